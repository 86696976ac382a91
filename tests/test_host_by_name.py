"""Host code that acts on the workspace by name, against a process that can write it (ENV-7, MCP-5, ENV-14).

The guard, the git configuration reader and the bwrap launcher run on the
host, outside every sandbox, while a sandboxed process with `fs.write` on the
workspace (a stdio MCP server swept once a second, another session's
command, a batch task in place) may change the tree at any moment: swap a
directory for a symlink, make a FIFO where a file is read, make a tree deeper
or longer than a walk by name can follow. None of that may hang the host,
reach outside the workspace, or keep a protected entry it planted.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore.environments import bwrap, callguard, guard
from agentcore.environments.base import EnvironmentUnavailable, SandboxPolicy
from agentcore.protected import write_protection
from race_support import exchanging

pytestmark = pytest.mark.timeout(180)

ATTEMPTS = 300
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


def _chain(top: Path, depth: int, name: str = "d") -> None:
    """`top/d/d/.../d`, `depth` levels, made relative to each level (a path by name could not reach the bottom)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


@pytest.fixture
def deep_ws(tmp_path: Path) -> Iterator[Path]:
    """A workspace that may hold a very deep tree, removed here: pytest's own cleanup recurses, and fails."""
    ws = tmp_path / "ws"
    ws.mkdir()
    yield ws
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        shutil.rmtree(ws, ignore_errors=True)
    finally:
        sys.setrecursionlimit(limit)


def _policy(ws: Path, **kw: Any) -> SandboxPolicy:
    return SandboxPolicy(**{"cwd": ws, "write_roots": (ws,), "read_denied": (), "protected": (), "env": ENV, **kw})


# -- configuration files that are not files ------------------------------------------------


def _returns(call: Callable[[], Any], fifos: list[Path], bound_s: float = 20.0) -> None:
    """`call()` ends by itself (whatever it returns or raises) within `bound_s`; a reader stuck on one of
    `fifos` is released (a writer opened and closed) so that the test process does not keep it."""
    t = threading.Thread(target=lambda: _swallow(call), daemon=True)
    t.start()
    t.join(bound_s)
    stuck = t.is_alive()
    while t.is_alive():
        for f in fifos:
            try:
                os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        t.join(0.5)
    assert not stuck, "the host blocked opening a FIFO the workspace holds"


def _swallow(call: Callable[[], Any]) -> None:
    try:
        call()
    except Exception:
        pass


