"""File tools against a concurrent actor that swaps path components between check and use (TOOL-9, CAP-13, FILE-5, FILE-11).

Another process (race_support) swaps a directory or file of the workspace
with a symlink to a directory outside fs.read and fs.write, or replaces the
temporary file of `write`, as fast as it can while the test calls the tool
up to ATTEMPTS times. Nothing synchronises the two: a hole is won within a
few calls, and a sound tool never reads or changes anything outside.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import ALLOW_ALL
from race_support import exchanging, swapping_temps

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ATTEMPTS = 300
SECRET = "OUTSIDE-SECRET-needle"
HARMLESS = "inside needle"



@pytest.fixture
def swap_tree(make_workspace: Callable[..., Path]) -> dict[str, Path]:
    """ws/sub (a directory) and ws/f.txt (a file), each with a symlink twin to the same thing outside."""
    ws = make_workspace("ws", {"sub/a.txt": HARMLESS + "\n", "f.txt": HARMLESS + "\n"})
    out = make_workspace("outside", {"secret-name.txt": SECRET + "\n", "a.txt": SECRET + "\n"})
    os.symlink(out, ws / ".sub-twin")
    os.symlink(out / "a.txt", ws / ".f-twin.txt")
    return {"ws": ws, "out": out}


def _leaked(env: Any) -> bool:
    return SECRET in repr(env.to_dict()) or "secret-name" in repr(env.to_dict())


async def _race(agent: Any, tool: str, args: dict[str, Any]) -> tuple[int, int]:
    """(calls that leaked, calls that got past the capability check) over the attempts; stops at the first leak.

    A call got past the check when it succeeded or when the use-time check caught the swap (`symlink_race`).
    """
    used = 0
    for _ in range(ATTEMPTS):
        env = await agent.call(tool, args)
        if _leaked(env):
            return 1, used
        used += env.ok or env.error_code == "symlink_race"
    return 0, used


@pytest.mark.parametrize(
    ("tool", "args", "twins"),
    [
        ("grep", {"pattern": "needle", "path": "sub"}, ("sub", ".sub-twin")),  # one rg walks the tree from sub
        ("grep", {"pattern": "needle", "path": "sub", "glob": "*.txt"}, ("sub", ".sub-twin")),  # listed, then searched
        ("grep", {"pattern": "needle", "path": "f.txt"}, ("f.txt", ".f-twin.txt")),  # a file as the root
        ("glob", {"pattern": "**", "path": "sub"}, ("sub", ".sub-twin")),
        # Beneath the root: rg lists the root, then opens `sub` (and files in it) by relative name, which
        # follows the symlink swapped in between; what it reports from there must never be shown (FILE-17).
        ("grep", {"pattern": "needle"}, ("sub", ".sub-twin")),  # the whole tree, one rg
        ("grep", {"pattern": "needle", "glob": "**/*.txt"}, ("sub", ".sub-twin")),  # listed, then searched by name
        ("grep", {"pattern": "needle"}, ("f.txt", ".f-twin.txt")),  # a file beneath the root
        ("glob", {"pattern": "**"}, ("sub", ".sub-twin")),
        ("read", {"path": "f.txt"}, ("f.txt", ".f-twin.txt")),
        ("read", {"path": "sub/a.txt"}, ("sub", ".sub-twin")),
        ("edit", {"path": "sub/a.txt", "old_string": "needle", "new_string": "needle+", "replace_all": True}, ("sub", ".sub-twin")),
    ],
)
async def test_a_swapped_symlink_never_reaches_outside(
    swap_tree: dict[str, Path], make_agent: Callable[..., Any], tool: str, args: dict[str, Any], twins: tuple[str, str]
) -> None:
    ws, out = swap_tree["ws"], swap_tree["out"]
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    agent = make_agent(ws)
    with exchanging(ws / twins[0], ws / twins[1]):
        leaked, used = await _race(agent, tool, args)
    assert not leaked, f"{tool} returned content or names from outside fs.read while a symlink was swapped in"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert used > 0  # the race was run: some calls got past the check to the moment of use


async def test_write_into_a_swapped_directory_stays_inside(swap_tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws, out = swap_tree["ws"], swap_tree["out"]
    agent = make_agent(ws)
    ok = 0
    with exchanging(ws / "sub", ws / ".sub-twin"):
        for i in range(ATTEMPTS):
            ok += (await agent.call("write", {"path": "sub/a.txt", "content": f"written {i}\n"})).ok
            assert sorted(p.name for p in out.iterdir()) == ["a.txt", "secret-name.txt"]
            assert (out / "a.txt").read_text() == SECRET + "\n"
    assert ok > 0


@pytest.mark.parametrize("tool", ["write", "edit"])
async def test_the_temporary_file_swapped_for_a_symlink_changes_nothing_outside(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], tool: str
) -> None:
    """`write` keeps an existing file's mode: it must set it on the file it made, never through a
    symlink another process put in that file's place (here: making a file outside world-writable)."""
    ws = make_workspace("ws")
    out = make_workspace("outside", {"victim": "private\n"})
    victim = out / "victim"
    os.chmod(victim, 0o600)
    target = ws / "t.txt"
    args = {"path": "t.txt", "content": "needle\n" * 20000} if tool == "write" else {"path": "t.txt", "old_string": "needle", "new_string": "pin", "replace_all": True}
    agent = make_agent(ws)
    with swapping_temps(ws, "t.txt", victim):
        for _ in range(ATTEMPTS // 3):
            if target.is_symlink() or not target.exists():  # a won race leaves the symlink in place: start again
                target.unlink(missing_ok=True)
            target.write_text("needle\n" * 20000)
            os.chmod(target, 0o666)
            await agent.call(tool, args)
            assert stat.S_IMODE(os.stat(victim).st_mode) == 0o600, f"{tool} changed the mode of a file outside fs.write"
    assert victim.read_text() == "private\n"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("grep", {"pattern": "needle"}),
        ("grep", {"pattern": "needle", "glob": "**/*.txt"}),
        ("glob", {"pattern": "**"}),
    ],
)
async def test_a_swap_inside_the_workspace_never_shows_what_a_rule_hides(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], tool: str, args: dict[str, Any]
) -> None:
    """The link points inside fs.read, at a directory a rule denies: the results name `sub/...`, which no
    rule hides, so only the proof that rg really went through `sub` keeps the hidden lines out (FILE-11)."""
    ws = make_workspace("ws", {"sub/a.txt": HARMLESS + "\n", "private/a.txt": SECRET + "\n", "private/secret-name.txt": SECRET + "\n"})
    os.symlink("private", ws / ".sub-twin")
    rules = [*ALLOW_ALL, {"permission": "read", "pattern": "{workspace}/private/**", "action": "deny"}]
    agent = make_agent(ws, rules=rules)
    with exchanging(ws / "sub", ws / ".sub-twin"):
        leaked, used = await _race(agent, tool, args)
    assert not leaked, f"{tool} showed what a rule hides through a directory swapped for a link to it"
    assert used > 0


