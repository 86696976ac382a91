"""`task`: run a subagent and return its final answer (SUB).

`agent` names an entry of the manifest's `agents` map (a child manifest
file); without it the subagent is a "general" copy of the calling agent.
The child manifest is compiled against the same workspace and then
intersected with the parent's effective set (`agentcore.subagents`): it
keeps only what the parent also has, and inherits the parent's manifest
denies (pinned), project rules and session denies. Its calls go through a
child Engine with the parent's broker and watchdog, in a child session
(`depth + 1`, headless inherited) that is closed when the call ends.

The agent loop itself belongs to the host. It sets `subagent_runner` on the
Engine::

    async def runner(child_engine, child_session, prompt: str, description: str) -> str

and the runner drives the child's model, calling tools with
`child_engine.call(child_session, ...)`. Without a runner the call fails
with `no_subagent_runner`. Aborting the parent session aborts the child
(Session.abort cascades); the call then fails with "aborted by parent".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

import anyio

from ..errors import ManifestError, ToolFailure
from . import _schemas
from .base import Tool, ToolResult

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest
    from ..pipeline.engine import Engine
    from ..session import Session

SubagentRunner = Callable[["Engine", "Session", str, str], Awaitable[str]]
GENERAL_AGENT = "general"


def _child_manifest(name: str | None, runtime: Any) -> "CompiledManifest":
    from ..manifest.compiled import load_manifest
    from ..subagents import intersect

    parent: CompiledManifest = runtime.manifest
    if name is None:
        return parent  # the general subagent: the caller's own capabilities, no more
    path = parent.agents.get(name)
    if path is None:
        known = ", ".join(sorted(parent.agents)) or "none"
        raise ToolFailure("unknown_agent", f"no subagent has that name; available subagents: {known}")
    try:
        child = load_manifest(path, workspace=parent.workspace, registry=runtime.registry)
    except ManifestError as exc:
        raise ToolFailure("agent_invalid", f"the manifest of subagent {name!r} cannot be used: {exc}") from None
    return intersect(parent, child)


def _inherit_rules(parent: "Session", child: "Session") -> None:
    """Project rules, and the parent's session denies, apply to the child too."""
    rules = parent.rule_engine.rules
    child.set_project_rules(tuple(r for r in rules if r.rule.scope == "project"))
    seen: set[tuple[str, str]] = set()
    for cr in parent.session_rules:
        key = (cr.rule.permission, cr.rule.pattern)
        if cr.rule.action == "deny" and key not in seen:
            seen.add(key)
            child.add_session_rule(cr.rule.permission, cr.rule.pattern, "deny")


class TaskTool(Tool):
    id = "task"
    description = (
        "Delegate a self-contained task to a subagent and wait for its final answer. "
        "`description` is a short title, `prompt` the full instructions; `agent` picks a named subagent "
        "(default: a general subagent with your own permissions). A subagent never has more access than you."
    )
    parameters = _schemas.TASK
    kind = "other"
    default_timeout_s = 4 * 3600.0  # a subagent runs a whole agent loop; abort still cancels

    def title(self, args: dict[str, Any]) -> str:
        return f"Subagent: {args.get('description', '')}"[:120]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        from ..pipeline.engine import Engine
        from ..subagents import stricter_environment

        session: Session = runtime.session
        if session.depth + 1 > runtime.limits.task_depth:
            raise ToolFailure("depth_limit", f"subagents may nest at most {runtime.limits.task_depth} levels deep")
        name: str | None = args.get("agent")
        manifest = _child_manifest(name, runtime)
        parent_engine = runtime.engine
        runner: SubagentRunner | None = getattr(parent_engine, "subagent_runner", None)
        if parent_engine is None or runner is None:
            raise ToolFailure("no_subagent_runner", "this host cannot run subagents")

        child_engine = Engine(
            manifest,
            registry=runtime.registry,
            broker=parent_engine.broker,
            # The parent's watchdog instance: a child manifest cannot switch categories off.
            watchdog=parent_engine.watchdog,
            project_rules=parent_engine.project_rules,
            environment=stricter_environment(parent_engine.environment_name, manifest.environment),
        )
        child_engine.subagent_runner = runner  # type: ignore[attr-defined]  # grandchildren use the same host loop
        child = child_engine.open_session(parent=session, headless=session.headless)
        _inherit_rules(session, child)
        # Tracked on the child session, so aborting the child (or the parent,
        # which cascades) cancels the runner wherever it is waiting.
        scope = anyio.CancelScope()
        child.track(scope)
        result: Any = None
        try:
            with scope:
                result = await runner(child_engine, child, args["prompt"], args["description"])
        except ToolFailure:
            raise
        except Exception as exc:  # the host's loop failed: report it as this call's failure
            raise ToolFailure("subagent_failed", f"the subagent failed ({type(exc).__name__})") from None
        finally:
            child.untrack(scope)
            child.close()
        if scope.cancel_called:
            raise ToolFailure("aborted", "aborted by parent")
        if not isinstance(result, str):
            raise ToolFailure("subagent_failed", "the subagent returned no text")
        return self._result(name or GENERAL_AGENT, result, runtime)

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
