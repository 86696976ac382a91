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
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore.environments import SandboxPolicy, bwrap
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


def test_plan_follows_denied_paths_and_ignores_sockets(tree: Path) -> None:
    ws = tree / "ws"
    pol = policy(ws, read_denied=(ws / "secret",))
    before = same_as_fresh(pol)
    assert str(ws / "secret") not in before  # a missing denied path needs no mask
    (ws / "secret").mkdir()
    with_dir = same_as_fresh(pol)
    assert has_run(with_dir, ("--tmpfs", str(ws / "secret")))  # a denied directory becomes an empty tmpfs
    sock = socket.socket(socket.AF_UNIX)
    try:
        # Unix sockets are refused by the seccomp filter, not masked one by one:
        # a new socket file changes nothing in the mounts.
        sock.bind(os.fspath(ws / "svc.sock"))
        assert same_as_fresh(pol) == with_dir
    finally:
        sock.close()
        os.unlink(ws / "svc.sock")


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
    c = dataclasses.replace(a, write_roots=(), read_roots=(ws,))
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


def _system_root(tree: Path) -> Path:
    root = tree / "root"  # not under /tmp: the sandbox's /tmp is its own, so no system entry may lie there
    for d in ("usr/bin", "usr/lib", "etc"):
        (root / d).mkdir(parents=True)
    (root / "bin").symlink_to("usr/bin")
    (root / "lib").symlink_to("usr/lib")
    (root / "lib64").symlink_to("usr/missing")  # a dangling one is not shown
    return root


def _settled(*dirs: Path) -> None:
    # Times well in the past, as a root that nobody changed for a while has (ctime still moves: it is now).
    for d in dirs:
        os.utime(d, ns=(10**18, 10**18))


def _listed(root: Path) -> tuple[tuple[str, str], ...]:
    return bwrap._list_system_entries(str(root), lambda _d: None)


def test_system_entries_are_reused_only_while_their_directories_are_unchanged(tree: Path) -> None:
    root = _system_root(tree)
    _settled(root, root / "usr")
    first = bwrap._system_entries(str(root), settle=False)
    assert (str(root / "bin"), "usr/bin") in first and (str(root / "etc"), "") in first
    assert not any(p == str(root / "lib64") for p, _ in first)
    assert str(root) in bwrap._system_memo and first == _listed(root)
    # A new top-level entry changes the root's times: listed again.
    (root / "sbin").mkdir()
    _settled(root)
    assert (str(root / "sbin"), "") in bwrap._system_entries(str(root), settle=False)
    # A symlink's target appearing changes only its own directory (usr): that one is watched too.
    (root / "usr" / "missing").mkdir()
    os.utime(root / "usr", ns=(10**18 + 1, 10**18 + 1))
    again = bwrap._system_entries(str(root), settle=False)
    assert (str(root / "lib64"), "usr/missing") in again and again == _listed(root)


def test_a_directory_changed_within_the_settle_margin_is_listed_every_time(tree: Path) -> None:
    root = _system_root(tree)  # just made: its times are now
    assert bwrap.dir_state(str(root), time.time_ns()) is None
    assert bwrap._system_entries(str(root)) == _listed(root)
    assert str(root) not in bwrap._system_memo  # nothing kept that a same-tick change could leave looking unchanged
    assert bwrap.dir_state(str(root / "bin" / "nothing"), time.time_ns(), settle=False) is None  # missing: never trusted


def test_system_entries_follow_a_symlink_met_on_the_way_to_a_target(tree: Path) -> None:
    # /lib64 -> opt/a/lib64 where opt/a is itself a symlink: the target's directory (opt/b) stays as it was when
    # opt/a is pointed elsewhere (only opt changes), so the entries must not be reused on its times alone.
    root = _system_root(tree)
    for d in ("opt/b/lib64", "opt/c/lib64"):
        (root / d).mkdir(parents=True)
    (root / "opt" / "a").symlink_to("b")
    (root / "lib64").unlink()
    (root / "lib64").symlink_to("opt/a/lib64")
    first = bwrap._system_entries(str(root), settle=False)
    assert (str(root / "opt" / "b" / "lib64"), "") in first
    (root / "opt" / "a2").symlink_to("c")
    os.replace(root / "opt" / "a2", root / "opt" / "a")
    again = bwrap._system_entries(str(root), settle=False)
    assert again == _listed(root)
    assert (str(root / "opt" / "c" / "lib64"), "") in again and (str(root / "opt" / "b" / "lib64"), "") not in again
