"""The watchdog (WDOG): a pre-execute hook that can only narrow.

It sees the tool id, the validated arguments, the manifest and the session
id (plus what the capability check already resolved, so it never re-parses
differently) and answers allow, deny(reason) or ask. An `allow` never
overrides a refusal by an earlier layer: the pipeline only consults the
watchdog for calls that are still going ahead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest
    from ..shell.parse import SimpleCommand


@dataclass(frozen=True)
class WatchdogCall:
    tool: str
    args: Mapping[str, Any]
    manifest: "CompiledManifest"
    session_id: str
    commands: tuple["SimpleCommand", ...] = ()
    paths: Mapping[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    action: Literal["allow", "deny", "ask"]
    reason: str = ""
    category: str = ""

    @classmethod
    def allow(cls) -> "Verdict":
        return cls("allow")


class Watchdog(Protocol):
    async def review(self, call: WatchdogCall) -> Verdict: ...


class AllowAllWatchdog:
    """No opinion: used when a manifest switches the watchdog off."""

    async def review(self, call: WatchdogCall) -> Verdict:
        return Verdict.allow()
