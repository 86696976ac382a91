"""Per-tool output limits and bounds (TRUNC), overridable per manifest."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

KB = 1024
MiB = KB * KB


@dataclass(frozen=True)
class Limits:
    """The manifest's `limits:` block with every default filled in: output caps, timeouts, depths, walk bounds."""

    read_bytes: int = 200 * KB
    glob_entries: int = 1000
    grep_matches: int = 200
    bash_bytes: int = 200 * KB
    web_fetch_bytes: int = 200 * KB
    default_bytes: int = 200 * KB
    text_bytes: int = 8 * KB * KB
    bash_timeout_s: float = 120.0
    bash_max_timeout_s: float = 600.0
    web_fetch_timeout_s: float = 30.0
    web_fetch_max_download: int = 10 * KB * KB
    web_search_calls: int = 25
    web_search_timeout_s: float = 15.0
    task_depth: int = 5
    # Sidecar bytes (TRUNC-9): one call, and the live sidecars of a whole session tree.
    sidecar_bytes: int = 64 * MiB
    session_sidecar_bytes: int = 512 * MiB
    # The per-call walk of the sandbox's roots (ENV-6, ENV-13): past these bounds what it did not
    # list is read-only for the call, and a call that needs read-denied names hunted is refused.
    walk_entries: int = 100_000
    walk_depth: int = 32

    def merged(self, overrides: dict[str, Any]) -> "Limits":
        names = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in overrides.items() if k in names and v is not None})

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
