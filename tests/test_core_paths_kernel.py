"""Canonicalisation by the kernel (O_PATH + /proc/self/fd) against `os.path.realpath`.

`canonicalize` asks the kernel to resolve an existing path and falls back to
realpath for everything else. The two must agree on every path both can
resolve: random trees of directories, files and symlinks (relative, absolute,
climbing with `..`, chained, looping, dangling) are built on disk and every
path into them is resolved both ways, and with /proc unusable.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import paths
from agentcore.paths import PathRefused, canonicalize, canonicalize_stat

NAMES = st.sampled_from(["a", "b", "c", "d e", "x (deleted)"])
SEGMENTS = st.one_of(NAMES, st.sampled_from(["..", ".", ""]))


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """(kind, relative path, symlink target) entries, created in order; failures to create are skipped."""
    entries = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["dir", "file", "link"]))
        rel = "/".join(draw(st.lists(NAMES, min_size=1, max_size=3)))
        target = ""
        if kind == "link":
            target = "/".join(draw(st.lists(SEGMENTS, min_size=1, max_size=4)))
            if draw(st.booleans()):
                target = "{root}/" + target
        entries.append((kind, rel, target))
    return entries


def _build(root: Path, entries: list[tuple[str, str, str]]) -> None:
    for kind, rel, target in entries:
        p = root / rel
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            if kind == "dir":
                p.mkdir()
            elif kind == "file":
                p.write_text("x")
            else:
                os.symlink(target.replace("{root}", str(root)), p)
        except OSError:
            continue  # a parent is a file or a link, or the name exists: the tree is what it is


def _realpath(joined: str) -> str | None:
    try:
        return os.path.realpath(joined, strict=True)
    except OSError:
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=trees(), probes=st.lists(st.lists(SEGMENTS, min_size=1, max_size=5), min_size=1, max_size=8))
def test_the_kernel_and_realpath_agree_on_every_existing_path(entries: list[tuple[str, str, str]], probes: list[list[str]]) -> None:
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="kres-")))
    try:
        _build(root, entries)
        for segments in probes:
            joined = str(root) + "/" + "/".join(segments)
            expected = _realpath(joined)
            found = paths._kernel_resolve(joined)
            if found is not None:
                assert found[0] == expected, (entries, segments)
                assert found[1].st_ino == os.stat(expected).st_ino
            elif expected is not None:
                # The kernel declined (a trailing slash on a file, say): canonicalize still gets realpath's answer.
                assert str(canonicalize(joined, root)) == expected
    finally:
        shutil.rmtree(root)


def test_without_proc_the_answers_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(os.path.realpath(tmp_path))
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("x")
    os.symlink("d", root / "link")
    os.symlink("missing", root / "dangling")
    with_proc = [canonicalize(raw, root) for raw in ("link/f.txt", "d/../d/f.txt", "link/new.txt")]
    monkeypatch.setattr(paths, "_proc_fd", False)
    assert [canonicalize(raw, root) for raw in ("link/f.txt", "d/../d/f.txt", "link/new.txt")] == with_proc
    assert with_proc[0] == root / "d" / "f.txt" and with_proc[2] == root / "d" / "new.txt"
    with pytest.raises(PathRefused):
        canonicalize("dangling/x", root)


def test_a_pipe_behind_a_magic_link_is_not_taken_as_a_path() -> None:
    """/proc/self/fd/N of a pipe resolves in the kernel to "pipe:[...]", never a path to compare with scopes."""
    r, w = os.pipe()
    try:
        assert paths._kernel_resolve(f"/proc/self/fd/{r}") is None
        with pytest.raises(PathRefused):
            canonicalize(f"/proc/self/fd/{r}/x", Path("/"))
    finally:
        os.close(r)
        os.close(w)


def test_the_stat_comes_with_an_existing_path_and_not_with_a_missing_one(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    (root / "f.txt").write_text("x")
    os.link(root / "f.txt", root / "g.txt")
    path, st = canonicalize_stat("f.txt", root)
    assert path == root / "f.txt" and st is not None and st.st_nlink == 2
    assert canonicalize_stat("new.txt", root) == (root / "new.txt", None)
