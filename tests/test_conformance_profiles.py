"""Profiles (rfc vs spec), layer features, boundary runs, every-check reports, per-reply properties, smoke, per-area needs."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from typing import Any

import anyio

from conformance.cases import load_cases
from conformance.connectors import HarnessClient, InProcessTransport, transport_for
from conformance.expectations import judge
from conformance.generators import boundary_runs, generate
from conformance.harness_agentcore import AgentcoreHarness
from conformance.needs import area_needs, needs_markdown
from conformance.profiles import EXTENSION, RFC, load_profiles, pointer_tag
from conformance.properties import CallInfo, RuleBook, ask_violations, envelope_violations
from conformance.runner import RunOptions, run_case, run_suite
from conformance.smoke import smoke
from conformance.spec_ids import load_requirements

PY = sys.executable


def _case(cid: str) -> Any:
    return next(c for c in load_cases() if c.id == cid)


# -- profiles ------------------------------------------------------------------------------------


def test_profiles_map_is_consistent_with_spec() -> None:
    profiles = load_profiles()
    assert profiles.problems(load_requirements()) == []
    assert profiles.tag_of("ENVL-1") == RFC and profiles.tag_of("PERM-10").choice == "specificity"
    assert profiles.tag_of("NET-9").choice == "detail"  # the RFC is silent: SPEC decides
    assert profiles.case_tag(["PERM-10", "PERM-9"]) == RFC and profiles.case_tag(["PERM-12"]).choice == "scope-order"
    assert pointer_tag("/metadata/refusal/scope", {"equals": 1}, RFC) == EXTENSION
    assert pointer_tag("/data", {"keys": []}, RFC).choice == "fixed-shapes"
    assert pointer_tag("/data/content", {"equals": 1}, RFC) == RFC


def test_an_extension_only_mistake_fails_spec_but_not_rfc() -> None:
    case = _case("envl.refusals-of-read")

    async def go() -> Any:
        async with HarnessClient(transport_for(None, mutant="refusal-kind-read")) as client:
            return await run_case(client, case, 1)

    res = anyio.run(go)
    assert (res.status, res.rfc_status) == ("fail", "pass")
    assert res.first_failure().tag.choice == "envelope-extensions"
    assert not judge([res], profile="spec").ok and judge([res], profile="rfc").ok


class _RfcOnly(AgentcoreHarness):
    """Our engine as an RFC-only library would present it: no envelope extensions, no compile description."""

    async def features(self) -> list[str]:
        return [f for f in await super().features() if f not in ("envelope.extensions", "compile.describe")]

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        meta = envelope.get("metadata", {})
        envelope["metadata"] = {k: v for k, v in meta.items() if k in ("duration_ms", "truncated", "output_path")}
        return envelope

    def describe_compile(self, compiled: Any, registry: Any) -> dict[str, Any]:
        return {}


def test_a_harness_without_extensions_is_not_asked_for_them() -> None:
    """Extension checks are not evaluated and compile descriptions not required: nothing fails for lack of them."""
    cases = [c for c in load_cases() if c.area in ("PERM", "ASK", "FILE", "ENVL", "VAR", "LOCK")]

    async def go() -> list[Any]:
        async with HarnessClient(InProcessTransport(_RfcOnly)) as client:
            return await run_suite(client, cases, 3)

    results = anyio.run(go)
    bad = {r.id: r.message for r in results if r.status not in ("pass", "not_applicable")}
    assert bad == {}
    assert sum(r.rfc_status == "pass" for r in results) >= 30
    # What the harness cannot describe is not applicable, never failed.
    assert [r.id for r in results if "compile.describe" in r.message] and all(r.status == "not_applicable" for r in results if "compile.describe" in r.message)


def test_all_checks_reports_every_failing_check() -> None:
    case = _case("envl.refusals-of-write")

    async def go(all_checks: bool) -> Any:
        async with HarnessClient(transport_for(None, mutant="headless-allows-write")) as client:
            return await run_case(client, case, 1, RunOptions(all_checks=all_checks))

    first, every = anyio.run(go, False), anyio.run(go, True)
    assert first.status == every.status == "fail"
    shown = every.to_json()["failures"]
    assert len(shown) >= 3 and len(first.to_json()["failures"]) == 1
    assert any(f["profile"] == "spec" for f in shown) and any(f["profile"] == "rfc" for f in shown)
    assert any("files" in f["message"] for f in shown)  # the write happened: the file check after the call fails too


# -- boundary runs --------------------------------------------------------------------------------


def test_boundary_runs_cover_every_end_option_and_rotation() -> None:
    spec = {"n": {"int": {"min": 3, "max": 9}}, "p": {"pick": ["a", "b", "c"]}, "s": {"shuffle": [1, 2, 3, 4]}, "name": {"name": {}}}
    assert boundary_runs(spec, {}) == 4
    runs = [generate(spec, random.Random(k), {}, boundary=k) for k in range(4)]
    assert [r["n"] for r in runs] == [3, 9, 3, 9]
    assert [r["p"] for r in runs] == ["a", "b", "c", "a"]
    assert sorted(tuple(r["s"]).index(1) for r in runs) == [0, 1, 2, 3]  # every item in every position
    assert boundary_runs({"name": {"name": {}}}, {}) == 0


def test_a_case_with_boundaries_runs_each_of_them() -> None:
    case = _case("cap.protected-paths-refused-as-redirect-targets")

    async def go() -> Any:
        async with HarnessClient(transport_for(None)) as client:
            return await run_case(client, case, 11)

    res = anyio.run(go)
    assert res.status == "pass"
    assert [v for v in res.variants if v.startswith("boundary")] == [f"boundary {k}" for k in range(1, 10)]


# -- properties of every reply ------------------------------------------------------------------------


def _refusal(layer: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "error_text": "denied by manifest rule #1 (read → deny)",
            "metadata": {"duration_ms": 3, "tool": "read", "kind": "read", "error_code": "denied", "refusal": {"layer": layer, "code": "denied", **extra}}}


def test_envelope_properties() -> None:
    call = CallInfo("a", "s", "read", {"path": "secret-name.txt"})
    book = RuleBook()
    book.compiled("a", {"rules": [{"permission": "read", "pattern": "{workspace}/secret-name.txt", "action": "deny"}]})
    assert envelope_violations(call, _refusal("permission", scope="manifest", rule_index=0), book) == []
    msgs = lambda env: " ".join(v.message for v in envelope_violations(call, env, book))  # noqa: E731
    assert "duration_ms" in msgs({**_refusal("permission", scope="manifest", rule_index=0), "metadata": {**_refusal("permission", scope="manifest", rule_index=0)["metadata"], "duration_ms": 3.0}})
    assert "not a deny rule" in msgs(_refusal("permission", scope="manifest", rule_index=1))
    assert "asked_by" in msgs(_refusal("ask"))
    echo = _refusal("permission", scope="manifest", rule_index=0)
    echo["error_text"] += " secret-name.txt"
    assert "repeats an argument value" in msgs(echo)
    out = {"type": "output", "data": {"path": "rel.txt", "content": "", "start_line": 1, "end_line": 0, "total_lines": 0, "next_offset": None, "extra": 1},
           "metadata": {"duration_ms": 1, "tool": "read", "kind": "read", "truncated": False}}
    found = msgs(out)
    assert "truncated" in found and "fields" in found and "canonical" in found
    ask = {"id": "x", "type": "permission", "tool": "read", "kind": "read", "layer": "permission", "subjects": ["fs.read /tmp/../etc/x"]}
    assert "canonical" in " ".join(v.message for v in ask_violations(call, ask))


# -- smoke and per-area needs ---------------------------------------------------------------------------


def test_smoke_tells_a_broken_harness_from_a_non_conforming_implementation() -> None:
    ok = anyio.run(lambda: smoke(None))
    broken = anyio.run(lambda: smoke("broken:wrong-seq"))
    wrong = anyio.run(lambda: smoke("broken:echoes-values"))
    crash = anyio.run(lambda: smoke("command:python -c 'import sys; sys.stdin.readline()'"))
    assert (ok.exit_code, broken.exit_code, wrong.exit_code, crash.exit_code) == (0, 2, 1, 2)
    assert "/seq" in json.dumps(broken.to_json())
    assert wrong.to_json()["harness"] == "ok" and "ENVL-6" in json.dumps(wrong.to_json())


def test_per_area_needs_name_what_a_harness_must_implement() -> None:
    cases = load_cases()
    needs = area_needs(cases)
    assert "tool.read" in needs["FILE"].more and "rules" in needs["PERM"].common
    assert needs["FILE"].runnable(["tool.read"], cases) >= 4
    table = "\n".join(needs_markdown(cases, ["tool.read"]))
    assert "## What a harness needs, per area" in table and "| PERM |" in table and "`rules`" in table


def test_cli_help_lists_every_subcommand_and_lists_mutants() -> None:
    helptext = subprocess.run([PY, "-m", "agentcore.cli.main", "conformance", "--help"], capture_output=True, text=True, timeout=60).stdout
    for sub in ("run", "smoke", "trace", "selftest", "list"):
        assert sub in helptext
    listing = subprocess.run([PY, "-m", "conformance", "list", "--mutants"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) >= 40
