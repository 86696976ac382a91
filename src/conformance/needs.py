"""What a harness must implement to take part, per requirement area.

Each case needs some features (HARNESS.md): the tools it calls, the layers
it relies on (`manifest`, `capability`, `rules`), interactive asks, and so
on. Per area this says which features every case of the area needs, which
ones unlock further cases, and, for a given harness, which of them it lacks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from .cases import Case


@dataclass
class AreaNeeds:
    """The features one area's cases need: those every case needs, and how many cases each further one unlocks."""

    area: str
    cases: int = 0
    common: frozenset[str] = frozenset()                       # needed by every case of the area
    more: Counter[str] = field(default_factory=Counter)        # feature -> cases that need it beyond `common`
    runnable_with_tools_only: int = 0                          # cases a tools-only harness can run

    def lacking(self, features: Iterable[str]) -> list[str]:
        have = set(features)
        return sorted((set(self.common) | set(self.more)) - have)

    def runnable(self, features: Iterable[str], cases: Iterable[Case]) -> int:
        have = set(features)
        return sum(1 for c in cases if c.area == self.area and c.needed_features() <= have)


def area_needs(cases: Iterable[Case]) -> dict[str, AreaNeeds]:
    by_area: dict[str, list[frozenset[str]]] = defaultdict(list)
    for case in cases:
        by_area[case.area].append(case.needed_features())
    out: dict[str, AreaNeeds] = {}
    for area in sorted(by_area):
        sets = by_area[area]
        common = frozenset.intersection(*sets) if sets else frozenset()
        more: Counter[str] = Counter()
        for s in sets:
            more.update(s - common)
        tools_only = sum(1 for s in sets if all(f.startswith("tool.") for f in s))
        out[area] = AreaNeeds(area, len(sets), common, more, tools_only)
    return out


def _code(names: Iterable[str]) -> str:
    items = [f"`{n}`" for n in names]
    return ", ".join(items) if items else "—"


def needs_markdown(cases: list[Case], features: Iterable[str] | None = None) -> list[str]:
    """Markdown lines: per area, what every case needs, what unlocks more, and (given features) what is missing."""
    needs = area_needs(cases)
    have = set(features) if features is not None else None
    head = "| area | cases | every case needs | more cases need | tools-only cases |"
    rule = "|---|---:|---|---|---:|"
    if have is not None:
        head += " runnable here | this harness lacks |"
        rule += "---:|---|"
    lines = ["## What a harness needs, per area", "", head, rule]
    for area, n in needs.items():
        more = ", ".join(f"`{f}` ({k})" for f, k in sorted(n.more.items(), key=lambda x: (-x[1], x[0])))
        row = f"| {area} | {n.cases} | {_code(sorted(n.common))} | {more or '—'} | {n.runnable_with_tools_only} |"
        if have is not None:
            row += f" {n.runnable(have, cases)} | {_code(n.lacking(have))} |"
        lines.append(row)
    return lines
