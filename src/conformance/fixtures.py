"""Loopback HTTP servers the runner starts for cases that fetch (feature `fixture.http`).

A case's `setup.http` describes routes; the runner binds two servers on
127.0.0.1 before anything else is rendered, so their ports can appear in the
manifest, rules, arguments and in the routes themselves (`Location` headers):

- `${http}` / `${http_port}` / `${http_authority}`: the scripted server;
- `${sentinel}` / `${sentinel_port}` / `${sentinel_authority}`: a server
  that must never be contacted (every request it gets is recorded).

What each server received is checked by a `served` step. Both run in
threads of the runner (stdlib `http.server`); the implementation fetches
them like any other host (they are listed by literal address, NET-5).
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Route:
    """What the scripted server answers on one path: status, headers and body (gzip-compressed on the wire when `gzip`)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    gzip: bool = False

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Route:
        body = spec.get("body", "").encode("utf-8") * int(spec.get("repeat", 1))
        if "body_hex" in spec:
            body = bytes.fromhex(spec["body_hex"])
        return cls(int(spec.get("status", 200)), {str(k): str(v) for k, v in spec.get("headers", {}).items()}, body, bool(spec.get("gzip")))


class LoopbackServer:
    """One threaded HTTP/1.1 server on 127.0.0.1: scripted routes (404 elsewhere), every request recorded."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _serve(self) -> None:
                with owner._lock:
                    owner.requests.append({
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    })
                route = owner.routes.get(self.path.split("?", 1)[0], Route(404, {"Content-Type": "text/plain"}, b"not found"))
                body = gzip.compress(route.body) if route.gzip else route.body
                self.send_response(route.status)
                for key, value in route.headers.items():
                    self.send_header(key, value)
                if route.gzip:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _serve

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = False

        self._server = Server((HOST, 0), Handler)
        self.port: int = self._server.server_address[1]
        # A short poll interval: shutdown() waits for the loop to notice, once per case run.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name=f"conformance-http-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def authority(self) -> str:
        return f"{HOST}:{self.port}"

    def forget(self) -> None:
        with self._lock:
            self.requests.clear()

    def seen(self) -> dict[str, Any]:
        with self._lock:
            requests = list(self.requests)
        return {"count": len(requests), "requests": requests}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class HttpFixture:
    """The scripted server and the sentinel of one case run."""

    def __init__(self) -> None:
        self.http = LoopbackServer()
        self.sentinel = LoopbackServer()

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, server in (("http", self.http), ("sentinel", self.sentinel)):
            out[name] = f"http://{server.authority}"
            out[f"{name}_port"] = server.port
            out[f"{name}_authority"] = server.authority
        return out

    def set_routes(self, routes: dict[str, dict[str, Any]]) -> None:
        self.http.routes = {path: Route.from_spec(spec) for path, spec in routes.items()}

    def forget(self) -> None:
        """A new run of the same case: nothing has been received yet."""
        self.http.forget()
        self.sentinel.forget()

    def server(self, name: str) -> LoopbackServer:
        return self.sentinel if name == "sentinel" else self.http

    def close(self) -> None:
        self.http.close()
        self.sentinel.close()
