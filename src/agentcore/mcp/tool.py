"""An MCP server's tool as a Tool (MCP-2, MCP-6, MCP-7).

It keeps the server's description and input schema, takes its kind from the
server's annotations only where that cannot mislead a client (KIND-3), and
declares no accesses: its arguments are opaque, so nothing in them can be
proven. What a call can reach is what its server was granted — part of the
agent's effective set, enforced by the server's own sandbox (stdio) or by
vetted, pinned dialing (remote) — and the capability stage checks exactly
that: the server's grant must lie within the effective set the call runs
under. The rules then decide on the tool id (default `ask`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import Refusal
from ..tools.base import CallContext, Tool, ToolResult
from ..vocabulary import AcpKind
from .names import clean_description
from .render import render_result

if TYPE_CHECKING:
    from ..access import Access
    from ..manifest.compiled import EffectiveCapabilities
    from .server import ServerConnection

MAX_PROGRESS_NOTES = 100  # per call: a server's progress notifications cannot flood the call's observers


def kind_for(annotations: Any, verified_read_only: bool) -> AcpKind:
    """The ACP kind of an MCP tool (MCP-6).

    A server's `readOnlyHint` is believed only when its sandbox makes it true
    (`read`), since clients approve `read` tools without asking; an explicit
    `readOnlyHint: false` gives `edit`, or `delete` with `destructiveHint: true`;
    anything else is `other`.
    """
    read_only = getattr(annotations, "read_only_hint", None)
    if read_only is True:
        return "read" if verified_read_only else "other"
    if read_only is False:
        return "delete" if getattr(annotations, "destructive_hint", None) is True else "edit"
    return "other"


def _covered(grant: "EffectiveCapabilities", effective: "EffectiveCapabilities") -> bool:
    """Every entry of `grant` is an entry of `effective` (compiled from the same text)."""
    return (
        {p.expanded for p in grant.fs_read} <= {p.expanded for p in effective.fs_read}
        and {p.expanded for p in grant.fs_write} <= {p.expanded for p in effective.fs_write}
        and {h.raw for h in grant.net_hosts} <= {h.raw for h in effective.net_hosts}
        and set(grant.shell) <= set(effective.shell)
        and grant.capabilities <= effective.capabilities
    )


class McpTool(Tool):
    """One tool of one MCP server, called through that server's connection."""

    own_truncation = True

    def __init__(self, ident: str, server: "ServerConnection", listed: Any, parameters: dict[str, Any], kind: AcpKind) -> None:
        self.id = ident  # type: ignore[misc]
        self.server = server
        self.name = listed.name
        self.description = clean_description(listed.description, server.name, listed.name, server.plan.scrub)  # type: ignore[misc]
        self.parameters = parameters  # type: ignore[misc]
        self.kind = kind  # type: ignore[misc]
        self.default_timeout_s = server.plan.timeout_s  # type: ignore[misc]
        self.concurrency_safe = kind == "read"  # type: ignore[misc]

    def title(self, args: dict[str, Any]) -> str:
        """`<tool> (MCP server <server>)`; never an argument."""
        return f"{self.name} (MCP server {self.server.name})"

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list["Access"]:
        """None (opaque arguments); refused when the server's grant exceeds the effective set (MCP-4)."""
        manifest = ctx.manifest
        if manifest is not None and not _covered(self.server.plan.grant, manifest.effective):
            raise Refusal("capability", "out_of_scope", f"the MCP server {self.server.name} was granted more than this agent's effective set")
        return []

    def locations(self, args: dict[str, Any], ctx: CallContext) -> list[Any]:
        """None: nothing in the arguments is known to be a path."""
        return []

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        """`tools/call` on the server; the result as text (MCP-7), secrets scrubbed, cut with a sidecar."""
        notes = 0

        async def progress(text: str) -> None:
            nonlocal notes
            notes += 1
            if notes <= MAX_PROGRESS_NOTES:
                await runtime.report(text)

        try:
            result = await self.server.call(self.name, args, progress=progress)
        finally:
            swept = await self.server.sweep()  # whatever the call did, nothing protected it made stays (ENV-7)
        text = render_result(list(getattr(result, "content", None) or []), getattr(result, "structured_content", None))
        text = self.server.plan.scrub(text)
        spool = runtime.byte_spool(runtime.limits.default_bytes)
        try:
            spool.write_sync(text.encode("utf-8", "replace"))
        finally:
            spool.close()
        data: dict[str, Any] = {"content": spool.head_text(), "is_error": bool(getattr(result, "is_error", False))}
        if spool.truncated:
            data["head"] = data["content"]
        extra = {"protected_removed": swept} if swept else {}  # a count only, never which paths (ENVL-6)
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None, extra=extra)
