"""The engine: one pipeline for every tool call (ORDER).

lookup -> schema -> capability -> permission rules -> watchdog -> ask
resolution -> environment -> execution (time limit, abort) -> envelope.
Each stage is one method that records its decision and returns None (go on)
or the refusal envelope that ends the call; `explain` runs the very same
stages without executing. Every refusal names its layer and rule but never
the argument values.

Hosts watch a call through its events (`pipeline/events.py`): observers
given to the engine or to one call, or `Engine.stream` as an async iterator.
"""

from __future__ import annotations

import inspect
import itertools
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

import anyio
from wcmatch import fnmatch as wcfnmatch

from ..asking import HEADLESS_ASK_TEXT, AskBroker, AskRequest, Choice, HeadlessBroker
from ..envelope import Envelope
from ..errors import Refusal, ToolFailure
from ..manifest.compiled import CompiledManifest
from ..manifest.intersect import stricter_environment
from ..patterns.globtext import glob_escape
from ..rules.evaluator import Decision, Subject
from ..rules.model import ACTION_RANK, CompiledRule
from ..runtime import ProcessSurface, Runtime, ScopedFS
from ..session import ClientFiles, Session
from ..tools.base import CallContext, Location, Tool, ToolResult
from ..tools.registry import ToolRegistry
from ..watchdog import Verdict, Watchdog, WatchdogCall, read_screen_of
from .capability import CapabilityResult, check_capabilities
from .events import AskAnswered, AskRaised, CallFinished, CallStarted, Event, Observer, OutputChunk, StageDecided
from .schema import validate_args

if TYPE_CHECKING:
    from ..environments.base import Environment, SandboxPolicy
    from ..tools.source import SessionTool

_log = logging.getLogger("agentcore.events")

SubagentRunner = Callable[["Engine", Session, str, str], Awaitable[str]]
"""The host's agent loop for `task`: async (child_engine, child_session, prompt, description) -> final text."""


@dataclass
class CallTrace:
    """What each layer decided; `explain` prints it, the envelope carries a summary."""

    layers: list[dict[str, Any]] = field(default_factory=list)
    enabled: bool = True  # off for ordinary calls: the hot path builds no explanation

    def add(self, layer: str, decision: str, **info: Any) -> None:
        if self.enabled:
            self.layers.append({"layer": layer, "decision": decision, **info})


_NO_TRACE = CallTrace(enabled=False)


def exact_pattern(subject: Subject) -> str:
    """A rule pattern matching exactly this subject and nothing else."""
    if subject.kind == "path":
        # Braces escaped too: a path component spelled like a variable (`{workspace}`) must stay literal,
        # or the remembered rule would name another path than the one answered (ASK-3).
        return glob_escape(subject.value).replace("{", "\\{")
    if subject.kind == "command":
        return wcfnmatch.escape(subject.value)
    if subject.kind == "host":
        return subject.value
    return "*"


# Call ids the engine makes up (a host usually passes its own): a random prefix per process and a counter,
# unique within a process and, with 32 random bits, across the processes that record into one database;
# a uuid4 per call cost a system call and ~2 us.
_CALL_PREFIX = os.urandom(4).hex()
_CALL_COUNTER = itertools.count(1)


def _new_call_id() -> str:
    return f"call_{_CALL_PREFIX}{next(_CALL_COUNTER):04x}"


def _reseed_call_ids() -> None:
    global _CALL_PREFIX, _CALL_COUNTER
    _CALL_PREFIX, _CALL_COUNTER = os.urandom(4).hex(), itertools.count(1)


os.register_at_fork(after_in_child=_reseed_call_ids)  # a forked child never repeats its parent's ids


