"""Replaying a recorded session against the current engine and manifest (a regression check).

The model is replaced by `RecordedModel`, which answers every request with the
assistant turn the recording has at that point of that conversation (a
conversation is named by its first user message, so subagents replay too).
The tool calls then run through today's engine: with the manifest given,
against the workspace as it is now, asks answered as they were recorded (a
call that asks now but did not then is refused, as headless). Every tool call
whose decision (output or refusal, and by which layer and code) or envelope
shape (its fields, not their values) changed is reported.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..api import Engine, ManifestError, load_manifest
from .loop import AgentLoop
from .messages import Message
from .model import ModelTurn, ProviderError, RequestSettings, ToolSpec, Usage


class ReplayError(Exception):
    """The session or the manifest cannot be replayed."""


@dataclass(frozen=True)
class Change:
    """A tool call whose decision or envelope shape differs between the recording (`before`) and the replay (`after`)."""

    call_id: str
    tool: str
    what: str  # "decision" or "shape"
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "tool": self.tool, "what": self.what, "before": self.before, "after": self.after}


@dataclass
class ReplayReport:
    """What replaying one session found: calls made, those that changed, and recorded calls the replay never made."""

    session_id: str
    calls: int = 0
    changes: list[Change] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # recorded calls the replay never made

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "calls": self.calls, "changes": [c.to_dict() for c in self.changes], "missing": self.missing}

    def summary(self) -> str:
        lines = [f"replayed session {self.session_id}: {self.calls} tool call(s), {len(self.changes)} change(s)"]
        for c in self.changes:
            lines.append(f"  {c.call_id} {c.tool}: {c.what} changed: {c.before} -> {c.after}")
        for cid in self.missing:
            lines.append(f"  {cid}: recorded but not made in the replay")
        return "\n".join(lines)


def decision(envelope: dict[str, Any]) -> str:
    """`output`, or `error:<layer>:<code>` for a refusal, or `error:<code>`."""
    meta = envelope.get("metadata") or {}
    if envelope.get("type") == "output":
        return "output"
    refusal = meta.get("refusal")
    if refusal:
        return f"error:{refusal.get('layer')}:{refusal.get('code')}"
    return f"error:{meta.get('error_code')}"


def shape(envelope: dict[str, Any]) -> list[str]:
    """The envelope's field names (data and metadata), without the ones that vary run to run."""
    meta = envelope.get("metadata") or {}
    data = envelope.get("data")
    keys = [f"metadata.{k}" for k in sorted(meta) if k not in ("duration_ms", "output_path")]
    if isinstance(data, dict):
        keys += [f"data.{k}" for k in sorted(data)]
    return keys


class RecordedModel:
    """A ModelClient that answers from recorded conversations."""

    supports_images = True

    def __init__(self, conversations: dict[str, list[Message] | None], name: str) -> None:
        self.name = name
        self._conversations = conversations

    async def request(self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec],
                      settings: RequestSettings, on_delta: Any) -> ModelTurn:
        first = next((m.text for m in messages if m.role == "user"), "")
        turns = self._conversations.get(first, [])
        if turns is None:
            raise ProviderError("the recording has more than one conversation that starts with this message", status=None)
        index = sum(1 for m in messages if m.role == "assistant")
        if index >= len(turns):
            raise ProviderError("the recording has no further model turn for this conversation", status=None)
        turn = turns[index]
        text = turn.text
        if text:
            await on_delta("text", text)
        finish = "tool_calls" if turn.tool_calls else "stop"
        return ModelTurn(turn.parts, finish, Usage(0, 0, 1), self.name)

    def problems(self) -> list[str]:
        return []

    async def aclose(self) -> None:
        pass


_AskKey = tuple[str, str, str, str, tuple[str, ...]]  # conversation, call id, tool, layer, subjects


class _RecordedAnswers:
    """Asks answered as the recording says they were; a call that was not asked then is refused.

    An answer is found by the conversation the call is made in (its first user message, as for the
    model's turns), the call id, the tool, the layer and every subject asked about: call ids repeat
    across a subagent and its parent and across the runs of a continued or reloaded session, and a
    recorded "yes" must never answer another call. A key recorded with different answers is refused.
    """

    name = "recording"
    headless = False

    def __init__(self, choices: dict[_AskKey, str]) -> None:
        self._choices = choices
        self._conversation: dict[str, str] = {}  # replayed session id -> its conversation

    def observe(self, event: Any) -> None:
        if event.type == "run_started":
            self._conversation.setdefault(event.session_id, event.prompt)

    async def ask(self, request: Any) -> Any:
        conversation = self._conversation.get(request.session_id)
        if conversation is None:
            return "reject_once"
        key = (conversation, request.call_id, request.tool, request.layer, tuple(s.describe() for s in request.subjects))
        return self._choices.get(key, "reject_once")

    async def question(self, questions: Any) -> Any:
        return None


