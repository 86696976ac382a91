"""Reading git configuration as git does (gitconfig.py): checked against the real `git config`.

Whatever git accepts we must read identically (a key we miss could be a
hook directory or a filter driver); whatever git refuses we may refuse too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import gitconfig
from agentcore.gitconfig import GitConfigError, parse_text


def require_git() -> None:
    if shutil.which("git") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("git is required on CI")
        pytest.skip("git is not installed")


def git_list(path: Path, *extra: str) -> list[tuple[str, str | None]] | None:
    """`git config --list` of one file as (name, value) pairs; None when git refuses the file."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.fspath(path.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", "config", "--file", os.fspath(path), "--null", "--list", *extra], capture_output=True, env=env, timeout=30)
    if done.returncode != 0:
        return None
    out: list[tuple[str, str | None]] = []
    for item in done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]:
        name, nl, value = item.partition("\n")
        out.append((name, value if nl else None))
    return out


def ours(text: str) -> list[tuple[str, str | None]] | None:
    try:
        return [(e.name, e.value) for e in parse_text(text)]
    except GitConfigError:
        return None


def _git_name(name: str) -> str:
    # git prints the section and key lowercased and the subsection as written.
    return name


CASES = [
    "[core]\n\thooksPath = .githooks\n",
    "[core]\nhooksPath=a b  # trailing comment\n",
    '[core] hooksPath = "quoted ; not a comment" ; a comment\n',
    "[Core]\n\tHooksPath = X\n",
    '[filter "lfs"]\n\tclean = git-lfs clean -- %f\n\trequired\n',
    '[diff "A.b C"]\n\ttextconv = "cat \\"x\\""\n',
    "[branch.Main]\n\tremote = origin\n",
    "[a]\n\tx = one \\\n  two\n",
    "[a]\r\n\tx = crlf\r\n",
    "\ufeff[a]\n\tx = bom\n",
    "[a]\n\tx = tab\\there\\nnew\n",
    "[a]\n\tx = \n",
    "[a]\n\tx\n\ty = 1\n",
    "# only a comment\n; another\n",
    "[a] x = same line\n",
    "[a]\n\tx = \"unterminated\n",
    "[a]\n\tx = bad \\q escape\n",
    "x = no section\n",
    "[a\n\tx = 1\n",
    '[a "b\n"]\n',
    "[a]\n\t1x = digit first\n",
    "[a]\n\tx y = space in key\n",
    "[a]\n\tx # comment without value\n",
    '[a "sub"]\n\tx = 1\n[a "Sub"]\n\tx = 2\n',
    '[a "with \\\\ backslash and \\" quote"]\n\tx = 1\n',
    "[a.b.c]\n\tx = 1\n",
    "[a]\n\tx = \"  kept  \" and   spaces   \n",
    "[includeIf \"gitdir:~/w/\"]\n\tpath = ~/w.cfg\n",
]


@pytest.mark.parametrize("text", CASES)
def test_examples_read_like_git(tmp_path: Path, text: str) -> None:
    require_git()
    f = tmp_path / "config"
    f.write_text(text, encoding="utf-8")
    theirs = git_list(f)
    mine = ours(text)
    if theirs is None:
        return  # git refuses it; refusing or reading it are both safe
    assert mine == theirs


_KEY = st.sampled_from(["hooksPath", "x", "fsmonitor", "path", "clean", "Y-1"])
_SUB = st.text(alphabet='ab "\\.-_Z', min_size=0, max_size=6)
_VALUE = st.text(alphabet=' \t\\"#;abn=-./~\n', max_size=14)


@st.composite
def configs(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(["core", "Filter", "include", "alias", "a.b"]))
        sub = draw(st.one_of(st.none(), _SUB))
        if sub is None:
            parts.append(f"[{section}]")
        else:
            esc = sub.replace("\\", "\\\\").replace('"', '\\"')
            parts.append(f'[{section.split(".")[0]} "{esc}"]')
        for _ in range(draw(st.integers(0, 3))):
            key = draw(_KEY)
            if draw(st.booleans()):
                parts.append(f"\t{key}")
            else:
                parts.append(f"\t{key} ={draw(_VALUE)}")
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from(["# c", "; c", "", "  "])))
    return "\n".join(parts) + "\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=configs())
def test_generated_configurations_read_like_git(tmp_path: Path, text: str) -> None:
    require_git()
    f = tmp_path / "config"
    f.write_text(text, encoding="utf-8")
    theirs = git_list(f)
    if theirs is None:
        return
    assert ours(text) == theirs, text


def test_includes_are_followed_whatever_their_condition(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "main").write_text('[include]\n\tpath = sub/one\n[includeIf "onbranch:never"]\n\tpath = two\n[includeIf "gitdir:/x/"]\n\tpath = missing\n')
    (tmp_path / "sub" / "one").write_text("[core]\n\thooksPath = /h1\n[include]\n\tpath = ../three\n")
    (tmp_path / "two").write_text("[core]\n\thooksPath = /h2\n")
    (tmp_path / "three").write_text("[core]\n\tfsmonitor = x\n")
    cfg = gitconfig.load([os.fspath(tmp_path / "main")])
    assert [e.value for e in cfg.values("core", "hookspath")] == ["/h1", "/h2"]
    assert [e.name for e in cfg.values("core", "fsmonitor")] == ["core.fsmonitor"]
    # A missing target is still a path to protect: creating it later would add configuration.
    assert os.fspath(tmp_path / "missing") in cfg.includes
    assert set(cfg.files) == {os.fspath(tmp_path / p) for p in ("main", "sub/one", "two", "three")}


def test_include_loops_and_unknown_prefixes_fail_closed(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("[include]\n\tpath = b\n")
    (tmp_path / "b").write_text("[include]\n\tpath = a\n")
    with pytest.raises(GitConfigError):
        gitconfig.load([os.fspath(tmp_path / "a")])
    (tmp_path / "c").write_text("[include]\n\tpath = %(prefix)/etc/x\n")
    with pytest.raises(GitConfigError):
        gitconfig.load([os.fspath(tmp_path / "c")])
    (tmp_path / "d").write_bytes(b"[core]\n\tx = a\0b\n")
    with pytest.raises(GitConfigError):
        gitconfig.load([os.fspath(tmp_path / "d")])


def test_hook_directories_resolve_like_git(tmp_path: Path) -> None:
    top = tmp_path / "w"
    (top / ".git").mkdir(parents=True)
    (top / ".git" / "config").write_text("[core]\n\thooksPath = .husky/_\n[core]\n\thooksPath = ~/hooks\n")
    repo = gitconfig.repo_at(os.fspath(top / ".git"))
    cfg = gitconfig.load(repo.config_files(), home="/home/u")
    dirs = gitconfig.hook_dirs(cfg, repo, home="/home/u")
    assert os.fspath(top / ".husky" / "_") in dirs and "/home/u/hooks" in dirs


def test_gitfiles_and_commondir_are_followed(tmp_path: Path) -> None:
    main = tmp_path / "main" / ".git"
    (main / "worktrees" / "wt").mkdir(parents=True)
    (main / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {main / 'worktrees' / 'wt'}\n")
    repo = gitconfig.repo_at(os.fspath(tmp_path / "wt" / ".git"))
    assert repo.commondir == os.fspath(main)
    assert repo.config_files() == [os.fspath(main / "config"), os.fspath(main / "worktrees" / "wt" / "config.worktree")]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".git").write_text("not a pointer\n")
    with pytest.raises(GitConfigError):
        gitconfig.repo_at(os.fspath(tmp_path / "bad" / ".git"))
