"""Nothing the agent writes can make git run code later (issue 8, part 1): real git, real bwrap.

Every class is tried the way an attacker with `write` plus an allowlisted
`bash` would try it, and each test asserts the side effect did not happen:
no `fired-*` marker anywhere, and a `git status` the *user* runs afterwards
on the host (a clean environment: `env -i`, an empty HOME, no system
configuration) does not run the planted command either. Where feasible a
control makes the same plant by hand in a scratch copy and shows that the
same host command does fire it, so the absence of the marker means
something.

The planted commands are `touch fired-<class>`: git runs them in the
working tree's top, which the sandbox can write, so a plant firing inside
the sandbox would leave its marker too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from test_bash_support import Lab, arity, assert_ran, assert_refused, bash_manifest

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

ANY = {"wildcard": True}
SHELL = [
    *(arity(c, n) for c in ("cp", "mv", "mkdir", "tee", "touch", "chmod") for n in (1, 2, 3)),
    *(arity("git", n) for n in (1, 2, 3, 4)),
]


def require_git() -> str:
    git = shutil.which("git")
    if git is None:
        if os.environ.get("CI") == "true":
            pytest.fail("git is required on CI")
        pytest.skip("git is not installed")
    return git


@pytest.fixture
def repo(lab: Lab) -> Iterator[Lab]:
    """The lab with a real repository at the workspace root (one commit of a.txt) and an empty HOME."""
    require_git()
    shutil.rmtree(lab.ws / ".git")
    (lab.root / "home").mkdir()
    host_git(lab, lab.ws, "init", "-q", "-b", "main")
    host_git(lab, lab.ws, "add", "a.txt")
    host_git(lab, lab.ws, "commit", "-q", "-m", "one")
    yield lab


def host_env(lab: Lab) -> dict[str, str]:
    """What a user's shell would give git, minus everything of this machine: env -i, an empty HOME."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.fspath(lab.root / "home"), "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C"}


