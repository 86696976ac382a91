"""`AgentLoop`: the model loop over the engine. It owns every step.

One `run(session, prompt)`:

1. the user message joins the history; the system prompt and the tool
   definitions come from the manifest (`prompt.py`);
2. a model request streams text and reasoning as events; a failed request
   is retried with backoff when the provider says it may succeed later
   (429, 5xx, a dropped connection), then the run fails naming the status;
3. the turn's tool calls go through the engine: calls of tools declared
   `concurrency_safe` run in parallel with their safe neighbours, every other
   call alone and in order; malformed arguments and unknown tools end in
   error envelopes from the engine's own stages, never in a crash;
4. the envelopes go back to the model as tool results, exactly as the engine
   truncated them, and the next request is made, until the model answers
   without tool calls (`end_turn`), runs out of tokens (`max_tokens`),
   refuses (`refusal`), the request cap is reached (`max_turn_requests`),
   or the run is cancelled (`cancelled`).

`cancel(session)` aborts the model request and every tool in flight; tools
end in `aborted` envelopes (their events still arrive) and the run returns
`cancelled`. The loop is also the engine's subagent runner for `task`.
"""

from __future__ import annotations

import inspect
import logging
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

import anyio

from ..api import Engine, Envelope, Event, Session
from .events import AgentEvent, MessageAdded, ModelDelta, ModelRetried, RunFinished, RunStarted
from .messages import Message, ToolCallPart, ToolResultPart, user_message
from .model import ModelClient, ModelTurn, ProviderError, RequestSettings, Usage
from .prompt import PromptCache

_log = logging.getLogger("agentcore.agent")

# The ACP stop reasons, plus `failed` (the provider kept failing) and `token_budget` (a batch task's budget ran out).
STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "failed", "token_budget")


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per model request, and the backoff between them (doubling, with jitter, capped)."""

    attempts: int = 4
    base_s: float = 1.0
    max_s: float = 30.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None and retry_after_s == retry_after_s:  # NaN (a server's or a script's) is ignored
            return min(max(retry_after_s, 0.0), self.max_s)
        return min(self.base_s * 2 ** (attempt - 1), self.max_s) * (0.5 + random.random() / 2)


@dataclass
class RunResult:
    """How a run ended, and what it did."""

    run_id: str
    stop_reason: str
    text: str
    usage: Usage
    messages: list[Message]
    tool_calls: int = 0
    refusals: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    problems: list[str] = field(default_factory=list)


class _Failed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Spend:
    """What a run and all its subagents have spent together: the caps (`max_turn_requests`, the token
    budget) bound the whole tree, so a `task` cannot multiply them."""

    requests: int = 0
    tokens: int = 0


@dataclass
class _Run:
    """One run's state."""

    session: Session
    run_id: str
    history: list[Message]
    added: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    refusals: dict[str, int] = field(default_factory=dict)
    cancelled: bool = False
    model_scope: anyio.CancelScope | None = None
    spend: _Spend = field(default_factory=_Spend)  # shared with the subagents' runs (the top run's own)


