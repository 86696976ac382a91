"""The default watchdog on git pointed at a repository in the write scope (WDOG-7): asked, in every spelling.

A repository the agent can write to may have been planted by the very
command that runs git on it, so `-C`, `--git-dir`, `--work-tree` (also
`=`-forms, abbreviations of the long ones, and `--separate-git-dir` after a
subcommand) into fs.write are put to a human; outside the workspace they
stay denied, and a read-only directory of the workspace is allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from agentcore.shell.parse import parse_shell
from agentcore.watchdog import Verdict, WatchdogCall
from agentcore.watchdog.default import DefaultWatchdog


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "ws"
    for d in ("sub/.git", "docs", "vendor/lib"):
        (root / d).mkdir(parents=True)
    os.symlink(root / "sub", root / "sublink")
    return root


def manifest(ws: Path, writable: tuple[str, ...]) -> Any:
    def can_write(p: str) -> bool:
        return any(p == os.fspath(ws / w) or p.startswith(os.fspath(ws / w) + "/") for w in writable)

    return SimpleNamespace(
        workspace=ws, effective=SimpleNamespace(can_write=can_write),
        spec=SimpleNamespace(watchdog=SimpleNamespace(enabled=True, disable=[])),
    )


def review(ws: Path, line: str, writable: tuple[str, ...] = ("",)) -> Verdict:
    cmds = parse_shell(line).commands
    call = WatchdogCall("bash", {"command": line}, manifest(ws, tuple(w for w in writable)), "s", cmds)
    return anyio.run(DefaultWatchdog().review, call)


ASKED = [
    "git -C sub status",
    "git -C sublink log",
    "git -C docs diff",
    "git --git-dir=sub/.git status",
    "git --git-dir sub/.git log",
    "git --work-tree=sub status",
    "git --work-tree sub status",
    "git --git-d=sub/.git status",
    "git --work-t=sub status",
    "git -C . -C sub status",
    "git status --git-dir=sub/.git",
    "git init --separate-git-dir=sub/x new",
    "git clone --separate-git=docs/g https://example.com/r x",
    "git worktree list --git-dir sub/.git",
]


@pytest.mark.parametrize("line", ASKED)
def test_git_pointed_into_the_write_scope_is_asked(ws: Path, line: str) -> None:
    v = review(ws, line)
    assert (v.action, v.category) == ("ask", "code_execution_wrapper"), (line, v)
    assert "sub" not in (v.reason or "") and "docs" not in (v.reason or "")


@pytest.mark.parametrize("line", ["git -C sub status", "git --git-dir=sub/.git log", "git --work-tree=vendor/lib status"])
def test_a_read_only_directory_of_the_workspace_is_fine(ws: Path, line: str) -> None:
    assert review(ws, line, writable=("docs",)).action == "allow"


@pytest.mark.parametrize("line", ["git status", "git -C . status", "git log", "git diff --stat"])
def test_the_workspace_root_itself_is_not_asked(ws: Path, line: str) -> None:
    assert review(ws, line).action == "allow", line


@pytest.mark.parametrize("line", ["git -C .. status", "git --git-dir=/tmp/x log", "git --work-tree=../.. status", "git -C sub --git-dir=/etc status"])
def test_outside_the_workspace_stays_denied(ws: Path, line: str) -> None:
    v = review(ws, line)
    assert (v.action, v.category) == ("deny", "code_execution_wrapper"), line


def test_git_dir_from_the_environment_never_gets_through(ws: Path) -> None:
    """`GIT_DIR=… git` is refused by the parser (no assignments, SHELL-4); through `env` the watchdog denies."""
    from agentcore.shell.parse import ShellRefused

    for line in ("GIT_DIR=sub/.git git status", "GIT_WORK_TREE=sub git status"):
        with pytest.raises(ShellRefused) as info:
            parse_shell(line)
        assert info.value.code == "assignment"
    for line in ("env GIT_DIR=sub/.git git status", "env GIT_WORK_TREE=sub git status"):
        v = review(ws, line)
        assert (v.action, v.category) == ("deny", "code_execution_wrapper"), line
