"""Per-implementation expectations: which cases are known to fail, and why.

Rules (as in MCP's conformance suite): a listed case that fails is fine; an
unlisted case that fails fails the run; a listed case that now passes fails
the run as *stale*, so the list only ever shrinks. A listed id the suite
does not have is stale too. Only MUST cases count unless `strict`, which
makes SHOULD and MAY failures count as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is there

from .runner import FAILING, CaseResult


@dataclass(frozen=True)
class Expectations:
    """An implementation's expectations file: the cases known to fail, each with its reason."""

    implementation: str | None = None
    failures: dict[str, str] = field(default_factory=dict)  # case id -> reason


def load_expectations(path: Path) -> Expectations:
    data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_Loader) or {}
    if isinstance(data, list):
        return Expectations(failures={str(x): "" for x in data})
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expectations must be a mapping or a list of case ids")
    unknown = set(data) - {"implementation", "failures"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
    raw = data.get("failures") or {}
    if isinstance(raw, list):
        failures = {str(x): "" for x in raw}
    elif isinstance(raw, dict):
        failures = {str(k): str(v or "") for k, v in raw.items()}
    else:
        raise ValueError(f"{path}: failures must be a mapping (case id -> reason) or a list")
    return Expectations(implementation=data.get("implementation"), failures=failures)


@dataclass
class Verdict:
    """A run judged against the expectations: failing cases sorted into expected, unexpected, stale and informational."""

    expected: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    informational: list[str] = field(default_factory=list)  # failing, but below the counted level
    judged: int = 0  # cases that passed or failed: neither skipped nor not applicable

    @property
    def ok(self) -> bool:
        # A run in which every case was skipped or not applicable proved nothing: it is not a clean run.
        return not self.unexpected and not self.stale and self.judged > 0

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "judged": self.judged, "expected": self.expected, "unexpected": self.unexpected, "stale": self.stale,
                "informational": self.informational}


def judge(
    results: Iterable[CaseResult],
    expectations: Expectations | None = None,
    *,
    strict: bool = False,
    all_ids: Iterable[str] | None = None,
    profile: str = "spec",
) -> Verdict:
    """The run's verdict under one profile (`spec`: every check; `rfc`: only checks that restate the RFC)."""
    exp = expectations or Expectations()
    v = Verdict()
    seen: set[str] = set()
    for r in results:
        seen.add(r.id)
        status = r.status_for(profile)
        listed = r.id in exp.failures
        failing = status in FAILING
        v.judged += status == "pass" or failing
        counts = r.level == "MUST" or strict
        if listed and failing:
            v.expected.append(r.id)
        elif listed and status == "pass":
            v.stale.append(r.id)
        elif failing and counts:
            v.unexpected.append(r.id)
        elif failing:
            v.informational.append(r.id)
    if all_ids is not None:
        known = set(all_ids)
        v.stale += sorted(i for i in exp.failures if i not in known)
    return v