class AgentLoop:
    """Drives one engine with one model client. Observers get loop events and engine events."""

    def __init__(
        self,
        engine: Engine,
        model: ModelClient,
        *,
        max_turn_requests: int = 50,
        token_budget: int | None = None,
        settings: RequestSettings | None = None,
        retry: RetryPolicy | None = None,
        observers: Sequence[Any] = (),
        _child: bool = False,
    ) -> None:
        self.engine = engine
        self.model = model
        self.max_turn_requests = max_turn_requests
        self.token_budget = token_budget
        self.settings = settings or RequestSettings()
        self.retry = retry or RetryPolicy()
        self._observers: list[Any] = list(observers)
        self._runs: dict[str, _Run] = {}  # session id -> the run in progress
        self._call_ids: dict[str, set[str]] = {}
        self._prompts = PromptCache()
        self._spend: _Spend | None = None  # a subagent's loop: the tree's spend it shares
        engine.subagent_runner = self._subagent
        self._forwarding = not _child  # a subagent's engine shares its parent's observer list: forward once
        if self._forwarding:
            engine.add_observer(self._forward)

    def close(self) -> None:
        """Detach from the engine (its events stop reaching this loop's observers)."""
        if self._forwarding:
            self.engine.remove_observer(self._forward)
            self._forwarding = False
        if self.engine.subagent_runner == self._subagent:
            self.engine.subagent_runner = None

    def __enter__(self) -> "AgentLoop":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- observers -------------------------------------------------------------------------
    def add_observer(self, observer: Any) -> None:
        """`observer(event)` for every loop and engine event (awaited when it returns an awaitable)."""
        self._observers.append(observer)

    def remove_observer(self, observer: Any) -> None:
        self._observers.remove(observer)

    async def _forward(self, event: Event) -> None:
        await self._emit(event)

    async def _emit(self, event: Event | AgentEvent) -> None:
        for observer in list(self._observers):
            try:
                result = observer(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # an observer never changes what the run does
                _log.exception("observer failed on %s", event.type)

    # -- running ---------------------------------------------------------------------------
    async def run(self, session: Session, prompt: str | Message, history: Sequence[Message] = (), *,
                  run_id: str | None = None) -> RunResult:
        """Answer `prompt` in `session`, continuing `history`; returns when the run stops."""
        if session.id in self._runs:
            raise RuntimeError("a run is already in progress in this session")
        message = prompt if isinstance(prompt, Message) else user_message(prompt)
        state = _Run(session, run_id or f"run_{uuid.uuid4().hex[:12]}", list(history))
        if self._spend is not None:
            state.spend = self._spend  # a subagent's loop: it spends from its parent run's caps
        self._runs[session.id] = state
        try:
            await self._emit(RunStarted(session_id=session.id, run_id=state.run_id, model=self.model.name,
                                        prompt=message.text, parent_session_id=session.parent.id if session.parent else None,
                                        parent_call_id=session.parent_call_id))
            await self._add(state, message)
            stop, error = await self._steps(state)
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (a parent's abort reaching a subagent): still end the run's record.
            with anyio.CancelScope(shield=True):
                await self._finish(state, "cancelled", None)
            raise
        finally:
            self._runs.pop(session.id, None)
            self._prompts.forget(session)
        return await self._finish(state, stop, error)

    def cancel(self, session: Session) -> None:
        """Abort the model request and every tool in flight; the run returns `cancelled`."""
        state = self._runs.get(session.id)
        if state is None:
            return
        state.cancelled = True
        session.abort()
        if state.model_scope is not None:
            state.model_scope.cancel()

    async def _steps(self, state: _Run) -> tuple[str, str | None]:
        try:
            while True:
                if state.cancelled:
                    return "cancelled", None
                if state.spend.requests >= self.max_turn_requests:
                    return "max_turn_requests", None
                if self.token_budget is not None and state.spend.tokens >= self.token_budget:
                    return "token_budget", None
                turn = await self._request(state)
                if turn is None:
                    return "cancelled", None
                reply = Message("assistant", turn.parts)
                await self._add(state, reply, usage=turn.usage)
                stop = _stop_for(turn)
                if stop is not None:
                    return stop, None
                results = await self._run_tools(state, reply.tool_calls)
                await self._add(state, Message("tool", tuple(results)))
        except _Failed as exc:
            return "failed", exc.message

    async def _finish(self, state: _Run, stop: str, error: str | None) -> RunResult:
        text = next((m.text for m in reversed(state.added) if m.role == "assistant" and m.text), "")
        problems = self.model.problems() if state.session.parent is None else []
        if problems and stop == "end_turn":
            # Unmet expectations turn a normal end into a failure. Any other stop reason (the request cap,
            # the token budget, a cancel) is why the run stopped, and it stays; the problems are reported beside it.
            stop, error = "failed", "the scripted model's expectations failed"
        await self._emit(RunFinished(session_id=state.session.id, run_id=state.run_id, stop_reason=stop, text=text,
                                     usage=state.usage.to_dict(), error=error))
        return RunResult(state.run_id, stop, text, state.usage, state.added, state.tool_calls, state.refusals, error, problems)

    async def _add(self, state: _Run, message: Message, usage: Usage | None = None) -> None:
        state.history.append(message)
        state.added.append(message)
        if not self._observers:  # as in the engine: with nobody listening, no event is built
            return
        await self._emit(MessageAdded(session_id=state.session.id, run_id=state.run_id, message=message,
                                      usage=usage.to_dict() if usage else None))

    # -- the model ---------------------------------------------------------------------------
    async def _request(self, state: _Run) -> ModelTurn | None:
        if self.engine.may_wait(state.session):
            # The session's MCP tools are listed before tools are advertised; `cancel` reaches this wait too.
            state.model_scope = anyio.CancelScope()
            with state.model_scope:
                await self.engine.ready(state.session)
            state.model_scope = None
        if state.cancelled:
            return None
        system, tools = self._prompts.get(self.engine, state.session)

        async def on_delta(kind: str, text: str) -> None:
            if not self._observers:
                return
            await self._emit(ModelDelta(session_id=state.session.id, run_id=state.run_id, kind=kind, text=text))

        for attempt in range(1, self.retry.attempts + 1):
            if state.cancelled:  # a cancel during the backoff: no further request
                return None
            # One scope for both ends: `cancel` cancels it, and its deadline is the request's timeout.
            state.model_scope = scope = anyio.CancelScope(deadline=anyio.current_time() + self.settings.timeout_s + 5)
            try:
                with scope:
                    turn = await self.model.request(system, state.history, tools, self.settings, on_delta)
                    state.usage.add(turn.usage)
                    state.spend.requests += turn.usage.requests
                    state.spend.tokens += turn.usage.total_tokens
                    return turn
                if state.cancelled or not scope.cancelled_caught:
                    return None  # cancelled
                error = ProviderError("model request timed out", retryable=True)
            except ProviderError as exc:
                error = exc
            except TimeoutError:  # a client-side timeout inside the provider library
                error = ProviderError("model request timed out", retryable=True)
            finally:
                state.model_scope = None
            state.usage.requests += 1  # a failed attempt is a request too (the cap counts it)
            state.spend.requests += 1
            if state.cancelled:
                return None
            if not error.retryable or attempt == self.retry.attempts:
                raise _Failed(f"{error.message} (after {attempt} attempt{'s' if attempt > 1 else ''})")
            delay = self.retry.delay(attempt, error.retry_after_s)
            await self._emit(ModelRetried(session_id=state.session.id, run_id=state.run_id, attempt=attempt,
                                          status=error.status, delay_s=round(delay, 3), reason=error.message, partial=error.partial))
            if state.cancelled:  # cancelled while the retry was being reported
                return None
            # `cancel` ends the wait too (it cancels the model scope, which covers the backoff).
            state.model_scope = anyio.CancelScope()
            try:
                with state.model_scope:
                    await anyio.sleep(delay)
            finally:
                state.model_scope = None
        return None

    # -- tools -------------------------------------------------------------------------------
    async def _run_tools(self, state: _Run, calls: Sequence[ToolCallPart]) -> list[ToolResultPart]:
        """Safe calls run in parallel with their safe neighbours; every other call alone, in order."""
        results: list[ToolResultPart | None] = [None] * len(calls)
        i = 0
        while i < len(calls):
            if state.cancelled:
                # The run was cancelled while earlier calls ran: the rest never start (a cancel must not
                # let queued calls run), and the model still gets a result for each of them.
                for k in range(i, len(calls)):
                    results[k] = self._not_run(state.session, calls[k])
                break
            j = i + 1
            # The last call has no neighbour to run with: no need to ask whether it is safe (a lone call, the common turn).
            if j < len(calls) and self._safe(state.session, calls[i]):
                while j < len(calls) and self._safe(state.session, calls[j]):
                    j += 1
            if j - i == 1:  # one call alone: a task group would only add its cost (~130 us a round trip, measured)
                await self._call(state, calls[i], results, i)
            else:
                async with anyio.create_task_group() as tg:
                    for k in range(i, j):
                        tg.start_soon(self._call, state, calls[k], results, k)
            i = j
        return [r for r in results if r is not None]

    def _not_run(self, session: Session, call: ToolCallPart) -> ToolResultPart:
        tool = self.engine.tool(session, call.tool)
        envelope = Envelope(type="error", error_text="the call was aborted", kind=tool.kind if tool is not None else "other",
                            tool=call.tool, error_code="aborted")
        return ToolResultPart(call.call_id, call.tool, envelope.to_dict())

    def _safe(self, session: Session, call: ToolCallPart) -> bool:
        tool = self.engine.tool(session, call.tool)
        return tool is not None and tool.concurrency_safe

    async def _call(self, state: _Run, call: ToolCallPart, results: list[ToolResultPart | None], index: int) -> None:
        envelope = await self.engine.call(state.session, call.tool, call.parsed_arguments(), call_id=self._call_id(state.session, call))
        state.tool_calls += 1
        layer = (envelope.refusal or {}).get("layer")
        if layer:
            state.refusals[layer] = state.refusals.get(layer, 0) + 1
        results[index] = ToolResultPart(call.call_id, call.tool, envelope.to_dict())

    def _call_id(self, session: Session, call: ToolCallPart) -> str:
        """The model's call id, made unique in the session (it names the call in events and ACP)."""
        used = self._call_ids.setdefault(session.id, set())
        base = call.call_id or "call"
        cid, n = base, 1
        while cid in used:
            n += 1
            cid = f"{base}-{n}"
        used.add(cid)
        return cid

    # -- subagents -----------------------------------------------------------------------------
    async def _subagent(self, engine: Engine, session: Session, prompt: str, description: str) -> str:
        """The engine's subagent runner for `task`: a child loop on the child engine, same model."""
        parent_run = self._runs.get(session.parent.id) if session.parent is not None else None
        spend = parent_run.spend if parent_run is not None else _Spend()
        # The caps bound the whole tree: a child spends what the run has left, no more (and nothing when it is used up).
        if spend.requests >= self.max_turn_requests:
            raise RuntimeError("the run's model requests (max_turn_requests) are used up")
        if self.token_budget is not None and spend.tokens >= self.token_budget:
            raise RuntimeError("the run's token budget is used up")
        child = AgentLoop(engine, self.model, max_turn_requests=self.max_turn_requests, token_budget=self.token_budget,
                          settings=self.settings, retry=self.retry, observers=(), _child=True)
        child._spend = spend
        child._observers = self._observers  # the same list: whoever watches the parent sees the child
        result = await child.run(session, prompt)
        parent = self._runs.get(session.parent.id) if session.parent is not None else None
        if parent is not None:  # a subagent's tokens count toward its parent's run (and its budget)
            parent.usage.add(Usage(result.usage.input_tokens, result.usage.output_tokens, 0))
        if not result.text:
            raise RuntimeError(f"the subagent stopped ({result.stop_reason}) without an answer")
        return result.text


def _stop_for(turn: ModelTurn) -> str | None:
    """The stop reason a turn implies, or None when its tool calls should run."""
    if turn.finish == "content_filter":
        return "refusal"
    if turn.finish == "length":
        return "max_tokens"
    if any(isinstance(p, ToolCallPart) for p in turn.parts):
        return None
    return "end_turn"