def host_git(lab: Lab, cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    ident = ["-c", "user.name=u", "-c", "user.email=u@example.com", "-c", "protocol.file.allow=always"]
    done = subprocess.run(["git", *ident, *args], cwd=cwd, env=host_env(lab), capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def fired(root: Path) -> list[str]:
    return sorted(os.fspath(p.relative_to(root)) for p in root.rglob("fired-*"))


def scratch(lab: Lab) -> Path:
    """A copy of the workspace outside it, for the controls (made after the defended run)."""
    dst = lab.root / "scratch"
    shutil.copytree(lab.ws, dst, symlinks=True)
    return dst


def agent(agent_for: Callable[..., Any], make_agent: Callable[..., Any], lab: Lab, **kw: Any) -> Any:
    """bash (SHELL) plus write and edit, default watchdog, headless."""
    data = bash_manifest(SHELL, **kw)
    data["tools"] = ["bash", "write", "edit"]
    return make_agent(lab.ws, data, engine_kwargs={"watchdog": "default"})


def put(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        os.chmod(path, mode)


FSMONITOR = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = touch fired-{name}\n"


async def run_ok(a: Any, command: str) -> dict[str, Any]:
    env = await a.call("bash", {"command": command})
    data = assert_ran(env)
    data["_metadata"] = env.to_dict()["metadata"]
    return data


# -- a `.git` file pointing at a planted repository -------------------------------------------


async def test_a_gitdir_pointer_at_depth_does_not_survive(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any]) -> None:
    lab = repo
    a = agent(agent_for, make_agent, lab)
    # The ingredients the write tool does let through: a config, objects/ and refs/, a pointer and a HEAD
    # kept under harmless names. The pieces that would finish the job are refused.
    for path, text in (("evil/config", FSMONITOR.format(name="gitfile") + "\tworktree = ../sub\n"),
                       ("evil/objects/info/keep", ""), ("evil/refs/heads/keep", ""),
                       ("notes/pointer", "gitdir: ../evil\n"), ("notes/HEAD", "ref: refs/heads/main\n")):
        assert (await a.call("write", {"path": path, "content": text})).ok, path
    assert_refused(await a.call("write", {"path": "sub/.git", "content": "gitdir: ../evil\n"}), "capability", "protected")
    assert_refused(await a.call("write", {"path": "evil/HEAD", "content": "ref: refs/heads/main\n"}), "capability", "protected")
    # bash finishes it in one call; the sweep takes back the pointer and the marker that completed the layout.
    data = await run_ok(a, "cp notes/pointer sub/.git && cp notes/HEAD evil/HEAD")
    assert data["exit_code"] == 0 and data["_metadata"]["protected_removed"] == 2
    assert not (lab.ws / "sub" / ".git").exists() and not (lab.ws / "evil" / "HEAD").exists()
    host_git(lab, lab.ws / "sub", "status")
    host_git(lab, lab.ws / "evil", "status")
    assert fired(lab.root) == []
    # Control: the same two files put in place by hand make the user's own `git status` fire.
    copy = scratch(lab)
    shutil.copy(copy / "notes" / "pointer", copy / "sub" / ".git")
    shutil.copy(copy / "notes" / "HEAD", copy / "evil" / "HEAD")
    host_git(lab, copy / "sub", "status", check=False)
    assert fired(lab.root) == ["scratch/sub/fired-gitfile"]


# -- commondir and config.worktree ------------------------------------------------------------


async def test_commondir_and_config_worktree_cannot_be_planted(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any]) -> None:
    lab = repo
    host_git(lab, lab.ws, "config", "extensions.worktreeConfig", "true")
    host_git(lab, lab.ws, "config", "core.repositoryformatversion", "1")
    a = agent(agent_for, make_agent, lab)
    put(lab.ws / "notes" / "wtcfg", FSMONITOR.format(name="worktree"))
    put(lab.ws / "notes" / "commondir", "../../evil\n")
    put(lab.ws / "notes" / "HEAD", "ref: refs/heads/main\n")
    put(lab.ws / "evil" / "config", "[core]\n\trepositoryformatversion = 1\n\tbare = false\n\tfsmonitor = touch fired-commondir\n[extensions]\n\tworktreeConfig = true\n")
    (lab.ws / "evil" / "objects").mkdir()
    (lab.ws / "evil" / "refs").mkdir()
    for path in (".git/config.worktree", ".git/commondir"):
        assert_refused(await a.call("write", {"path": path, "content": "x\n"}), "capability", "protected")
    # In the real repository both files are under a read-only .git.
    for command in ("cp notes/wtcfg .git/config.worktree", "cp notes/commondir .git/commondir"):
        data = await run_ok(a, command)
        assert data["exit_code"] != 0, command
    # A new git directory made of HEAD + commondir, anywhere: its markers are taken back.
    data = await run_ok(a, "mkdir -p sub/wt && cp notes/HEAD sub/wt/HEAD && cp notes/commondir sub/wt/commondir")
    assert data["exit_code"] == 0 and data["_metadata"]["protected_removed"] >= 2
    assert not (lab.ws / "sub" / "wt" / "HEAD").exists() and not (lab.ws / "sub" / "wt" / "commondir").exists()
    put(lab.ws / "sub" / "wt" / "config.worktree", "[core]\n\tworktree = .\n")  # even with the user's help
    host_git(lab, lab.ws, "status")
    host_git(lab, lab.ws / "sub" / "wt", "status")
    assert not (lab.ws / ".git" / "config.worktree").exists() and not (lab.ws / ".git" / "commondir").exists()
    assert fired(lab.root) == []
    # Controls: put in place by hand, each fires on the user's `git status`.
    copy = scratch(lab)
    shutil.copy(copy / "notes" / "wtcfg", copy / ".git" / "config.worktree")
    host_git(lab, copy, "status", check=False)
    shutil.copy(copy / "notes" / "HEAD", copy / "sub" / "wt" / "HEAD")
    shutil.copy(copy / "notes" / "commondir", copy / "sub" / "wt" / "commondir")
    host_git(lab, copy / "sub" / "wt", "status", check=False)
    assert fired(lab.root) == ["scratch/fired-worktree", "scratch/sub/wt/fired-commondir"]


# -- bare layouts ----------------------------------------------------------------------------


@pytest.mark.parametrize("order", [("config", "objects/x", "refs/x", "HEAD"), ("HEAD", "config", "refs/x", "objects/x")])
async def test_the_write_tool_never_completes_a_bare_layout(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any], order: tuple[str, ...]) -> None:
    lab = repo
    a = agent(agent_for, make_agent, lab)
    texts = {"config": FSMONITOR.format(name="bare") + "\tworktree = ..\n", "HEAD": "ref: refs/heads/main\n"}
    *first, last = order
    for name in first:
        assert (await a.call("write", {"path": f"deep/er/b/{name}", "content": texts.get(name, "")})).ok, name
    assert_refused(await a.call("write", {"path": f"deep/er/b/{last}", "content": texts.get(last, "")}), "capability", "protected")
    # Neither in another spelling nor through edit of what is there.
    assert_refused(await a.call("write", {"path": f"deep/er/./b/{last}", "content": "x"}), "capability", "protected")
    host_git(lab, lab.ws / "deep" / "er" / "b", "status")
    assert fired(lab.root) == []
    # A plain `config` next to a lone `refs/` in an ordinary project stays writable.
    assert (await a.call("write", {"path": "proj/refs/README", "content": "x"})).ok
    assert (await a.call("write", {"path": "proj/config", "content": "x"})).ok
    assert (await a.call("write", {"path": "proj/objects/o.txt", "content": "x"})).ok


