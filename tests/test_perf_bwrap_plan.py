"""bwrap planning after the performance work: the memoised plan follows the host tree and the policy.

`build_plan` reuses work only for identical observations of the host tree;
these tests change the tree (and the policy) between plans and check that
every plan equals one computed with all caches bypassed, and that the cheap
helpers agree with their plain definitions.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.environments import SandboxPolicy
from agentcore.environments import bwrap as bwrap_module
from agentcore.environments.bwrap import _build_plan_uncached, _inside, _outermost, _resolve_protected, _View, build_plan

ENV = {"PATH": "/usr/bin:/bin"}
COMPONENT = st.sampled_from(["a", "b", "ab", "a-b", "a.b", "a b", ".git", "é"])
ABS = st.lists(COMPONENT, max_size=4).map(lambda parts: "/" + "/".join(parts))


@pytest.fixture
def tree() -> Iterator[Path]:
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="perfplan-", dir="/var/tmp")))
    (root / "ws").mkdir()
    (root / "outside").mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def policy(ws: Path, **kw: object) -> SandboxPolicy:
    base: dict[str, object] = dict(cwd=ws, write_roots=(ws,), read_denied=(), protected=(), env=ENV)
    base.update(kw)
    return SandboxPolicy(**base)  # type: ignore[arg-type]


def same_as_fresh(pol: SandboxPolicy) -> tuple[str, ...]:
    plan = build_plan(pol)
    fresh = _build_plan_uncached(pol)
    assert plan == fresh
    return plan.args


def has_run(args: tuple[str, ...], run: tuple[str, ...]) -> bool:
    return any(args[i : i + len(run)] == run for i in range(len(args)))


def pairs(args: tuple[str, ...], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


@given(ABS, ABS)
def test_inside_is_component_containment(p: str, r: str) -> None:
    expected = PurePosixPath(p) == PurePosixPath(r) or PurePosixPath(r) in PurePosixPath(p).parents
    assert _inside(Path(p), Path(r)) is expected
    assert _inside(p, r) is expected


@given(st.lists(ABS, max_size=8, unique=True))
def test_outermost_drops_exactly_the_nested_paths(raw: list[str]) -> None:
    paths = [Path(p) for p in raw]
    expected = [d for d in paths if not any(o != d and (o in d.parents) for o in paths)]
    assert _outermost(paths) == expected


def test_plan_follows_protected_paths_appearing_and_disappearing(tree: Path) -> None:
    ws = tree / "ws"
    pol = policy(ws, protected=(ws / ".git" / "config", ws / ".vscode"))
    first = same_as_fresh(pol)
    assert build_plan(pol).placeholders == (ws / ".git", ws / ".vscode")  # both missing
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    second = same_as_fresh(pol)
    assert second != first
    assert (str(ws / ".git" / "config"),) * 2 in pairs(second, "--ro-bind")  # now bound read-only in place
    assert build_plan(pol).placeholders == (ws / ".vscode",)
    shutil.rmtree(ws / ".git")
    assert same_as_fresh(pol) == first


def test_plan_follows_sockets_and_denied_paths(tree: Path) -> None:
    ws = tree / "ws"
    pol = policy(ws, read_denied=(ws / "secret",))
    before = same_as_fresh(pol)
    assert str(ws / "secret") not in before  # a missing denied path needs no mask
    (ws / "secret").mkdir()
    with_dir = same_as_fresh(pol)
    assert has_run(with_dir, ("--tmpfs", str(ws / "secret")))  # a denied directory becomes an empty tmpfs
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(os.fspath(ws / "svc.sock"))
        masked = same_as_fresh(pol)
        assert any(target == str(ws / "svc.sock") for _src, target in pairs(masked, "--ro-bind"))
    finally:
        sock.close()
    os.unlink(ws / "svc.sock")
    assert same_as_fresh(pol) == with_dir


def test_plan_follows_a_symlink_swapped_in(tree: Path) -> None:
    ws = tree / "ws"
    (ws / "sub").mkdir()
    pol = policy(ws, protected=(ws / "sub" / "hooks",))
    same_as_fresh(pol)
    (ws / "sub").rmdir()
    os.symlink(tree / "outside", ws / "sub")
    # A protected path through a symlink inside a write root cannot be kept read-only: refused, not served from a cache.
    with pytest.raises(Exception, match="symbolic link"):
        build_plan(pol)


def test_a_different_policy_gets_its_own_plan(tree: Path) -> None:
    ws = tree / "ws"
    (ws / "keep").mkdir()
    a = policy(ws)
    b = dataclasses.replace(a, read_denied=(ws / "keep",))
    c = dataclasses.replace(a, write_roots=())
    plans = {same_as_fresh(p) for p in (a, b, c)}
    assert len(plans) == 3
    assert same_as_fresh(a) == build_plan(policy(ws)).args  # an equal policy value: the same plan
    # The environment of the command does not shape the mounts.
    assert build_plan(dataclasses.replace(a, env={"PATH": "/bin", "X": "1"})) == build_plan(a)


def test_shared_lstat_memo_resolves_like_a_fresh_walk(tree: Path) -> None:
    ws = tree / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "f").write_text("x")
    os.symlink(tree / "outside", tree / "link")
    view = _View([ws], [])
    paths = [ws / ".git" / "hooks", ws / ".git" / "config", ws / "f" / "x", ws / "missing" / "deeper", tree / "link" / "t", ws / ".idea"]
    seen: dict[str, os.stat_result | None] = {}
    assert [_resolve_protected(p, view, seen) for p in paths] == [_resolve_protected(p, view) for p in paths]


# -- reused socket scans ---------------------------------------------------------------


@pytest.fixture
def settle_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Treat every directory as settled, so scans of a freshly made tree are reused at once.

    The real setting refuses to reuse a scan of a directory changed in the last
    two seconds; with it at zero, only the change detection itself stands
    between a stale scan and the plan — which is what these tests exercise.
    Directory times are pushed into the past so that a change made within the
    same timestamp tick still shows up as a new mtime.
    """
    monkeypatch.setattr(bwrap_module, "SCAN_SETTLE_NS", 0)
    bwrap_module._scan_cache.clear()


