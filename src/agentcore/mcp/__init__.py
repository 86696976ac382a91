"""MCP servers as tools (MCP): the client side of the Model Context Protocol, behind the pipeline.

- `config`: which servers a session runs (manifest `mcp:` entries, servers a host passes) and their grants;
- `names`: tool ids `<server>__<tool>`;
- `schemas`: a tool's input schema checked as a schema (dialect, size, depth, references);
- `stdio`: JSON-RPC over a sandboxed process's pipes; `remote`: vetted, pinned HTTP and SSE;
- `server`: one server's connection: start, list, call, restart;
- `tool`: `McpTool`, one server tool as a Tool; `render`: results as text;
- `hub`: `McpHub`, a session's servers as its `SessionToolSource`.

The MCP SDK (`mcp`) is imported only when a server starts.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["McpHub", "McpServer", "ServerPlan", "plan_servers"]

# Names resolve on first use (PEP 562): `agentcore.api` needs only `config` to start, and a session
# with no MCP server never pays for the hub, its sandboxed transports or the tool catalogue they pull in.
_HOME = {"McpHub": ".hub", "McpServer": ".config", "ServerPlan": ".config", "plan_servers": ".config"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOME[name], __name__), name)
