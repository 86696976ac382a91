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
    """What running each case against the broken implementations its `catches:` lists found: breakages not caught, unknown or unlisted names, inconclusive cases."""

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
            if name.startswith("mutant:"):
                continue  # checked by verify_mutants
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


# -- protocol-level mutants --------------------------------------------------------------------


@dataclass
class MutantRun:
    """One case run through one mutant on one seed: how often the mutant fired, and the case's status."""

    mutant: str
    seed: int
    case: str
    fired: int
    status: str


@dataclass
class MutantReport:
    """What verifying the protocol-level mutants found: every run, and mutants unknown, never listed or never exercised."""

    seeds: tuple[int, ...] = ()
    runs: list[MutantRun] = field(default_factory=list)
    never_listed: list[str] = field(default_factory=list)
    unknown_names: list[tuple[str, str]] = field(default_factory=list)
    inconclusive: list[tuple[str, int, str]] = field(default_factory=list)   # (case, seed, reference status)
    planned: list[str] = field(default_factory=list)
    strict: bool = False   # our own engine must exercise every mutant (a third party's harness may not apply)

    @property
    def problems(self) -> list[str]:
        out = [f"case {c} lists unknown mutant {n!r}" for c, n in self.unknown_names]
        out += [f"mutant {m} is listed by no case, so nothing shows the suite catches it" for m in self.never_listed]
        for r in self.runs:
            if r.fired == 0:
                out.append(f"mutant {r.mutant} never fired in case {r.case} (seed {r.seed}): the case does not set up its situation")
            elif r.status not in FAILING:
                out.append(f"mutant {r.mutant} fired {r.fired}x in case {r.case} (seed {r.seed}) but the case still passes ({r.status})")
        out += [
            f"case {c} does not pass against the reference on seed {s} ({st}), so it cannot show mutants caught"
            for c, s, st in self.inconclusive if st in FAILING
        ]
        if self.strict:
            ran = {r.mutant for r in self.runs}
            out += [f"mutant {m} was never exercised: every case listing it is not applicable or skipped" for m in self.planned if m not in ran]
        return out

    def per_mutant(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.runs:
            row = out.setdefault(r.mutant, {"fired": 0, "cases": set(), "caught_on_seeds": set(), "missed": []})
            row["fired"] += r.fired
            row["cases"].add(r.case)
            if r.fired and r.status in FAILING:
                row["caught_on_seeds"].add(r.seed)
            else:
                row["missed"].append((r.case, r.seed))
        return out

    def to_json(self) -> dict[str, Any]:
        rows = {
            name: {"fired": row["fired"], "cases": sorted(row["cases"]), "caught_on_seeds": sorted(row["caught_on_seeds"]), "missed": row["missed"]}
            for name, row in sorted(self.per_mutant().items())
        }
        ran = {r.mutant for r in self.runs}
        return {"seeds": list(self.seeds), "mutants": rows, "not_exercised": sorted(set(self.planned) - ran), "problems": self.problems}


def mutant_plan(cases: Iterable[Case], names: Iterable[str] | None = None) -> tuple[dict[str, list[Case]], MutantReport]:
    from .mutants import MUTANTS, PREFIX

    report = MutantReport()
    wanted = set(names) if names is not None else set(MUTANTS)
    plan: dict[str, list[Case]] = {n: [] for n in sorted(wanted & set(MUTANTS))}
    for case in cases:
        for entry in case.catches:
            if not entry.startswith(PREFIX):
                continue
            name = entry[len(PREFIX):]
            if name not in MUTANTS:
                report.unknown_names.append((case.id, name))
            elif name in plan:
                plan[name].append(case)
    report.never_listed = sorted(n for n, listed in plan.items() if not listed)
    return {n: c for n, c in plan.items() if c}, report


async def verify_mutants(cases: list[Case], seeds: Iterable[int], *, impl: str | None = None, names: Iterable[str] | None = None) -> MutantReport:
    """Every mutant, through the proxy in front of `impl`, must fire in and fail every case that lists it, on every seed."""
    plan, report = mutant_plan(cases, names)
    report.seeds = tuple(seeds)
    report.planned = sorted(plan)
    report.strict = impl is None
    needed = {c.id: c for listed in plan.values() for c in listed}
    for seed in report.seeds:
        ref = await reference_results(list(needed.values()), seed, impl)
        for case_id, res in ref.items():
            if res.status != "pass":
                report.inconclusive.append((case_id, seed, res.status))
        for name, listed in plan.items():
            if all(ref[c.id].status != "pass" for c in listed):
                continue  # nothing to show for this harness: see MutantReport.not_exercised
            async with HarnessClient(transport_for(impl, mutant=name)) as client:
                mutant = client.transport.mutant
                for case in listed:
                    if ref[case.id].status != "pass":
                        continue
                    before = mutant.fired
                    res = await run_case(client, case, seed)
                    report.runs.append(MutantRun(name, seed, case.id, mutant.fired - before, res.status))
    return report
