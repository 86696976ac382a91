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

from .config import McpServer, ServerPlan, plan_servers
from .hub import McpHub

__all__ = ["McpHub", "McpServer", "ServerPlan", "plan_servers"]
