"""The embedded scripted model: turns from a YAML or JSON file, served over loopback HTTP.

`--model script:FILE` starts `ScriptServer`, an OpenAI-compatible Chat
Completions server on 127.0.0.1, and the agent talks to it through the
ordinary `openai-compatible` provider. Demos, tests and users' own CI thus run
offline and deterministically while exercising the real provider code. The
server answers only requests that carry its random token as their API key
(other processes on the machine can reach the port, not take its turns).

A script is a list of turns (or `{turns: [...]}`); each model request takes
the next turn::

    - reasoning: "Look at the file first."
      text: "Reading it."
      tool_calls:
        - tool: read
          args: {path: notes.txt}
          expect: {type: output, contains: "TODO"}     # checked on the next request
    - text: "Done."

Turn keys: `text`, `reasoning`, `tool_calls` (`tool`, `args` or the raw
`arguments` text, optional `id` and `expect`), `finish` (`stop`, `length`,
`content_filter`), `repeat` (a count, or `forever`), and for failure tests
`error: {status, message, retry_after}`, `broken: true` (the stream breaks
off) and `hang: true` (the stream stalls until the client goes away).
`expect` keys: `type`, `error_code`, `refusal_layer`, `contains`, `data`
(a subset of the envelope's data). Failed expectations are collected in
`failures`; the run reports them.
"""

from __future__ import annotations

import hmac
import http.server
import json
import os
import select
import socket
import threading
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_CHUNK = 24  # characters of text per streamed delta


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expect(_Strict):
    type: Literal["output", "error"] | None = None
    error_code: str | None = None
    refusal_layer: str | None = None
    contains: str | None = None
    data: dict[str, Any] | None = None


class ScriptToolCall(_Strict):
    tool: str = Field(min_length=1)
    args: dict[str, Any] | None = None
    arguments: str | None = None  # raw text, for malformed-JSON tests
    id: str | None = None
    expect: Expect | None = None

    def raw(self) -> str:
        if self.arguments is not None:
            return self.arguments
        return json.dumps(self.args or {}, ensure_ascii=False)


class ScriptError(_Strict):
    status: int = Field(ge=400, le=599)
    message: str = "scripted failure"
    retry_after: float | None = None


class Turn(_Strict):
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    finish: Literal["stop", "length", "content_filter"] | None = None
    repeat: Union[int, Literal["forever"]] = 1
    error: ScriptError | None = None
    broken: bool = False
    hang: bool = False


class Script(_Strict):
    model: str = "script"
    turns: list[Turn] = Field(min_length=1)


class ScriptFileError(Exception):
    """The script file cannot be read or is not a valid script."""


