"""The agent loop's own events, beside the engine's call events.

An observer of `AgentLoop` receives both kinds, in order: the loop's events
(`RunStarted`, `ModelDelta`, `MessageAdded`, `ModelRetried`, `RunFinished`)
and the engine's (`CallStarted` … `CallFinished`) for every tool call the
run makes, subagents' runs included. Loop events carry the session and run
ids; a subagent's run names the parent session and the `task` call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from .messages import Message


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base of the loop's events: the session and run each belongs to, and its JSON form (`to_dict`)."""

    type: ClassVar[str] = "agent_event"
    session_id: str
    run_id: str

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if hasattr(value, "to_dict") else value
        return out


@dataclass(frozen=True, kw_only=True)
class RunStarted(AgentEvent):
    """A prompt arrived; `model` is `provider:name`."""

    type: ClassVar[str] = "run_started"
    model: str
    prompt: str
    parent_session_id: str | None = None
    parent_call_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelDelta(AgentEvent):
    """Streamed model output: `kind` is `text` or `reasoning`."""

    type: ClassVar[str] = "model_delta"
    kind: str
    text: str


@dataclass(frozen=True, kw_only=True)
class MessageAdded(AgentEvent):
    """A message joined the conversation: the user's, a complete model turn (with `usage`), or tool results."""

    type: ClassVar[str] = "message_added"
    message: Message
    usage: dict[str, int] | None = None


@dataclass(frozen=True, kw_only=True)
class ModelRetried(AgentEvent):
    """A model request failed and will be tried again after `delay_s`; streamed output of the failed attempt is void."""

    type: ClassVar[str] = "model_retried"
    attempt: int
    status: int | None
    delay_s: float
    reason: str
    partial: bool


@dataclass(frozen=True, kw_only=True)
class RunFinished(AgentEvent):
    """The run ended: `stop_reason` is end_turn, max_tokens, max_turn_requests, refusal, cancelled or failed."""

    type: ClassVar[str] = "run_finished"
    stop_reason: str
    text: str
    usage: dict[str, int]
    error: str | None = None