async def test_a_bare_layout_made_by_bash_is_undone(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any]) -> None:
    lab = repo
    a = agent(agent_for, make_agent, lab)
    put(lab.ws / "notes" / "config", FSMONITOR.format(name="bare") + "\tworktree = ..\n")
    put(lab.ws / "notes" / "HEAD", "ref: refs/heads/main\n")
    data = await run_ok(a, "mkdir -p x/y/b/objects x/y/b/refs && cp notes/config x/y/b/config && cp notes/HEAD x/y/b/HEAD")
    assert data["exit_code"] == 0 and data["_metadata"]["protected_removed"] >= 1
    host_git(lab, lab.ws / "x" / "y" / "b", "status")
    assert fired(lab.root) == []
    assert not any((lab.ws / "x" / "y" / "b" / m).exists() for m in ("HEAD", "objects", "refs"))  # a new directory: every marker
    assert (lab.ws / "x" / "y" / "b" / "config").exists()  # the rest stays, inert
    copy = scratch(lab)
    shutil.copy(copy / "notes" / "HEAD", copy / "x" / "y" / "b" / "HEAD")
    (copy / "x" / "y" / "b" / "objects").mkdir()
    (copy / "x" / "y" / "b" / "refs").mkdir()
    host_git(lab, copy / "x" / "y" / "b", "status", check=False)
    assert fired(lab.root) == ["scratch/x/y/fired-bare"]


# -- hook directories and included files the configuration names ----------------------------


HOOK = "#!/bin/sh\ntouch fired-hook\n"


