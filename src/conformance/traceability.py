"""Traceability: SPEC.md requirements <-> cases <-> exclusions.

Every MUST and every SHOULD needs at least one case or an explicit exclusion with a reason
(`exclusions.yaml`); a case or exclusion citing an id SPEC.md does not have
is an error, and so is an exclusion for a requirement that a case covers
(the exclusion would hide that it is now tested). A case's level must not
claim more than the requirements it cites.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is there

from .cases import Case

EXCLUSIONS_FILE = Path(__file__).parent / "exclusions.yaml"
_RANK = {"MUST": 3, "SHOULD": 2, "MAY": 1}


def load_exclusions(path: Path | None = None) -> dict[str, str]:
    data = yaml.load((path or EXCLUSIONS_FILE).read_text(encoding="utf-8"), Loader=_Loader) or {}
    raw = data.get("exclusions", {}) if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        raise ValueError("exclusions.yaml must be {exclusions: {REQ-ID: reason}}")
    out: dict[str, str] = {}
    for rid, reason in raw.items():
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            raise ValueError(f"exclusion {rid}: needs a reason (a sentence)")
        out[str(rid)] = " ".join(reason.split())
    return out


@dataclass
class Trace:
    """Requirements traced to the cases citing them and the exclusions waiving them, with every gap or inconsistency."""

    cases_by_requirement: dict[str, list[str]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    unknown_in_cases: list[tuple[str, str]] = field(default_factory=list)   # (case id, requirement id)
    unknown_in_exclusions: list[str] = field(default_factory=list)
    uncovered_musts: list[str] = field(default_factory=list)
    excluded_but_covered: list[str] = field(default_factory=list)
    level_too_high: list[tuple[str, str]] = field(default_factory=list)     # (case id, its level)
    levels: dict[str, str] = field(default_factory=dict)                     # requirement -> level

    @property
    def problems(self) -> list[str]:
        out = [f"case {c} cites unknown requirement {r}" for c, r in self.unknown_in_cases]
        out += [f"exclusion for unknown requirement {r}" for r in self.unknown_in_exclusions]
        out += [f"{self.levels.get(r, 'MUST')} {r} has no case and no exclusion" for r in self.uncovered_musts]
        out += [f"{r} is excluded but covered by {', '.join(self.cases_by_requirement[r])}" for r in self.excluded_but_covered]
        out += [f"case {c} is {lvl} but cites no requirement of that level" for c, lvl in self.level_too_high]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "cases_by_requirement": self.cases_by_requirement,
            "excluded": self.excluded,
            "problems": self.problems,
        }


def trace(requirements: Mapping[str, Any], cases: Iterable[Case], exclusions: Mapping[str, str]) -> Trace:
    t = Trace()
    by_req: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        best = 0
        for rid in case.requirements:
            if rid not in requirements:
                t.unknown_in_cases.append((case.id, rid))
                continue
            by_req[rid].append(case.id)
            best = max(best, _RANK[requirements[rid].level])
        if best and _RANK[case.level] > best:
            t.level_too_high.append((case.id, case.level))
    t.cases_by_requirement = {rid: by_req[rid] for rid in requirements if rid in by_req}
    for rid, reason in exclusions.items():
        if rid not in requirements:
            t.unknown_in_exclusions.append(rid)
        elif rid in by_req:
            t.excluded_but_covered.append(rid)
        else:
            t.excluded[rid] = reason
    t.levels = {rid: req.level for rid, req in requirements.items()}
    t.uncovered_musts = [rid for rid, req in requirements.items() if req.level in ("MUST", "SHOULD") and rid not in by_req and rid not in exclusions]
    return t


def emitted(case_lines: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per requirement, the statuses a real run reported (from JSON Lines case records)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for line in case_lines:
        for rid in line.get("requirements", []):
            out[rid][line["status"]] += 1
    return {k: dict(v) for k, v in out.items()}
