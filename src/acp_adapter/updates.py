"""Events to ACP `session/update` payloads: one translation for live turns and for `session/load`.

Input is an event's JSON form (`event.to_dict()`, exactly what the recorder
stores), so a replayed session produces the very updates the live one did.
Output is a list of update objects in ACP's wire form (camelCase keys).
Nothing here imports the ACP SDK.

Per call: `tool_call` (pending, with title, kind, rawInput) when it starts;
`tool_call_update` to `in_progress`, with its locations, once every check
has let it execute (an editor opens a location: a refused path is never one); output
while it runs (terminal `_meta` for clients that opted in, else text
content); the final update (`completed` or `failed`) with the envelope as
`rawOutput` and its content: a diff for writes and edits, the truncated
head and the sidecar path for reads, searches and commands, the refusal
text and the layer for refusals. A `todos` result becomes a `plan`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agentcore.textdata import printable

TEXT_CAP = 64 * 1024  # characters of live text output kept per call (the envelope holds the head anyway)
NOTES_SHOWN = 20  # the latest progress notes a live update shows
NOTE_CHARS = 1000  # characters of one progress note shown
COMMANDS_SHOWN = 100  # skills offered as slash commands
DESCRIPTION_CHARS = 300  # characters of a command's description
TRUNCATED_NOTE = "[output truncated]"  # ends a terminal's live output at TEXT_CAP
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,56}")  # an engine call id used as the toolCallId as it is


def _text(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


@dataclass
class _Call:
    """A call in flight: its ACP kind, whether its output streams as terminal `_meta`, and the live text and notes shown so far."""

    kind: str
    terminal: bool
    output: str = ""
    notes: list[str] = field(default_factory=list)
    shown: int = 0  # characters of `output` the last live update carried
    streamed: int = 0  # characters sent as terminal `_meta` so far
    locations: list[dict[str, Any]] = field(default_factory=list)  # shown once the engine lets the call execute


class Translator:
    """Turns one session's events into updates. `session_id` is the top-level engine session."""

    def __init__(self, session_id: str, *, terminal_output: bool) -> None:
        self.session_id = session_id
        self.terminal_output = terminal_output
        self._calls: dict[str, _Call] = {}  # by toolCallId
        self._ids: dict[tuple[str, str], str] = {}  # (engine session, call id) -> toolCallId
        self._used: set[str] = set()
        self._next: dict[str, int] = {}  # the next suffix to try for a base id

    def _cid(self, e: dict[str, Any], *, new: bool = False) -> str:
        key = (str(e.get("session_id", "")), str(e["call_id"]))
        if new:  # a call starts: an engine id seen before was a replayed call's (the live loop numbers afresh)
            self._ids.pop(key, None)
        return self.tool_call_id(*key)

    def tool_call_id(self, session_id: str, call_id: str) -> str:
        """The call's ACP toolCallId. The engine's call ids are the model's, unique only in one engine session:
        a subagent's call could take the id of a card its parent shows (an editor keys cards by it), and a long
        or odd one was repeated in every update. Here it is unique in the ACP session, short and plain."""
        key = (session_id, call_id)
        tid = self._ids.get(key)
        if tid is None:
            base = call_id if _PLAIN_ID.fullmatch(call_id) else "call"
            tid, n = base, self._next.get(base, 1)
            while tid in self._used:
                n += 1
                tid = f"{base}-{n}"
            self._next[base] = n
            self._used.add(tid)
            self._ids[key] = tid
        return tid

    def updates(self, event: dict[str, Any], *, replaying: bool = False) -> list[dict[str, Any]]:
        handler = getattr(self, "_" + str(event.get("type")), None)
        return handler(event, replaying) if handler is not None else []

    # -- the model's messages ----------------------------------------------------------------
    def _model_delta(self, e: dict[str, Any], replaying: bool) -> list[dict[str, Any]]:
        if e["session_id"] != self.session_id:  # a subagent's thinking stays inside its task call
            return []
        kind = "agent_message_chunk" if e["kind"] == "text" else "agent_thought_chunk"
        return [{"sessionUpdate": kind, "content": {"type": "text", "text": e["text"]}}]

    def _message_added(self, e: dict[str, Any], replaying: bool) -> list[dict[str, Any]]:
        message = e["message"]
        if not replaying or e["session_id"] != self.session_id or message["role"] != "user":
            return []  # a live client already shows what its user sent
        return [{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": p["text"]}}
                for p in message["parts"] if p.get("kind") == "text"]

    # -- tool calls ------------------------------------------------------------------------------
    def _call_started(self, e: dict[str, Any], replaying: bool) -> list[dict[str, Any]]:
        terminal = self.terminal_output and e["kind"] == "execute"
        # An editor follows `locations` (opens the file): they are the paths as the model wrote them, unchecked
        # here, so they wait for the execution stage, which every check (scope, rules, protection) has passed.
        locations = [{"path": loc["path"], **({"line": loc["line"]} if loc.get("line") else {})} for loc in e.get("locations") or []]
        cid = self._cid(e, new=True)
        self._calls[cid] = _Call(e["kind"], terminal, locations=locations)
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": cid,
            "title": printable(e["title"] or e["tool"]),  # a model's text on the editor's card: nothing that reorders it
            "kind": e["kind"],
            "status": "pending",
            "locations": [],
            "rawInput": e.get("raw_input"),
        }
        if terminal:
            update["content"] = [{"type": "terminal", "terminalId": cid}]
            update["_meta"] = {"terminal_info": {"terminal_id": cid}}
        return [update]

    def _stage_decided(self, e: dict[str, Any], replaying: bool) -> list[dict[str, Any]]:
        if e["stage"] != "execution":
            return []
        cid = self._cid(e)
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": cid, "status": "in_progress"}
        call = self._calls.get(cid)
        if call is not None and call.locations and e.get("decision") == "allow":
            update["locations"] = call.locations
        return [update]

    def _output_chunk(self, e: dict[str, Any], replaying: bool) -> list[dict[str, Any]]:
        cid = self._cid(e)
        call = self._calls.get(cid)
        if call is None:
            return []
        base = {"sessionUpdate": "tool_call_update", "toolCallId": cid}
        if e["stream"] == "progress":
            # The latest notes only: each update carries all it shows, and a server may send notes without end.
            call.notes = [*call.notes[-(NOTES_SHOWN - 1):], e["text"][:NOTE_CHARS]]
            return [{**base, "content": [_text("\n".join(call.notes))]}]
        if call.terminal:
            # Bounded like the text form: a command printing without end must not stream it all to the editor
            # (the envelope and its sidecar keep what it printed).
            if call.streamed >= TEXT_CAP:
                return []
            data = e["text"][:TEXT_CAP - call.streamed]
            call.streamed += len(data)
            if call.streamed >= TEXT_CAP:
                data += f"\n{TRUNCATED_NOTE}\n"
            return [{**base, "_meta": {"terminal_output": {"terminal_id": cid, "data": data}}}]
        if len(call.output) >= TEXT_CAP:
            return []
        call.output = (call.output + e["text"])[:TEXT_CAP]
        # Each update carries the whole text so far, so one per chunk is quadratic: a command writing a byte at a
        # time would send the editor gigabytes. An update goes out once the text grew by an eighth since the last
        # one (or reached the cap): all of a call's live updates together carry at most about 9 x TEXT_CAP.
        if (len(call.output) - call.shown) * 8 < call.shown and len(call.output) < TEXT_CAP:
            return []
        call.shown = len(call.output)
        return [{**base, "content": [_text(f"```\n{call.output}\n```")]}]

    def _call_finished(self, e: dict[str, Any], replaying: bool) -> list[dict[str, Any]]:
        cid = self._cid(e)
        call = self._calls.pop(cid, None)
        env = e["envelope"]
        ok = env.get("type") == "output"
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": cid,
            "status": "completed" if ok else "failed",
            "content": _content(env, e.get("ui") or {}),
            "rawOutput": env,
        }
        if call is not None and call.terminal:
            data = env.get("data") if isinstance(env.get("data"), dict) else {}
            update["content"] = [{"type": "terminal", "terminalId": cid}, *update["content"]]
            update["_meta"] = {"terminal_exit": {"terminal_id": cid, "exit_code": data.get("exit_code"), "signal": None}}
        out = [update]
        plan = _plan(env) if ok else None
        if plan is not None:
            out.append(plan)
        return out

    def _run_finished(self, e: dict[str, Any], replaying: bool) -> list[dict[str, Any]]:
        return []