@pytest.mark.parametrize("hooks", ["tools/hooks", ".githooks", "ci/hooks/"])
@pytest.mark.parametrize("exists", [True, False])
async def test_a_hooks_path_directory_stays_empty(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any], hooks: str, exists: bool) -> None:
    lab = repo
    host_git(lab, lab.ws, "config", "core.hooksPath", hooks)
    hdir = lab.ws / hooks
    if exists:
        hdir.mkdir(parents=True)
    put(lab.ws / "notes" / "hook", HOOK, 0o755)
    a = agent(agent_for, make_agent, lab)
    assert_refused(await a.call("write", {"path": f"{hooks.rstrip('/')}/pre-commit", "content": HOOK}), "capability", "protected")
    await run_ok(a, f"mkdir -p {hooks}")
    await run_ok(a, f"cp notes/hook {hooks.rstrip('/')}/pre-commit")
    assert not (hdir / "pre-commit").exists()
    assert hdir.exists() == exists  # a missing one is not even created
    host_git(lab, lab.ws, "commit", "-q", "--allow-empty", "-m", "two")
    assert fired(lab.root) == []
    copy = scratch(lab)
    put(copy / hooks / "pre-commit", HOOK, 0o755)
    host_git(lab, copy, "commit", "-q", "--allow-empty", "-m", "three", check=False)
    assert fired(lab.root) == ["scratch/fired-hook"]


async def test_a_hooks_path_directory_granted_as_a_writable_root_stays_read_only(repo: Lab, make_agent: Callable[..., Any]) -> None:
    """`fs.write` on exactly the directory `core.hooksPath` names: the sandbox cannot mount a read-only
    copy over a writable root itself, so the root is not bound writable at all (a hook planted there
    ran at the user's next commit)."""
    lab = repo
    host_git(lab, lab.ws, "config", "core.hooksPath", "hooks")
    (lab.ws / "hooks").mkdir()
    put(lab.ws / "notes" / "hook", HOOK, 0o755)
    data = bash_manifest(SHELL, write=["{workspace}/hooks/**", "{workspace}/notes/**"])
    a = make_agent(lab.ws, data, engine_kwargs={"watchdog": "default"})
    assert (await run_ok(a, "cp notes/hook hooks/pre-commit"))["exit_code"] != 0
    assert (await run_ok(a, "touch notes/still-writable"))["exit_code"] == 0
    assert list((lab.ws / "hooks").iterdir()) == []
    host_git(lab, lab.ws, "commit", "-q", "--allow-empty", "-m", "two")
    assert fired(lab.root) == []


async def test_an_included_configuration_file_cannot_be_created(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any]) -> None:
    lab = repo
    with open(lab.ws / ".git" / "config", "a") as f:
        f.write('[include]\n\tpath = ../shared.cfg\n[includeIf "onbranch:main"]\n\tpath = ../more/branch.cfg\n')
    put(lab.ws / "notes" / "cfg", FSMONITOR.format(name="include"))
    a = agent(agent_for, make_agent, lab)
    for target in ("shared.cfg", "more/branch.cfg"):
        assert_refused(await a.call("write", {"path": target, "content": "x"}), "capability", "protected")
        await run_ok(a, f"cp notes/cfg {target}")
        assert not (lab.ws / target).exists()
    host_git(lab, lab.ws, "status")
    assert fired(lab.root) == []
    copy = scratch(lab)
    shutil.copy(copy / "notes" / "cfg", copy / "shared.cfg")
    host_git(lab, copy, "status", check=False)
    assert fired(lab.root) == ["scratch/fired-include"]


# -- -C, --git-dir, --work-tree ---------------------------------------------------------------


PLANT_AND_RUN = "mkdir -p sub/r/.git/objects sub/r/.git/refs && cp notes/HEAD sub/r/.git/HEAD && cp notes/config sub/r/.git/config && "


@pytest.mark.parametrize("git", ["git -C sub/r status", "git --git-dir=sub/r/.git status", "git --git-dir sub/r/.git log",
                                 "git --work-tree=sub/r status", "git -C sub status", "git status --git-dir=sub/r/.git"])
