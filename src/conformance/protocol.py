"""The harness protocol, version 1 (HARNESS.md is the normative description).

One JSON object per line in each direction. The runner writes requests
`{"seq": N, "op": ..., ...}`; the harness answers each with exactly one
reply carrying the same `seq` and exactly one of `result`, `envelope`,
`ask`, `skip` or `error`. This module holds the vocabulary, the checks the
runner applies to every reply, and a small stdio server that Python
harnesses (ours and the deliberately broken ones) share.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Awaitable, Callable, Mapping

from agentcore.textdata import loads_json

from . import PROTOCOL_VERSION

# Requests carry call arguments, which cases may nest past the engine's own limit (ORDER-2) on purpose.
MAX_MESSAGE_DEPTH = 256
OPS: tuple[str, ...] = ("start", "reset", "compile", "set_rules", "call", "answer", "close")
REPLY_KEYS: tuple[str, ...] = ("result", "envelope", "ask", "skip", "error")
# Which reply payloads each operation may produce (skip and error always may).
ALLOWED_REPLIES: dict[str, frozenset[str]] = {
    "start": frozenset({"result", "error"}),
    "reset": frozenset({"result", "skip", "error"}),
    "compile": frozenset({"result", "skip", "error"}),
    "set_rules": frozenset({"result", "skip", "error"}),
    "call": frozenset({"envelope", "ask", "skip", "error"}),
    "answer": frozenset({"envelope", "ask", "skip", "error"}),
    "close": frozenset({"result", "skip", "error"}),
}
CHOICES: tuple[str, ...] = ("allow_once", "allow_always", "reject_once", "reject_always")
# What `answer` may carry for a permission ask: the four options, or the ask was cancelled (ASK-2).
ANSWERS: tuple[str, ...] = CHOICES + ("cancelled",)
MODES: tuple[str, ...] = ("headless", "interactive")
SCOPES: tuple[str, ...] = ("project", "session")


class ProtocolViolation(Exception):
    """A reply the runner cannot accept; the runner, not the harness, caught it."""


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise ProtocolViolation(message)


def check_reply(request: Mapping[str, Any], reply: Any) -> str:
    """Validate one reply against its request; returns the payload key."""
    _require(isinstance(reply, dict), "reply is not a JSON object")
    _require("seq" in reply, "reply has no seq")
    _require(reply["seq"] == request["seq"], f"reply seq {reply['seq']!r} does not match request seq {request['seq']!r}")
    keys = [k for k in REPLY_KEYS if k in reply]
    _require(len(keys) == 1, f"reply must carry exactly one of {', '.join(REPLY_KEYS)} (got {keys or 'none'})")
    key = keys[0]
    op = request["op"]
    _require(key in ALLOWED_REPLIES[op], f"a {key!r} reply is not valid for op {op!r}")
    payload = reply[key]
    if key == "envelope":
        _require(isinstance(payload, dict) and payload.get("type") in ("output", "error"), "envelope must be an object with type output|error")
    elif key == "ask":
        _require(isinstance(payload, dict), "ask must be an object")
        _require(isinstance(payload.get("id"), str) and payload["id"] != "", "ask.id must be a non-empty string")
        _require(payload.get("type") in ("permission", "question"), "ask.type must be permission|question")
    elif key == "skip":
        _require(isinstance(payload, dict) and isinstance(payload.get("reason"), str), "skip must be {reason: string}")
    elif key == "error":
        _require(isinstance(payload, dict) and isinstance(payload.get("message"), str), "error must be {message: string}")
    else:
        _require(isinstance(payload, dict), "result must be an object")
        if op == "start":
            _require(isinstance(payload.get("protocol"), int), "start result must carry protocol (integer)")
            impl = payload.get("implementation")
            _require(isinstance(impl, dict) and isinstance(impl.get("name"), str), "start result must carry implementation.name")
            feats = payload.get("features", [])
            _require(isinstance(feats, list) and all(isinstance(f, str) for f in feats), "start result features must be a list of strings")
        if op == "compile" and "compile_error" not in payload:
            _require(isinstance(payload.get("tools"), dict), "compile result must carry tools (or compile_error)")
            _require(isinstance(payload.get("effective"), dict), "compile result must carry effective (or compile_error)")
    return key


# -- the harness side ------------------------------------------------------------------


Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def error_reply(message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"message": message, **details}}


def skip_reply(reason: str, **details: Any) -> dict[str, Any]:
    return {"skip": {"reason": reason, **details}}


def decode_request(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(request, None) or (None, error reply) for a line that is not a valid request."""
    try:
        # Duplicate keys and deep nesting are refused like malformed JSON (StructureError is a ValueError).
        req = loads_json(line, max_depth=MAX_MESSAGE_DEPTH)
    except (ValueError, UnicodeDecodeError):
        return None, {"seq": None, **error_reply("request is not valid JSON")}
    if not isinstance(req, dict) or "seq" not in req or req.get("op") not in OPS:
        seq = req.get("seq") if isinstance(req, dict) else None
        return None, {"seq": seq, **error_reply("request needs seq and a known op")}
    return req, None


async def serve_stdio(make_handler: Callable[[], Any]) -> None:
    """Run a harness over stdin/stdout until EOF.

    `make_handler()` returns an async context manager whose value has
    `handle(request) -> reply`. Anything the implementation prints goes to
    stderr: stdout carries replies only.
    """
    import anyio

    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    stdin = sys.stdin.buffer

    async with make_handler() as harness:
        while True:
            line = await anyio.to_thread.run_sync(stdin.readline)
            if not line:
                break
            if not line.strip():
                continue
            req, bad = decode_request(line)
            if req is None:
                reply = bad
            else:
                reply = {"seq": req["seq"], **(await harness.handle(req))}
            out.write(json.dumps(reply, separators=(",", ":"), default=str).encode() + b"\n")
    out.close()


def hello(name: str, version: str, *, language: str, spec_version: str, features: list[str], **extra: Any) -> dict[str, Any]:
    """The `start` result a harness returns."""
    return {
        "result": {
            "protocol": PROTOCOL_VERSION,
            "implementation": {"name": name, "version": version, "language": language, "spec_version": spec_version, **extra},
            "features": sorted(set(features)),
        }
    }
