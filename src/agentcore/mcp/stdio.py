"""JSON-RPC over a sandboxed process's stdin and stdout, as the MCP SDK's `ClientSession` wants it (MCP-8).

Our own transport, not the SDK's `stdio_client`: that one starts the process
itself (unsandboxed, with part of our environment) and buffers lines without
bound. Here the process comes from `Environment.spawn`, one message is at most
`max_message_bytes`, and anything on stdout that is not a JSON-RPC message
breaks the connection at once: the server's calls in flight fail with the
reason instead of waiting for their timeout.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..environments.base import SpawnedProcess

READ_CHUNK = 65536


class _Lines:
    """Splits a byte stream into lines, refusing any line longer than `limit` (scans each byte once)."""

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self._scanned = 0
        self._limit = limit

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete lines `chunk` ends (without their newline); `ValueError` once one is too long."""
        self._buf += chunk
        out: list[bytes] = []
        start = 0
        while True:
            i = self._buf.find(b"\n", max(start, self._scanned))
            if i < 0:
                break
            if i - start > self._limit:
                raise ValueError("too long")
            out.append(bytes(self._buf[start:i]))
            start = i + 1
        del self._buf[:start]
        self._scanned = len(self._buf)
        if len(self._buf) > self._limit:
            raise ValueError("too long")
        return out


@asynccontextmanager
async def process_streams(
    proc: SpawnedProcess, *, max_message_bytes: int, on_broken: Callable[[str], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) for `ClientSession` over `proc`; `on_broken(reason)` once the connection ends."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)

    async def forward(line: bytes) -> bool:
        """Pass one line on as a message; False once the connection is over. A frame of its own: the reader
        waits for the server's next output holding nothing of the last message (up to 16 MiB, more as objects)."""
        if not line.strip():
            return True
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            on_broken("sent output that is not JSON-RPC (malformed message on stdout)")
            return False
        try:
            await read_send.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def reader() -> None:
        lines = _Lines(max_message_bytes)
        async with read_send:
            while True:
                chunk = await proc.receive(READ_CHUNK)
                if not chunk:
                    on_broken("closed its output (it exited or crashed)")
                    return
                try:
                    got = deque(lines.feed(chunk))
                except ValueError:
                    on_broken(f"sent a message larger than {max_message_bytes} bytes")
                    return
                while got:
                    if not await forward(got.popleft()):
                        return

    async def writer() -> None:
        async with write_recv:
            async for item in write_recv:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await proc.send(data.encode("utf-8"))
                except OSError:
                    on_broken("stopped reading its input")
                    await read_send.aclose()
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_recv, write_send
        finally:
            tg.cancel_scope.cancel()
            await write_send.aclose()
            await read_recv.aclose()
