"""The event stream of a call: what a host sees while the pipeline works (ORDER).

Every call emits, in this order: `CallStarted`; one `StageDecided` per stage
it reaches (schema, capability, permission, watchdog, ask, environment,
execution); `AskRaised` and `AskAnswered` around a question put to the
broker; `OutputChunk`s while the tool runs (bash output as it is produced,
web_fetch progress); and last `CallFinished` with the envelope. Events carry
the session and call ids, and for calls made by a subagent the id of the
parent's `task` call, so a host can attribute them.

Observers are called in order and awaited, so a host that forwards events
(ACP sends `tool_call` before any permission request) keeps their order.
With no observer, the pipeline builds no event at all.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable, ClassVar, Union

from ..asking import AskRequest, Choice
from ..envelope import Envelope
from ..lazydc import lazy_dataclass  # made on first use: every call imports this module, few make these
from ..tools.base import Location

__all__ = [
    "AskAnswered",
    "AskRaised",
    "CallFinished",
    "CallStarted",
    "Event",
    "Observer",
    "OutputChunk",
    "StageDecided",
]


@lazy_dataclass(frozen=True, kw_only=True)
class Event:
    """Common to every event: which session and call it belongs to."""

    type: ClassVar[str] = "event"
    session_id: str
    call_id: str
    parent_call_id: str | None = None
    """For a subagent's calls: the parent session's `task` call that started the subagent."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (the envelope and ask request in their own JSON forms)."""
        out: dict[str, Any] = {"type": self.type}
        for f in dataclasses.fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, Envelope):
        return value.to_dict()
    if isinstance(value, Location):
        return value.to_dict()
    if isinstance(value, AskRequest):
        return {
            "tool": value.tool,
            "kind": value.kind,
            "title": value.title,
            "layer": value.layer,
            "reason": value.reason,
            "subjects": [s.describe() for s in value.subjects],
            "always": value.always_label(),
        }
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


@lazy_dataclass(frozen=True, kw_only=True)
class CallStarted(Event):
    """The model asked for a call; nothing has been decided yet."""

    type: ClassVar[str] = "call_started"
    tool: str
    kind: str
    title: str
    locations: tuple[Location, ...] = ()
    raw_input: Any = None


@lazy_dataclass(frozen=True, kw_only=True)
class StageDecided(Event):
    """One stage's decision: `allow`, `deny`, `ask` or `skipped` (with the refusal code on a deny)."""

    type: ClassVar[str] = "stage_decided"
    stage: str
    decision: str
    code: str | None = None
    reason: str | None = None


@lazy_dataclass(frozen=True, kw_only=True)
class AskRaised(Event):
    """The call needs an answer; the request goes to the broker next."""

    type: ClassVar[str] = "ask_raised"
    request: AskRequest


@lazy_dataclass(frozen=True, kw_only=True)
class AskAnswered(Event):
    """The answer, and who gave it: the broker's name, or `headless` when no human could be asked."""

    type: ClassVar[str] = "ask_answered"
    choice: Choice
    answered_by: str


@lazy_dataclass(frozen=True, kw_only=True)
class OutputChunk(Event):
    """Part of a running tool's output (`stream="output"`) or a progress note (`"progress"`)."""

    type: ClassVar[str] = "output_chunk"
    stream: str
    text: str


@lazy_dataclass(frozen=True, kw_only=True)
class CallFinished(Event):
    """The call's one envelope (with its front-end hints, such as a write's diff, under `ui`)."""

    type: ClassVar[str] = "call_finished"
    tool: str
    envelope: Envelope

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.envelope.ui:  # never part of the envelope itself: what the model sees stays as it was
            out["ui"] = self.envelope.ui
        return out


AnyEvent = Union[CallStarted, StageDecided, AskRaised, AskAnswered, OutputChunk, CallFinished]
Observer = Callable[[Event], Union[Awaitable[None], None]]
