"""Real loopback servers shared by the tests/test_net_*.py files (no tests here).

* :class:`RecordingServer` -- a threaded HTTP/1.1 server with fixed routes
  that records every request it receives.
* :class:`Sentinel` -- a listening socket nobody accepts on.  The kernel
  completes and queues every TCP handshake, so a non-blocking ``accept``
  afterwards tells exactly whether anything ever connected.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunked: bool = False  # send the body chunked, without Content-Length


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


Route = Reply | Callable[[Seen], Reply]


class RecordingServer:
    def __init__(self, routes: dict[str, Route], *, host: str = "127.0.0.1",
                 ssl_context: ssl.SSLContext | None = None, port: int = 0) -> None:
        self.routes = routes
        self.requests: list[Seen] = []
        self.sni: list[str | None] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                owner.requests.append(seen)
                route = owner.routes.get(self.path.split("?")[0], Reply(404, {}, b"not found"))
                reply = route(seen) if callable(route) else route
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(reply.body)))
                self.send_header("Connection", "close")
                self.end_headers()
                if reply.chunked:
                    for start in range(0, len(reply.body), 4096):
                        piece = reply.body[start : start + 4096]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.wfile.write(reply.body)
                self.close_connection = True

            do_GET = do_POST = do_HEAD = _serve

        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        class Server(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

            def get_request(self):  # type: ignore[no-untyped-def]
                conn, addr = super().get_request()
                if ssl_context is None:
                    return conn, addr
                def remember(sock, name, ctx):  # type: ignore[no-untyped-def]
                    owner.sni.append(name)
                ssl_context.sni_callback = remember
                return ssl_context.wrap_socket(conn, server_side=True), addr

        self._server = Server((host, port), Handler)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class Sentinel:
    """A port that must never be contacted."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.bind((host, 0))
        self._sock.listen(64)
        self.port: int = self._sock.getsockname()[1]

    def take_connection(self, timeout: float = 10.0) -> socket.socket:
        self._sock.settimeout(timeout)
        conn, _ = self._sock.accept()
        conn.settimeout(timeout)
        return conn

    def connection_count(self) -> int:
        self._sock.setblocking(False)
        count = 0
        try:
            while True:
                conn, _ = self._sock.accept()
                conn.close()
                count += 1
        except BlockingIOError:
            return count
        finally:
            self._sock.setblocking(True)

    def close(self) -> None:
        self._sock.close()


def read_until_eof(conn: socket.socket) -> bytes:
    """Read until the peer closes; a socket timeout means it never did."""
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
