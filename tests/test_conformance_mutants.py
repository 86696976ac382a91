"""The mutating proxy: mutants made at the protocol, in front of any harness, must fire and be caught.

CI runs every mutant on three seeds (`.ci/run`); here, the machinery itself:
the catalogue, the catch rules (fired and failed, per case and seed), the
two ways a mutant shows a gap (it never fires; it fires and nothing fails),
and the proxy in front of a real harness process.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio

from conformance.cases import load_cases
from conformance.connectors import HarnessClient, transport_for
from conformance.mutants import MUTANTS
from conformance.runner import run_case
from conformance.selftest import mutant_plan, verify_mutants


def test_catalogue_has_at_least_forty_mutants_each_listed_by_a_case() -> None:
    assert len(MUTANTS) >= 40
    groups = {cls.group for cls in MUTANTS.values()}
    assert groups == {"envelope", "situation", "runner"}
    assert all(cls.summary and cls.name for cls in MUTANTS.values())
    plan, report = mutant_plan(load_cases())
    assert report.never_listed == [] and report.unknown_names == []
    assert set(plan) == set(MUTANTS)


def test_listed_mutants_fire_and_are_caught() -> None:
    names = ["refusal-kind-grep", "headless-allows-edit", "rule-index-session-per-batch", "edit-counts-overlapping", "watchdog-always-canonical-path", "close-without-payload"]
    report = anyio.run(lambda: verify_mutants(load_cases(), [4], names=names))
    assert report.problems == []
    rows = report.per_mutant()
    assert set(rows) == set(names)
    assert all(row["fired"] > 0 and row["caught_on_seeds"] == {4} for row in rows.values())


def _case_dir(tmp_path: Path, body: str) -> list:
    d = tmp_path / "file"
    d.mkdir()
    (d / "gap.yaml").write_text(textwrap.dedent(body))
    return load_cases(tmp_path)


def test_a_mutant_that_never_fires_is_a_gap_not_a_catch(tmp_path: Path) -> None:
    cases = _case_dir(tmp_path, """\
        id: gap.no-bash-here
        title: lists a mutant whose situation it never sets up
        requirements: [FILE-1]
        level: MUST
        catches: ['mutant:bash-truncates-at-limit']
        setup:
          files: [{path: a.txt, content: "a\\n"}]
          manifest: {name: gap, tools: [read], requires: {fs: {read: ['{workspace}/**']}}, rules: [{permission: '*', pattern: '*', action: allow}]}
        steps:
        - call: {tool: read, args: {path: missing.txt}}
          expect: {type: error, code: not_found}
        """)
    report = anyio.run(lambda: verify_mutants(cases, [1], names=["bash-truncates-at-limit"]))
    assert any("never fired in case gap.no-bash-here" in p for p in report.problems)


def test_a_mutant_that_fires_without_failing_the_case_is_reported(tmp_path: Path) -> None:
    cases = _case_dir(tmp_path, """\
        id: gap.limit-never-reached
        title: sets a bash limit but never produces output near it
        requirements: [FILE-1]
        level: MUST
        catches: ['mutant:bash-limit-ignored']
        setup:
          manifest: {name: gap, tools: [read, bash], requires: {fs: {read: ['{workspace}/**']}}, limits: {bash_bytes: 100}, rules: [{permission: '*', pattern: '*', action: allow}]}
        steps:
        - call: {tool: read, args: {path: missing.txt}}
          expect: {type: error, code: not_found}
        """)
    report = anyio.run(lambda: verify_mutants(cases, [1], names=["bash-limit-ignored"]))
    assert any("fired 1x in case gap.limit-never-reached" in p and "still passes" in p for p in report.problems)


def test_the_proxy_sits_in_front_of_a_harness_process() -> None:
    case = next(c for c in load_cases() if c.id == "file.read-returns-text-verbatim")

    async def go() -> tuple[str, str | None, str, int]:
        async with HarnessClient(transport_for("command:python -m conformance.harness_agentcore", mutant="seq-float")) as client:
            res = await run_case(client, case, 2)
            return res.status, res.caught_by, res.message, client.transport.mutant.fired

    status, by, message, fired = anyio.run(go)
    assert (status, by) == ("error", "runner") and "/seq: must be a JSON integer" in message and fired >= 1


def test_a_fault_in_the_cleanup_close_is_reported() -> None:
    case = next(c for c in load_cases() if c.id == "file.read-returns-text-verbatim")
    assert not any("close" in step for step in case.steps)  # only the runner's own cleanup closes

    async def go() -> tuple[str, str | None, str]:
        async with HarnessClient(transport_for(None, mutant="close-without-payload")) as client:
            res = await run_case(client, case, 1)
            return res.status, res.caught_by, res.message

    status, by, message = anyio.run(go)
    assert (status, by) == ("error", "runner") and "cleanup close" in message


def test_mutants_in_front_of_the_node_harness() -> None:
    """Any harness: the same mutants, put in front of our second implementation, are caught too."""
    import os
    import shutil

    if shutil.which("node") is None:
        if os.environ.get("CI") == "true":
            raise AssertionError("node is required on CI")
        import pytest

        pytest.skip("node is not installed")
    root = Path(__file__).resolve().parents[1]
    names = ["edit-counts-overlapping", "grep-follows-symlinks", "always-parent-directory", "bash-truncates-at-limit"]
    report = anyio.run(lambda: verify_mutants(load_cases(), [2], impl=f"command:node {root / 'harnesses/node/harness.mjs'}", names=names))
    assert report.problems == []
    assert set(report.per_mutant()) == set(names) - {"bash-truncates-at-limit"}  # Node has no bash: not exercised
    assert report.to_json()["not_exercised"] == ["bash-truncates-at-limit"]