def backdate(*dirs: Path) -> None:
    for d in dirs:
        os.utime(d, (1_000_000_000, 1_000_000_000))


def masked(pol: SandboxPolicy) -> set[str]:
    plan = build_plan(pol)
    assert plan == _build_plan_uncached(pol)  # the reused scan saw what a fresh one sees
    return {target for src, target in pairs(plan.args, "--ro-bind") if src.endswith("/empty")}


def test_a_reused_scan_sees_new_removed_and_relinked_sockets(tree: Path, settle_now: None) -> None:
    ws = tree / "ws"
    (ws / "sub").mkdir()
    (tree / "outside" / "run").mkdir()
    os.symlink(tree / "outside" / "run" / "svc.sock", ws / "sub" / "link")  # dangling for now
    pol = policy(ws)
    backdate(ws, ws / "sub")
    assert not masked(pol) & {str(ws / "sub" / "a.sock"), str(tree / "outside" / "run" / "svc.sock")}
    assert (ws, 2) in bwrap_module._scan_cache  # reused from here on
    socks = []
    try:
        s = socket.socket(socket.AF_UNIX)
        socks.append(s)
        s.bind(os.fspath(ws / "sub" / "a.sock"))  # a new entry in a listed directory
        backdate(ws / "sub")
        assert str(ws / "sub" / "a.sock") in masked(pol)
        # The symlink's target appears elsewhere: no listed directory changes.
        t = socket.socket(socket.AF_UNIX)
        socks.append(t)
        t.bind(os.fspath(tree / "outside" / "run" / "svc.sock"))
        assert str(tree / "outside" / "run" / "svc.sock") in masked(pol)
    finally:
        for x in socks:
            x.close()
    os.unlink(ws / "sub" / "a.sock")
    assert str(ws / "sub" / "a.sock") not in masked(pol)


def test_a_replaced_directory_is_rescanned(tree: Path, settle_now: None) -> None:
    ws = tree / "ws"
    (ws / "d").mkdir()
    pol = policy(ws)
    backdate(ws, ws / "d")
    masked(pol)
    # Same name, same (old) times, different inode: a replaced directory.
    os.rename(ws / "d", tree / "old-d")
    (ws / "d").mkdir()
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(os.fspath(ws / "d" / "x.sock"))
        backdate(ws, ws / "d")
        assert str(ws / "d" / "x.sock") in masked(pol)
    finally:
        s.close()


def test_recently_changed_directories_are_never_reused(tree: Path) -> None:
    bwrap_module._scan_cache.clear()
    ws = tree / "ws"
    (ws / "fresh").mkdir()  # changed just now: well within SCAN_SETTLE_NS
    build_plan(policy(ws))
    assert (ws, 2) not in bwrap_module._scan_cache