@pytest.mark.parametrize("where", [".git/config", ".git/commondir", ".gitmodules", "included"])
def test_a_fifo_where_git_configuration_is_read_never_hangs_the_host(tmp_path: Path, where: str) -> None:
    """A nested repository is new (the next sweep removes it), but the next call's preparation and every
    write check in that directory read its configuration first: a FIFO there blocked the open for good,
    on the event loop when the walk was quick, and with it every sweep of a running MCP server."""
    ws = tmp_path / "ws"
    sub = ws / "sub"
    (sub / ".git" / "refs").mkdir(parents=True)
    (sub / ".git" / "objects").mkdir()
    (sub / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    if where == "included":
        (sub / ".git" / "config").write_text("[include]\n\tpath = ../inc.cfg\n")
        fifo = sub / "inc.cfg"
    else:
        fifo = sub / where
    os.mkfifo(fifo)
    _returns(lambda: callguard.prepare(_policy(ws), [ws]), [fifo])
    _returns(lambda: write_protection(sub / "x.txt"), [fifo])
    with pytest.raises(EnvironmentUnavailable):
        callguard.prepare(_policy(ws), [ws])  # fails closed: such a configuration cannot be checked
    if where != ".gitmodules":  # which the write check does not read
        assert write_protection(sub / "x.txt") is not None


def test_the_null_device_as_an_include_reads_as_empty(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git" / "refs").mkdir(parents=True)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".git" / "config").write_text("[include]\n\tpath = /dev/null\n")
    callguard.prepare(_policy(ws), [ws])
    assert write_protection(ws / "x.txt") is None


# -- trees a walk by name cannot follow ------------------------------------------------------


def test_a_tree_deeper_than_python_recurses_neither_breaks_the_sweep_nor_keeps_a_planted_entry(deep_ws: Path) -> None:
    ws = deep_ws
    _chain(ws, 1500, "d")  # 3,000 characters deep: within PATH_MAX, beyond the recursion limit
    before = guard.observe([os.fspath(ws)])
    (ws / ".envrc").write_text("export PATH=$PWD/bin:$PATH\n")
    os.rename(ws / "d", ws / "e")  # the recorded chain is gone from where it was
    assert guard.sweep(before).removed == 1
    assert not (ws / ".envrc").exists()
    guard.observe([os.fspath(ws)])  # the next call's look works too


def test_a_path_longer_than_the_system_allows_does_not_keep_a_planted_entry(deep_ws: Path) -> None:
    """No name reaches the bottom of such a tree, so the walk cannot finish and the sweep fails; but it
    removes what it found first, or a command keeps its `.envrc` by making the tree (and so does a
    server, whose final sweep fails the same way)."""
    ws = deep_ws
    before = guard.observe([os.fspath(ws)])
    (ws / ".envrc").write_text("export PATH=$PWD/bin:$PATH\n")
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "tasks.json").write_text("{}\n")
    _chain(ws, (4200 - len(os.fspath(ws))) // 2 + 1, "d")
    with pytest.raises(guard.GuardError):
        guard.sweep(before)
    assert not (ws / ".envrc").exists() and not (ws / ".vscode").exists()


def test_a_sweep_of_a_deep_tree_costs_one_step_per_directory(deep_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening again what a command shut walked from / to every directory: the square of the depth
    (a tree 12,000 deep held a sweep for three minutes, and a command makes one in seconds)."""
    ws = deep_ws
    before = guard.observe([os.fspath(ws)])
    depth = (4200 - len(os.fspath(ws))) // 2 + 1
    _chain(ws, depth, "d")
    steps = 0
    real = guard._step

    def counted(name: str, dir_fd: int) -> int:
        nonlocal steps
        steps += 1
        return real(name, dir_fd)

    monkeypatch.setattr(guard, "_step", counted)
    with pytest.raises(guard.GuardError):
        guard.sweep(before)
    assert steps < 10 * depth, f"{steps} directory steps for a tree {depth} deep"


@contextmanager
def _descriptors(spare: int) -> Iterator[None]:
    """The soft limit on open descriptors set to those open now plus `spare` (1,024 is a common default)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + spare, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_branch_too_deep_to_remove_does_not_keep_its_siblings(deep_ws: Path) -> None:
    """The removal holds one descriptor per level: a chain deeper than the process may hold stops it.
    Before, the first such branch ended the removal, and whatever it had not reached yet stayed."""
    ws = deep_ws
    before = guard.observe([os.fspath(ws)])
    gh = ws / ".github"
    gh.mkdir()
    _chain(gh, 300, "a")  # listed before or after `workflows`: one of the two chains comes first
    (gh / "workflows").mkdir()
    (gh / "workflows" / "ci.yml").write_text("on: push\n")
    _chain(gh, 300, "z")
    with _descriptors(150):
        with pytest.raises(guard.GuardError):
            guard.sweep(before)
    assert not (gh / "workflows").exists()


# -- a directory swapped for a symlink while the host looks ---------------------------------


def test_the_walk_never_lists_a_directory_outside_through_a_swapped_one(tmp_path: Path) -> None:
    """The walk lists each directory by name: swapped for a link between its look and its listing, the
    directory led the walk outside (to `/`: the whole host, under workspace names, every second)."""
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    outside = tmp_path / "outside"
    (outside / "only-outside" / "deeper").mkdir(parents=True)
    os.symlink(outside, ws / ".a-twin")
    with exchanging(ws / "a", ws / ".a-twin"):
        for _ in range(ATTEMPTS):
            guard.forget_all()
            try:
                state = guard.state_of(os.fspath(ws), True)
            except guard.GuardError:
                continue  # refusing is allowed; walking outside is not
            assert not any("only-outside" in p for p in (*state.dirs, *state.entries)), "the walk listed a directory outside"


def test_placeholder_cleanup_removes_nothing_outside_the_root_its_lock_file_is_for(tmp_path: Path) -> None:
    """The lock files listing bwrap's mount points lie in this process's TMPDIR: a batch worker's is another
    worker's sandbox's to write when its `fs.write` covers /tmp. What it adds there was removed as a
    placeholder (an empty file or directory) wherever it named."""
    base = Path(os.path.realpath(tmp_path))
    ws = base / "ws"
    (ws / "a").mkdir(parents=True)
    victim = base / "victim"
    victim.mkdir()
    (victim / "empty-file").touch()
    (victim / "empty-dir").mkdir()
    pol = _policy(ws, protected=(ws / "a" / ".envrc",))

    async def run() -> None:
        async with bwrap._placeholder_lease(pol) as lease:
            [(root, _fd)] = lease
            with open(bwrap._lock_path(root), "ab") as f:  # as the other process would
                f.write(b"".join(os.fsencode(p) + b"\0" for p in (victim / "empty-file", victim / "empty-dir", ws / "a" / "ph")))
            (ws / "a" / "ph").touch()  # a placeholder of this root's: still removed

    anyio.run(run)
    assert (victim / "empty-file").exists() and (victim / "empty-dir").is_dir(), "placeholder cleanup removed an entry outside its root"
    assert not (ws / "a" / "ph").exists()


@pytest.mark.bwrap
def test_a_directory_swapped_before_bwrap_binds_it_binds_nothing_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bwrap resolved each bind's source by name when it started, after the plan had looked: a pinned
    directory swapped for `../notes` meanwhile had a read-only directory bound writable (and bwrap's mount
    points made in it). Deterministic: the swap is made at the last moment before bwrap starts."""
    try:
        bwrap.self_test(bwrap.bwrap_binary())
    except EnvironmentUnavailable as exc:
        pytest.skip(f"bwrap cannot start here: {exc.reason}")
    base = Path(os.path.realpath(tmp_path))
    ws = base / "ws"
    (ws / "a").mkdir(parents=True)
    notes = base / "notes"  # readable to the command, never writable
    notes.mkdir()
    (notes / "mine.txt").write_text("the user's\n")
    pol = _policy(ws, protected=(ws / "a" / ".envrc",), read_roots=(notes,))
    real = bwrap.run_process_group

    async def swapped(cmd: Any, **kw: Any) -> Any:
        os.rename(ws / "a", ws / "a-moved")
        os.symlink("../notes", ws / "a")
        return await real(cmd, **kw)

    monkeypatch.setattr(bwrap, "run_process_group", swapped)

    class Sink:
        async def write(self, chunk: bytes) -> None:
            pass

    script = f"echo changed > {notes}/mine.txt; echo new > {ws}/a/x"
    try:
        anyio.run(lambda: bwrap.BwrapEnvironment().run(["/bin/sh", "-c", script], pol, timeout_s=30, sink=Sink()))
    except EnvironmentUnavailable:
        pass
    assert (notes / "mine.txt").read_text() == "the user's\n"
    assert sorted(os.listdir(notes)) == ["mine.txt"], "bwrap wrote into a directory outside the write roots"
