"""Network for `bash` through the real pipeline: net.hosts -> per-call filtering proxy, else no network.

Class 6 of the bypass notes (URLs and hosts): every trick aims at a sentinel
port that nobody may contact; the sentinel's kernel backlog tells whether a
single TCP handshake ever reached it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from test_bash_support import (
    Lab,
    arity,
    assert_ran,
    assert_refused,
    bash_manifest,
)
from test_net_servers import RecordingServer, Reply, Seen, Sentinel

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

BODY = "hello-from-the-allowed-server"
CURL = [arity("curl", n) for n in range(1, 10)] + [arity("wget", n) for n in range(1, 4)] + [arity("cat", 1), arity("printenv", 1)]


@pytest.fixture
def sentinel() -> Iterator[Sentinel]:
    s = Sentinel()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def server(sentinel: Sentinel) -> Iterator[RecordingServer]:
    def redirect(_: Seen) -> Reply:
        return Reply(302, {"Location": f"http://127.0.0.1:{sentinel.port}/stolen"}, b"")

    srv = RecordingServer({"/hello": Reply(200, {"Content-Type": "text/plain"}, BODY.encode()), "/redir": redirect})
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def net_agent(make_agent: Callable[..., Any], lab: Lab, server: RecordingServer) -> Any:
    """An agent whose manifest lists exactly the recording server in net.hosts (default watchdog)."""
    data = bash_manifest(CURL, hosts=[f"127.0.0.1:{server.port}"])
    return make_agent(lab.ws, data, engine_kwargs={"watchdog": "default"})


def decisions(env: Any) -> list[dict[str, Any]]:
    network = env.to_dict()["metadata"].get("network")
    assert isinstance(network, list), env.to_dict()
    return network


async def test_listed_host_is_reached_through_the_proxy(net_agent: Any, server: RecordingServer) -> None:
    env = await net_agent.call("bash", {"command": f"curl -s -m 10 http://127.0.0.1:{server.port}/hello"})
    data = assert_ran(env)
    assert data["exit_code"] == 0 and data["output"] == BODY
    assert [(s.method, s.path) for s in server.requests] == [("GET", "/hello")]
    assert server.requests[0].headers.get("connection") == "close"  # rewritten by the proxy, not curl's keep-alive
    [entry] = decisions(env)
    assert entry["decision"] == "allow" and entry["host"] == "127.0.0.1" and entry["port"] == server.port
    assert "/hello" not in str(entry)  # paths are never logged


async def test_proxy_settings_reach_the_command(net_agent: Any) -> None:
    data = assert_ran(await net_agent.call("bash", {"command": "printenv HTTP_PROXY"}))
    assert data["output"].strip() == "http://127.0.0.1:3128"


async def test_unlisted_loopback_port_is_refused_by_the_proxy(net_agent: Any, server: RecordingServer, sentinel: Sentinel) -> None:
    env = await net_agent.call("bash", {"command": f"curl -s -m 10 http://127.0.0.1:{sentinel.port}/"})
    data = assert_ran(env)
    assert "refused the request: host_not_allowed" in data["output"]
    assert sentinel.connection_count() == 0 and server.requests == []
    [entry] = decisions(env)
    assert entry["decision"] == "deny" and entry["code"] == "host_not_allowed" and entry["port"] == sentinel.port


async def test_a_host_without_a_port_means_the_default_ports_only(make_agent: Callable[..., Any], lab: Lab, sentinel: Sentinel) -> None:
    """`127.0.0.1` in net.hosts: port 80 (and 443) through the proxy, every other port refused. Needs root for port 80."""
    try:
        web = RecordingServer({"/hello": Reply(200, {"Content-Type": "text/plain"}, BODY.encode())}, port=80)
    except OSError as exc:
        pytest.skip(f"cannot listen on 127.0.0.1:80 here ({exc.strerror}); CI runs as root and exercises this")
    try:
        agent = make_agent(lab.ws, bash_manifest(CURL, hosts=["127.0.0.1"]), engine_kwargs={"watchdog": "default"})
        env = await agent.call("bash", {"command": "curl -s -m 10 http://127.0.0.1/hello"})
        assert assert_ran(env)["output"] == BODY
        assert [(e["decision"], e["port"]) for e in decisions(env)] == [("allow", 80)]
        # https goes through CONNECT to 443: allowed by the same pattern (nothing listens there, so the dial fails).
        env = await agent.call("bash", {"command": "curl -s -m 10 https://127.0.0.1/"})
        assert decisions(env)[0]["decision"] == "allow" and decisions(env)[0]["port"] == 443
        env = await agent.call("bash", {"command": f"curl -s -m 10 http://127.0.0.1:{sentinel.port}/"})
        assert "host_not_allowed" in assert_ran(env)["output"]
        assert sentinel.connection_count() == 0 and [r.path for r in web.requests] == ["/hello"]
    finally:
        web.close()


URL_TRICKS = [
    ("userinfo", "http://127.0.0.1:{A}@127.0.0.1:{S}/"),
    ("backslash-userinfo", "'http://127.0.0.1:{S}\\@127.0.0.1:{A}/'"),
    ("fragment-before-at", "'http://127.0.0.1:{S}#@127.0.0.1:{A}/'"),
    ("query-before-at", "'http://127.0.0.1:{S}?@127.0.0.1:{A}/'"),
    ("short-ip", "http://127.1:{S}/"),
    ("decimal-ip", "http://2130706433:{S}/"),
    ("hex-ip", "http://0x7f000001:{S}/"),
    ("octal-ip", "http://0177.0.0.1:{S}/"),
    ("ipv4-mapped-ipv6", "'http://[::ffff:127.0.0.1]:{S}/'"),
    ("localhost", "http://localhost:{S}/"),
    ("upper-case-trailing-dot", "http://LOCALHOST.:{S}/"),
    ("zone-id", "'http://[fe80::1%25lo]:{S}/'"),
    ("https-connect", "https://127.0.0.1:{S}/"),
    ("proxytunnel", "-p http://127.0.0.1:{S}/"),
    ("redirect-to-other-host", "-L http://127.0.0.1:{A}/redir"),
    ("second-url", "http://127.0.0.1:{A}/hello http://127.0.0.1:{S}/"),
    ("host-header", "-H 'Host: 127.0.0.1:{S}' http://127.0.0.1:{A}/hello"),
    ("request-target", "--request-target http://127.0.0.1:{S}/ http://127.0.0.1:{A}/hello"),
    ("connect-to", "--connect-to ::127.0.0.1:{S} http://127.0.0.1:{A}/hello"),
    ("resolve", "--resolve allowed.test:{A}:127.0.0.1 http://allowed.test:{S}/"),
    ("proxy-ignored", "--noproxy '*' http://127.0.0.1:{S}/"),
    ("other-proxy-protocol", "-m 2 -x socks5h://127.0.0.1:3128 http://127.0.0.1:{S}/"),
]


@pytest.mark.parametrize("url", [t[1] for t in URL_TRICKS], ids=[t[0] for t in URL_TRICKS])
async def test_url_and_host_tricks_never_reach_an_unlisted_port(
    net_agent: Any, server: RecordingServer, sentinel: Sentinel, url: str
) -> None:
    command = f"curl -s -m 10 {url.format(A=server.port, S=sentinel.port)}"
    env = await net_agent.call("bash", {"command": command})
    assert_ran(env)
    assert sentinel.connection_count() == 0
    assert all(s.path != "/stolen" for s in server.requests)
    # Whatever the proxy saw, it never allowed anything but the listed host:port.
    for entry in env.to_dict()["metadata"].get("network", []):
        if entry["decision"] == "allow":
            assert (entry["host"], entry["port"]) == ("127.0.0.1", server.port), entry


async def test_redirect_is_rechecked_and_logged(net_agent: Any, server: RecordingServer, sentinel: Sentinel) -> None:
    env = await net_agent.call("bash", {"command": f"curl -s -m 10 -L http://127.0.0.1:{server.port}/redir"})
    assert_ran(env)
    assert [(d["decision"], d["port"]) for d in decisions(env)] == [("allow", server.port), ("deny", sentinel.port)]
    assert sentinel.connection_count() == 0


EXFILTRATION = [
    ("data-from-file", "curl -s -d @a.txt http://127.0.0.1:{A}/hello"),
    ("data-binary-stdin", "cat a.txt | curl -s --data-binary @- http://127.0.0.1:{A}/hello"),
    ("upload", "curl -s -T a.txt http://127.0.0.1:{A}/hello"),
    ("form", "curl -s -F f=@a.txt http://127.0.0.1:{A}/hello"),
    ("post-method", "curl -s -X POST http://127.0.0.1:{A}/hello"),
    ("json", "curl -s --json x http://127.0.0.1:{A}/hello"),
    ("wget-post-file", "wget --post-file=a.txt http://127.0.0.1:{A}/hello"),
]


@pytest.mark.parametrize("command", [e[1] for e in EXFILTRATION], ids=[e[0] for e in EXFILTRATION])
async def test_sending_data_to_a_listed_host_is_refused_by_the_watchdog(
    net_agent: Any, lab: Lab, server: RecordingServer, command: str
) -> None:
    before = lab.snapshot()
    env = await net_agent.call("bash", {"command": command.format(A=server.port)})
    assert_refused(env, "watchdog", "exfiltration")
    assert server.requests == [] and lab.snapshot() == before
    assert "alpha" not in str(env.to_dict())


async def test_dev_tcp_to_a_listed_host_is_refused_too(net_agent: Any, server: RecordingServer) -> None:
    env = await net_agent.call("bash", {"command": f"cat a.txt > /dev/tcp/127.0.0.1/{server.port}"})
    assert_refused(env, "capability", "out_of_scope")
    assert server.requests == []


async def test_without_net_hosts_there_is_no_network_at_all(
    make_agent: Callable[..., Any], lab: Lab, server: RecordingServer, sentinel: Sentinel
) -> None:
    agent = make_agent(lab.ws, bash_manifest(CURL), engine_kwargs={"watchdog": "default"})
    for port in (server.port, sentinel.port):
        env = await agent.call("bash", {"command": f"curl -s -m 5 http://127.0.0.1:{port}/hello"})
        assert assert_ran(env)["exit_code"] == 7  # could not connect
        assert "network" not in env.to_dict()["metadata"]
    data = assert_ran(await agent.call("bash", {"command": "printenv HTTP_PROXY"}))
    assert data["exit_code"] == 1 and data["output"] == ""
    data = assert_ran(await agent.call("bash", {"command": "cat /proc/net/dev"}))
    interfaces = [line.split(":")[0].strip() for line in data["output"].splitlines()[2:]]
    assert interfaces == ["lo"]
    assert server.requests == [] and sentinel.connection_count() == 0



async def test_a_manifest_deny_rule_on_a_listed_host_is_enforced_by_the_proxy(make_agent: Callable[..., Any], lab: Lab,
                                                                               server: RecordingServer, sentinel: Sentinel) -> None:
    """NET-8: a host the command line does not show (reached by a redirect) still meets the manifest's deny rule."""
    rules = [{"permission": "net.fetch", "pattern": f"127.0.0.1:{sentinel.port}", "action": "deny"},
             {"permission": "*", "pattern": "*", "action": "allow"}]
    hosts = [f"127.0.0.1:{server.port}", f"127.0.0.1:{sentinel.port}"]
    agent = make_agent(lab.ws, bash_manifest(CURL, hosts=hosts, rules=rules), engine_kwargs={"watchdog": "default"})
    env = await agent.call("bash", {"command": f"curl -s -L -m 10 http://127.0.0.1:{server.port}/redir"})
    assert_ran(env)
    assert sentinel.connection_count() == 0  # the denied host was never contacted
    assert [(e["decision"], e["port"], e["code"]) for e in decisions(env)] == [
        ("allow", server.port, "allowed"), ("deny", sentinel.port, "denied_by_rule")]


