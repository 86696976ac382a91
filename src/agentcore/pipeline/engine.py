"""The engine: one pipeline for every tool call (ORDER).

schema -> capability -> permission rules -> watchdog -> ask resolution ->
execution (timeout, abort) -> envelope. Each stage only ever narrows what
the previous one let through; every refusal names its layer and rule but
never the argument values.
"""

from __future__ import annotations

from agentcore.patterns.globtext import glob_escape

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import anyio
from wcmatch import fnmatch as wcfnmatch
from wcmatch import glob as wcglob

from ..access import Access
from ..envelope import Envelope
from ..errors import Refusal, ToolFailure
from ..manifest.compiled import CompiledManifest
from ..rules.engine import Decision, Subject
from ..rules.model import CompiledRule
from ..runtime import ProcessSurface, Runtime, ScopedFS
from ..session import Session
from ..tools.base import CallContext, Tool, ToolResult
from ..tools.registry import ToolRegistry, default_registry
from .broker import HEADLESS_ASK_TEXT, AskBroker, AskRequest, HeadlessBroker
from .capability import CapabilityResult, check_capabilities
from .schema import validate_args
from .watchdog import Verdict, Watchdog, WatchdogCall, read_screen_of


@dataclass
class CallTrace:
    """What each layer decided; `explain` prints it, the envelope carries a summary."""

    layers: list[dict[str, Any]] = field(default_factory=list)
    enabled: bool = True  # off for ordinary calls: the hot path builds no explanation

    def add(self, layer: str, decision: str, **info: Any) -> None:
        if self.enabled:
            self.layers.append({"layer": layer, "decision": decision, **info})


# Tools that apply their own output limit (TRUNC-1); every other tool is truncated generically.
_OWN_TRUNCATION = frozenset({"read", "glob", "grep", "bash", "web_fetch", "task"})


_NO_TRACE = CallTrace(enabled=False)


def exact_pattern(subject: Subject) -> str:
    """A rule pattern matching exactly this subject and nothing else."""
    if subject.kind == "path":
        return glob_escape(subject.value)
    if subject.kind == "command":
        return wcfnmatch.escape(subject.value)
    if subject.kind == "host":
        return subject.value
    return "*"


def _args_digest(tool: str, args: dict[str, Any]) -> tuple[str, str]:
    return tool, json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