async def test_git_pointed_into_the_write_scope_is_asked(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any], git: str) -> None:
    lab = repo
    put(lab.ws / "notes" / "config", FSMONITOR.format(name="pointed"))
    put(lab.ws / "notes" / "HEAD", "ref: refs/heads/main\n")
    a = agent(agent_for, make_agent, lab)
    before = lab.snapshot()
    env = await a.call("bash", {"command": PLANT_AND_RUN + git})
    assert_refused(env, "ask", "headless")
    assert env.refusal is not None and env.refusal.get("asked_by") == "watchdog"
    assert lab.snapshot() == before and fired(lab.root) == []
    # Pointed at the workspace root itself (where git looks anyway) it is not asked.
    assert (await run_ok(a, "git -C . status"))["exit_code"] == 0


# -- a repository configuration that runs commands, inside the sandbox ----------------------


EVIL_CONFIG = """\
[core]
\tfsmonitor = touch fired-fsmonitor
\tpager = "touch fired-pager; cat"
\thooksPath = hooks-evil
\tsshCommand = touch fired-ssh
\taskPass = touch fired-askpass
[filter "evil"]
\tclean = "sh -c 'touch fired-clean; cat'"
\tsmudge = "sh -c 'touch fired-smudge; cat'"
\tprocess = touch fired-process
\trequired = true
[diff "evil"]
\ttextconv = "sh -c 'touch fired-textconv; cat \\"$1\\"' --"
[pager]
\tlog = "touch fired-pagerlog; cat"
[alias]
\tst = !touch fired-alias
[credential]
\thelper = !touch fired-credential
[gpg]
\tprogram = touch fired-gpg
[log]
\tshowSignature = true
"""
FILTER_CONFIG = """\
[filter "evil"]
\tclean = "sh -c 'touch fired-clean; cat'"
\tsmudge = "sh -c 'touch fired-smudge; cat'"
[diff "evil"]
\ttextconv = "sh -c 'touch fired-textconv; cat \\"$1\\"' --"
"""
EXTERNAL_CONFIG = """\
[diff]
\texternal = touch fired-external
[diff "ext"]
\tcommand = touch fired-diffcommand
"""


def plant_repo_config(lab: Lab, text: str, attributes: str) -> None:
    """Attributes committed, then the configuration appended (as a repository someone else prepared)."""
    put(lab.ws / ".gitattributes", attributes)
    (lab.ws / "hooks-evil").mkdir()
    put(lab.ws / "hooks-evil" / "post-checkout", "#!/bin/sh\ntouch fired-hook\n", 0o755)
    host_git(lab, lab.ws, "add", ".gitattributes")
    host_git(lab, lab.ws, "commit", "-q", "-m", "attrs")
    with open(lab.ws / ".git" / "config", "a") as f:
        f.write(text)
    put(lab.ws / "a.txt", "alpha changed\n")


@pytest.mark.parametrize(("config", "control"), [
    (EVIL_CONFIG, {"fsmonitor", "process", "alias"}),
    (FILTER_CONFIG, {"clean", "textconv"}),
], ids=["everything", "clean-and-textconv"])
async def test_a_repository_configuration_runs_nothing_in_the_sandbox(
    repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any], config: str, control: set[str]
) -> None:
    lab = repo
    plant_repo_config(lab, config, "*.txt filter=evil diff=evil\n")
    a = agent(agent_for, make_agent, lab, watchdog_enabled=False)  # the sandbox alone (the watchdog would ask for `git st`)
    for command in ("git status", "git diff", "git log -p", "git show", "git diff --stat", "git st"):
        data = await run_ok(a, command)
        assert fired(lab.root) == [], (command, data["output"])
        if command != "git st":
            assert data["exit_code"] == 0, (command, data["output"])
    assert "alpha changed" in (await run_ok(a, "git diff"))["output"]
    # Control: the user's own git on the host runs them.
    copy = scratch(lab)
    for args in (["status"], ["diff"], ["log", "-p", "-1"], ["st"]):
        host_git(lab, copy, *args, check=False)
    assert {f"scratch/fired-{c}" for c in control} <= set(fired(lab.root)), fired(lab.root)


