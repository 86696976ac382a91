"""`bash` process handling through the real pipeline: timeouts, abort, truncation, exit codes,
the choice of environment (class 7: the sandbox being unavailable must fail closed; config and
trust), and `agentcore explain` showing the bwrap command line.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore.api import Engine, load_manifest, load_project_rules
from agentcore.asking import ScriptedBroker
from agentcore.envelope import Envelope
from agentcore.watchdog.default import default_watchdog_for
from test_bash_support import (
    ALLOW_ALL,
    Lab,
    allow,
    arity,
    assert_os_refused,
    assert_ran,
    assert_refused,
    bash_manifest,
    live_pids_with,
    wait_for,
)

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

AGENTCORE = Path(sys.executable).parent / "agentcore"


def unique_seconds() -> str:
    """A sleep duration nobody else on the machine uses: it marks our processes in /proc."""
    return f"{300 + secrets.randbelow(600)}.{secrets.randbelow(10**6):06d}"


PROC_SHELL = [arity("sleep", 1), arity("echo", 1), allow("cat"), arity("touch", 1), arity("seq", 2), allow("false"), allow("true"),
              arity("cat", 1), arity("exit", 1), arity("set", 2)]


# -- timeouts and abort --------------------------------------------------------------


async def test_timeout_ms_kills_the_whole_process_group_grandchildren_included(agent_for: Callable[..., Any]) -> None:
    agent = agent_for(PROC_SHELL)
    mark = unique_seconds()
    out: list[Envelope] = []
    seen: list[int] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            # The subshell forks; `sleep` is its child, i.e. a grandchild of the shell the tool starts.
            out.append(await agent.call("bash", {"command": f"(sleep {mark}; echo done) | cat", "timeout_ms": 1500}))

        tg.start_soon(run)
        await wait_for(lambda: bool(live_pids_with(mark)), what="the sandboxed sleep to start")
        seen.extend(live_pids_with(mark))
    [env] = out
    data = assert_ran(env)
    assert data["timed_out"] is True and data["exit_code"] != 0
    assert "done" not in data["output"]
    assert seen and live_pids_with(mark) == []
    assert env.duration_ms < 10_000


async def test_session_abort_ends_a_running_call(agent_for: Callable[..., Any], lab: Lab) -> None:
    agent = agent_for(PROC_SHELL)
    mark = unique_seconds()
    out: list[Envelope] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            out.append(await agent.call("bash", {"command": f"touch started.flag && sleep {mark}"}))

        tg.start_soon(run)
        await wait_for(lambda: (lab.ws / "started.flag").exists() and bool(live_pids_with(mark)), what="the call to be running")
        assert agent.session.busy
        agent.session.abort()
    [env] = out
    wire = env.to_dict()
    assert env.type == "error" and wire["metadata"]["error_code"] == "aborted", wire
    assert live_pids_with(mark) == []
    assert not agent.session.busy
    # The session stays usable after an abort.
    assert assert_ran(await agent.call("bash", {"command": "echo again"}))["output"] == "again\n"


async def test_default_timeout_comes_from_the_manifest_limits(make_agent: Callable[..., Any], lab: Lab) -> None:
    data = bash_manifest(PROC_SHELL, limits={"bash_timeout_s": 0.5, "bash_max_timeout_s": 1.0})
    agent = make_agent(lab.ws, data, engine_kwargs={"watchdog": "default"})
    env = await agent.call("bash", {"command": f"sleep {unique_seconds()}"})
    assert assert_ran(env)["timed_out"] is True
    # timeout_ms cannot exceed bash_max_timeout_s
    env = await agent.call("bash", {"command": f"sleep {unique_seconds()}", "timeout_ms": 3_600_000})
    assert assert_ran(env)["timed_out"] is True and env.duration_ms < 5_000


# -- output and exit codes ------------------------------------------------------------


async def test_output_over_the_limit_is_truncated_with_everything_in_the_sidecar(agent_for: Callable[..., Any]) -> None:
    agent = agent_for(PROC_SHELL)
    full = "".join(f"{i}\n" for i in range(1, 60001)).encode()
    assert len(full) > 200 * 1024
    env = await agent.call("bash", {"command": "seq 1 60000"})
    data = assert_ran(env)
    assert env.truncated and data["exit_code"] == 0
    assert data["head"] == data["output"]
    head = data["output"].encode()
    assert len(head) == 200 * 1024 and full.startswith(head)
    assert env.output_path is not None and Path(env.output_path).read_bytes() == full
    assert Path(env.output_path).parent == agent.session.workdir
    wire = env.to_dict()
    assert wire["metadata"]["truncated"] is True and wire["metadata"]["output_path"] == env.output_path
    # Under the limit: no head, no sidecar.
    small = await agent.call("bash", {"command": "seq 1 1000"})
    assert not small.truncated and small.output_path is None and "head" not in small.data


@pytest.mark.parametrize(
    ("command", "code"),
    [("true", 0), ("false", 1), ("cat missing.txt", 1), ("exit 42", 42), ("false | true", 0), ("set -o pipefail; false | true", 1)],
)
async def test_exit_codes_are_reported(agent_for: Callable[..., Any], command: str, code: int) -> None:
    data = assert_ran(await agent_for(PROC_SHELL).call("bash", {"command": command}))
    assert data["exit_code"] == code and data["timed_out"] is False


async def test_stderr_is_merged_and_stdin_is_empty(agent_for: Callable[..., Any]) -> None:
    agent = agent_for(PROC_SHELL)
    data = assert_ran(await agent.call("bash", {"command": "cat missing.txt"}))
    assert "missing.txt: No such file or directory" in data["output"]
    data = assert_ran(await agent.call("bash", {"command": "cat"}))
    assert data == {"output": "", "exit_code": 0, "timed_out": False}


# -- which environment runs the command (class 7: config and trust) ----------------------


def _engine(write_manifest: Callable[..., Path], lab: Lab, data: dict[str, Any], **kw: Any) -> Engine:
    m = load_manifest(write_manifest(data), workspace=lab.ws)
    return Engine(m, watchdog=default_watchdog_for(m), **kw)


async def test_bwrap_is_the_default_and_none_only_when_chosen(
    write_manifest: Callable[..., Path], open_session: Callable[..., Any], lab: Lab
) -> None:
    shell = [arity("touch", 1)]
    command = {"command": "touch ../outside/S"}
    default = _engine(write_manifest, lab, bash_manifest(shell, environment=None))
    assert default.environment_name == "bwrap"
    assert "No such file or directory" in assert_os_refused(await default.call(open_session(default), "bash", command))
    assert not (lab.outside / "S").exists()
    # Explicit opt-out, by the host or by the manifest: nothing confines the command any more.
    for chosen in (
        _engine(write_manifest, lab, bash_manifest(shell), environment="none"),
        _engine(write_manifest, lab, bash_manifest(shell, environment="none")),
    ):
        assert chosen.environment_name == "none"
        assert assert_ran(await chosen.call(open_session(chosen), "bash", command))["exit_code"] == 0
        assert (lab.outside / "S").exists()
        (lab.outside / "S").unlink()


async def test_unknown_environment_fails_closed(write_manifest: Callable[..., Path], open_session: Callable[..., Any], lab: Lab) -> None:
    eng = _engine(write_manifest, lab, bash_manifest([arity("touch", 1)]), environment="no-such-sandbox")
    before = lab.snapshot()
    assert_refused(await eng.call(open_session(eng), "bash", {"command": "touch S"}), "environment", "unavailable")
    assert lab.snapshot() == before
    report = await eng.explain(open_session(eng), "bash", {"command": "touch S"})
    assert report["result"]["refused"] and report["result"]["refusal"]["layer"] == "environment"


async def test_a_policy_bwrap_cannot_enforce_fails_closed(agent_for: Callable[..., Any], lab: Lab) -> None:
    # .git is a symlink inside the write root: .git/hooks cannot be kept read-only, so nothing may run.
    (lab.ws / ".git").rename(lab.ws / "realgit")
    (lab.ws / ".git").symlink_to("realgit")
    before = lab.snapshot()
    env = await agent_for([arity("touch", 1)]).call("bash", {"command": "touch S"})
    assert_refused(env, "environment", "unavailable")
    assert lab.snapshot() == before


@pytest.mark.parametrize("extra", [{"sandbox": False}, {"dangerouslyDisableSandbox": True}, {"environment": "none"}, {"env": {"X": "1"}}])
async def test_the_model_cannot_pass_flags_that_disable_the_sandbox(agent_for: Callable[..., Any], lab: Lab, extra: dict[str, Any]) -> None:
    before = lab.snapshot()
    env = await agent_for([arity("touch", 1)]).call("bash", {"command": "touch S", **extra})
    assert_refused(env, "schema", "invalid_arguments")
    assert lab.snapshot() == before


async def test_the_model_cannot_start_its_own_sandbox_or_namespace(agent_for: Callable[..., Any], lab: Lab) -> None:
    for command, shell in (
        ("bwrap --bind / / touch S", [arity("bwrap", 5)]),
        ("unshare -r touch S", [arity("unshare", 3)]),
        ("nsenter -t 1 -m touch S", [arity("nsenter", 5)]),
    ):
        before = lab.snapshot()
        assert_refused(await agent_for(shell).call("bash", {"command": command}), "watchdog", "code_execution_wrapper")
        assert lab.snapshot() == before


async def test_project_and_session_rules_cannot_override_a_manifest_deny(
    write_manifest: Callable[..., Path], open_session: Callable[..., Any], lab: Lab
) -> None:
    rules = [*ALLOW_ALL, {"permission": "bash", "pattern": "touch S", "action": "deny"}]
    m = load_manifest(write_manifest(bash_manifest([arity("touch", 1)], rules=rules)), workspace=lab.ws)
    # The project file sits in the workspace, i.e. the repository tries to widen the manifest.
    project_file = write_manifest({"rules": [{"permission": "bash", "pattern": "touch S", "action": "allow"}]}, directory=lab.ws, name="rules")
    project = load_project_rules(project_file, m)
    eng = Engine(m, watchdog=default_watchdog_for(m), project_rules=project)
    ses = open_session(eng)
    ses.add_session_rule("bash", "touch S", "allow")
    ses.add_session_rule("*", "*", "allow")
    before = lab.snapshot()
    env = await eng.call(ses, "bash", {"command": "touch S"})
    assert_refused(env, "permission", "denied")
    assert env.refusal is not None and env.refusal["scope"] == "manifest"
    assert lab.snapshot() == before


async def test_the_runtime_configuration_inside_the_workspace_cannot_be_rewritten(
    engine: Callable[..., Engine], open_session: Callable[..., Any], lab: Lab
) -> None:
    eng = engine(lab.ws, bash_manifest([arity("echo", 1), arity("tee", 1), arity("touch", 1)]), watchdog="default", manifest_dir=lab.ws, fmt="yaml")
    [source] = [p for p in lab.ws.iterdir() if p.suffix == ".yaml"]
    ses = open_session(eng)
    before = lab.snapshot()
    assert_refused(await eng.call(ses, "bash", {"command": f"echo 'tools: []' > {source.name}"}), "capability", "protected")
    assert lab.snapshot() == before
    # Through argv the engine cannot see the path; the sandbox keeps the file read-only.
    assert "Read-only file system" in assert_os_refused(await eng.call(ses, "bash", {"command": f"tee {source.name}"}))
    assert lab.snapshot() == before


async def test_always_answers_do_not_widen(engine: Callable[..., Engine], open_session: Callable[..., Any], lab: Lab) -> None:
    broker = ScriptedBroker(["allow_always", "reject_once"])
    eng = engine(lab.ws, bash_manifest([arity("touch", 1)], rules=()), watchdog="default", broker=broker)
    ses = open_session(eng, headless=False)
    assert assert_ran(await eng.call(ses, "bash", {"command": "touch ok.txt"}))["exit_code"] == 0
    before = lab.snapshot()
    # Approving `touch ok.txt` for good does not approve `touch S` (nor `touch ok.txt*`-like prefixes).
    assert_refused(await eng.call(ses, "bash", {"command": "touch S"}), "ask", "rejected")
    assert lab.snapshot() == before
    assert len(broker.requests) == 2
    assert assert_ran(await eng.call(ses, "bash", {"command": "touch ok.txt"}))["exit_code"] == 0
    assert len(broker.requests) == 2  # the exact call is remembered, and only it
    assert_refused(await eng.call(ses, "bash", {"command": "touch ok.txt.bak"}), "ask", "cancelled")
    assert len(broker.requests) == 3 and not (lab.ws / "ok.txt.bak").exists()


# -- explain ----------------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.fspath(AGENTCORE), *args], capture_output=True, text=True, timeout=60, cwd=cwd, env={**os.environ, "NO_COLOR": "1"})


def test_explain_prints_the_bwrap_command_line_without_running_anything(write_manifest: Callable[..., Path], lab: Lab) -> None:
    manifest = write_manifest(bash_manifest([arity("touch", 1)]))
    args = ["explain", "--headless", "--manifest", os.fspath(manifest), "--workspace", os.fspath(lab.ws), "bash"]
    before = lab.snapshot()
    done = _cli(*args, json.dumps({"command": "touch S"}), cwd=lab.root)
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stdout.splitlines() if "command line:" in ln]
    assert "bwrap " in line and "--unshare-all" in line and "--die-with-parent" in line
    assert "--ro-bind / /" not in line and "--ro-bind /usr /usr" in line and "--remount-ro /" in line  # view "minimal"
    assert f"--bind {lab.ws} {lab.ws}" in line and "--clearenv" in line
    assert "--setenv PATH /usr/local/bin:/usr/bin:/bin" in line  # shown as it will run (nothing secret-looking)
    assert "--seccomp fd:seccomp-filter" in line  # the descriptor number is only known per run
    assert line.rstrip().endswith("-- /bin/bash --noprofile --norc -c 'touch S'")  # shell-quoted
    assert "result: would run" in done.stdout
    assert lab.snapshot() == before
    # A refused call names its layer and never reaches the environment.
    done = _cli(*args, json.dumps({"command": "touch $(id)"}), cwd=lab.root)
    assert done.returncode == 0, done.stderr
    assert "command line:" not in done.stdout and "result: refused" in done.stdout
    assert lab.snapshot() == before


def test_explain_shows_the_per_call_masks(write_manifest: Callable[..., Path], lab: Lab) -> None:
    """The command line explain prints carries what the per-call walk adds: wildcard-denied files, nested repositories."""
    (lab.ws / "keys").mkdir()
    (lab.ws / "keys" / "a.pem").write_text("k")
    (lab.ws / "sub" / ".git").mkdir(parents=True)
    rules = [*ALLOW_ALL, {"permission": "read", "pattern": "**/*.pem", "action": "deny"}]
    manifest = write_manifest(bash_manifest([arity("cat", 1)], rules=rules))
    args = ["explain", "--headless", "--manifest", os.fspath(manifest), "--workspace", os.fspath(lab.ws), "bash"]
    done = _cli(*args, json.dumps({"command": "cat keys/a.pem"}), cwd=lab.root)
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stdout.splitlines() if "command line:" in ln]
    words = line.split()
    assert words[words.index(str(lab.ws / "keys" / "a.pem")) - 2] == "--ro-bind"  # masked by an empty file
    nested = str(lab.ws / "sub" / ".git")
    assert words[words.index(nested) - 1] == "--ro-bind"  # a nested repository is read-only as a whole



def test_explain_json_shows_the_network_mode(write_manifest: Callable[..., Path], lab: Lab) -> None:
    manifest = write_manifest(bash_manifest([arity("curl", 2)], hosts=["127.0.0.1:9"]))
    done = _cli(
        "explain", "--json", "--headless", "--manifest", os.fspath(manifest), "--workspace", os.fspath(lab.ws),
        "bash", json.dumps({"command": "curl -s http://127.0.0.1:9/"}), cwd=lab.root,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [envl] = [layer for layer in report["layers"] if layer["layer"] == "environment"]
    assert envl["decision"] == "allow" and envl["environment"] == "bwrap"
    assert "127.0.0.1:9" in envl["network"]
    assert envl["command_line"][-6:] == ["--", "/bin/bash", "--noprofile", "--norc", "-c", "curl -s http://127.0.0.1:9/"]
    assert "--unshare-all" in envl["command_line"]
