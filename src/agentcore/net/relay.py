"""In-sandbox relay: hands every connection to 127.0.0.1:PORT to the host.

Runs inside the sandbox with the system ``python3`` and the standard library
only, so it must not import anything from agentcore:

    python3 relay.py CHANNEL_FD PORT [--ready-fd FD]

CHANNEL_FD is an inherited, connected unix socket whose other end the
host-side filtering proxy holds. The sandbox cannot create unix sockets of
its own (the seccomp filter refuses them), so the relay does not dial
anything: it accepts a TCP connection and passes the accepted socket itself
to the host over the channel (SCM_RIGHTS). The proxy then reads and writes
that socket directly, so no bytes are copied in here.

PORT 0 picks a free port. With ``--ready-fd`` the relay writes
``ready PORT\\n`` to that descriptor once it is listening and closes it, so a
launcher can start the command only after the relay is up. The relay makes
no decisions; the proxy on the host side makes them all.
"""

from __future__ import annotations

# `_socket`, not `socket`: the wrapper module's enum set-up alone costs ~15 ms of
# interpreter time, and this runs before every sandboxed command with network.
import _socket
import os
import sys


def serve(channel_fd: int, port: int, ready_fd: int | None) -> int:
    channel = _socket.socket(fileno=channel_fd)  # adopts the inherited socket; no socket() call
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    if ready_fd is not None:
        os.write(ready_fd, f"ready {listener.getsockname()[1]}\n".encode("ascii"))
        os.close(ready_fd)
    while True:
        conn_fd, _ = listener._accept()
        try:
            rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, conn_fd.to_bytes(4, sys.byteorder, signed=True))]
            channel.sendmsg([b"c"], rights)
        except OSError:
            return 0  # the host side is gone: nothing can be relayed any more
        finally:
            os.close(conn_fd)  # the host holds its own copy now


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
    if len(args) != 2 or not all(a.isdigit() for a in args) or not 0 <= int(args[1]) <= 65535:
        sys.stderr.write("usage: relay.py CHANNEL_FD PORT [--ready-fd FD]\n")
        return 2
    try:
        return serve(int(args[0]), int(args[1]), ready_fd)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