async def test_an_external_diff_fails_instead_of_running(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any]) -> None:
    lab = repo
    plant_repo_config(lab, EXTERNAL_CONFIG, "*.txt diff=ext\n")
    a = agent(agent_for, make_agent, lab)
    data = await run_ok(a, "git diff")
    assert data["exit_code"] != 0 and fired(lab.root) == []
    assert (await run_ok(a, "git status"))["exit_code"] == 0
    copy = scratch(lab)
    host_git(lab, copy, "diff", check=False)
    assert fired(lab.root) == ["scratch/fired-diffcommand"]


async def test_a_submodule_planted_mid_command_is_not_entered(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any]) -> None:
    """`git status` recurses into a submodule whose directory has a `.git`; one made by the same command
    would bring an unknown configuration along. The submodule's `.git` is a placeholder until it exists."""
    lab = repo
    sub = lab.root / "subsrc"
    sub.mkdir()
    host_git(lab, sub, "init", "-q", "-b", "main")
    host_git(lab, sub, "commit", "-q", "--allow-empty", "-m", "s")
    host_git(lab, lab.ws, "submodule", "add", "-q", os.fspath(sub), "mod")
    host_git(lab, lab.ws, "commit", "-q", "-m", "mod")
    shutil.rmtree(lab.ws / "mod")
    (lab.ws / "mod").mkdir()  # as after a clone without --recurse-submodules
    put(lab.ws / "notes" / "config", FSMONITOR.format(name="submodule"))
    put(lab.ws / "notes" / "HEAD", "ref: refs/heads/main\n")
    a = agent(agent_for, make_agent, lab, watchdog_enabled=False)
    data = await run_ok(a, "mkdir -p mod/.git/objects mod/.git/refs && cp notes/HEAD mod/.git/HEAD && cp notes/config mod/.git/config && git status")
    assert data["exit_code"] != 0
    assert fired(lab.root) == [] and not (lab.ws / "mod" / ".git").exists()
    st = await run_ok(a, "git status")
    assert st["exit_code"] == 0, st["output"]


# -- protected names deeper than the old walk reached ---------------------------------------


async def test_a_repository_made_deep_down_is_removed(repo: Lab, agent_for: Callable[..., Any], make_agent: Callable[..., Any]) -> None:
    lab = repo
    deep = "d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11"
    put(lab.ws / "notes" / "config", FSMONITOR.format(name="deep"))
    put(lab.ws / "notes" / "HEAD", "ref: refs/heads/main\n")
    put(lab.ws / "notes" / "envrc", "touch fired-envrc\n")
    a = agent(agent_for, make_agent, lab)
    data = await run_ok(a, f"mkdir -p {deep}/.git/objects {deep}/.git/refs && cp notes/HEAD {deep}/.git/HEAD && cp notes/config {deep}/.git/config")
    assert data["exit_code"] == 0 and data["_metadata"]["protected_removed"] == 1
    data = await run_ok(a, f"cp notes/envrc {deep}/.envrc && cp -r {deep.split('/')[0]} moved")
    assert data["_metadata"]["protected_removed"] == 2  # the copy's .envrc as well
    assert not (lab.ws / deep / ".git").exists() and not (lab.ws / deep / ".envrc").exists()
    host_git(lab, lab.ws / deep, "status")
    assert fired(lab.root) == []
    assert (lab.ws / "moved" / "d2").is_dir()  # ordinary content the command made stays


# -- controls: ordinary git work succeeds -----------------------------------------------------


