"""Protocol-level mutation testing: wrong implementations made by a proxy in front of any harness.

`MUTANTS` maps each mutant's name to its class. A case lists the mutants it
catches as `mutant:<name>` in `catches:`; `conformance selftest --mutants`
runs every mutant against the cases that list it, on several seeds, and
requires each to fire and to be caught on every seed.
"""

from __future__ import annotations

from .envelope import ENVELOPE_MUTANTS
from .proxy import Mutant, MutatingTransport
from .runner_faults import RUNNER_MUTANTS
from .situations import SITUATION_MUTANTS

PREFIX = "mutant:"
MUTANTS: dict[str, type[Mutant]] = {m.name: m for m in [*ENVELOPE_MUTANTS, *SITUATION_MUTANTS, *RUNNER_MUTANTS]}


def make(name: str) -> Mutant:
    cls = MUTANTS.get(name)
    if cls is None:
        raise ValueError(f"unknown mutant {name!r}; known: {', '.join(sorted(MUTANTS))}")
    return cls()


__all__ = ["MUTANTS", "PREFIX", "Mutant", "MutatingTransport", "make"]