FLOOD = """\
import socket, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
for i in range(count):
    with socket.create_connection(("127.0.0.1", 3128)) as c:
        c.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % port)
        while c.recv(4096):
            pass
print("done", count)
"""


async def test_the_decisions_a_command_makes_the_proxy_log_are_bounded(
    make_agent: Callable[..., Any], lab: Lab, server: RecordingServer, sentinel: Sentinel
) -> None:
    """Every output bounded: a command looping on refused connections makes one decision each, and
    before, every one of them rode on the envelope (a 10-minute loop: hundreds of MB for the model)."""
    (lab.ws / "flood.py").write_text(FLOOD)
    agent = make_agent(lab.ws, bash_manifest([arity("python3", 3)], hosts=[f"127.0.0.1:{server.port}"],
                                             watchdog_enabled=False))
    env = await agent.call("bash", {"command": f"python3 flood.py {sentinel.port} 2000"})
    data = assert_ran(env)
    assert data["output"].strip() == "done 2000", data
    metadata = env.to_dict()["metadata"]
    network = metadata["network"]
    assert len(network) <= 100
    assert all(e["decision"] == "deny" and e["port"] == sentinel.port for e in network)
    assert metadata["network_omitted"] == 2000 - len(network)
    assert sentinel.connection_count() == 0