async def test_git_works_in_a_repository_a_worktree_and_a_submodule(repo: Lab, make_agent: Callable[..., Any]) -> None:
    lab = repo
    put(lab.ws / "a.txt", "alpha\nbeta\n")
    host_git(lab, lab.ws, "worktree", "add", "-q", os.fspath(lab.root / "wt"), "-b", "feature")
    sub = lab.root / "subsrc"
    sub.mkdir()
    put(sub / "s.txt", "s\n")
    host_git(lab, sub, "init", "-q", "-b", "main")
    host_git(lab, sub, "add", "s.txt")
    host_git(lab, sub, "commit", "-q", "-m", "s")
    host_git(lab, lab.ws, "submodule", "add", "-q", os.fspath(sub), "mod")
    put(lab.ws / "mod" / "s.txt", "s changed\n")
    put(lab.root / "wt" / "a.txt", "alpha in the worktree\n")
    shell = [*(arity("git", n) for n in (1, 2, 3))]
    # A worktree's or a submodule's repository lives in the main checkout's .git: the sandbox shows it
    # only when fs.read grants it.
    grants = {where: ("{workspace}/**", f"{lab.ws}/.git/**") for where in (lab.root / "wt", lab.ws / "mod")}
    for where, expect in ((lab.ws, "beta"), (lab.root / "wt", "in the worktree"), (lab.ws / "mod", "s changed")):
        read = grants.get(where, ("{workspace}/**",))
        a = make_agent(where, bash_manifest(shell, read=read), engine_kwargs={"watchdog": "default"})
        status = await run_ok(a, "git status")
        assert status["exit_code"] == 0, status["output"]
        diff = await run_ok(a, "git diff")
        assert diff["exit_code"] == 0 and expect in diff["output"], diff["output"]
        log = await run_ok(a, "git log --oneline")
        assert log["exit_code"] == 0 and log["output"].strip(), log["output"]
        assert log["_metadata"].get("protected_removed") is None
    top = make_agent(lab.ws, bash_manifest(shell), engine_kwargs={"watchdog": "default"})
    assert "mod" in (await run_ok(top, "git status"))["output"]  # the superproject sees the submodule's change


# -- every neutralised key, one at a time ------------------------------------------------------

# (id, configuration with {fire} for the planted program, attributes, sandbox command, host git arguments)
KEYS = [
    ("fsmonitor", "[core]\n\tfsmonitor = {fire}\n", "", "git status", ["status"]),
    ("filter-clean", '[filter "e"]\n\tclean = {fire}\n', "*.txt filter=e\n", "git diff", ["diff"]),
    ("filter-process", '[filter "e"]\n\tprocess = {fire}\n', "*.txt filter=e\n", "git diff", ["diff"]),
    ("textconv", '[diff "e"]\n\ttextconv = {fire}\n', "*.txt diff=e\n", "git log -p", ["log", "-p"]),
    ("diff-command", '[diff "e"]\n\tcommand = {fire}\n', "*.txt diff=e\n", "git diff", ["diff"]),
    ("diff-external", "[diff]\n\texternal = {fire}\n", "", "git diff", ["diff"]),
    ("alias", "[alias]\n\tst = !{fire}\n", "", "git st", ["st"]),
    ("included-alias", "[include]\n\tpath = ../notes/inc.cfg\n", "", "git st", ["st"]),
    ("credential-helper", "[credential]\n\thelper = !{fire}\n", "", "git credential fill < notes/req", ["credential", "fill"]),
    ("credential-url-helper", '[credential "https://example.com"]\n\thelper = !{fire}\n', "", "git credential fill < notes/req", ["credential", "fill"]),
    ("askpass", "[core]\n\taskPass = {fire}\n", "", "git credential fill < notes/req", ["credential", "fill"]),
    ("ssh-command", "[core]\n\tsshCommand = {fire}\n", "", "git ls-remote ssh://example.invalid/x", ["ls-remote", "ssh://example.invalid/x"]),
    ("git-proxy", "[core]\n\tgitProxy = {fire}\n", "", "git ls-remote git://example.invalid/x", ["ls-remote", "git://example.invalid/x"]),
    ("upload-pack", '[remote "o"]\n\turl = {ws}\n\tuploadpack = {fire}\n', "", "git ls-remote o", ["ls-remote", "o"]),
    ("receive-pack", '[remote "o"]\n\turl = {ws}\n\treceivepack = {fire}\n', "", "git push o main", ["push", "o", "main"]),
    ("ext-transport", '[remote "x"]\n\turl = ext::{fire} x\n[protocol "ext"]\n\tallow = always\n', "", "git ls-remote x", ["ls-remote", "x"]),
    ("gpg-program", "[gpg]\n\tprogram = {fire}\n[log]\n\tshowSignature = true\n", "", "git log -1", ["log", "-1"]),
    ("difftool", '[difftool "e"]\n\tcmd = {fire}\n', "", "git difftool --no-prompt --tool=e", ["difftool", "--no-prompt", "--tool=e"]),
]


