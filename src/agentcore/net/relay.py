"""In-sandbox relay: 127.0.0.1:PORT  ->  the filtering proxy's unix socket.

Runs inside the sandbox with the system ``python3`` and the standard library
only, so it must not import anything from agentcore:

    python3 relay.py UNIX_SOCKET_PATH PORT [--ready-fd FD]

PORT 0 picks a free port.  With ``--ready-fd`` the relay writes
``ready PORT\\n`` to that file descriptor once it is listening and closes
it, so a launcher can start the command only after the relay is up.
The relay makes no decisions; the proxy on the host side makes them all.
"""

from __future__ import annotations

import asyncio
import os
import sys

_CHUNK = 65536


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # half-close, the other direction may still flow
    except (ConnectionError, OSError):
        writer.close()


async def _serve_one(socket_path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
    except OSError:
        writer.close()
        return
    try:
        await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
    finally:
        for w in (writer, up_writer):
            w.close()


async def _main(socket_path: str, port: int, ready_fd: int | None) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _serve_one(socket_path, reader, writer)

    server = await asyncio.start_server(handle, host="127.0.0.1", port=port)
    bound = server.sockets[0].getsockname()[1]
    if ready_fd is not None:
        os.write(ready_fd, f"ready {bound}\n".encode("ascii"))
        os.close(ready_fd)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    args = list(argv)
    ready_fd = None
    if "--ready-fd" in args:
        index = args.index("--ready-fd")
        try:
            ready_fd = int(args[index + 1])
        except (IndexError, ValueError):
            sys.stderr.write("relay: --ready-fd needs a file descriptor number\n")
            return 2
        del args[index : index + 2]
    if len(args) != 2 or not args[1].isdigit() or not 0 <= int(args[1]) <= 65535:
        sys.stderr.write("usage: relay.py UNIX_SOCKET_PATH PORT [--ready-fd FD]\n")
        return 2
    try:
        asyncio.run(_main(args[0], int(args[1]), ready_fd))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