def load_script(path: Path) -> Script:
    """Read and validate a script file (YAML or JSON)."""
    from ..api import parse_document
    from ..textdata import MAX_DOCUMENT_BYTES, TooLarge, read_bounded

    try:
        with open(path, "rb") as fh:  # bounded like a manifest: `script:/dev/zero` must not take the memory
            text = read_bounded(fh, MAX_DOCUMENT_BYTES)
    except (OSError, UnicodeDecodeError, TooLarge) as exc:
        raise ScriptFileError(f"cannot read the script {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    try:
        data = parse_document(text, Path(path))
    except Exception as exc:  # the loader's own errors carry file:line
        raise ScriptFileError(str(exc)) from None
    if isinstance(data, list):
        data = {"turns": data}
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ScriptFileError(f"{path}: {where}: {first['msg']}") from None


# -- expectations -------------------------------------------------------------------------


def check_expectation(expect: Expect, envelope: dict[str, Any]) -> list[str]:
    """What does not hold of `envelope` (empty when everything does)."""
    meta = envelope.get("metadata") or {}
    problems: list[str] = []
    if expect.type is not None and envelope.get("type") != expect.type:
        problems.append(f"type is {envelope.get('type')!r}, expected {expect.type!r}")
    if expect.error_code is not None and meta.get("error_code") != expect.error_code:
        problems.append(f"error_code is {meta.get('error_code')!r}, expected {expect.error_code!r}")
    if expect.refusal_layer is not None and (meta.get("refusal") or {}).get("layer") != expect.refusal_layer:
        problems.append(f"refusal layer is {(meta.get('refusal') or {}).get('layer')!r}, expected {expect.refusal_layer!r}")
    if expect.contains is not None and expect.contains not in json.dumps(envelope, ensure_ascii=False):
        problems.append("the result does not contain the expected text")
    if expect.data is not None:
        data = envelope.get("data") if isinstance(envelope.get("data"), dict) else {}
        for key, want in expect.data.items():
            if data.get(key) != want:
                problems.append(f"data.{key} is {data.get(key)!r}, expected {want!r}")
    return problems


# -- the server -----------------------------------------------------------------------------


class ScriptServer:
    """Serves a script's turns, one per request, on 127.0.0.1 (a port of its own)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.failures: list[str] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._index = 0
        self._used = 0  # times the current turn was served (repeat)
        self._pending: dict[str, tuple[str, Expect]] = {}  # call id -> (tool, expectation)
        self._stopping = threading.Event()
        self._calls = 0
        # Any local process can reach a loopback port: only the host that started this server, which holds
        # the token, may take turns from it (or learn what they are).
        self.token = os.urandom(16).hex()
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> "ScriptServer":
        self._thread = threading.Thread(target=self._serve, name="agentcore-script-model", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        # Not `serve_forever`: its shutdown waits for a 0.5 s poll, and `stop` runs on the host's event loop
        # (once per run: a batch of scripted tasks spent most of its time there). `stop` wakes this loop instead.
        while not self._stopping.is_set():
            self._httpd.handle_request()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            try:  # a connection wakes `handle_request`, which then sees `_stopping`
                socket.create_connection(self._httpd.server_address[:2], timeout=1).close()
            except OSError:
                pass
            self._thread.join(timeout=5)
        self._httpd.server_close()

    def __enter__(self) -> "ScriptServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- turns ----------------------------------------------------------------------------
    def next_turn(self, body: dict[str, Any]) -> tuple[Turn | None, list[str]]:
        """The turn for this request (None when the script is used up) and its tool call ids."""
        with self._lock:
            self.requests += 1
            self._check(body.get("messages") or [])
            if self._index >= len(self.script.turns):
                return None, []
            turn = self.script.turns[self._index]
            self._used += 1
            if turn.repeat != "forever" and self._used >= turn.repeat:
                self._index += 1
                self._used = 0
            ids = []
            for call in turn.tool_calls:
                self._calls += 1
                call_id = call.id or f"call_{self._calls}"
                ids.append(call_id)
                if call.expect is not None:
                    self._pending[call_id] = (call.tool, call.expect)
            return turn, ids

    def _check(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            call_id = message.get("tool_call_id")
            if message.get("role") != "tool" or call_id not in self._pending:
                continue
            tool, expect = self._pending.pop(call_id)
            try:
                envelope = json.loads(message.get("content") or "")
            except (TypeError, json.JSONDecodeError):
                envelope = {}
            for problem in check_expectation(expect, envelope if isinstance(envelope, dict) else {}):
                self.failures.append(f"expectation on {tool} call {call_id}: {problem}")

    def problems(self) -> list[str]:
        """Failed expectations, and expectations whose results never came back (the run ended first)."""
        with self._lock:
            unchecked = [f"expectation on {tool} call {cid}: its result was never sent back" for cid, (tool, _e) in self._pending.items()]
            return [*self.failures, *unchecked]

    def stopping(self) -> bool:
        return self._stopping.is_set()


def _usage(body: dict[str, Any], turn: Turn) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages") or [])) // 4
    completion = (len(turn.text) + len(turn.reasoning) + sum(len(c.raw()) for c in turn.tool_calls)) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)]


def _handler(server: ScriptServer) -> type[http.server.BaseHTTPRequestHandler]:
    """A request handler class bound to `server` (http.server makes one handler object per request)."""
    return type("Handler", (_ScriptHandler,), {"script": server})


class _ScriptHandler(http.server.BaseHTTPRequestHandler):
    script: ScriptServer
    protocol_version = "HTTP/1.1"
    # Streamed deltas are small writes: with Nagle on, each waits for the client's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet: stderr belongs to the host
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        given = self.headers.get("authorization") or ""
        if not hmac.compare_digest(given.encode(), f"Bearer {self.script.token}".encode()):
            self._json(401, {"error": {"message": "this scripted model answers only the host that started it"}})
            self.close_connection = True
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": "only /v1/chat/completions is served"}})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        except (ValueError, json.JSONDecodeError):
            self._json(400, {"error": {"message": "the request body is not JSON"}})
            return
        turn, ids = self.script.next_turn(body)
        if turn is None:
            self._json(400, {"error": {"message": f"the script has no turn {self.script.requests}"}})
        elif turn.error is not None:
            headers = {"retry-after": str(turn.error.retry_after)} if turn.error.retry_after is not None else {}
            self._json(turn.error.status, {"error": {"message": turn.error.message}}, headers)
        elif body.get("stream"):
            self._stream(body, turn, ids)
        else:
            self._json(200, _completion(body, turn, ids))

    def _json(self, status: int, doc: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, doc: dict[str, Any] | str) -> None:
        data = ("data: " + (doc if isinstance(doc, str) else json.dumps(doc)) + "\n\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, body: dict[str, Any], turn: Turn, ids: list[str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for doc in _stream_docs(body, turn, ids):
                if doc == "BREAK":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if doc == "HANG":
                    self._stall()
                    return
                self._chunk(doc)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client went away (cancelled): nothing more to send
            self.close_connection = True

    def _stall(self) -> None:
        """Send nothing more until the client hangs up (EOF on the socket) or the server stops."""
        while not self.script.stopping():
            readable, _w, _x = select.select([self.connection], [], [], 0.1)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                break
        self.close_connection = True


def _base(body: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-script", "object": "chat.completion.chunk", "created": 0, "model": str(body.get("model", "script"))}


def _finish(turn: Turn) -> str:
    return turn.finish or ("tool_calls" if turn.tool_calls else "stop")


def _stream_docs(body: dict[str, Any], turn: Turn, ids: list[str]) -> list[Any]:
    base = _base(body)

    def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}

    docs: list[Any] = [delta({"role": "assistant"})]
    docs += [delta({"reasoning_content": p}) for p in _pieces(turn.reasoning)]
    text = _pieces(turn.text)
    docs += [delta({"content": p}) for p in text[:1]]
    if turn.broken:
        return docs + ["BREAK"]
    if turn.hang:
        return docs + ["HANG"]
    docs += [delta({"content": p}) for p in text[1:]]
    for i, (call, call_id) in enumerate(zip(turn.tool_calls, ids)):
        raw = call.raw()
        half = len(raw) // 2
        docs.append(delta({"tool_calls": [{"index": i, "id": call_id, "type": "function", "function": {"name": call.tool, "arguments": raw[:half]}}]}))
        docs.append(delta({"tool_calls": [{"index": i, "function": {"arguments": raw[half:]}}]}))
    docs.append(delta({}, _finish(turn)))
    docs.append({**base, "choices": [], "usage": _usage(body, turn)})
    docs.append("[DONE]")
    return docs


def _completion(body: dict[str, Any], turn: Turn, ids: list[str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": c.tool, "arguments": c.raw()}} for c, cid in zip(turn.tool_calls, ids)
        ]
    return {**_base(body), "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(turn)}], "usage": _usage(body, turn)}
