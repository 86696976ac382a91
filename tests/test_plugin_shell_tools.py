"""A plugin tool that runs commands gets the sandbox `bash` gets, because of what it declares, not its name.

The tool here runs its command line through `runtime.proc.run_sandboxed`, the
runtime surface the architecture promises tools. Each test checks the side
effect on the real file system after a real bwrap run: what a command must
not see, must not change, or must not leave behind.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore.access import ShellAccess
from agentcore.api import Engine, Tool, ToolResult, build_catalog, compile_manifest

SECRET = "plugin-secret-7f3a"


class Runner(Tool):
    id = "runner"
    description = "Runs one command line in the sandbox."
    parameters = {"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"], "additionalProperties": False}
    kind = "execute"
    uses = ("shell.run", "fs.read", "fs.write")
    needs_environment = True

    def accesses(self, args: dict[str, Any], ctx: Any) -> list[Any]:
        return [ShellAccess("line", args["line"])]

    def command_argv(self, args: dict[str, Any]) -> list[str]:
        return ["/bin/bash", "--noprofile", "--norc", "-c", args["line"]]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        spool = runtime.byte_spool(65536)
        try:
            outcome = await runtime.proc.run_sandboxed(self.command_argv(args), timeout_s=30, sink=runtime.output_sink(spool))
        finally:
            spool.close()
        return ToolResult(data={"output": spool.head_text(), "exit_code": outcome.exit_code, "removed": outcome.protected_removed})


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "ws"
    (root / "secret").mkdir(parents=True)
    (root / "secret" / "key.txt").write_text(SECRET + "\n")
    (root / "keys").mkdir()
    (root / "keys" / "server.dat").write_text(SECRET + "\n")
    (root / "locked").mkdir()
    (root / "a.txt").write_text("a\n")
    return root


def _engine(ws: Path, rules: list[dict[str, str]], shell: list[dict[str, Any]] | None = None) -> Engine:
    catalog = build_catalog(plugins=False, extra=[Runner()])
    if shell is None:
        shell = [{"cmd": c, "args": [{"wildcard": True}]} for c in ("cat", "mkdir", "touch")]
        shell += [{"cmd": c, "args": [{"wildcard": True}, {"wildcard": True}]} for c in ("cat", "cp")]
        shell += [{"cmd": "mkdir", "args": ["-p", {"wildcard": True}]}]
    m = compile_manifest({"name": "plugin", "tools": ["runner"],
                          "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}, "shell": shell},
                          "rules": [*rules, {"permission": "*", "pattern": "*", "action": "allow"}]}, workspace=ws, catalog=catalog)
    return Engine(m, catalog=catalog)


def _call(engine: Engine, line: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        with engine.open_session(headless=True) as session:
            return (await engine.call(session, "runner", {"line": line})).to_dict()

    return anyio.run(go)


def test_the_manifest_knows_which_tools_run_commands(ws: Path) -> None:
    assert _engine(ws, []).manifest.shell_tools == ("runner",)


def test_a_read_deny_written_for_the_plugin_hides_the_path_in_its_sandbox(ws: Path) -> None:
    engine = _engine(ws, [{"permission": "runner", "pattern": "{workspace}/secret/**", "action": "deny"},
                          {"permission": "runner", "pattern": "**/*.dat", "action": "deny"}])
    # Neither command line matches the deny as text (the rules would refuse it first): only the sandbox stands between.
    for line in ("cat secret/key.txt", "cat keys/server.dat a.txt"):
        env = _call(engine, line)
        assert env["type"] == "output", env
        assert SECRET not in env["data"]["output"]  # a hidden file reads as empty, a hidden directory as missing


def test_a_write_deny_written_for_the_plugin_keeps_the_path_read_only(ws: Path) -> None:
    engine = _engine(ws, [{"permission": "runner", "pattern": "{workspace}/locked/**", "action": "deny"}])
    env = _call(engine, "cp a.txt locked/b.txt")
    assert env["type"] == "output" and env["data"]["exit_code"] != 0
    assert not (ws / "locked" / "b.txt").exists()
    assert _call(engine, "cp a.txt c.txt")["data"]["exit_code"] == 0  # elsewhere the workspace stays writable
    assert (ws / "c.txt").read_text() == "a\n"


@pytest.mark.parametrize("line", ["mkdir -p sub/.git/hooks", "touch sub/.envrc"])
def test_protected_entries_the_plugins_command_creates_at_depth_do_not_stay(ws: Path, line: str) -> None:
    (ws / "sub").mkdir()
    env = _call(_engine(ws, []), line)
    assert env["type"] == "output", env
    assert not (ws / "sub" / ".git").exists() and not (ws / "sub" / ".envrc").exists()
    assert env["data"]["exit_code"] != 0 or env["data"]["removed"] >= 1


def test_sandboxed_git_ignores_what_a_repository_configures_for_the_plugin_too(ws: Path) -> None:
    """The per-call git overrides (ENV-14) reach a plugin's command: a repository's fsmonitor never runs."""
    repo = ws / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f.txt").write_text("x\n")
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", f"touch {ws}/pwned; false"], check=True)
    env = _call(_engine(repo, [], shell=[{"cmd": "git", "args": ["status"]}]), "git status")
    assert env["type"] == "output", env
    assert env["data"]["exit_code"] == 0
    assert not (ws / "pwned").exists()
