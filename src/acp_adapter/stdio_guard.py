"""A guard in front of the SDK's reader: bounded lines, and an error response for every bad one.

The SDK reads a line whatever its size and drops one that is not JSON
without a word. Here stdin is read first: a line longer than `MAX_LINE` is
discarded as it arrives (never held whole) and answered with an "invalid
request" error; a line that is not JSON gets a "parse error"; one that is
not a JSON-RPC 2.0 object gets "invalid request" (with its id when it has
one). Only well-formed messages reach the SDK, and the connection stays up.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import threading
from typing import Any

MAX_LINE = 16 * 1024 * 1024  # bytes per message; a prompt with embedded files fits, a runaway line does not
_CHUNK = 64 * 1024


async def guarded_stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, "asyncio.Task[None]"]:
    """(reader for the SDK, stdout writer, the pump task)."""
    loop = asyncio.get_running_loop()
    raw = asyncio.StreamReader(limit=_CHUNK)
    if _kind(0) in ("fifo", "socket"):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(raw), sys.stdin)
    else:
        # stdin is a file, /dev/null or a terminal, which the event loop cannot watch (epoll refuses
        # /dev/null and regular files): read it on a thread, so that its end still ends the agent.
        _feed_from_thread(loop, raw)
    writer = await _stdout_writer(loop)
    clean = asyncio.StreamReader(limit=MAX_LINE + _CHUNK)
    task = loop.create_task(_pump(raw, clean, writer), name="agentcore-acp-stdin")
    return clean, writer, task


def _kind(fd: int) -> str:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return "closed"
    return "fifo" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device" if stat.S_ISCHR(mode) else "file"


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    def give(call: Any, *args: Any) -> bool:
        try:
            loop.call_soon_threadsafe(call, *args)
            return True
        except RuntimeError:  # the loop is closed: nobody is reading any more
            return False

    def run() -> None:
        try:
            while (data := os.read(0, _CHUNK)) and give(reader.feed_data, data):
                pass
        except OSError:
            pass
        give(reader.feed_eof)

    threading.Thread(target=run, name="agentcore-acp-stdin", daemon=True).start()


class _FileTransport(asyncio.WriteTransport):
    """stdout redirected to a regular file, which pipe transports refuse: plain blocking writes."""

    def __init__(self) -> None:
        super().__init__()
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

    def get_write_buffer_size(self) -> int:
        return 0

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True


async def _stdout_writer(loop: asyncio.AbstractEventLoop) -> asyncio.StreamWriter:
    from acp.stdio import _WritePipeProtocol  # the SDK's protocol: flow control for drain()

    protocol = _WritePipeProtocol()
    transport: asyncio.WriteTransport
    if _kind(1) == "file":
        transport = _FileTransport()
    else:
        transport, _ = await loop.connect_write_pipe(lambda: protocol, sys.stdout)
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _pump(raw: asyncio.StreamReader, clean: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            line, too_long = await _read_line(raw)
            if line is None:
                break
            if too_long:
                _error(writer, None, -32600, f"Invalid request: the message is longer than {MAX_LINE} bytes")
                continue
            message = line.strip()
            if message:
                checked = _check(message, writer)
                if checked:
                    clean.feed_data(message + b"\n")
    finally:
        clean.feed_eof()


async def _read_line(raw: asyncio.StreamReader) -> tuple[bytes | None, bool]:
    """One line, or (None, False) at the end; a line over MAX_LINE is consumed and reported, not kept."""
    parts: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = await raw.readuntil(b"\n")
            done = True
        except asyncio.LimitOverrunError as exc:
            chunk = await raw.readexactly(exc.consumed)
            done = False
        except asyncio.IncompleteReadError as exc:
            chunk, done = exc.partial, True
            if not chunk and not parts:
                return None, False
        size += len(chunk)
        if size <= MAX_LINE:
            parts.append(chunk)
        else:
            parts.clear()  # past the bound: keep nothing
        if done:
            return (b"", True) if size > MAX_LINE else (b"".join(parts), False)


def _check(message: bytes, writer: asyncio.StreamWriter) -> bool:
    try:
        doc: Any = json.loads(message)
    except (ValueError, RecursionError):
        _error(writer, None, -32700, "Parse error: the message is not JSON")
        return False
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0":
        _error(writer, doc.get("id") if isinstance(doc, dict) else None, -32600, "Invalid request: not a JSON-RPC 2.0 object")
        return False
    if "method" in doc and not isinstance(doc["method"], str):
        _error(writer, doc.get("id"), -32600, "Invalid request: the method must be a string")
        return False
    return True


def _error(writer: asyncio.StreamWriter, request_id: Any, code: int, message: str) -> None:
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    payload = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    writer.write(json.dumps(payload).encode() + b"\n")
