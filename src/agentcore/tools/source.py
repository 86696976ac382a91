"""Tools that exist for one session only (an MCP hub's), as the engine consults them.

A session may carry a `SessionToolSource` (`session.stores.tool_source`): the
engine waits for it before the first call, looks tools up in it after the
manifest's own, advertises its tools that are not deferred, and lets
`tool_search` find the deferred ones. Every call of such a tool goes through
the same stages as any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .base import Tool


@dataclass(frozen=True)
class SessionTool:
    """One session tool: the tool, its prebuilt argument validator, and whether it waits behind `tool_search`."""

    tool: Tool
    validator: Any
    deferred: bool


class SessionToolSource(Protocol):
    """What the engine needs from a session's own tools."""

    async def ready(self) -> None:
        """Return once the first listing is done (tools of servers that failed are simply absent)."""
        ...

    def lookup(self, tool_id: str) -> SessionTool | None:
        """The session tool `tool_id`, deferred or not, or None."""
        ...

    def entries(self) -> list[SessionTool]:
        """Every session tool now, in a stable order."""
        ...