# -- content of a finished call ---------------------------------------------------------------


def _content(env: dict[str, Any], ui: dict[str, Any]) -> list[dict[str, Any]]:
    meta = env.get("metadata") or {}
    if env.get("type") != "output":
        refusal = meta.get("refusal")
        if refusal:
            by = f", asked by {refusal['asked_by']}" if refusal.get("asked_by") else ""
            return [_text(f"Refused by the {refusal['layer']} layer ({refusal['code']}{by}): {env.get('error_text', '')}")]
        return [_text(f"Failed ({meta.get('error_code')}): {env.get('error_text', '')}")]
    diff = ui.get("diff")
    if diff:
        return [{"type": "diff", "path": diff["path"], "oldText": diff["old_text"], "newText": diff["new_text"]}]
    text = _output_text(env.get("data"))
    if meta.get("output_path"):
        text += f"\n\n(truncated; the whole output is in {meta['output_path']})"
    return [_text(text)] if text else []


def _output_text(data: Any) -> str:
    if not isinstance(data, dict):
        return "" if data is None else json.dumps(data, ensure_ascii=False)
    if isinstance(data.get("content"), str):  # read, web_fetch
        return data["content"]
    if isinstance(data.get("matches"), list):  # grep
        return "\n".join(f"{m.get('path')}:{m.get('line')}: {m.get('text')}" for m in data["matches"])
    if isinstance(data.get("paths"), list):  # glob
        return "\n".join(str(p) for p in data["paths"])
    if isinstance(data.get("output"), str):  # bash
        return f"```\n{data['output']}\n```\nexit code {data.get('exit_code')}" + (" (timed out)" if data.get("timed_out") else "")
    if isinstance(data.get("result"), str):  # task
        return data["result"]
    return json.dumps(data, ensure_ascii=False, indent=2)


_PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed", "cancelled": "completed"}


def _plan(env: dict[str, Any]) -> dict[str, Any] | None:
    data = env.get("data")
    todos = data.get("todos") if isinstance(data, dict) else None
    if not isinstance(todos, list):
        return None
    entries = [
        {"content": str(t.get("content", "")), "status": _PLAN_STATUS.get(str(t.get("status")), "pending"),
         "priority": t.get("priority") if t.get("priority") in ("high", "medium", "low") else "medium"}
        for t in todos if isinstance(t, dict)
    ]
    return {"sessionUpdate": "plan", "entries": entries}


def usage_update(used: int, size: int) -> dict[str, Any]:
    return {"sessionUpdate": "usage_update", "used": used, "size": size}


def available_commands(skills: list[Any]) -> dict[str, Any]:
    """Skills as slash commands (`/name`), with their one-line descriptions. Skills may live where the agent
    writes: the menu is bounded, and a description is shown, never interpreted (escape sequences, overrides)."""
    return {"sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": printable(s.name),
                                   "description": printable(s.description or f"Use the {s.name} skill")[:DESCRIPTION_CHARS],
                                   "input": {"hint": "what to do with it"}} for s in skills[:COMMANDS_SHOWN]]}
