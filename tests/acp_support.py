"""Helpers for the ACP tests: the official schema and client from npm, a recording client, a wire log.

Third-party test dependencies (npm: `@agentclientprotocol/sdk` for the
official JSON Schema, `acpx` as a real client) are installed on first use
into a cache directory. On CI (`CI=true`) a missing Node or npm fails the
test; elsewhere it skips with the reason.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from external_support import install, missing

NPM_PACKAGES = ("@agentclientprotocol/sdk@2.4.0", "acpx@0.1.15")
AGENTCORE = str(Path(sys.executable).parent / "agentcore")






def npm_dir() -> Path:
    d = install("npm", NPM_PACKAGES)
    if d is None:
        missing("node and npm are needed for the ACP schema and the acpx client")
    assert d is not None
    return d


def acpx_bin() -> str:
    return str(npm_dir() / "node_modules" / ".bin" / "acpx")


# -- the official schema --------------------------------------------------------------------------

_METHOD_TYPES = {
    "initialize": "Initialize", "authenticate": "Authenticate", "session/new": "NewSession", "session/load": "LoadSession",
    "session/list": "ListSessions", "session/close": "CloseSession", "session/prompt": "Prompt",
    "session/set_config_option": "SetSessionConfigOption", "session/set_mode": "SetSessionMode",
    "session/request_permission": "RequestPermission", "fs/read_text_file": "ReadTextFile", "fs/write_text_file": "WriteTextFile",
}
_NOTIFICATION_TYPES = {"session/update": "SessionNotification", "session/cancel": "CancelNotification"}


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    path = npm_dir() / "node_modules" / "@agentclientprotocol" / "sdk" / "schema" / "v1" / "schema.json"
    return json.loads(path.read_text())


def _validator(ref: str) -> Any:
    from jsonschema import Draft202012Validator

    full = _schema()
    return Draft202012Validator({"$defs": full["$defs"], "$ref": ref})


@dataclass
class Wire:
    """Every JSON-RPC message between the test client and the agent, in order."""

    messages: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # ("client"|"agent", message)

    @classmethod
    def from_log(cls, messages: list[dict[str, Any]]) -> "Wire":
        """A wire log without directions (acpx's JSON output): senders told apart by method and open request ids."""
        agent_methods = {"session/update", "session/request_permission", "fs/read_text_file", "fs/write_text_file"}
        open_requests: dict[str, set[Any]] = {"client": set(), "agent": set()}
        out: list[tuple[str, dict[str, Any]]] = []
        for msg in messages:
            if "method" in msg:
                sender = "agent" if msg["method"] in agent_methods else "client"
                if "id" in msg:
                    open_requests[sender].add(msg["id"])
            else:
                sender = "client" if msg.get("id") in open_requests["agent"] else "agent"
                open_requests["agent" if sender == "client" else "client"].discard(msg.get("id"))
            out.append((sender, msg))
        return cls(out)

    def observer(self, event: Any) -> None:
        direction = "client" if str(event.direction).lower().endswith("outgoing") else "agent"
        self.messages.append((direction, json.loads(json.dumps(event.message))))

    def validate(self) -> int:
        """Validate every message against the official ACP schema; returns how many were checked."""
        pending: dict[tuple[str, Any], str] = {}
        for sender, msg in self.messages:
            # The exact type the method calls for, and the schema as a whole.
            problems = _problems(sender, msg, pending)
            problems += [f"as an ACP message: {e.message}" for e in _top().iter_errors(msg)]
            assert not problems, f"invalid ACP message from the {sender}: {problems[0]}\n{json.dumps(msg)[:2000]}"
        return len(self.messages)


@lru_cache(maxsize=1)
def _top() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_schema())


def _problems(sender: str, msg: dict[str, Any], pending: dict[tuple[str, Any], str]) -> list[str]:
    method = msg.get("method")
    if method is not None and "id" in msg:  # a request
        pending[(sender, msg["id"])] = method
        return _check(f"#/$defs/{_METHOD_TYPES[method]}Request", msg.get("params"), method)
    if method is not None:  # a notification
        return _check(f"#/$defs/{_NOTIFICATION_TYPES[method]}", msg.get("params"), method)
    asked = pending.pop(("agent" if sender == "client" else "client", msg.get("id")), None)
    if asked is None:
        return [f"a response to no request ({msg.get('id')!r})"]
    if "error" in msg:
        return _check("#/$defs/Error", msg["error"], f"{asked} error")
    return _check(f"#/$defs/{_METHOD_TYPES[asked]}Response", msg.get("result"), f"{asked} result")


@lru_cache(maxsize=64)
def _cached(ref: str) -> Any:
    return _validator(ref)


def _check(ref: str, value: Any, what: str) -> list[str]:
    return [f"{what}: {e.message} at {'/'.join(map(str, e.absolute_path))}" for e in _cached(ref).iter_errors(value)]


# -- a client -------------------------------------------------------------------------------------


@dataclass
class RecordingClient:
    """An ACP client that records every update and answers permission requests by `answer(request)`."""

    answer: Callable[[Any], str] = lambda request: "allow_once"
    updates: list[dict[str, Any]] = field(default_factory=list)
    permissions: list[Any] = field(default_factory=list)
    on_update: Callable[[dict[str, Any]], Any] | None = None
    on_permission: Callable[[Any], Any] | None = None
    buffers: dict[str, str] = field(default_factory=dict)  # the editor's unsaved text, by absolute path
    file_reads: list[str] = field(default_factory=list)  # every path the agent asked to read through the client

    async def read_text_file(self, path: str, session_id: str, line: int | None = None, limit: int | None = None, **kwargs: Any) -> Any:
        from acp import schema

        self.file_reads.append(path)
        text = self.buffers[path] if path in self.buffers else Path(path).read_text(encoding="utf-8")
        return schema.ReadTextFileResponse(content=text)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        doc = update.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.updates.append(doc)
        if self.on_update is not None:
            result = self.on_update(doc)
            if hasattr(result, "__await__"):
                await result

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        from acp import schema

        texts = [c.content.text for c in tool_call.content or [] if getattr(c, "type", None) == "content"]
        self.permissions.append({"options": [(o.option_id, o.name, o.kind) for o in options], "tool_call_id": tool_call.tool_call_id,
                                 "updates_before": len(self.updates), "title": tool_call.title, "texts": texts,
                                 "content_types": [c.type for c in tool_call.content or []]})
        if self.on_permission is not None:
            result = self.on_permission(tool_call)
            if hasattr(result, "__await__"):
                await result
        choice = self.answer(tool_call)
        if choice == "cancelled":
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id=choice))

    def on_connect(self, conn: Any) -> None:
        pass

    def kinds(self) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates]

    def tool_updates(self, call_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("toolCallId") == call_id]


@asynccontextmanager
async def acp_agent(client: RecordingClient, *args: str, cwd: Path, wire: Wire | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """`agentcore acp ARGS` as a subprocess, connected to `client`; yields (connection, process)."""
    import acp

    async with acp.spawn_agent_process(client, AGENTCORE, "acp", *args, cwd=str(cwd), env=dict(os.environ),
                                       use_unstable_protocol=True) as (conn, proc):
        if wire is not None:
            conn._conn.add_observer(wire.observer)
        yield conn, proc


def text_block(text: str) -> Any:
    from acp import schema

    return schema.TextContentBlock(type="text", text=text)
