"""`task`: run a subagent and return its final answer (SUB).

`agent` names an entry of the manifest's `agents` map (a child manifest
file); without it the subagent is a "general" copy of the calling agent.
The child manifest is compiled against the same workspace and then
intersected with the parent's effective set (`agentcore.manifest.intersect`): it
keeps only what the parent also has, and inherits the parent's manifest
denies (pinned), project rules and session denies. Its calls go through a
child Engine with the parent's broker and watchdog, in a child session
(`depth + 1`, headless inherited) that is closed when the call ends.

The agent loop itself belongs to the host: the engine that runs this tool
(`runtime.engine`, `Engine.run_subagent`) builds the child engine and
session and hands them to the host's subagent runner, which drives the
child's model. Without a runner the call fails with `no_subagent_runner`.
Aborting the parent session aborts the child (Session.abort cascades); the
call then fails with "aborted by parent".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ManifestError, ToolFailure
from ..manifest.compiled import load_subagent
from ..manifest.intersect import intersect
from . import _schemas
from .base import Tool, ToolResult

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest

GENERAL_AGENT = "general"


def _child_manifest(name: str | None, runtime: Any) -> "CompiledManifest":
    parent: CompiledManifest = runtime.manifest
    if name is None:
        return parent  # the general subagent: the caller's own capabilities, no more
    path = parent.agents.get(name)
    if path is None:
        known = ", ".join(sorted(parent.agents)) or "none"
        raise ToolFailure("unknown_agent", f"no subagent has that name; available subagents: {known}")
    try:
        child = load_subagent(parent, path, runtime.registry)
    except ManifestError as exc:
        raise ToolFailure("agent_invalid", f"the manifest of subagent {name!r} cannot be used: {exc}") from None
    return intersect(parent, child)


class TaskTool(Tool):
    id = "task"
    description = (
        "Delegate a self-contained task to a subagent and wait for its final answer. "
        "`description` is a short title, `prompt` the full instructions; `agent` picks a named subagent "
        "(default: a general subagent with your own permissions). A subagent never has more access than you."
    )
    parameters = _schemas.TASK
    kind = "other"
    own_truncation = True
    default_timeout_s = 4 * 3600.0  # a subagent runs a whole agent loop; abort still cancels

    def title(self, args: dict[str, Any]) -> str:
        return f"Subagent: {args.get('description', '')}"[:120]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        if runtime.session.depth + 1 > runtime.limits.task_depth:
            raise ToolFailure("depth_limit", f"subagents may nest at most {runtime.limits.task_depth} levels deep")
        name: str | None = args.get("agent")
        manifest = _child_manifest(name, runtime)
        if runtime.engine is None:
            raise ToolFailure("no_subagent_runner", "this host cannot run subagents")
        text = await runtime.engine.run_subagent(
            manifest, runtime.session, prompt=args["prompt"], description=args["description"], call_id=runtime.call_id
        )
        return self._result(name or GENERAL_AGENT, text, runtime)

    @staticmethod
    def _result(agent: str, text: str, runtime: Any) -> ToolResult:
        limit = runtime.limits.default_bytes
        encoded = text.encode("utf-8", "surrogatepass")
        if len(encoded) <= limit:
            return ToolResult(data={"agent": agent, "result": text})
        spool = runtime.byte_spool(limit)
        try:
            spool.write_all(encoded)  # a cap cuts the sidecar (TRUNC-9)
        finally:
            spool.close()
        return ToolResult(data={"agent": agent, "result": spool.head_text()}, truncated=True, output_path=str(spool.path))
