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
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Protocol

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest
    from ..shell.parse import SimpleCommand


@dataclass(frozen=True)
class ReadScreen:
    """What a watchdog says about reading paths, synchronously and cheaply, for search results (PERM-14, WDOG-17).

    A search must not show what `read` would have to ask about, yet cannot
    put every result to the watchdog's `review`. A watchdog that offers a
    screen answers two questions instead:

    - `withholds(path)`: whether a `read` of this canonical path would not be
      allowed without asking (the watchdog would ask or deny);
    - `markers(root)`: lowercase strings without `/` such that every path
      beneath the canonical directory `root` that `withholds` holds for
      contains one of them in its part below `root`, compared after
      `str.lower()`; `()` when nothing beneath `root` is withheld, and `None`
      when there is no such promise (then every path is asked).

    The markers let a search over thousands of files ask `withholds` about a
    handful of them.
    """

    withholds: Callable[[str], bool]
    markers: Callable[[str], "tuple[str, ...] | None"] = lambda root: None


OPEN_SCREEN = ReadScreen(lambda path: False, lambda root: ())
"""Withholds nothing: the screen of a watchdog that never asks about a read."""
CLOSED_SCREEN = ReadScreen(lambda path: True, lambda root: None)
"""Withholds everything: the screen of a watchdog that cannot answer for paths (fail closed)."""

@dataclass(frozen=True)
class WatchdogCall:
    """One call as the watchdog sees it (WDOG-1).

    `shell` holds the command lines the call runs, one per shell access the
    tool declared, whatever the tool is called; `commands` holds their parsed
    simple commands, in order. The pipeline fills both. A caller outside the
    pipeline may give only `shell`, and the default watchdog then parses it.
    A call that runs a shell is reviewed as one because it declares so, never
    because of its tool's name.
    """

    tool: str
    args: Mapping[str, Any]
    manifest: "CompiledManifest"
    session_id: str
    commands: tuple["SimpleCommand", ...] = ()
    paths: Mapping[str, Path] = field(default_factory=dict)
    shell: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """A watchdog's answer for a call: allow, deny or ask, with the reason and its category."""

    action: Literal["allow", "deny", "ask"]
    reason: str = ""
    category: str = ""

    @classmethod
    def allow(cls) -> "Verdict":
        return cls("allow")


class Watchdog(Protocol):
    async def review(self, call: WatchdogCall) -> Verdict: ...


class ScreensReads(Protocol):
    """What a watchdog offers so that searches can leave out what `read` would ask about (WDOG-17).

    `read_screen(manifest)` returns a `ReadScreen` that agrees with
    `review` on `read` calls: `withholds(path)` exactly when `review` of a
    `read` of that canonical path would not answer `allow`.
    """

    def read_screen(self, manifest: "CompiledManifest") -> ReadScreen: ...


def read_screen_of(watchdog: Any, manifest: "CompiledManifest") -> ReadScreen:
    """The watchdog's read screen; a watchdog that offers none, or fails to give one, withholds every path (fail closed)."""
    offer = getattr(watchdog, "read_screen", None)
    if offer is None:
        return CLOSED_SCREEN
    try:
        screen = offer(manifest)
    except Exception:
        return CLOSED_SCREEN
    return screen if isinstance(screen, ReadScreen) else CLOSED_SCREEN


class AllowAllWatchdog:
    """No opinion: used when a manifest switches the watchdog off."""

    async def review(self, call: WatchdogCall) -> Verdict:
        return Verdict.allow()

    def read_screen(self, manifest: Any) -> ReadScreen:
        return OPEN_SCREEN