def _recording(recorder: Any, session_id: str, turns: dict[str, list[Message] | None] | None = None,
               choices: dict[_AskKey, str] | None = None) -> tuple[dict[str, list[Message] | None], dict[_AskKey, str]]:
    """One walk of the recorded session tree: each session's model turns by its first user message, and every
    recorded answer by `_RecordedAnswers`' key.

    A message that began more than one session (a subagent given its parent's prompt, two subagents given the
    same one) gets None: which turns belong to which replayed session cannot be told, so neither gets any (nor,
    in `replay_session`, any recorded answer). A key answered two ways is refused: nobody approved it.
    """
    turns = {} if turns is None else turns
    choices = {} if choices is None else choices
    info = recorder.session(session_id)
    history = [Message.from_dict(m) for m in recorder.history(session_id)]
    first = next((m.text for m in history if m.role == "user"), "")
    turns[first] = None if first in turns else [m for m in history if m.role == "assistant"]
    asked: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for event in recorder.events(session_id):
        if event.get("type") == "ask_raised":
            request = event.get("request") or {}
            asked[event["call_id"]] = (str(request.get("tool")), str(request.get("layer")), tuple(request.get("subjects") or ()))
        elif event.get("type") == "ask_answered" and event.get("call_id") in asked:
            tool, layer, subjects = asked.pop(event["call_id"])
            key = (first, event["call_id"], tool, layer, subjects)
            choice = event.get("choice")
            choices[key] = choice if choices.get(key, choice) == choice else "reject_once"
    for child in info["children"]:
        _recording(recorder, child, turns, choices)
    return turns, choices


def _recorded_results(recorder: Any, session_id: str) -> dict[str, tuple[str, dict[str, Any]]]:
    results: dict[str, tuple[str, dict[str, Any]]] = {}
    for m in recorder.history(session_id):
        for p in m["parts"]:
            if p["kind"] == "tool_result":
                results[p["call_id"]] = (p["tool"], p["envelope"])
    for child in recorder.session(session_id)["children"]:
        results.update(_recorded_results(recorder, child))
    return results


async def replay_session(db: Path, session_id: str, manifest_path: Path, workspace: Path) -> ReplayReport:
    """Re-run `session_id` from the recording at `db` and report what changed."""
    from ..recorder.store import Recorder, RecorderError, database_files

    try:
        with Recorder(db) as recorder:
            info = recorder.session(session_id)
            conversations, answered = _recording(recorder, session_id)
            recorded = _recorded_results(recorder, session_id)
            choices = {k: v for k, v in answered.items() if conversations.get(k[0]) is not None}
    except RecorderError as exc:
        raise ReplayError(str(exc)) from None
    except sqlite3.DatabaseError as exc:  # a page that does not read back (a damaged or truncated file)
        raise ReplayError(f"the session database is damaged ({exc})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # Rows that are JSON objects but not the messages, parts or events this code wrote (an edited recording):
        # nothing is replayed from them.
        raise ReplayError(f"the recording of session {session_id} is damaged ({exc!r})") from None
    try:
        # The recording is protected as it was when it was made: a call the recorded run was refused (writing
        # the database) must not run now and overwrite the recording being replayed.
        manifest = load_manifest(manifest_path, workspace=workspace, extra_protected=list(database_files(db)))
    except ManifestError as exc:
        raise ReplayError(str(exc)) from None
    answers = _RecordedAnswers(choices)
    engine = Engine(manifest, broker=answers)
    loop = AgentLoop(engine, RecordedModel(conversations, info.get("model") or "recording"), max_turn_requests=10_000)
    loop.add_observer(answers.observe)  # which recorded conversation each replayed session is
    replayed: dict[str, dict[str, Any]] = {}

    def collect(event: Any) -> None:  # every session's calls, subagents' included
        if event.type == "call_finished":
            replayed[event.call_id] = event.envelope.to_dict()

    loop.add_observer(collect)
    # An unattended recording (`agentcore run`, batch) refused its asks as headless: so does its replay, or
    # every one of them would be reported as changed (headless -> rejected).
    with engine.open_session(headless=bool(info.get("headless"))) as session:
        history: list[Message] = []
        for run in info["runs"]:
            result = await loop.run(session, run["prompt"] or "", history)
            history += result.messages
    report = ReplayReport(session_id)
    for call_id, (tool, before) in recorded.items():
        after = replayed.get(call_id)
        if after is None:
            report.missing.append(call_id)
            continue
        report.calls += 1
        if decision(before) != decision(after):
            report.changes.append(Change(call_id, tool, "decision", decision(before), decision(after)))
        elif shape(before) != shape(after):
            report.changes.append(Change(call_id, tool, "shape", shape(before), shape(after)))
    return report


__all__ = ["Change", "RecordedModel", "ReplayError", "ReplayReport", "replay_session"]
