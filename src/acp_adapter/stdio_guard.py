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
from typing import Any

MAX_LINE = 16 * 1024 * 1024  # bytes per message; a prompt with embedded files fits, a runaway line does not
_CHUNK = 64 * 1024


async def guarded_stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, "asyncio.Task[None]"]:
    """(reader for the SDK, stdout writer, the pump task)."""
    from acp.stdio import stdio_streams

    raw, writer = await stdio_streams(limit=_CHUNK)
    clean = asyncio.StreamReader(limit=MAX_LINE + _CHUNK)
    task = asyncio.get_running_loop().create_task(_pump(raw, clean, writer), name="agentcore-acp-stdin")
    return clean, writer, task


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
