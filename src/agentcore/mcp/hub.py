"""The MCP servers of one session and the tools they offer (MCP-2, MCP-3, MCP-10, TSRCH-6).

`McpHub` is the session's `SessionToolSource`. It starts one owner task per
server (at session start when the session is opened inside an event loop,
else at its first call), turns each server's listing into tools — dropping,
with the reason, a tool whose name cannot be an id, whose id collides, or
whose schema fails the checks — and decides which tools wait behind
`tool_search`. Closing the session kills every server's process group at
once; the owner tasks then reap them.

The owner tasks are tasks of the running asyncio loop: a session is a
synchronous object that outlives any one `async with`, and its servers
live as long as it does.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..tools.source import SessionTool
from .config import ServerPlan
from .names import NameProblem, tool_id
from .schemas import SchemaProblem, check_input_schema
from .server import ListedTool, ServerConnection
from .tool import McpTool, kind_for

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest

_log = logging.getLogger("agentcore.mcp")
DEFER_ABOVE = 20  # TSRCH-5: more tools than this in all, and undecided servers' tools are deferred


class McpHub:
    """The MCP servers of one session (see the module docstring)."""

    def __init__(self, manifest: "CompiledManifest", plans: Sequence[ServerPlan], *, environment: str,
                 reserved_ids: Iterable[str] = ()) -> None:
        self._manifest = manifest
        self._plans = list(plans)
        self._environment = environment
        self._reserved = frozenset(reserved_ids)
        self._connections: list[ServerConnection] = []
        self._entries: dict[str, SessionTool] = {}
        self._unavailable: dict[str, list[dict[str, str]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Start every server (idempotent; needs a running loop). A new loop starts them afresh."""
        loop = asyncio.get_running_loop()
        if self._closed or self._loop is loop:
            return
        self._kill_all()  # servers of a loop that has ended cannot be reached any more
        self._loop = loop
        names = Counter(p.name for p in self._plans)
        self._connections = []
        seen: set[str] = set()
        for plan in self._plans:
            if names[plan.name] > 1 and plan.name in seen:
                continue  # a second server of the same name (the first one's problem says so)
            seen.add(plan.name)
            self._connections.append(ServerConnection(plan, self._manifest, self._environment, self._on_tools))
        self._tasks = [loop.create_task(c.run(), name=f"mcp-server-{c.name}") for c in self._connections]

    def start_if_running(self) -> None:
        """Start now if an event loop is running here (session start); otherwise the first call starts them."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self.start()

    async def ready(self) -> None:
        """Return once every server's first start has ended (each bounded by its start timeout)."""
        self.start()
        for connection in list(self._connections):
            await connection.first_attempt()

    def close(self) -> None:
        """Kill every server's process group now; the owner tasks then reap what they started and end."""
        self._closed = True
        self._kill_all()
        self._entries = {}

    def _kill_all(self) -> None:
        for connection in self._connections:
            connection.kill_now()

    async def aclose(self) -> None:
        """`close`, then wait for the owner tasks to finish (everything reaped)."""
        self.close()
        tasks, self._tasks = self._tasks, []
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- the session tool source --------------------------------------------------------------
    def lookup(self, ident: str) -> SessionTool | None:
        """The session tool `ident` (deferred or not), or None."""
        return self._entries.get(ident)

    def entries(self) -> list[SessionTool]:
        """Every available tool of the session's servers, in server order then listing order."""
        return list(self._entries.values())

    # -- listings to tools -------------------------------------------------------------------
    def _on_tools(self, _connection: ServerConnection) -> None:
        """A server (re)listed its tools: rebuild every session tool."""
        entries: dict[str, tuple[McpTool, Any, bool | None]] = {}
        unavailable: dict[str, list[dict[str, str]]] = {}
        for connection in self._connections:
            bad = unavailable.setdefault(connection.name, [])
            for ident, made in self._tools_of(connection, bad):
                if ident in entries:  # cannot happen between servers; kept as a guard
                    bad.append({"tool": ident, "reason": "its id collides with another tool's"})
                    continue
                entries[ident] = made
        total = len(self._manifest.tools) + len(self._manifest.deferred) + len(entries)
        # Deferring is only of use when tool_search can find the tools again.
        auto = total > DEFER_ABOVE and "tool_search" in self._manifest.tools
        self._entries = {
            ident: SessionTool(tool, validator, defer if defer is not None else auto)
            for ident, (tool, validator, defer) in entries.items()
        }
        self._unavailable = unavailable

    def _tools_of(self, connection: ServerConnection, bad: list[dict[str, str]]) -> list[tuple[str, tuple[McpTool, Any, bool | None]]]:
        listed = list(connection.tools)
        counts = Counter(t.name for t in listed)
        out = []
        for t in listed:
            reason, made = self._make(connection, t, counts[t.name])
            if reason is not None:
                bad.append({"tool": _shown(t.name), "reason": reason})
            else:
                assert made is not None
                out.append((made[0].id, made))
        return out

    def _make(self, connection: ServerConnection, listed: ListedTool, count: int) -> tuple[str | None, tuple[McpTool, Any, bool | None] | None]:
        if count > 1:
            return "the server lists this name more than once", None
        try:
            ident = tool_id(connection.name, listed.name)
        except NameProblem as exc:
            return str(exc), None
        if ident in self._reserved:
            return "its id collides with a registered tool's id", None
        checked = listed.checked  # checked once, when the server listed it (never kept beyond its listing)
        if checked is None:
            try:
                checked = check_input_schema(listed.input_schema, connection.plan.secrets)
            except SchemaProblem as exc:
                checked = exc
        if isinstance(checked, SchemaProblem):
            return str(checked), None
        kind = kind_for(listed.annotations, connection.verified_read_only)
        tool = McpTool(ident, connection, listed, dict(listed.input_schema), kind)
        return None, (tool, checked, connection.plan.defer)

    # -- status --------------------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        """Each server: name, origin, transport, where it runs, state, reason, tools (id, kind, deferred) and unavailable tools."""
        by_name = {c.name: c for c in self._connections}
        out = []
        for plan in self._plans:
            connection = by_name.get(plan.name)
            if connection is not None and connection.plan is not plan:
                connection = None  # a second server of that name: never started
            tools = [
                {"id": e.tool.id, "kind": e.tool.kind, "deferred": e.deferred}
                for e in self._entries.values()
                if isinstance(e.tool, McpTool) and connection is not None and e.tool.server is connection
            ]
            out.append({
                "name": plan.name,
                "origin": plan.origin,
                "transport": plan.transport,
                "runs": plan.describe(),
                "sandbox": self._environment if plan.transport == "stdio" else "remote",
                "state": connection.state if connection is not None else ("unavailable" if plan.problem else "not started"),
                "reason": connection.reason if connection is not None else plan.problem,
                "restarts": connection.restarts if connection is not None else 0,
                "env": sorted(plan.env),
                "headers": sorted(plan.headers),
                "tools": tools,
                "unavailable_tools": self._unavailable.get(plan.name, []) if connection is not None else [],
                "notes": list(connection.notes) if connection is not None else [],
                # The proxy's last decisions for a stdio server with net.hosts (host, port, verdict, code; never a path).
                "network": list(connection.network[-20:]) if connection is not None else [],
            })
        return out


def _shown(name: Any) -> str:
    """A tool name as listed, made safe to print (bounded, printable ASCII)."""
    text = "".join(c if 0x20 <= ord(c) < 0x7F else "?" for c in str(name))
    return text if len(text) <= 80 else text[:77] + "..."
