"""web_fetch through the real pipeline against a loopback HTTP server the test starts."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentcore.api import Engine, load_manifest
from agentcore.watchdog import AllowAllWatchdog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

Route = tuple[int, dict[str, str], bytes]


class Server:
    """A threaded loopback HTTP server; routes map a path to (status, headers, body)."""

    def __init__(self, routes: dict[str, Route | Callable[[str], Route]]) -> None:
        self.routes = routes
        self.hits: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                outer.hits.append(self.path)
                route = outer.routes.get(self.path.split("?", 1)[0])
                if route is None:
                    status, headers, body = 404, {"Content-Type": "text/plain"}, b"missing"
                else:
                    status, headers, body = route(self.path) if callable(route) else route
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for s in made:
        s.close()


def make_engine(tmp_path: Path, hosts: list[str], *, rules: list[dict[str, str]] | None = None, limits: dict[str, Any] | None = None) -> Engine:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    manifest = {
        "name": "fetcher",
        "tools": ["web_fetch", "read"],
        "requires": {"net": {"hosts": hosts}},
        "rules": rules
        if rules is not None
        else [{"permission": "web_fetch", "pattern": "*", "action": "allow"}, {"permission": "read", "pattern": "*", "action": "allow"}],
        "limits": limits or {},
        "environment": "none",
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return Engine(load_manifest(path, workspace=ws), watchdog=AllowAllWatchdog())


HTML = (
    b"<!doctype html><html><head><title>Doc title</title><script>steal()</script></head>"
    b"<body><h1>Heading</h1><p>Some <b>bold</b> text with <a href='/next'>a link</a>.</p></body></html>"
)


async def test_fetch_html_becomes_markdown(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({"/page": (200, {"Content-Type": "text/html; charset=utf-8"}, HTML)})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"])
    session = engine.open_session()
    env = await engine.call(session, "web_fetch", {"url": srv.url("/page#frag")})
    assert env.ok, env.error_text
    assert env.kind == "fetch"
    data = env.data
    assert data["status"] == 200
    assert data["content_type"].startswith("text/html")
    assert data["url"] == srv.url("/page")  # fragment dropped, canonical URL
    assert "# Heading" in data["content"] and "**bold**" in data["content"]
    assert f"[a link]({srv.url('/next')})" in data["content"]
    assert "steal" not in data["content"]
    assert not env.truncated
    assert srv.hits == ["/page"]


async def test_non_2xx_is_returned_with_status(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"])
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/nope")})
    assert env.ok and env.data["status"] == 404 and env.data["content"] == "missing"


async def test_long_content_goes_to_a_sidecar_readable_with_read(tmp_path: Path, servers: list[Server]) -> None:
    body = "".join(f"line {i:05d} ünïcode\n" for i in range(2000)).encode()
    srv = Server({"/big.txt": (200, {"Content-Type": "text/plain; charset=utf-8"}, body)})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"], limits={"web_fetch_bytes": 1000})
    session = engine.open_session()
    env = await engine.call(session, "web_fetch", {"url": srv.url("/big.txt")})
    assert env.ok, env.error_text
    assert env.truncated and env.output_path
    head = env.data["content"]
    assert len(head.encode()) <= 1000
    assert body.decode().startswith(head)
    sidecar = Path(env.output_path)
    assert sidecar.read_bytes() == body
    assert str(sidecar).startswith(str(session.workdir))
    # The model reads the rest through the ordinary read tool.
    again = await engine.call(session, "read", {"path": str(sidecar), "offset": 1999, "limit": 2})
    assert again.ok and again.data["content"] == "line 01998 ünïcode\nline 01999 ünïcode\n"
    session.close()
    assert not sidecar.exists()


async def test_content_at_the_limit_is_not_truncated(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({"/x": (200, {"Content-Type": "text/plain"}, b"a" * 1000)})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"], limits={"web_fetch_bytes": 1000})
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/x")})
    assert env.ok and not env.truncated and env.data["content"] == "a" * 1000


async def test_host_outside_net_hosts_is_refused_before_any_request(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({"/page": (200, {"Content-Type": "text/plain"}, b"hi")})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port + 1 if srv.port < 65535 else 1}"])
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/page?token=s3cret")})
    assert not env.ok
    assert env.refusal == {"layer": "capability", "code": "host_not_allowed"}
    assert "s3cret" not in (env.error_text or "")
    assert srv.hits == []


async def test_no_hosts_at_all_is_an_empty_scope(tmp_path: Path, servers: list[Server]) -> None:
    engine = make_engine(tmp_path, [])
    env = await engine.call(engine.open_session(), "web_fetch", {"url": "http://127.0.0.1:9/x"})
    assert env.refusal is not None and env.refusal["code"] == "empty_scope"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "http://user@127.0.0.1/x", "http://127.0.0.1\\@evil/"])
async def test_unusable_urls_are_refused(tmp_path: Path, url: str) -> None:
    engine = make_engine(tmp_path, ["127.0.0.1:8080"])
    env = await engine.call(engine.open_session(), "web_fetch", {"url": url})
    assert not env.ok and env.refusal is not None and env.refusal["layer"] == "capability"
    assert env.refusal["code"].startswith("url_")


async def test_manifest_deny_rule_on_the_host_wins(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({"/page": (200, {"Content-Type": "text/plain"}, b"hi")})
    servers.append(srv)
    host = f"127.0.0.1:{srv.port}"
    rules = [
        {"permission": "web_fetch", "pattern": "*", "action": "allow"},
        {"permission": "net.fetch", "pattern": host, "action": "deny"},
    ]
    engine = make_engine(tmp_path, [host], rules=rules)
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/page")})
    assert not env.ok and env.refusal is not None
    assert env.refusal["layer"] == "permission" and env.refusal["code"] == "denied"
    assert srv.hits == []


async def test_redirect_to_a_host_outside_net_hosts_is_refused(tmp_path: Path, servers: list[Server]) -> None:
    other = Server({"/secret": (200, {"Content-Type": "text/plain"}, b"internal")})
    servers.append(other)
    srv = Server({"/go": (302, {"Location": other.url("/secret")}, b"")})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"])
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/go")})
    assert not env.ok
    assert env.error_code == "host_not_allowed"
    assert other.hits == []


async def test_redirect_within_net_hosts_is_followed(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({"/go": (301, {"Location": "/there"}, b""), "/there": (200, {"Content-Type": "text/plain"}, b"arrived")})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"])
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/go")})
    assert env.ok and env.data["content"] == "arrived" and env.data["url"] == srv.url("/there")
    assert env.extra == {"redirects": 1}


async def test_binary_content_is_a_tool_failure(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({"/img": (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n\x00\x00")})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"])
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/img")})
    assert env.type == "error" and env.error_code == "binary_content" and env.refusal is None


async def test_download_limit_maps_to_too_large(tmp_path: Path, servers: list[Server]) -> None:
    srv = Server({"/huge": (200, {"Content-Type": "text/plain"}, b"x" * 5000)})
    servers.append(srv)
    engine = make_engine(tmp_path, [f"127.0.0.1:{srv.port}"], limits={"web_fetch_max_download": 4096})
    env = await engine.call(engine.open_session(), "web_fetch", {"url": srv.url("/huge")})
    assert env.type == "error" and env.error_code == "too_large"


async def test_title_never_shows_path_or_query() -> None:
    from agentcore.tools.web_fetch import WebFetchTool

    t = WebFetchTool()
    assert t.title({"url": "https://Example.COM/a/b?key=s3cret"}) == "Fetch https://example.com:443"
    assert t.title({"url": "not a url"}) == "Fetch a URL"
