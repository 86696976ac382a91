"""The suite's test of itself: can every case fail, and is every breakage caught?

Each case lists in `catches:` the deliberately broken implementations it
must fail against. For every case that passes against the reference
engine, each listed broken implementation is run on it and must not pass;
and every broken implementation must be listed by at least one case.
A case that does not pass against the reference tells nothing about the
broken ones (they wrap the reference), so it is reported as inconclusive.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from .broken import BROKEN
from .cases import Case
from .connectors import HarnessClient, transport_for
from .runner import FAILING, CaseResult, run_case


@dataclass
class MatrixReport:
    unknown_names: list[tuple[str, str]] = field(default_factory=list)      # (case, name)
    not_caught: list[tuple[str, str, str]] = field(default_factory=list)    # (case, broken, status)
    never_listed: list[str] = field(default_factory=list)
    never_exercised: list[str] = field(default_factory=list)                # listed only by inconclusive cases
    inconclusive: list[tuple[str, str]] = field(default_factory=list)       # (case, reference status)
    runs: int = 0

    @property
    def problems(self) -> list[str]:
        out = [f"case {c} lists unknown broken implementation {n!r}" for c, n in self.unknown_names]
        out += [f"case {c} passes against broken implementation {b} ({s})" for c, b, s in self.not_caught]
        out += [f"broken implementation {b} is listed by no case" for b in self.never_listed]
        return out


async def verify_catches(cases: Iterable[Case], reference: dict[str, CaseResult], seed: int) -> MatrixReport:
    report = MatrixReport()
    cases = list(cases)
    plan: dict[str, list[Case]] = defaultdict(list)
    listed: set[str] = set()
    for case in cases:
        for name in case.catches:
            if name not in BROKEN:
                report.unknown_names.append((case.id, name))
                continue
            listed.add(name)
            ref = reference.get(case.id)
            if ref is None or ref.status != "pass":
                continue
            plan[name].append(case)
        ref = reference.get(case.id)
        if ref is not None and ref.status != "pass":
            report.inconclusive.append((case.id, ref.status))
    report.never_listed = sorted(set(BROKEN) - listed)
    report.never_exercised = sorted(listed - set(plan))
    for name in sorted(plan):
        async with HarnessClient(transport_for(f"broken:{name}")) as client:
            for case in plan[name]:
                res = await run_case(client, case, seed)
                report.runs += 1
                if res.status not in FAILING:
                    report.not_caught.append((case.id, name, res.status))
    return report


async def reference_results(cases: Iterable[Case], seed: int, impl: str | None = None) -> dict[str, CaseResult]:
    out: dict[str, CaseResult] = {}
    async with HarnessClient(transport_for(impl)) as client:
        for case in cases:
            out[case.id] = await run_case(client, case, seed)
    return out


def summary(report: MatrixReport) -> dict[str, Any]:
    return {
        "runs": report.runs,
        "problems": report.problems,
        "inconclusive": report.inconclusive,
        "never_exercised": report.never_exercised,
    }
