"""The sweep against a concurrent actor that swaps a directory of the workspace for a symlink (ENV-7, MCP-5).

The sweep runs on the host, outside every sandbox, while a stdio MCP server
(sandboxed, but with `fs.write` on the workspace) may still be running: its
own sweeps happen once a second while it runs. Such a server can plant a
protected entry and swap the directory holding it for a link to any host
directory. A sweep that removed by name would then remove the entry of that
name *there*: another repository's `.git`, a `.envrc` in the user's home.
The actor here swaps as fast as it can while the test plants and sweeps up to
ATTEMPTS times; whatever happens inside the workspace, nothing outside it may
change.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentcore.environments import guard
from race_support import exchanging

pytestmark = pytest.mark.timeout(180)

ATTEMPTS = 300


def _plant(real: int) -> None:
    """A `.envrc` and a git directory in the real directory, whatever name it has at the moment."""
    for name in (".envrc", ".vscode"):
        try:
            if name == ".vscode":
                os.mkdir(name, dir_fd=real)
            else:
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=real))
        except FileExistsError:
            pass
    try:
        os.mkdir(".git", dir_fd=real)
        git = os.open(".git", os.O_RDONLY | os.O_DIRECTORY, dir_fd=real)
        try:
            os.close(os.open("HEAD", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=git))
        finally:
            os.close(git)
    except FileExistsError:
        pass


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {os.fspath(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


def test_a_sweep_never_removes_anything_outside_through_a_swapped_directory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    victim = tmp_path / "victim"  # stands for another repository, the user's home
    (victim / ".git" / "refs").mkdir(parents=True)
    (victim / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (victim / ".envrc").write_text("export MINE=1\n")
    (victim / ".vscode").mkdir()
    (victim / ".vscode" / "settings.json").write_text("{}\n")
    expected = _snapshot(victim)
    os.symlink(victim, ws / ".a-twin")
    before = guard.observe([os.fspath(ws)])
    real = os.open(ws / "a", os.O_RDONLY | os.O_DIRECTORY)
    try:
        with exchanging(ws / "a", ws / ".a-twin"):
            for _ in range(ATTEMPTS):
                _plant(real)
                try:
                    guard.sweep(before)
                except guard.GuardError:
                    pass  # refusing to finish is allowed; reaching outside is not
                assert _snapshot(victim) == expected, "the sweep changed a directory outside the workspace"
        # Once nothing swaps any more, the sweep removes what was planted (wherever the real directory
        # now is): how many rounds the race let it remove depends on the load, so it is not counted.
        _plant(real)
        assert guard.sweep(before).removed > 0
        assert _snapshot(victim) == expected
        assert {".envrc", ".vscode", ".git"}.isdisjoint(os.listdir(f"/proc/self/fd/{real}"))
    finally:
        os.close(real)


def test_placeholder_cleanup_never_removes_anything_outside_through_a_swapped_directory(tmp_path: Path) -> None:
    """bwrap's mount points are removed after the run by the paths a lock file lists (empty files and
    directories only): through a swapped directory that would remove the empty ones of the same name outside."""
    from agentcore.environments import bwrap

    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    os.symlink(victim, ws / ".a-twin")
    listing = tmp_path / "lock"
    listing.write_bytes(b"\0".join(os.fsencode(ws / "a" / name) for name in ("ph-file", "ph-dir")) + b"\0")
    real = os.open(ws / "a", os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(listing, os.O_RDONLY)
    try:
        with exchanging(ws / "a", ws / ".a-twin"):
            for _ in range(ATTEMPTS):
                # The user's own empty files outside, and bwrap's placeholders in the real directory.
                (victim / "ph-file").touch()
                (victim / "ph-dir").mkdir(exist_ok=True)
                os.close(os.open("ph-file", os.O_WRONLY | os.O_CREAT, 0o444, dir_fd=real))
                try:
                    os.mkdir("ph-dir", dir_fd=real)
                except FileExistsError:
                    pass
                bwrap._remove_listed(fd, ws)
                assert (victim / "ph-file").exists() and (victim / "ph-dir").is_dir(), "placeholder cleanup removed an entry outside"
        os.close(os.open("ph-file", os.O_WRONLY | os.O_CREAT, 0o444, dir_fd=real))
        _place_back(ws)
        bwrap._remove_listed(fd, ws)  # nothing swaps now: the real placeholders go
        assert not os.path.lexists(f"/proc/self/fd/{real}/ph-file")
        assert (victim / "ph-file").exists() and (victim / "ph-dir").is_dir()
    finally:
        os.close(fd)
        os.close(real)


def _place_back(ws: Path) -> None:
    """Put the real directory back at `a` if the swapper stopped with the link there."""
    if (ws / "a").is_symlink():
        os.rename(ws / "a", ws / ".tmp-link")
        os.rename(ws / ".a-twin", ws / "a")
        os.rename(ws / ".tmp-link", ws / ".a-twin")
