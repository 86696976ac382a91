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
from functools import lru_cache
from pathlib import Path
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


SCHEMA_DIR = Path(__file__).parent / "schema"
# The `$defs` of replies.schema.json that each payload of each operation must satisfy.
_PAYLOAD_DEF: dict[tuple[str, str], str] = {
    ("start", "result"): "hello",
    ("reset", "result"): "empty",
    ("close", "result"): "empty",
    ("compile", "result"): "compile_result",
    ("set_rules", "result"): "rules_result",
}
_KEY_DEF = {"envelope": "envelope", "ask": "ask", "skip": "skip", "error": "error"}
# A harness that declares this feature describes every compiled agent (`effective` and `tools`).
DESCRIBE_FEATURE = "compile.describe"


class ProtocolViolation(Exception):
    """A reply the runner cannot accept; the runner, not the harness, caught it."""


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise ProtocolViolation(message)


@lru_cache(maxsize=2)
def load_schema(name: str) -> dict[str, Any]:
    """`requests` or `replies`: the published JSON Schema of the protocol's messages."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=32)
def _validator(schema: str, definition: str | None) -> Any:
    from jsonschema import Draft202012Validator

    doc = load_schema(schema)
    target = doc if definition is None else {"$defs": doc["$defs"], "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(target)


def _first_error(validator: Any, instance: Any, prefix: str) -> str | None:
    from jsonschema.exceptions import best_match

    if validator.is_valid(instance):  # the common case, without collecting errors
        return None
    err = best_match(validator.iter_errors(instance))
    if err is None:
        return None
    where = "/".join(str(p) for p in err.absolute_path)
    return f"{prefix}{'/' + where if where else ''}: {err.message[:240]}"


def request_problem(request: Mapping[str, Any]) -> str | None:
    """Why a request does not match requests.schema.json (None when it does): the runner checks its own messages."""
    op = request.get("op")
    if op not in OPS:
        return f"request/op: unknown operation {op!r}"
    return _first_error(_validator("requests", str(op)), request, "request")


def check_reply(request: Mapping[str, Any], reply: Any, features: frozenset[str] = frozenset()) -> str:
    """Validate one reply against its request and the published schema; returns the payload key.

    Every violation names the field it found wrong (`/envelope/metadata: ...`).
    """
    _require(isinstance(reply, dict), "reply is not a JSON object")
    _require("seq" in reply, "/seq: the reply has no seq")
    seq = reply["seq"]
    _require(type(seq) is int, f"/seq: must be a JSON integer like the request's, got {json.dumps(seq)}")
    _require(seq == request["seq"], f"/seq: reply seq {seq!r} does not match request seq {request['seq']!r}")
    keys = [k for k in REPLY_KEYS if k in reply]
    _require(len(keys) == 1, f"reply must carry exactly one of {', '.join(REPLY_KEYS)} (got {keys or 'none'})")
    key = keys[0]
    op = request["op"]
    _require(key in ALLOWED_REPLIES[op], f"/{key}: a {key!r} reply is not valid for op {op!r}")
    payload = reply[key]
    definition = _PAYLOAD_DEF.get((op, key)) or _KEY_DEF[key]
    problem = _first_error(_validator("replies", definition), payload, f"/{key}")
    _require(problem is None, problem or "")
    if op == "compile" and key == "result" and DESCRIBE_FEATURE in features and "compile_error" not in payload:
        for name in ("effective", "tools"):
            _require(isinstance(payload.get(name), dict), f"/result/{name}: required by the feature {DESCRIBE_FEATURE} (or compile_error)")
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