class Engine:
    def __init__(
        self,
        manifest: CompiledManifest,
        *,
        registry: ToolRegistry | None = None,
        broker: AskBroker | None = None,
        watchdog: Watchdog | None = None,
        project_rules: tuple[CompiledRule, ...] = (),
        environment: str | None = None,
    ) -> None:
        self.manifest = manifest
        self.registry = registry or default_registry()
        self.broker: AskBroker = broker or HeadlessBroker()
        if watchdog is None:
            from .default_watchdog import default_watchdog_for

            watchdog = default_watchdog_for(manifest)
        self.watchdog = watchdog
        self.project_rules = project_rules
        self.environment_name = environment or manifest.environment
        self._environment: Any = None
        # The host's agent loop for `task` (SUB): async (child_engine, child_session, prompt, description) -> str.
        self.subagent_runner: Any = None
        self._policy: Any = None
        self._verified = False

    # -- sessions --------------------------------------------------------------
    def open_session(self, *, headless: bool | None = None, session_id: str | None = None, parent: Session | None = None) -> Session:
        return Session(
            workspace=self.manifest.workspace,
            bindings=self.manifest.bindings,
            manifest_rules=self.manifest.rules,
            project_rules=self.project_rules,
            headless=self.broker.headless if headless is None else headless,
            session_id=session_id,
            depth=(parent.depth + 1) if parent else 0,
            parent=parent,
            sidecar_bytes=self.manifest.limits.session_sidecar_bytes,
        )

    # -- environment -------------------------------------------------------------
    def environment(self) -> tuple[Any, Any]:
        """(Environment, SandboxPolicy) for this manifest; raises EnvironmentUnavailable."""
        if self._environment is None:
            from ..environments import get_environment
            from ..environments.policy import policy_for

            env = get_environment(self.environment_name)
            self._policy = policy_for(self.manifest)
            self._environment = env
        return self._environment, self._policy

    # -- the pipeline ------------------------------------------------------------
    def _tool(self, session: Session, tool_id: str) -> Tool | None:
        if tool_id in self.manifest.tools or (
            tool_id in self.manifest.deferred and tool_id in session.stores.discovered_tools
        ):
            if self.registry.has(tool_id):
                return self.registry.get(tool_id)
        return None

    async def call(self, session: Session, tool_id: str, args: Any, *, call_id: str | None = None) -> Envelope:
        started = time.perf_counter()
        # One cancel scope per call, tracked by the session: an abort reaches the
        # call wherever it is, a pending ask included, and ends it in an envelope.
        scope = anyio.CancelScope()
        session.track(scope)
        env: Envelope | None = None
        try:
            with scope:
                env = await self._call(
                    session, tool_id, args, call_id or f"call_{uuid.uuid4().hex[:12]}", _NO_TRACE, execute=True, scope=scope
                )
        except Exception as exc:  # ORDER-3: a bug anywhere still ends in exactly one envelope
            tool = self._tool(session, tool_id)
            env = Envelope(
                type="error",
                error_text=f"internal error while handling the call ({type(exc).__name__})",
                kind=tool.kind if tool else "other",
                tool=tool_id,
                error_code="internal_error",
            )
        finally:
            session.untrack(scope)
        if env is None:
            tool = self._tool(session, tool_id)
            if anyio.current_time() >= scope.deadline:  # the per-call ceiling (ORDER-6), not an abort
                env = self._refuse(tool, tool_id, "limit", "timeout", "the tool did not finish within its time limit")
            else:
                env = Envelope(type="error", error_text="the call was aborted", kind=tool.kind if tool else "other", tool=tool_id, error_code="aborted")
        env.duration_ms = int((time.perf_counter() - started) * 1000)
        return env

    async def explain(self, session: Session, tool_id: str, args: Any) -> dict[str, Any]:
        trace = CallTrace()
        env = await self._call(session, tool_id, args, "explain", trace, execute=False)
        out: dict[str, Any] = {"tool": tool_id, "layers": trace.layers}
        if env.type == "error":
            out["result"] = {"refused": True, "error_text": env.error_text, "refusal": env.refusal}
        else:
            out["result"] = {"refused": False}
        return out

    def _refuse(self, tool: Tool | None, tool_id: str, layer: str, code: str, text: str, **extra: Any) -> Envelope:
        refusal = {"layer": layer, "code": code, **{k: v for k, v in extra.items() if v is not None}}
        return Envelope(
            type="error",
            error_text=text,
            kind=tool.kind if tool else "other",
            tool=tool_id,
            refusal=refusal,
            error_code=code,
        )

    async def _call(
        self,
        session: Session,
        tool_id: str,
        args: Any,
        call_id: str,
        trace: CallTrace,
        *,
        execute: bool,
        scope: anyio.CancelScope | None = None,
    ) -> Envelope:
        tool = self._tool(session, tool_id)
        if tool is None:
            trace.add("schema", "deny", code="unknown_tool")
            return self._refuse(None, tool_id, "schema", "unknown_tool", "this tool is not enabled for the agent")
        if session.closed:
            return self._refuse(tool, tool_id, "session", "session_closed", "the session is closed")

        # 1. schema
        problem = validate_args(self.registry.validator(tool_id), args)
        if problem is not None:
            trace.add("schema", "deny", message=problem)
            return self._refuse(tool, tool_id, "schema", "invalid_arguments", f"invalid arguments: {problem}")
        trace.add("schema", "allow")

        # 2. capability
        ctx = CallContext(workspace=str(self.manifest.workspace or ""), session_dir=str(session.workdir), manifest=self.manifest)
        try:
            accesses: list[Access] = tool.accesses(args, ctx)
            cap = check_capabilities(accesses, tool_id, self.manifest, session_dir=session.workdir)
        except Refusal as exc:
            trace.add(exc.layer, "deny", code=exc.code, message=exc.message, checks=exc.extra.get("checks") or None)
            return self._refuse(tool, tool_id, exc.layer, exc.code, exc.message)
        except ToolFailure as exc:
            trace.add("schema", "deny", code=exc.code, message=exc.message)
            return self._refuse(tool, tool_id, "schema", exc.code, exc.message)
        if trace.enabled:
            trace.add("capability", "allow", checks=cap.checks)

        # 3. permission rules
        worst, decisions = session.rule_engine.evaluate_all(cap.subjects)
        if trace.enabled:
            trace.add(
                "permission",
                worst.action,
                subjects=[{"subject": d.subject.describe() if d.subject else "", **d.to_json()} for d in decisions],
            )
        if worst.action == "deny":
            return self._rule_refusal(tool, tool_id, worst)

        # 4. watchdog
        wcall = WatchdogCall(
            tool=tool_id,
            args=args,
            manifest=self.manifest,
            session_id=session.id,
            commands=tuple(c for v in cap.resolved.values() if hasattr(v, "commands") for c in v.commands),
            paths={k: v for k, v in cap.resolved.items() if isinstance(v, Path)},
        )
        try:
            verdict: Verdict = await self.watchdog.review(wcall)
        except Exception as exc:  # a broken watchdog refuses; it never lets a call through
            trace.add("watchdog", "deny", code="watchdog_error", error=type(exc).__name__)
            return self._refuse(tool, tool_id, "watchdog", "watchdog_error", "the watchdog failed, so the call was refused")
        digest = _args_digest(tool_id, args) if verdict.action == "ask" else ("", "")
        if verdict.action == "ask" and digest in session.stores.watchdog_approvals:
            verdict = Verdict("allow", "approved earlier in this session", verdict.category)
        if verdict.action == "ask" and digest in session.stores.watchdog_rejections:
            verdict = Verdict("deny", "rejected earlier in this session", verdict.category)
        trace.add("watchdog", verdict.action, category=verdict.category or None, reason=verdict.reason or None)
        if verdict.action == "deny":
            return self._refuse(
                tool, tool_id, "watchdog", verdict.category or "watchdog", f"refused by the watchdog: {verdict.reason or verdict.category}"
            )

        # 5. ask resolution
        if tool_id == "question" and worst.action == "ask" and verdict.action != "ask":
            # Answering the question is itself the human's consent (QSTN-2).
            worst = Decision("allow", worst.rule, worst.subject)
            trace.add("ask", "skipped", reason="question: answering is consent")
        if worst.action == "ask" or verdict.action == "ask":
            layer = "permission" if worst.action == "ask" else "watchdog"
            if not execute:
                trace.add("ask", "ask", asked_by=layer, headless=session.headless)
                refused = self._environment_check(tool, tool_id, args, cap, trace, describe=True)
                if refused is not None:
                    return refused
                return self._refuse(tool, tool_id, "ask", "would_ask", "the call would need a human's approval")
            if session.headless or self.broker.headless:
                trace.add("ask", "deny", asked_by=layer, headless=True)
                return self._refuse(tool, tool_id, "ask", "headless", HEADLESS_ASK_TEXT, asked_by=layer)
            ask_subjects = tuple(d.subject for d in decisions if d.action == "ask" and d.subject is not None)
            request = AskRequest(
                session_id=session.id,
                call_id=call_id,
                tool=tool_id,
                kind=tool.kind,
                title=tool.title(args),
                layer=layer,  # type: ignore[arg-type]
                reason=verdict.reason if layer == "watchdog" else "no rule allows this call",
                subjects=ask_subjects if layer == "permission" else tuple(cap.subjects),
                args=args,
            )
            try:
                choice = await self.broker.ask(request)
            except Exception:  # a broken broker is a refusal, never an approval
                choice = "cancelled"
            trace.add("ask", choice, asked_by=layer)
            if choice in ("allow_always", "reject_always"):
                # Remember exactly what was answered, never a wider pattern (ASK-3, ASK-6).
                allow = choice == "allow_always"
                if worst.action == "ask":
                    for s in ask_subjects:
                        session.add_session_rule(s.tool, exact_pattern(s), "allow" if allow else "deny")
                if verdict.action == "ask":
                    (session.stores.watchdog_approvals if allow else session.stores.watchdog_rejections).add(digest)
            if choice not in ("allow_once", "allow_always"):
                code = "cancelled" if choice == "cancelled" else "rejected"
                return self._refuse(tool, tool_id, "ask", code, "the user declined this call" if code == "rejected" else "the permission request was cancelled", asked_by=layer)

        # 6a. the environment must be able to enforce the policy, or nothing runs (fail closed).
        refused = self._environment_check(tool, tool_id, args, cap, trace, describe=not execute)
        if refused is not None:
            return refused

        if not execute:
            return Envelope(type="output", data=None, kind=tool.kind, tool=tool_id)

        # 6. execution
        return await self._execute(tool, tool_id, args, cap, session, call_id, scope)

    @staticmethod
    def _truncate_generic(result: ToolResult, runtime: Runtime) -> ToolResult:
        """Tools without their own limit: compact JSON of `data` beyond `limits.default_bytes` goes to a sidecar (TRUNC-4)."""
        limit = runtime.limits.default_bytes
        text = json.dumps(result.data, ensure_ascii=False, separators=(",", ":"), default=str)
        encoded = text.encode("utf-8", "surrogatepass")
        if len(encoded) <= limit:
            return result
        spool = runtime.byte_spool(limit)
        try:
            spool.write_all(encoded)  # a cap cuts the sidecar; the envelope then says output_capped
        finally:
            spool.close()
        return ToolResult(
            data={"head": spool.head_text()},
            truncated=True,
            output_path=str(spool.path) if spool.path else None,
            extra=result.extra,
            ui=result.ui,
        )

    def _environment_check(
        self, tool: Tool, tool_id: str, args: dict[str, Any], cap: CapabilityResult, trace: CallTrace, *, describe: bool
    ) -> Envelope | None:
        if not (tool_id == "bash" or getattr(tool, "needs_environment", False)):
            return None
        if self._verified and not describe:
            # The policy is fixed per engine: verified once. Anything that changes later
            # (a bwrap that stops starting) still fails closed in run().
            return None
        from ..environments.base import EnvironmentUnavailable, redact_command_line

        env_info: dict[str, Any] = {}
        try:
            environment, policy = self.environment()
            environment.verify(policy)
            if policy.network == "proxy":
                # The proxy itself (and the socket pair to it) exists per call (tools/bash.py).
                env_info["network"] = "proxy: per-call filtering proxy for " + ", ".join(h.raw for h in self.manifest.effective.net_hosts)
            env_info["environment"] = environment.name
            self._verified = True
            if describe and hasattr(tool, "command_argv"):
                if hasattr(tool, "call_policy"):
                    policy = tool.call_policy(policy, self.manifest)  # the per-call masks, as a call now would get
                env_info["command_line"] = redact_command_line(environment.command_line(tool.command_argv(args), policy))
        except EnvironmentUnavailable as exc:
            trace.add("environment", "deny", reason=exc.reason)
            return self._refuse(tool, tool_id, "environment", "unavailable", f"the execution environment cannot run this call: {exc.reason}")
        trace.add("environment", "allow", **env_info)
        return None

    def _rule_refusal(self, tool: Tool, tool_id: str, decision: Decision) -> Envelope:
        rule = decision.rule.rule if decision.rule else None
        text = "denied by a permission rule"
        if rule is not None:
            text = f"denied by {rule.scope} rule #{rule.index + 1} ({rule.permission} → {rule.action})"
            if decision.pinned:
                text += "; manifest denies cannot be overridden"
        return self._refuse(
            tool,
            tool_id,
            "permission",
            "denied",
            text,
            scope=rule.scope if rule else None,
            rule_index=rule.index if rule else None,
        )

    async def _execute(
        self,
        tool: Tool,
        tool_id: str,
        args: dict[str, Any],
        cap: CapabilityResult,
        session: Session,
        call_id: str,
        scope: anyio.CancelScope | None,
    ) -> Envelope:
        environment = policy = None
        if tool_id == "bash" or getattr(tool, "needs_environment", False):
            environment, policy = self.environment()
        runtime = Runtime(
            manifest=self.manifest,
            session=session,
            tool_id=tool_id,
            call_id=call_id,
            resolved=cap.resolved,
            fs=ScopedFS(self.manifest, session, tool_id, read_screen_of(self.watchdog, self.manifest)),
            proc=ProcessSurface(self.manifest, session, environment, policy),
            broker=self.broker,
            registry=self.registry,
            engine=self,
        )
        result: ToolResult | None = None
        failure: Envelope | None = None
        # The call's own cancel scope carries the ceiling: one scope, no extra timer.
        ceiling = tool.default_timeout_s + 5.0
        try:
            if scope is not None:
                scope.deadline = anyio.current_time() + ceiling
                result = await tool.execute(args, runtime)
            else:
                with anyio.fail_after(ceiling):
                    result = await tool.execute(args, runtime)
        except TimeoutError:
            failure = self._refuse(tool, tool_id, "limit", "timeout", "the tool did not finish within its time limit")
        except ToolFailure as exc:
            if exc.code == "symlink_race":  # the tree changed under the check: a capability refusal after all
                failure = self._refuse(tool, tool_id, "capability", exc.code, exc.message)
            else:
                failure = Envelope(type="error", error_text=exc.message, kind=tool.kind, tool=tool_id, error_code=exc.code)
        except Refusal as exc:
            failure = self._refuse(tool, tool_id, exc.layer, exc.code, exc.message)
        except Exception as exc:  # a tool bug must still end in an envelope
            from ..environments.base import EnvironmentUnavailable

            if isinstance(exc, EnvironmentUnavailable):  # the sandbox could not start: nothing ran unsandboxed
                return self._refuse(tool, tool_id, "environment", "unavailable", f"the execution environment cannot run this call: {exc.reason}")
            failure = Envelope(
                type="error",
                error_text=f"internal error in tool {tool_id} ({type(exc).__name__})",
                kind=tool.kind,
                tool=tool_id,
                error_code="internal_error",
            )
        if failure is not None:
            return failure
        assert result is not None
        if not result.truncated and result.output_path is None and tool_id not in _OWN_TRUNCATION:
            result = self._truncate_generic(result, runtime)
        if runtime.output_capped:  # TRUNC-9: whichever spool of the call hit the cap
            result.extra = {**result.extra, "output_capped": True}
        return Envelope(
            type="output",
            data=result.data,
            truncated=result.truncated,
            output_path=result.output_path,
            kind=tool.kind,
            tool=tool_id,
            extra=result.extra,
            ui=result.ui,
        )