@pytest.mark.parametrize(
    "args",
    [{"pattern": "needle"}, {"pattern": "needle", "glob": "**/*"}],  # one rg with the marked names listed beside it; listed first
    ids=["tree", "listed"],
)
async def test_a_swap_never_counts_what_lies_outside_as_withheld(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], args: dict[str, Any]
) -> None:
    """`withheld` counts paths in fs.read the screen hides (PERM-14): names rg listed through a link swapped in
    for `sub` lie outside, and counting them tells how many `.env` files a directory outside holds."""
    ws = make_workspace("ws", {"sub/a.txt": HARMLESS + "\n", **{f"sub/d{i}/x.txt": HARMLESS + "\n" for i in range(20)}})
    out = make_workspace("outside", {f"d{i}/.env": "KEY=1\n" for i in range(20)})
    os.symlink(out, ws / ".sub-twin")
    agent = make_agent(ws, engine_kwargs={"watchdog": "default"})
    assert "withheld" not in (await agent.call("grep", args)).to_dict()["metadata"]
    used = 0
    with exchanging(ws / "sub", ws / ".sub-twin"):
        for _ in range(ATTEMPTS):
            env = await agent.call("grep", args)
            assert "withheld" not in env.to_dict()["metadata"], "names listed through a link were counted as withheld"
            used += env.ok
    assert used > 0