# Takes the relay's channel (same uid, same pid namespace: pidfd_getfd), hands the proxy a TCP socket it made
# itself with SO_LINGER set and unsent data queued (its peer, kept open, never reads), and has it refused.
LINGER = """\
import ctypes, os, signal, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
relay = None
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if b"-c" in argv and argv[argv.index(b"-c") + 2].isdigit():
            relay = (int(pid), int(argv[argv.index(b"-c") + 2]))
fd = libc.syscall(438, os.pidfd_open(relay[0]), relay[1], 0)  # pidfd_getfd
assert fd >= 0, ctypes.get_errno()
channel = socket.socket(fileno=fd)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)  # the accepted end gets the smallest window
listener.bind(("127.0.0.1", 0))
listener.listen(1)
x = socket.create_connection(listener.getsockname())
y, _ = listener.accept()
x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
x.sendall(b"z" * 100000)  # y never reads: most of it stays queued on x
x.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
socket.send_fds(channel, [b"c"], [x.fileno()])
x.close()  # the proxy holds the last reference now
y.sendall(b"CONNECT 10.0.0.1:1 HTTP/1.1\\r\\n\\r\\n")  # refused: the proxy answers on x, then closes it
print("sent", flush=True)
signal.pause()
"""


@pytest.mark.timeout(120)
async def test_a_lingering_socket_handed_to_the_proxy_does_not_hold_the_host(
    make_agent: Callable[..., Any], lab: Lab, server: RecordingServer
) -> None:
    """Before, the proxy's close of that socket blocked the host's event loop for the linger time (here an
    hour): the call's 3 s timeout could not fire, nor could anything else of the host."""
    (lab.ws / "linger.py").write_text(LINGER)
    agent = make_agent(lab.ws, bash_manifest([arity("python3", 1)], hosts=[f"127.0.0.1:{server.port}"],
                                             watchdog_enabled=False))
    env = await agent.call("bash", {"command": "python3 linger.py", "timeout_ms": 3000})
    data = assert_ran(env)
    assert data["output"] == "sent\n" and data["timed_out"] is True, data
    assert env.to_dict()["metadata"]["duration_ms"] < 60_000
    assert [(e["decision"], e["code"]) for e in decisions(env)] == [("deny", "host_not_allowed")]
    assert server.requests == []
