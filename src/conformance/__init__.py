"""The conformance suite: harness protocol, cases as data, runner and reports.

An implementation is driven through a small line-delimited JSON protocol
(HARNESS.md at the repository root); cases are YAML files under `cases/`
that cite SPEC.md requirement ids; the runner turns case steps into
protocol operations, so a harness never sees a case id or description.
"""

from __future__ import annotations

PROTOCOL_VERSION = 1
SUITE_VERSION = "2.0.0"
# The SPEC.md revision the cases are written against (SPEC.md, "Revision N").
SPEC_REVISION = "3"

__all__ = ["PROTOCOL_VERSION", "SUITE_VERSION", "SPEC_REVISION"]
