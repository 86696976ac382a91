"""The suite checks itself: traceability to SPEC.md, the case linter, and the broken implementations.

- every MUST of SPEC.md has a case or a reasoned exclusion; unknown ids are errors;
- every case names broken implementations it catches, and really fails against each;
- every broken implementation is caught by at least one case.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest

from conformance.broken import BROKEN
from conformance.cases import CaseError, load_cases
from conformance.selftest import reference_results, verify_catches
from conformance.spec_ids import load_requirements, parse_requirements
from conformance.traceability import load_exclusions, trace

SEED = 7


@pytest.fixture(scope="module")
def cases():  # type: ignore[no-untyped-def]
    return load_cases()


def test_every_must_and_should_is_covered_or_excluded_and_no_id_is_unknown(cases) -> None:  # type: ignore[no-untyped-def]
    reqs = load_requirements()
    t = trace(reqs, cases, load_exclusions())
    assert t.problems == []
    for level in ("MUST", "SHOULD"):
        wanted = [r for r in reqs.values() if r.level == level]
        assert all(r.id in t.cases_by_requirement or r.id in t.excluded for r in wanted), level
    musts = [r for r in reqs.values() if r.level == "MUST"]
    covered = [r for r in musts if r.id in t.cases_by_requirement]
    # Exclusions are the exception: most MUSTs are exercised by real cases.
    assert len(covered) >= 0.8 * len(musts)
    assert len(cases) >= 170


def test_traceability_reports_each_kind_of_problem(cases) -> None:  # type: ignore[no-untyped-def]
    reqs = parse_requirements(
        "- **[PERM-1]** MUST — a.\n- **[PERM-2]** MUST — b.\n- **[PERM-3]** SHOULD — c.\n- **[PERM-4]** MUST — d.\n- **[PERM-5]** SHOULD — e.\n- **[PERM-6]** MAY — f.\n"
    )
    case = next(c for c in cases if "PERM-9" in c.requirements)
    fake = type(case)(**{**case.__dict__, "id": "x", "requirements": ("PERM-1", "PERM-99"), "level": "MUST"})
    should_only = type(case)(**{**case.__dict__, "id": "y", "requirements": ("PERM-3",), "level": "MUST"})
    t = trace(reqs, [fake, should_only], {"PERM-1": "a reason long enough", "NOPE-1": "a reason long enough"})
    problems = "\n".join(t.problems)
    assert "case x cites unknown requirement PERM-99" in problems
    assert "exclusion for unknown requirement NOPE-1" in problems
    assert "MUST PERM-2 has no case and no exclusion" in problems
    assert "MUST PERM-4 has no case and no exclusion" in problems
    assert "PERM-1 is excluded but covered by x" in problems
    assert "case y is MUST but cites no requirement of that level" in problems
    assert "SHOULD PERM-5 has no case and no exclusion" in problems
    assert "PERM-6" not in problems  # a MAY needs neither


def _write_case(root: Path, area: str, name: str, body: str) -> None:
    d = root / area
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.yaml").write_text(textwrap.dedent(body))


GOOD = """\
id: x.one
title: t
requirements: [PERM-9]
level: MUST
catches: [always-allow]
steps:
  - call: {tool: read, args: {path: a}}
    expect: {type: output}
"""


def test_case_linter_rejects_malformed_cases(tmp_path: Path) -> None:
    _write_case(tmp_path, "perm", "ok", GOOD)
    assert [c.id for c in load_cases(tmp_path)] == ["x.one"]
    for bad in [
        GOOD.replace("level: MUST", "level: MUSTY"),
        GOOD.replace("expect: {type: output}", "expect: {typo: output}"),
        GOOD.replace("catches: [always-allow]\n", ""),
        GOOD.replace("{type: output}", "{checks: [{pointer: /data, equalz: 1}]}"),
        GOOD + "generate:\n  off: {int: {min: 1, max: 2}}\n",
        GOOD.replace("- call:", "- teleport:"),
    ]:
        _write_case(tmp_path, "perm", "bad", bad)
        with pytest.raises(CaseError):
            load_cases(tmp_path)
    _write_case(tmp_path, "perm", "bad", GOOD)
    with pytest.raises(CaseError, match="duplicate case id"):
        load_cases(tmp_path)


def test_every_case_fails_against_the_broken_implementations_it_names(cases) -> None:  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        ref = await reference_results(cases, SEED)
        return ref, await verify_catches(cases, ref, SEED)

    ref, report = anyio.run(go)
    assert report.problems == []
    # Every broken implementation is listed by some case, and nearly all are
    # actually exercised by a case the reference engine passes.
    assert report.never_listed == []
    assert len(report.never_exercised) <= 2, report.never_exercised
    assert report.runs >= len(BROKEN)
    passing = [cid for cid, r in ref.items() if r.status == "pass"]
    assert len(passing) >= 70