def sign_head(lab: Lab) -> None:
    """Give HEAD a (fake) signature, so that `log.showSignature` hands it to `gpg.program`."""
    raw = host_git(lab, lab.ws, "cat-file", "commit", "HEAD").stdout
    head, _, body = raw.partition("\n\n")
    sig = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----"
    obj = f"{head}\n{sig}\n\n{body}"
    sha = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], input=obj, cwd=lab.ws, env=host_env(lab),
                         capture_output=True, text=True, check=True).stdout.strip()
    host_git(lab, lab.ws, "update-ref", "refs/heads/main", sha)


@pytest.mark.parametrize(("name", "config", "attributes", "command", "host"), KEYS, ids=[k[0] for k in KEYS])
async def test_each_key_that_runs_a_program_is_neutralised(
    repo: Lab, make_agent: Callable[..., Any], name: str, config: str, attributes: str, command: str, host: list[str]
) -> None:
    lab = repo
    fire = lab.ws / "notes" / f"fire-{name}"
    put(fire, f"#!/bin/sh\ntouch {lab.ws}/fired-{name}\nexec cat \"$@\"\n", 0o755)
    put(lab.ws / "notes" / "req", "protocol=https\nhost=example.com\n\n")
    put(lab.ws / "notes" / "inc.cfg", f"[alias]\n\tst = !{fire}\n")
    if attributes:
        put(lab.ws / ".gitattributes", attributes)
        host_git(lab, lab.ws, "add", ".gitattributes")
        host_git(lab, lab.ws, "commit", "-q", "-m", "attributes")
    if name == "gpg-program":
        sign_head(lab)
    with open(lab.ws / ".git" / "config", "a") as f:
        f.write(config.format(fire=fire, ws=lab.ws))
    put(lab.ws / "a.txt", "alpha changed\n")
    shell = [*(arity("git", n) for n in (1, 2, 3, 4))]
    a = make_agent(lab.ws, bash_manifest(shell, watchdog_enabled=False))  # the sandbox alone
    await run_ok(a, command)
    assert fired(lab.root) == [], name
    # Control: the user's git on the host runs the planted program.
    stdin = (lab.ws / "notes" / "req").read_text() if "credential" in host else None
    subprocess.run(["git", *host], cwd=lab.ws, env=host_env(lab), input=stdin, capture_output=True, text=True, timeout=60)
    assert fired(lab.root) == [f"ws/fired-{name}"], name


async def test_without_a_sandbox_an_empty_git_directory_is_not_mistaken_for_a_placeholder(lab: Lab, make_agent: Callable[..., Any]) -> None:
    """With the environment `none` nothing is mounted, so a `.git` the command makes where bwrap would put a
    placeholder is the command's own: removed, and not there to be filled by the next call."""
    shutil.rmtree(lab.ws / ".git")
    a = make_agent(lab.ws, bash_manifest([arity("mkdir", 1)], environment="none"))
    data = await run_ok(a, "mkdir .git")
    assert data["exit_code"] == 0 and data["_metadata"]["protected_removed"] == 1
    assert not (lab.ws / ".git").exists()
