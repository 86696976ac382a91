"""`write` and `edit` refuse every protected path, at every depth, with layer capability and code `protected` (CAP-8).

The list is the data in protected.py, so a name added there is tested here
without editing this file; the paths it names are created for real, and a
refusal must leave the file system exactly as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore.protected import (
    PROTECTED_DIRS,
    PROTECTED_NAMES,
    PROTECTED_SEQUENCES,
    PROTECTED_SUFFIXES,
    SITE_DIRS,
    layout_reason,
    write_protection,
)
from clock_support import early_in_a_second

pytestmark = pytest.mark.anyio

TARGETS = sorted(
    [*(f"{n}" for n in PROTECTED_NAMES), *(f"{d}/x.cfg" for d in PROTECTED_DIRS), *("/".join(s) + "/x.cfg" for s in PROTECTED_SEQUENCES),
     *(f"lib/python3.11/{d}/x.pth" for d in SITE_DIRS), *(f"team{e}" for e in PROTECTED_SUFFIXES)]
)


def snapshot(root: Path) -> set[str]:
    return {os.fspath(p.relative_to(root)) for p in root.rglob("*")}


def assert_protected(env: Any) -> None:
    wire = env.to_dict()
    assert env.type == "error", wire
    assert env.refusal == {"layer": "capability", "code": "protected"}, wire


@pytest.mark.parametrize("depth", ["", "a/", "a/b/c/d/e/f/g/h/i/j/"], ids=["top", "depth1", "depth10"])
@pytest.mark.parametrize("target", TARGETS)
async def test_every_protected_path_is_refused_at_every_depth(make_workspace: Callable[..., Path], make_agent: Callable[..., Any], target: str, depth: str) -> None:
    ws = make_workspace("ws", {"a/keep.txt": "k\n", "a/b/c/d/e/f/g/h/i/j/keep.txt": "k\n"})
    agent = make_agent(ws)
    before = snapshot(ws)
    assert_protected(await agent.call("write", {"path": depth + target, "content": "touch fired\n"}))
    assert snapshot(ws) == before
    # An existing one (put there by the user) cannot be edited either, and reading it is fine.
    path = ws / (depth + target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("original\n")
    assert_protected(await agent.call("edit", {"path": depth + target, "old_string": "original", "new_string": "touch fired"}))
    assert path.read_text() == "original\n"
    assert (await agent.call("read", {"path": depth + target})).ok


@pytest.mark.parametrize("target", [".git", "sub/.git", "sub/.git/config", "sub/.git/commondir", "sub/.git/config.worktree",
                                    "sub/.git/worktrees/w/config.worktree", "sub/.git/modules/m/hooks/post-checkout", "sub/.git/objects/ab/cd"])
async def test_git_files_and_directories_anywhere(make_workspace: Callable[..., Path], make_agent: Callable[..., Any], target: str) -> None:
    ws = make_workspace("ws", {"sub/x.txt": "x\n"})
    agent = make_agent(ws)
    assert_protected(await agent.call("write", {"path": target, "content": "gitdir: /elsewhere\n"}))
    assert not (ws / target).exists()


async def test_an_ordinary_project_stays_writable(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    """Near misses: names that merely look like protected ones."""
    ws = make_workspace("ws")
    agent = make_agent(ws)
    for path in ("config", "src/config/app.yaml", "refs/notes.md", "objects/user.py", "HEAD.md", "head", "src/hooks/useThing.ts",
                 "github/workflows.md", "gitignore", ".gitignore", ".git-blame-ignore-revs", "docs/.envrc.md", "vscode/settings.json", "notes.code-workspace.md", "code-workspace",
                 ".config/app/settings.toml", "local/bin/tool", "git/config", "husky.md", ".editorconfig", ".env"):
        env = await agent.call("write", {"path": path, "content": "x\n"})
        assert env.ok, (path, env.to_dict())


@pytest.mark.parametrize("order", [("HEAD", "objects/o", "refs/r"), ("refs/r", "objects/o", "HEAD"), ("HEAD", "commondir"), ("commondir", "HEAD")])
async def test_a_git_layout_is_never_completed(make_workspace: Callable[..., Path], make_agent: Callable[..., Any], order: tuple[str, ...]) -> None:
    ws = make_workspace("ws")
    agent = make_agent(ws)
    *first, last = order
    for name in first:
        assert (await agent.call("write", {"path": f"deep/d/{name}", "content": "x\n"})).ok, name
    assert_protected(await agent.call("write", {"path": f"deep/d/{last}", "content": "x\n"}))
    assert layout_reason(ws / "deep" / "d" / last) == "completes a git repository layout"


async def test_inside_an_existing_layout_nothing_is_writable(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    ws = make_workspace("ws", {"backup.git/HEAD": "ref: refs/heads/main\n", "backup.git/objects/x": "", "backup.git/refs/y": ""})
    agent = make_agent(ws)
    for path in ("backup.git/config", "backup.git/hooks/post-update", "backup.git/description", "backup.git/info/attributes"):
        assert_protected(await agent.call("write", {"path": path, "content": "x\n"}))


async def test_a_virtual_environment_is_protected_whole(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    """Everything in a directory holding `pyvenv.cfg` is refused (its interpreter and activation scripts,
    the modules its `.pth` files import), and so is a `pyvenv.cfg` that would make one; a directory
    shaped like one without the marker is an ordinary one, but for its activation scripts, which shell plugins
    source wherever they find them (Table 5)."""
    site = ".venv/lib/python3.11/site-packages"
    ws = make_workspace("ws", {".venv/pyvenv.cfg": "home = /usr/bin\n", ".venv/bin/activate": "# activate\n",
                               f"{site}/_virtualenv.pth": "import _virtualenv\n", f"{site}/_virtualenv.py": "",
                               "env2/bin/tool": "# no marker\n", "env2/lib/python3.11/site-packages/m.py": ""})
    agent = make_agent(ws)
    for path in (".venv/pyvenv.cfg", ".venv/bin/activate", ".venv/bin/python", f"{site}/_virtualenv.py", f"{site}/pkg/__init__.py",
                 ".venv/share/x", "env2/pyvenv.cfg", "new/deeper/pyvenv.cfg", "env2/bin/activate", "env3/bin/activate.fish"):
        assert_protected(await agent.call("write", {"path": path, "content": "import os\n"}))
    assert (ws / ".venv/bin/activate").read_text() == "# activate\n" and not (ws / "env2/pyvenv.cfg").exists()
    assert not (ws / "new").exists()
    assert layout_reason(ws / ".venv/bin/activate") == "inside a Python virtual environment"
    assert layout_reason(ws / "env2/pyvenv.cfg") == "completes a Python virtual environment"
    for path in ("env2/bin/tool", "env2/lib/python3.11/site-packages/m.py", "notes/pyvenv.cfg.md", "venv.cfg", "bin/activated"):
        assert (await agent.call("write", {"path": path, "content": "x\n"})).ok, path


async def test_a_conda_environment_is_protected_whole(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    """A directory holding `conda-meta` (conda, or pixi's `.pixi/envs/default`) is an environment too: its
    activation scripts run whenever it is activated."""
    ws = make_workspace("ws", {".pixi/envs/default/conda-meta/history": "", ".pixi/envs/default/bin/python3": "",
                               "tools/bin/x": ""})
    agent = make_agent(ws)
    for path in (".pixi/envs/default/etc/conda/activate.d/evil.sh", ".pixi/envs/default/bin/python3", "tools/conda-meta/history"):
        assert_protected(await agent.call("write", {"path": path, "content": "touch pwned\n"}))
    assert layout_reason(ws / ".pixi/envs/default/bin/python3") == "inside a conda environment"
    assert not (ws / ".pixi/envs/default/etc").exists() and not (ws / "tools/conda-meta").exists()
    assert (await agent.call("write", {"path": "tools/bin/x", "content": "fine\n"})).ok


async def test_directories_and_includes_named_by_the_repository_configuration(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    ws = make_workspace("ws", {".git/HEAD": "ref: refs/heads/main\n", ".git/config": (
        "[core]\n\thooksPath = tools/git-hooks\n[include]\n\tpath = ../shared/git.cfg\n"
        '[includeIf "onbranch:x"]\n\tpath = /nonexistent-agentcore/other.cfg\n'
    ), "sub/.git": "gitdir: ../.git/worktrees/s\n", ".git/worktrees/s/HEAD": "x", ".git/worktrees/s/commondir": "../..\n",
        ".git/worktrees/s/config.worktree": "[core]\n\thooksPath = wt-hooks\n"})
    agent = make_agent(ws)
    for path in ("tools/git-hooks/pre-commit", "tools/git-hooks", "shared/git.cfg", "sub/wt-hooks/pre-push"):
        assert_protected(await agent.call("write", {"path": path, "content": "x\n"}))
    assert (await agent.call("write", {"path": "tools/other/x", "content": "x\n"})).ok


async def test_a_configuration_that_cannot_be_read_is_a_refusal(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    ws = make_workspace("ws", {".git/HEAD": "x", ".git/config": '[core "unterminated\n\thooksPath = h\n', "outside-repo/x": ""})
    agent = make_agent(ws)
    assert_protected(await agent.call("write", {"path": "src/a.py", "content": "x\n"}))
    assert write_protection(ws / "src" / "a.py") == "a git configuration that cannot be checked"


async def test_the_global_configuration_counts(make_workspace: Callable[..., Path], make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_workspace("ws", {".git/HEAD": "x", ".git/config": "[core]\n"})
    home = ws.parent / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {ws}/global-hooks\n[include]\n\tpath = {ws}/inc.cfg\n")
    monkeypatch.setenv("HOME", os.fspath(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    agent = make_agent(ws)
    for path in ("global-hooks/pre-commit", "inc.cfg"):
        assert_protected(await agent.call("write", {"path": path, "content": "x\n"}))


def test_spec_table_5_is_the_data_in_protected_py() -> None:
    """SPEC reproduces the list; the code is where it lives. The two may not drift apart."""
    spec = (Path(__file__).resolve().parent.parent / "SPEC.md").read_text(encoding="utf-8")
    table = spec[spec.index("**Table 5"):]
    rows = {}
    for line in table.splitlines()[1:]:
        if line.startswith("| ") and "`" in line:
            kind, entries = line.strip("|").split("|", 1)
            rows[kind.strip()] = {e.strip().strip("`") for e in entries.split(",")}
        elif rows and not line.startswith("|"):
            break
    assert rows["names (any component)"] == set(PROTECTED_NAMES)
    assert rows["directory names (any component)"] == set(PROTECTED_DIRS)
    assert rows["sequences of components"] == {"/".join(s) for s in PROTECTED_SEQUENCES}
    assert rows["`.pth` files directly in"] == set(SITE_DIRS)
    assert rows["name endings (any component)"] == set(PROTECTED_SUFFIXES)


@pytest.mark.parametrize("path", ["notes.pth", "lib/site-packages/pkg/x.pth", "lib/site-packages/pkg/__init__.py",
                                  "lib/site-packages.pth", "lib/my-site-packages/x.pth", "lib/site-packages/x.pth.txt"])
async def test_only_pth_files_directly_in_a_site_directory_are_python_start_up_files(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], path: str
) -> None:
    """Python reads `.pth` files only in the site directory itself: below it, beside it, or with another
    suffix, a file is an ordinary one (an installed package's modules stay writable)."""
    ws = make_workspace("ws", {"keep.txt": "k\n"})
    agent = make_agent(ws)
    assert (await agent.call("write", {"path": path, "content": "import os\n"})).ok
    assert (ws / path).read_text() == "import os\n"


def test_a_configuration_rewritten_within_one_second_is_read_again(whole_second_fs: Path) -> None:
    """On a filesystem that keeps whole seconds, rewriting a config file with as many bytes in the same
    second keeps its size and stamps: the cached reading must not outlive the rewrite."""

    from agentcore.protected import load_config

    config = whole_second_fs / "config"
    same_second = 0
    for attempt in range(3):
        early_in_a_second()
        config.write_text("[core]\n\thooksPath = aaaa\n")
        assert [e.value for e in load_config([os.fspath(config)]).values("core", "hookspath")] == ["aaaa"]
        stamp = os.stat(config).st_ctime_ns
        config.write_text("[core]\n\thooksPath = bbbb\n")
        same_second += os.stat(config).st_ctime_ns == stamp
        assert [e.value for e in load_config([os.fspath(config)]).values("core", "hookspath")] == ["bbbb"]
    assert same_second >= 1  # the case this test is about really happened