def _args_digest(tool: str, args: dict[str, Any]) -> tuple[str, str]:
    return tool, json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class _Call:
    """One call's state as it passes the stages."""

    session: Session
    tool_id: str
    args: Any
    call_id: str
    trace: CallTrace
    execute: bool
    observers: tuple[Observer, ...]
    tool: Tool | None = None
    schema_problem: str | None = None
    cap: CapabilityResult | None = None
    worst: Decision | None = None
    decisions: list[Decision] = field(default_factory=list)
    verdict: Verdict = field(default_factory=Verdict.allow)
    would_ask: bool = False
    scope: anyio.CancelScope | None = None

    @property
    def kind(self) -> str:
        return self.tool.kind if self.tool else "other"

    def event_ids(self) -> dict[str, Any]:
        return {"session_id": self.session.id, "call_id": self.call_id, "parent_call_id": self.session.parent_call_id}


class Engine:
    """Runs tool calls of one compiled manifest through the pipeline.

    `catalog` resolves tool ids, `watchdog` reviews calls after the rules,
    `broker` answers asks (headless by default: every ask is a refusal).
    `agentcore.api.Engine` fills in the defaults; this class takes them as
    parameters so that lower layers never reach up for them.
    """

    def __init__(
        self,
        manifest: CompiledManifest,
        *,
        catalog: ToolRegistry,
        watchdog: Watchdog,
        broker: AskBroker | None = None,
        project_rules: tuple[CompiledRule, ...] = (),
        environment: str | None = None,
        observers: Sequence[Observer] = (),
        subagent_runner: "SubagentRunner | None" = None,
    ) -> None:
        self.manifest = manifest
        self.catalog = catalog
        self.broker: AskBroker = broker or HeadlessBroker()
        self.watchdog = watchdog
        self.project_rules = project_rules
        self.environment_name = environment or manifest.environment
        self.subagent_runner = subagent_runner
        """The host's agent loop for `task` (SUB): async (child_engine, child_session, prompt, description) -> str."""
        self._observers: list[Observer] = list(observers)
        self._environment: Environment | None = None
        self._policy: SandboxPolicy | None = None
        self._verified = False
        self._stages = tuple(getattr(self, name) for name in self._STAGES)  # bound once, not looked up per call

    # -- observers ----------------------------------------------------------------
    def add_observer(self, observer: Observer) -> None:
        """Call `observer(event)` (awaited if it returns an awaitable) for every event of every call."""
        self._observers.append(observer)

    def remove_observer(self, observer: Observer) -> None:
        self._observers.remove(observer)

    # -- sessions -----------------------------------------------------------------
    def open_session(
        self,
        *,
        headless: bool | None = None,
        session_id: str | None = None,
        parent: Session | None = None,
        parent_call_id: str | None = None,
        client_files: ClientFiles | None = None,
    ) -> Session:
        """A new session of this agent; close it (or use it as a context manager) to remove its sidecars.

        `client_files` lets a front end supply the text `read` returns (an editor's unsaved buffer), asked
        only after the whole pipeline has allowed the call, for the path it allowed.
        """
        return Session(
            workspace=self.manifest.workspace,
            bindings=self.manifest.bindings,
            manifest_rules=self.manifest.rules,
            project_rules=self.project_rules,
            headless=self.broker.headless if headless is None else headless,
            session_id=session_id,
            depth=(parent.depth + 1) if parent else 0,
            parent=parent,
            parent_call_id=parent_call_id,
            sidecar_bytes=self.manifest.limits.session_sidecar_bytes,
            client_files=client_files,
        )

    def tool(self, session: Session, tool_id: str) -> Tool | None:
        """The tool `tool_id` if this agent may call it in `session` (enabled, or discovered by tool_search)."""
        if tool_id in self.manifest.tools or (
            tool_id in self.manifest.deferred and tool_id in session.stores.discovered_tools
        ):
            if self.catalog.has(tool_id):
                return self.catalog.get(tool_id)
            return None
        entry = _session_tool(session, tool_id)
        if entry is not None and (not entry.deferred or tool_id in session.stores.discovered_tools):
            return entry.tool
        return None

    def tools(self, session: Session) -> list[Tool]:
        """Every tool the agent may call in `session` now, in manifest order (discovered tools last, then session tools)."""
        ids = [*self.manifest.tools, *(t for t in self.manifest.deferred if t in session.stores.discovered_tools)]
        out = [t for t in (self.tool(session, i) for i in ids) if t is not None]
        source = session.stores.tool_source
        if source is not None:
            found = session.stores.discovered_tools
            out += [e.tool for e in source.entries() if not e.deferred or e.tool.id in found]
        return out

    def searchable(self, session: Session) -> list[str]:
        """Ids of the deferred tools `tool_search` can still wire in for `session` (not yet discovered)."""
        found = session.stores.discovered_tools
        out = [t for t in self.manifest.deferred if t not in found]
        source = session.stores.tool_source
        if source is not None:
            out += [e.tool.id for e in source.entries() if e.deferred and e.tool.id not in found]
        return out

    def may_wait(self, session: Session) -> bool:
        """Whether `ready` can wait at all: only a session with tools of its own to list (MCP servers) ever does."""
        return session.stores.tool_source is not None

    async def ready(self, session: Session) -> None:
        """Wait until the session's own tools (its MCP servers') are listed; hosts call it before advertising tools."""
        source = session.stores.tool_source
        if source is not None:
            await source.ready()

    def _schema_problem(self, session: Session, tool_id: str, args: Any) -> str | None:
        if tool_id in self.manifest.tools or tool_id in self.manifest.deferred:
            # The schema the catalog's validator is built from: proven valid without building it when it can be.
            return validate_args(lambda: self.catalog.validator(tool_id), args, self.catalog.get(tool_id).parameters)
        entry = _session_tool(session, tool_id)
        assert entry is not None  # lookup found the tool
        return validate_args(lambda: entry.validator, args)

    # -- environment --------------------------------------------------------------
    def environment(self) -> tuple["Environment", "SandboxPolicy"]:
        """(Environment, SandboxPolicy) for this manifest; raises EnvironmentUnavailable."""
        if self._environment is None or self._policy is None:
            from ..environments import get_environment
            from ..environments.policy import policy_for

            self._environment = get_environment(self.environment_name)
            self._policy = policy_for(self.manifest)
        return self._environment, self._policy

    # -- calling ------------------------------------------------------------------
    async def call(
        self, session: Session, tool_id: str, args: Any, *, call_id: str | None = None, observer: Observer | None = None
    ) -> Envelope:
        """Run one call through every stage; always returns exactly one envelope (ORDER-3)."""
        started = time.perf_counter()
        observers = tuple(self._observers) + ((observer,) if observer is not None else ())
        c = _Call(session, tool_id, args, call_id or _new_call_id(), _NO_TRACE, True, observers)
        # One cancel scope per call, tracked by the session: an abort reaches the
        # call wherever it is, a pending ask included, and ends it in an envelope.
        # Execution puts its time limit on this same scope (one scope, not two nested).
        scope = c.scope = anyio.CancelScope()
        aborts = session.aborts
        session.track(scope)
        env: Envelope | None = None
        try:
            with scope:
                env = await self._run(c)
        except Exception as exc:  # ORDER-3: a bug anywhere still ends in exactly one envelope
            env = _error(c, "internal_error", f"internal error while handling the call ({type(exc).__name__})")
        finally:
            session.untrack(scope)
        if env is None:  # the scope was cancelled: an abort if the session aborted meanwhile, else the time limit
            env = _error(c, "aborted", "the call was aborted") if session.aborts != aborts else _time_limit(c)
        env.duration_ms = int((time.perf_counter() - started) * 1000)
        if c.observers:
            await self._emit(c, CallFinished(**c.event_ids(), tool=tool_id, envelope=env))
        return env

    @asynccontextmanager
    async def stream(self, session: Session, tool_id: str, args: Any, *, call_id: str | None = None) -> AsyncIterator[AsyncIterator[Event]]:
        """The events of one call as an async iterator, ending with `CallFinished`::

            async with engine.stream(session, "bash", {"command": "ls"}) as events:
                async for event in events:
                    ...
        """
        send, receive = anyio.create_memory_object_stream[Event](max_buffer_size=64)

        async def run() -> None:
            async with send:
                await self.call(session, tool_id, args, call_id=call_id, observer=send.send)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            async with receive:
                yield receive

    async def explain(self, session: Session, tool_id: str, args: Any) -> dict[str, Any]:
        """Each layer's decision for this call, without executing it (the same stages as `call`)."""
        trace = CallTrace()
        c = _Call(session, tool_id, args, "explain", trace, False, ())
        env = await self._run(c)
        out: dict[str, Any] = {"tool": tool_id, "layers": trace.layers}
        if env.type == "error":
            out["result"] = {"refused": True, "error_text": env.error_text, "refusal": env.refusal}
        else:
            out["result"] = {"refused": False}
        return out

    # -- subagents (SUB) ------------------------------------------------------------
    async def run_subagent(
        self, manifest: CompiledManifest, parent: Session, *, prompt: str, description: str, call_id: str
    ) -> str:
        """One child agent run for `task`, on a child session closed when it ends.

        The child manifest arrives already intersected with the parent's. The
        child engine shares this engine's catalogue, broker, watchdog instance (a
        child manifest cannot switch categories off), project rules and
        observers, and takes the stricter environment; the child session is one
        level deeper, inherits project rules and session denies, and its events
        carry `call_id`, the parent's `task` call.
        """
        runner = self.subagent_runner
        if runner is None:
            raise ToolFailure("no_subagent_runner", "this host cannot run subagents")
        engine = self._child_engine(manifest)
        child = engine.open_session(parent=parent, headless=parent.headless, parent_call_id=call_id)
        _inherit_rules(parent, child)
        # Tracked on the child session, so aborting the child (or the parent,
        # which cascades) cancels the runner wherever it is waiting.
        scope = anyio.CancelScope()
        child.track(scope)
        result: object = None
        try:
            with scope:
                result = await runner(engine, child, prompt, description)
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
        return result

    def _child_engine(self, manifest: CompiledManifest) -> "Engine":
        return Engine(
            manifest,
            catalog=self.catalog,
            watchdog=self.watchdog,
            broker=self.broker,
            project_rules=self.project_rules,
            environment=stricter_environment(self.environment_name, manifest.environment),
            observers=(),
            subagent_runner=self.subagent_runner,
        )._share_observers(self._observers)

    def _share_observers(self, observers: list[Observer]) -> "Engine":
        self._observers = observers  # the same list: a host watching the parent sees the children
        return self

    # -- the stages ---------------------------------------------------------------
    _STAGES = ("_stage_lookup", "_stage_schema", "_stage_capability", "_stage_rules", "_stage_watchdog", "_stage_ask", "_stage_environment")

    async def _run(self, c: _Call) -> Envelope:
        for stage in self._stages:
            refused = await stage(c)
            if refused is not None:
                return refused
        if c.would_ask:  # explain: the call would stop here for a human
            return _refusal(c, "ask", "would_ask", "the call would need a human's approval")
        if not c.execute:
            return Envelope(type="output", data=None, kind=c.kind, tool=c.tool_id)
        return await self._execute(c)

    async def _stage_lookup(self, c: _Call) -> Envelope | None:
        if c.session.stores.tool_source is not None:
            await c.session.stores.tool_source.ready()  # the session's MCP tools are listed (bounded by their start timeouts)
        c.tool = self.tool(c.session, c.tool_id)
        if c.tool is None:
            c.trace.add("schema", "deny", code="unknown_tool")
            if c.observers:
                await self._emit(c, CallStarted(**c.event_ids(), tool=c.tool_id, kind="other", title=c.tool_id, raw_input=c.args))
            return await self._deny(c, "schema", "unknown_tool", "this tool is not enabled for the agent")
        c.schema_problem = self._schema_problem(c.session, c.tool_id, c.args)
        if c.observers:
            await self._emit(c, self._started(c))
        if c.session.closed:
            return await self._deny(c, "session", "session_closed", "the session is closed")
        return None

    def _started(self, c: _Call) -> CallStarted:
        tool = c.tool
        assert tool is not None
        title, locations = tool.id, ()
        if c.schema_problem is None:  # title and locations read the arguments: only valid ones
            try:
                title = tool.title(c.args) or tool.id
                locations = tuple(tool.locations(c.args, self._context(c.session)))
            except Exception:  # a title is a courtesy; a bad one must not break the call
                title, locations = tool.id, ()
        return CallStarted(**c.event_ids(), tool=c.tool_id, kind=tool.kind, title=title, locations=locations, raw_input=c.args)

    def _context(self, session: Session) -> CallContext:
        return CallContext(workspace=str(self.manifest.workspace or ""), session_dir=str(session.workdir), manifest=self.manifest)

    async def _stage_schema(self, c: _Call) -> Envelope | None:
        if c.schema_problem is not None:
            c.trace.add("schema", "deny", message=c.schema_problem)
            return await self._deny(c, "schema", "invalid_arguments", f"invalid arguments: {c.schema_problem}")
        c.trace.add("schema", "allow")
        if c.observers:  # no coroutine at all when nobody listens
            await self._decided(c, "schema", "allow")
        return None

    async def _stage_capability(self, c: _Call) -> Envelope | None:
        assert c.tool is not None
        try:
            accesses = c.tool.accesses(c.args, self._context(c.session))
            c.cap = check_capabilities(accesses, c.tool_id, self.manifest, session_dir=c.session.workdir)
        except Refusal as exc:
            c.trace.add(exc.layer, "deny", code=exc.code, message=exc.message, checks=exc.extra.get("checks") or None)
            return await self._deny(c, exc.layer, exc.code, exc.message)
        except ToolFailure as exc:  # a check the tool makes while deriving its accesses (ORDER-1)
            c.trace.add("schema", "deny", code=exc.code, message=exc.message)
            return await self._deny(c, "schema", exc.code, exc.message)
        if c.trace.enabled:
            c.trace.add("capability", "allow", checks=c.cap.checks)
        if c.observers:
            await self._decided(c, "capability", "allow")
        return None

    async def _stage_rules(self, c: _Call) -> Envelope | None:
        assert c.cap is not None
        evaluator = c.session.rule_evaluator
        c.worst, c.decisions = evaluator.evaluate_all(c.cap.subjects)
        # A directory the write creates, `read` of what another tool reads: a deny, or a rule asking first, holds (PERM-3).
        guards = [g for g in c.cap.guards if g not in c.cap.subjects]  # `read`'s own subject is judged already
        held = [d for d in map(evaluator.evaluate, guards) if d.action == "deny" or (d.action == "ask" and d.rule is not None)]
        if held:
            c.decisions = [*c.decisions, *held]
            c.worst = max(c.decisions, key=lambda d: ACTION_RANK[d.action])
        if c.trace.enabled:
            subjects = [{"subject": d.subject.describe() if d.subject else "", **d.to_json()} for d in c.decisions]
            c.trace.add("permission", c.worst.action, subjects=subjects)
        if c.worst.action == "deny":
            return await self._rule_refusal(c, c.worst)
        if c.observers:
            await self._decided(c, "permission", c.worst.action)
        return None

    async def _stage_watchdog(self, c: _Call) -> Envelope | None:
        assert c.cap is not None
        call = WatchdogCall(
            tool=c.tool_id,
            args=c.args,
            manifest=self.manifest,
            session_id=c.session.id,
            commands=tuple(cmd for v in c.cap.resolved.values() if hasattr(v, "commands") for cmd in v.commands),
            paths={k: v for k, v in c.cap.resolved.items() if isinstance(v, Path)},
            shell=tuple(v.source for v in c.cap.resolved.values() if hasattr(v, "commands")),
        )
        try:
            verdict: Verdict = await self.watchdog.review(call)
        except Exception as exc:  # a broken watchdog refuses; it never lets a call through
            c.trace.add("watchdog", "deny", code="watchdog_error", error=type(exc).__name__)
            return await self._deny(c, "watchdog", "watchdog_error", "the watchdog failed, so the call was refused")
        c.verdict = _remembered(c.session, c.tool_id, c.args, verdict)
        v = c.verdict
        c.trace.add("watchdog", v.action, category=v.category or None, reason=v.reason or None)
        if v.action == "deny":
            text = f"refused by the watchdog: {v.reason or v.category}"
            return await self._deny(c, "watchdog", v.category or "watchdog", text)
        if c.observers:
            await self._decided(c, "watchdog", v.action, reason=v.reason or None)
        return None

    async def _stage_ask(self, c: _Call) -> Envelope | None:
        assert c.tool is not None and c.worst is not None
        if c.tool.answer_is_consent and c.worst.action == "ask" and c.verdict.action != "ask":
            # Answering the call is itself the human's consent (QSTN-2).
            c.worst = Decision("allow", c.worst.rule, c.worst.subject)
            c.trace.add("ask", "skipped", reason=f"{c.tool_id}: answering is consent")
            await self._decided(c, "ask", "skipped", reason="answering is consent")
        if c.worst.action != "ask" and c.verdict.action != "ask":
            return None
        layer = "permission" if c.worst.action == "ask" else "watchdog"
        if not c.execute:
            c.trace.add("ask", "ask", asked_by=layer, headless=c.session.headless)
            c.would_ask = True
            return None
        request = self._ask_request(c, layer)
        if c.observers:
            await self._emit(c, AskRaised(**c.event_ids(), request=request))
        if c.session.headless or self.broker.headless:
            c.trace.add("ask", "deny", asked_by=layer, headless=True)
            await self._answered(c, "reject_once", "headless")
            return await self._deny(c, "ask", "headless", HEADLESS_ASK_TEXT, asked_by=layer)
        try:
            choice: Choice = await self.broker.ask(request)
        except Exception:  # a broken broker is a refusal, never an approval
            choice = "cancelled"
        c.trace.add("ask", choice, asked_by=layer)
        await self._answered(c, choice, getattr(self.broker, "name", "broker"))
        self._remember(c, request, choice)
        if choice in ("allow_once", "allow_always"):
            return None
        if choice == "cancelled":
            return await self._deny(c, "ask", "cancelled", "the permission request was cancelled", asked_by=layer)
        return await self._deny(c, "ask", "rejected", "the user declined this call", asked_by=layer)

    def _ask_request(self, c: _Call, layer: str) -> AskRequest:
        assert c.tool is not None and c.cap is not None
        return AskRequest(
            session_id=c.session.id,
            call_id=c.call_id,
            tool=c.tool_id,
            kind=c.tool.kind,
            title=c.tool.title(c.args),
            layer=layer,  # type: ignore[arg-type]
            reason=c.verdict.reason if layer == "watchdog" else "no rule allows this call",
            subjects=_ask_subjects(c.decisions) if layer == "permission" else tuple(c.cap.subjects),
            args=c.args,
        )

    @staticmethod
    def _remember(c: _Call, request: AskRequest, choice: Choice) -> None:
        """Record an "always" answer as exactly what was answered, never a wider pattern (ASK-3, ASK-6)."""
        if choice not in ("allow_always", "reject_always"):
            return
        allow = choice == "allow_always"
        assert c.worst is not None
        if c.worst.action == "ask":
            for s in _ask_subjects(c.decisions):
                c.session.add_session_rule(s.tool, exact_pattern(s), "allow" if allow else "deny")
        if c.verdict.action == "ask":
            store = c.session.stores.watchdog_approvals if allow else c.session.stores.watchdog_rejections
            store.add(_args_digest(c.tool_id, c.args))

    async def _stage_environment(self, c: _Call) -> Envelope | None:
        """The environment must be able to enforce the policy, or nothing runs (fail closed)."""
        assert c.tool is not None
        if not c.tool.needs_environment:
            return None
        describe = not c.execute
        if self._verified and not describe:
            # The policy is fixed per engine: verified once. Anything that changes later
            # (a bwrap that stops starting) still fails closed in run().
            return None
        from ..environments.base import EnvironmentUnavailable

        try:
            info = self._verify_environment(c, describe)
        except EnvironmentUnavailable as exc:
            c.trace.add("environment", "deny", reason=exc.reason)
            return await self._deny(c, "environment", "unavailable", f"the execution environment cannot run this call: {exc.reason}")
        c.trace.add("environment", "allow", **info)
        await self._decided(c, "environment", "allow")
        return None

    def _verify_environment(self, c: _Call, describe: bool) -> dict[str, Any]:
        from ..environments.base import redact_command_line

        assert c.tool is not None
        environment, policy = self.environment()
        environment.verify(policy)
        self._verified = True
        info: dict[str, Any] = {}
        if policy.network == "proxy":
            # The proxy itself (and the socket pair to it) exists per call (tools/bash.py).
            info["network"] = "proxy: per-call filtering proxy for " + ", ".join(h.raw for h in self.manifest.effective.net_hosts)
        info["environment"] = environment.name
        argv = c.tool.command_argv(c.args) if describe else None
        if argv is not None:
            policy = c.tool.call_policy(policy, self.manifest)  # the per-call masks, as a call now would get
            info["command_line"] = redact_command_line(environment.command_line(argv, policy))
        return info

    async def _execute(self, c: _Call) -> Envelope:
        tool = c.tool
        assert tool is not None
        runtime = self._runtime(c)
        if c.observers:
            await self._decided(c, "execution", "allow")
        # The time limit goes on the call's scope: its deadline firing leaves the
        # call without an envelope, which call() reports as a timeout unless the
        # session aborted meanwhile (ORDER-6). Nothing awaits between the tool's
        # return and the scope's exit, so a late deadline cannot undo a result.
        scope = c.scope
        assert scope is not None
        scope.deadline = anyio.current_time() + tool.default_timeout_s + 5.0
        try:
            result = await tool.execute(c.args, runtime)
        except TimeoutError:  # the tool's own timeout, not the engine's limit
            return _error(c, "timeout", "the tool gave up waiting (a timeout of its own)")
        except ToolFailure as exc:
            if exc.code == "symlink_race":  # the tree changed under the check: a capability refusal after all
                return _refusal(c, "capability", exc.code, exc.message)
            return _error(c, exc.code, exc.message)
        except Refusal as exc:
            return _refusal(c, exc.layer, exc.code, exc.message)
        except Exception as exc:  # a tool bug must still end in an envelope
            return _failure_envelope(c, exc)
        if not isinstance(result, ToolResult):
            return _error(c, "internal_error", f"internal error in tool {c.tool_id} (no result)")
        if not tool.own_truncation and not result.truncated and result.output_path is None:
            result = _truncate_generic(result, runtime)
        if runtime.output_capped:  # TRUNC-9: whichever spool of the call hit the cap
            result.extra = {**result.extra, "output_capped": True}
        return Envelope(
            type="output",
            data=result.data,
            truncated=result.truncated,
            output_path=result.output_path,
            kind=tool.kind,
            tool=c.tool_id,
            extra=result.extra,
            ui=result.ui,
        )

    def _runtime(self, c: _Call) -> Runtime:
        assert c.tool is not None and c.cap is not None
        environment = policy = None
        if c.tool.needs_environment:
            environment, policy = self.environment()
        runtime = Runtime(
            manifest=self.manifest,
            session=c.session,
            tool_id=c.tool_id,
            call_id=c.call_id,
            resolved=c.cap.resolved,
            fs=ScopedFS(self.manifest, c.session, c.tool_id, read_screen_of(self.watchdog, self.manifest)),
            proc=ProcessSurface(self.manifest, c.session, environment, policy),
            broker=self.broker,
            registry=self.catalog,
            engine=self,
        )
        if c.observers:
            ids = c.event_ids()

            async def progress(stream: str, text: str) -> None:
                await self._emit(c, OutputChunk(**ids, stream=stream, text=text))

            runtime.progress = progress
        return runtime

    # -- refusals and events ------------------------------------------------------
    async def _deny(self, c: _Call, layer: str, code: str, text: str, **extra: Any) -> Envelope:
        await self._decided(c, layer, "deny", code=code)
        return _refusal(c, layer, code, text, **extra)

    async def _rule_refusal(self, c: _Call, decision: Decision) -> Envelope:
        rule = decision.rule.rule if decision.rule else None
        text = "denied by a permission rule"
        if rule is not None:
            text = f"denied by {rule.scope} rule #{rule.index + 1} ({rule.permission} → {rule.action})"
            if decision.pinned:
                text += "; manifest denies cannot be overridden"
        return await self._deny(
            c, "permission", "denied", text, scope=rule.scope if rule else None, rule_index=rule.index if rule else None
        )

    async def _decided(self, c: _Call, stage: str, decision: str, *, code: str | None = None, reason: str | None = None) -> None:
        if c.observers:
            await self._emit(c, StageDecided(**c.event_ids(), stage=stage, decision=decision, code=code, reason=reason))

    async def _answered(self, c: _Call, choice: Choice, by: str) -> None:
        if c.observers:
            await self._emit(c, AskAnswered(**c.event_ids(), choice=choice, answered_by=by))

    async def _emit(self, c: _Call, event: Event) -> None:
        for observer in c.observers:
            try:
                result = observer(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # an observer never changes what a call does
                _log.exception("event observer failed on %s", event.type)


def _session_tool(session: Session, tool_id: str) -> "SessionTool | None":
    source = session.stores.tool_source
    return source.lookup(tool_id) if source is not None else None


def _inherit_rules(parent: Session, child: Session) -> None:
    """Project rules, and the parent's session denies and asks, apply to a subagent's session too (SUB-3).

    Only the narrowing actions: a session allow (an "always" answer) never reaches a child. An ask is kept
    too, or a general child would do unasked what the parent's session asks about (a headless parent: denied).
    The rules go over as compiled, so a variable means what it meant in the parent, and every deny is
    pinned there: the child's own manifest allows, which the parent never had, must not override it.
    """
    child.set_project_rules(tuple(r for r in parent.rule_evaluator.rules if r.rule.scope == "project"))
    child.inherit_session_rules([cr for cr in parent.session_rules if cr.rule.action in ("deny", "ask")], pin_denies=True)


def _ask_subjects(decisions: Sequence[Decision]) -> tuple[Subject, ...]:
    return tuple(d.subject for d in decisions if d.action == "ask" and d.subject is not None)


def _remembered(session: Session, tool_id: str, args: Any, verdict: Verdict) -> Verdict:
    """A watchdog `ask` this session already answered "always" for this exact call."""
    if verdict.action != "ask":
        return verdict
    digest = _args_digest(tool_id, args)  # only an ask needs it: most calls never pay for the JSON
    if digest in session.stores.watchdog_approvals:
        return Verdict("allow", "approved earlier in this session", verdict.category)
    if digest in session.stores.watchdog_rejections:
        return Verdict("deny", "rejected earlier in this session", verdict.category)
    return verdict


def _refusal(c: _Call, layer: str, code: str, text: str, **extra: Any) -> Envelope:
    refusal = {"layer": layer, "code": code, **{k: v for k, v in extra.items() if v is not None}}
    return Envelope(type="error", error_text=text, kind=c.kind, tool=c.tool_id, refusal=refusal, error_code=code)


def _time_limit(c: _Call) -> Envelope:
    return _refusal(c, "limit", "timeout", "the tool did not finish within its time limit")


def _error(c: _Call, code: str, text: str) -> Envelope:
    return Envelope(type="error", error_text=text, kind=c.kind, tool=c.tool_id, error_code=code)


def _failure_envelope(c: _Call, exc: Exception) -> Envelope:
    from ..environments.base import EnvironmentUnavailable

    if isinstance(exc, EnvironmentUnavailable):  # the sandbox could not start: nothing ran unsandboxed
        return _refusal(c, "environment", "unavailable", f"the execution environment cannot run this call: {exc.reason}")
    return _error(c, "internal_error", f"internal error in tool {c.tool_id} ({type(exc).__name__})")


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


__all__ = ["CallTrace", "Engine", "Location", "SubagentRunner", "exact_pattern"]
