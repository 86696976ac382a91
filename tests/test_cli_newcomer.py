"""The command line explains itself: versions, help, tools, schemas, arguments of any size, no tracebacks.

Every test runs the real `agentcore` console script as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli_support import cli_project

EXE = str(Path(sys.executable).parent / "agentcore")
ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def proj(tmp_path: Path) -> tuple[Path, Path]:
    return cli_project(tmp_path, "read")


def _parsers(parser: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    import argparse

    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _parsers(sub, path + (name,))
    return out


def test_version_and_help_on_every_argument() -> None:
    import argparse

    from agentcore import __version__
    from agentcore.cli.main import build_parser

    assert run("--version").stdout.strip() == f"agentcore {__version__}"
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            if not action.help:
                missing.append(" ".join(path) + " " + (action.option_strings[0] if action.option_strings else action.dest))
    assert missing == []


def test_tools_lists_every_tool_with_its_kind_and_parameters() -> None:
    from agentcore.api import LOCKED_IDS

    tools = json.loads(run("tools", "--json").stdout)
    by_id = {t["id"]: t for t in tools}
    assert set(LOCKED_IDS) <= set(by_id)
    assert by_id["bash"]["kind"] == "execute" and by_id["bash"]["parameters"]["required"] == ["command"]
    text = run("tools").stdout
    assert "read         kind=read" in text and "parameters: path: string" in text


def test_manifest_schema_is_a_json_schema_that_editors_can_use() -> None:
    from jsonschema import Draft202012Validator

    schema = json.loads(run("manifest", "schema").stdout)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    example = yaml.safe_load((ROOT / "examples" / "manifest.yaml").read_text())
    assert list(validator.iter_errors(example)) == []
    assert list(validator.iter_errors({"name": "x", "requries": {}}))  # a misspelt key is caught


def test_arguments_of_any_size_from_a_file_or_stdin(proj: tuple[Path, Path], tmp_path: Path) -> None:
    ws, m = proj
    content = "x" * 140_000  # on the command line this is "Argument list too long" on Linux
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"path": "src/big.txt", "content": content}))
    via_file = run("call", "--manifest", str(m), "--workspace", str(ws), "--headless", "write", f"@{args_file}")
    env = json.loads(via_file.stdout)
    assert env["metadata"]["refusal"]["code"] == "headless"  # the arguments arrived and were judged
    via_stdin = run("call", "--manifest", str(m), "--workspace", str(ws), "read", "-", stdin=json.dumps({"path": "src/nope.txt"}))
    assert json.loads(via_stdin.stdout)["metadata"]["error_code"] == "not_found"
    missing = run("call", "--manifest", str(m), "--workspace", str(ws), "read", "@/nonexistent/args.json")
    assert missing.returncode == 2 and "ARGS_JSON file" in missing.stderr


def test_deeply_nested_arguments_are_a_usage_error_not_a_traceback(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    deep = "[" * 100_000 + "]" * 100_000
    r = run("call", "--manifest", str(m), "--workspace", str(ws), "read", "-", stdin=deep)
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr


def test_an_internal_error_is_one_line_and_debug_shows_the_traceback() -> None:
    code = ("import sys, agentcore.cli.main as m\n"
            "def boom(args): raise RuntimeError('kaboom')\n"
            "m.cmd_tools = boom\n"
            "sys.exit(m.main(sys.argv[1:]))\n")
    plain = subprocess.run([sys.executable, "-c", code, "tools"], capture_output=True, text=True)
    assert plain.returncode == 70
    assert plain.stderr.strip() == "agentcore: internal error (RuntimeError); rerun with --debug for the traceback"
    debug = subprocess.run([sys.executable, "-c", code, "--debug", "tools"], capture_output=True, text=True)
    assert debug.returncode == 70 and "Traceback" in debug.stderr and "kaboom" in debug.stderr


def test_the_exit_spares_the_last_collection_and_still_runs_exit_handlers() -> None:
    """Issue 14 item 9: the interpreter's collection at exit walked every imported object (16 ms of a 150 ms
    `call`). The console script freezes them first; exit handlers run and the output arrives whole."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: sys.stderr.write(f'frozen={gc.get_freeze_count()}\\n'))\n"
            "sys.argv = ['agentcore', 'tools', '--json']\n"
            "from agentcore.cli.main import entry\n"
            "entry()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == 13
    frozen = int(r.stderr.strip().rpartition("frozen=")[2])
    assert frozen > 10_000  # every object the imports made, not a handful

def _leaf_commands() -> set[tuple[str, ...]]:
    import argparse

    from agentcore.cli.main import build_parser

    return {path for path, p in _parsers(build_parser()) if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A session recorded by the README's main command (scripted model), in a database of its own."""
    tmp = tmp_path_factory.mktemp("recorded")
    ws = tmp / "workspace"
    import shutil

    shutil.copytree(ROOT / "examples" / "workspace", ws)
    db = tmp / "sessions.db"
    manifest = str(ROOT / "examples" / "manifest.yaml")
    r = run("run", "--manifest", manifest, "--workspace", str(ws), "--db", str(db), "List the open TODOs and write them to notes/todo-summary.md")
    assert r.returncode == 0, r.stderr
    sid = json.loads(run("sessions", "list", "--db", str(db), "--json").stdout)[0]["id"]
    tasks = tmp / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "prompt": "List the open TODOs and write them to notes/todo-summary.md",
                                 "workspace_template": str(ROOT / "examples" / "workspace")}) + "\n")
    return {"db": str(db), "session": sid, "manifest": manifest, "ws": str(ws), "tasks": str(tasks), "tmp": str(tmp)}


def _every_command(recorded: dict[str, str], proj: tuple[Path, Path]) -> dict[tuple[str, ...], list[str]]:
    ws, m = str(proj[0]), str(proj[1])
    db, sid, manifest = recorded["db"], recorded["session"], recorded["manifest"]
    return {
        ("manifest", "check"): ["manifest", "check", m, "--workspace", ws, "--json"],
        ("manifest", "schema"): ["manifest", "schema"],
        ("manifest", "reference"): ["manifest", "reference"],
        ("tools",): ["tools", "--json"],
        ("call",): ["call", "--manifest", m, "--workspace", ws, "--headless", "read", '{"path": "src"}'],
        ("explain",): ["explain", "--manifest", m, "--workspace", ws, "read", '{"path": "src"}'],
        ("demo",): ["demo", "--json"],
        ("run",): ["run", "--manifest", manifest, "--workspace", recorded["ws"], "--no-record", "List the open TODOs and write them to notes/todo-summary.md"],
        ("sessions", "list"): ["sessions", "list", "--db", db, "--all"],
        ("sessions", "show"): ["sessions", "show", "--db", db, sid],
        ("sessions", "export"): ["sessions", "export", "--db", db, sid],
        ("replay",): ["replay", "--db", db, "--manifest", manifest, "--workspace", recorded["ws"], sid],
        ("acp",): ["acp", "--manifest", manifest, "--headless", "--db", db],
        ("mcp", "list"): ["mcp", "list", "--manifest", m, "--workspace", ws, "--json"],
        ("batch",): ["batch", recorded["tasks"], "--manifest", manifest, "--out", recorded["tmp"] + "/batch-out", "--no-record"],
        ("conformance", "run"): ["conformance", "run", "--case", "file.read-*", "--format", "jsonl"],
        ("conformance", "smoke"): ["conformance", "smoke"],
        ("conformance", "trace"): ["conformance", "trace"],
        ("conformance", "selftest"): ["conformance", "selftest", "--only-mutants", "--mutant", "always-capability-wide"],
        ("conformance", "list"): ["conformance", "list"],
        ("--help",): ["--help"],
        ("sessions", "rm"): ["sessions", "rm", "--db", db, sid],  # last: the others use the session
    }


def test_a_closed_pipe_is_not_a_traceback_for_any_command(recorded: dict[str, str], proj: tuple[Path, Path]) -> None:
    """Every subcommand (the table must name each one the parser has) piped into a reader that is gone."""
    commands = _every_command(recorded, proj)
    assert _leaf_commands() <= set(commands), f"add the new subcommands to this test: {_leaf_commands() - set(commands)}"
    problems = {}
    for key, args in commands.items():
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is already gone, as after `| head` exits
        try:
            done = subprocess.run([EXE, *args], stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
        finally:
            os.close(write_end)
        if "Traceback" in done.stderr or "BrokenPipe" in done.stderr or done.returncode not in (0, 141):
            problems[" ".join(key)] = (done.returncode, done.stderr[-500:])
    assert problems == {}


def test_manifest_check_json_into_a_closed_pipe(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([EXE, "manifest", "check", str(m), "--workspace", str(ws), "--json"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == ""


@pytest.mark.parametrize(("answers", "written"), [
    ("maybe\nyes\n", True), ("y\n", True), ("YES\n", True), ("no\n", False), ("n\n", False), ("what\n", False),
])
def test_the_terminal_ask_asks_again_until_it_understands(proj: tuple[Path, Path], answers: str, written: bool) -> None:
    ws, m = proj
    r = run("call", "--manifest", str(m), "--workspace", str(ws), "write", '{"path": "src/new.py", "content": "x"}', stdin=answers)
    env = json.loads(r.stdout)
    assert (env["type"] == "output") is written
    assert (ws / "src" / "new.py").exists() is written
    if answers.startswith(("maybe", "what")):
        assert "please answer o (allow once), a (always) or r (reject)" in r.stderr


def test_the_demo_shows_every_layer_it_names() -> None:
    steps = json.loads(run("demo", "--json").stdout)
    layers = {(s["envelope"]["metadata"].get("refusal") or {}).get("layer", "output") for s in steps}
    assert {"output", "permission", "capability", "schema", "watchdog", "ask"} <= layers


# -- errors that point and suggest (item 3) ---------------------------------------------------------

ERRORS = [
    # (manifest text, the one line expected on stderr after "agentcore: " and the file name)
    ("name: a\ntools: [read, wirte]\n", ":2: tools.1: unknown tool 'wirte' (did you mean 'write'?)"),
    ("name: a\ntools: [read]\nrequries:\n  fs: {read: ['{workspace}/**']}\n", ":3: requries: unknown key (did you mean 'requires'"),
    ("name: a\ntools: [read]\nrules:\n  - permission: raed\n    pattern: x\n    action: allow\n",
     ":4: rules.0.permission: permission 'raed' is neither a known tool, a capability nor '*' (did you mean 'read'?)"),
    ("name: a\ntools: [read]\nrules:\n  - permission: read\n    pattern: '{workspac}/x'\n    action: allow\n",
     ":5: rules.0.pattern: unknown variable {workspac} (did you mean '{workspace}'?)"),
    ("name: a\ntools: [read]\nrequires:\n  fs:\n    read: ['{wrkspace}/**']\n", ":5: requires.fs.read.0: unknown variable {wrkspace} (did you mean '{workspace}'?)"),
    ("name: a\ntools: [read]\nrules:\n  - permission: read\n    pattren: x\n    action: allow\n",
     ":5: rules.0.pattren: unknown key (did you mean 'pattern'?); missing: pattern"),
    ("", ":1: name: required key is missing"),
    ("name: a\ntools: [bash]\nrequires:\n  shell:\n    - cmd: git\n      args: [status, {wildcard: false}]\n",
     ":6: requires.shell.0.args: argument 1: an argument pattern is a string, {wildcard: true} (exactly one argument) or {prefix: TEXT}"),
    ("name: a\ntools: [read]\nrequires:\n  capabilities: [DB.query]\n",
     ":4: requires.capabilities.0: a capability name is two or more lowercase identifiers joined by '.'"),
    ("name: a\nwatchdog:\n  disable: [secret]\n", ":3: watchdog.disable.0: unknown watchdog category 'secret' (did you mean 'secrets'?)"),
    ("name: a\ntools: [read, read]\n", ":2: tools.1: tool 'read' is listed twice"),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_manifest_errors_point_at_file_line_key_and_suggest(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "m.yaml").write_text(text)
    r = run("manifest", "check", "m.yaml", "--workspace", "ws", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    first = r.stderr.splitlines()[0]
    assert first.startswith("agentcore: m.yaml" + expected), r.stderr
    assert "rules[" not in r.stderr and "Field required" not in r.stderr and "(and 1 more)" not in r.stderr


def test_every_schema_problem_is_listed_once_in_file_order(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text("name: a\nmodle: {id: x}\nlimits:\n  read_bytes: lots\nrequires:\n  fs:\n    raed: [x]\n")
    r = run("manifest", "check", str(tmp_path / "m.yaml"), cwd=tmp_path)
    lines = [line.removeprefix("agentcore: ") for line in r.stderr.splitlines()]
    assert [line.split(": ")[1] for line in lines] == ["modle", "limits.read_bytes", "requires.fs.raed"]
    assert all(line.startswith(str(tmp_path / "m.yaml") + ":") for line in lines)
    assert "lots" not in r.stderr  # the key and the constraint, never the value


def test_a_misspelt_tool_in_call_lists_the_enabled_tools(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = run("call", "--manifest", str(m), "--workspace", str(ws), "raed", '{"path": "x"}')
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "agentcore: 'raed' is not a tool (did you mean 'read'?); the manifest enables: read, write"
    r = run("explain", "--manifest", str(m), "--workspace", str(ws), "bash", '{"command": "ls"}')
    assert r.returncode == 2
    assert r.stderr.strip() == "agentcore: 'bash' is not enabled by this manifest; the manifest enables: read, write"


# -- manifest check warns about what will not work (item 4) ------------------------------------------


def test_manifest_check_warns_about_what_will_not_work(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(
        "name: w\ntools: [read]\nrequires:\n  fs:\n    read: ['{workspace}/**']\n    write: ['{workspace}/out/**']\n"
        "  shell:\n    - cmd: ls\n  net:\n    hosts: [example.com]\n  capabilities: [db.query]\n"
        "rules:\n  - {permission: bash, pattern: '*', action: allow}\n"
    )
    r = run("manifest", "check", "m.yaml", "--workspace", "missing", cwd=tmp_path)
    assert r.returncode == 0
    warnings = [line.removeprefix("warning: ") for line in r.stderr.splitlines()]
    assert warnings[0].startswith("workspace: ") and "is not an existing directory" in warnings[0]
    assert any(w.startswith("m.yaml:6: requires.fs.write: no enabled tool uses this grant") and "write, edit or bash" in w for w in warnings)
    assert any(w.startswith("m.yaml:7: requires.shell: no enabled tool uses this grant") and w.endswith("only with bash") for w in warnings)
    assert any(w.startswith("m.yaml:10: requires.net.hosts: no enabled tool uses this grant") and "web_fetch" in w for w in warnings)
    assert any(w.startswith("m.yaml:11: requires.capabilities.0: the named capability 'db.query'") for w in warnings)
    assert any(w.startswith("m.yaml:13: rules.0.permission: 'bash' is not enabled") for w in warnings)
    assert len(warnings) == 6
    assert "6 warnings (on stderr)" in r.stdout
    assert run("manifest", "check", "m.yaml", "--workspace", "missing", "--strict", cwd=tmp_path).returncode == 1
    doc = json.loads(run("manifest", "check", "m.yaml", "--workspace", "missing", "--json", cwd=tmp_path).stdout)
    assert doc["warnings"] == warnings


def test_manifest_check_compiles_the_named_subagents_as_task_would(tmp_path: Path) -> None:
    """A subagent `task` would refuse (`agent_invalid`) is said now, with the child's own file:line: key
    error; one that cannot even be read names no skill directories, which rule 5 then cannot protect."""
    agents = tmp_path / "ws" / "agents"
    agents.mkdir(parents=True)
    (agents / "good.yaml").write_text("name: good\ntools: [read]\nrequires: {fs: {read: ['{user-data}/**']}}\n")
    (agents / "typo.yaml").write_text("name: typo\ntools: [reed]\n")
    (agents / "broken.yaml").write_text("name: broken\ntools: [read\n")
    head = "name: p\ntools: [read, write, task]\nrequires: {fs: {read: ['{workspace}/**'], write: ['{workspace}/**']}}\n"
    (tmp_path / "m.yaml").write_text(head + "agents:\n  good: ws/agents/good.yaml\n  typo: ws/agents/typo.yaml\n"
                                     "  broken: ws/agents/broken.yaml\n  missing: ws/agents/missing.yaml\n")
    r = run("manifest", "check", "m.yaml", "--workspace", "ws", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warnings = [line.removeprefix("warning: ") for line in r.stderr.splitlines()]
    unknown = "the skill directories and subagents it would name are unknown"
    [typo] = [w for w in warnings if w.startswith("m.yaml:6: agents.typo: task refuses the subagent typo (agent_invalid): ")]
    assert typo.endswith("typo.yaml:2: tools.0: unknown tool 'reed' (did you mean 'read'?)")
    [broken] = [w for w in warnings if w.startswith("m.yaml:7: agents.broken: task refuses")]
    [missing] = [w for w in warnings if w.startswith("m.yaml:8: agents.missing: task refuses")]
    assert "invalid YAML" in broken and unknown in broken and unknown in missing
    assert not [w for w in warnings if "agents.good" in w]  # compiled with the parent's bindings, {user-data} included
    # Without fs.write nothing the agent does could plant those skills: the refusal alone is said.
    (tmp_path / "m.yaml").write_text(head.replace(", write: ['{workspace}/**']", "").replace(", write,", ",")
                                     + "agents:\n  broken: ws/agents/broken.yaml\n")
    [only] = run("manifest", "check", "m.yaml", "--workspace", "ws", cwd=tmp_path).stderr.splitlines()
    assert "task refuses the subagent broken" in only and unknown not in only


def test_a_manifest_that_uses_what_it_grants_has_no_warnings(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = run("manifest", "check", str(m), "--workspace", str(ws), "--strict")
    assert r.returncode == 0 and r.stderr == "" and "warning" not in r.stdout


def test_a_wildcard_argument_is_shown_as_exactly_one_argument(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "m.yaml").write_text(
        "name: s\ntools: [bash]\nrequires:\n  shell:\n    - {cmd: git, args: [status, {wildcard: true}]}\n"
        "    - {cmd: ls, args: [{prefix: '-'}, 'my dir']}\n    - {cmd: pwd}\n"
    )
    r = run("manifest", "check", "m.yaml", "--workspace", "ws", cwd=tmp_path)
    assert "  shell:     git status <one arg>; ls -… 'my dir'; pwd" in r.stdout


# -- the manifest reference (item 5) ----------------------------------------------------------------


def test_the_manifest_reference_page_is_generated_from_the_models() -> None:
    """docs/manifest.md is exactly what `agentcore manifest reference` prints: regenerate it after a schema change."""
    page = run("manifest", "reference").stdout
    assert (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8") == page, \
        "docs/manifest.md is stale: run `agentcore manifest reference > docs/manifest.md`"


def _all_fields(model: Any, path: str = "", seen: set[Any] | None = None) -> list[tuple[str, Any]]:
    """(key as the reference shows it, field) for every key, nested ones included (a model used twice: once)."""
    from typing import get_origin

    from agentcore.manifest.reference import _documented, _model_of

    seen = set() if seen is None else seen
    seen.add(model)
    out = []
    for name, field in model.model_fields.items():
        out.append((path + name, field))
        sub = _model_of(field.annotation)
        if sub is not None and _documented(sub) and sub not in seen:
            suffix = {list: "[]", dict: ".<name>"}.get(get_origin(field.annotation), "")
            out += _all_fields(sub, path + name + suffix + ".", seen)
    return out


def test_every_manifest_key_is_documented_with_its_default() -> None:
    from agentcore.manifest.schema import ManifestSpec  # the pydantic model: descriptions live there

    page = run("manifest", "reference").stdout
    undocumented = [key for key, field in _all_fields(ManifestSpec) if not field.description]
    assert undocumented == []
    for key, _field in _all_fields(ManifestSpec):
        assert f"| `{key}` |" in page, key


def test_the_reference_example_compiles(tmp_path: Path) -> None:
    from agentcore.manifest.reference import example_yaml

    (tmp_path / "ws").mkdir()
    (tmp_path / "m.yaml").write_text(example_yaml())
    r = run("manifest", "check", "m.yaml", "--workspace", "ws", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_manifest_check_names_the_mcp_server_code_fs_write_reaches(tmp_path: Path) -> None:
    """A stdio server that runs a script of the workspace runs what the agent may have rewritten, at its next
    start and with its own grant: advice naming the deny that keeps it out of reach (outside ENV-7)."""
    ws = tmp_path / "ws"
    (ws / "tools").mkdir(parents=True)
    (ws / "tools" / "server.py").write_text("print('serving')\n")
    (ws / "run-server").write_text("#!/bin/sh\n")
    base = ("name: m\ntools: [write]\nrequires:\n  fs: {{write: ['{{workspace}}/**']}}\nmcp:\n"
            "  local: {{command: python3, args: [tools/server.py, --port, '8080']}}\n"
            "  direct: {{command: ./run-server}}\n  pkg: {{command: npx, args: ['-y', some-package]}}\n"
            "rules:\n{rules}  - {{permission: '*', pattern: '*', action: allow}}\n")
    (tmp_path / "m.yaml").write_text(base.format(rules=""))
    warnings = run("manifest", "check", "m.yaml", "--workspace", "ws", cwd=tmp_path).stderr.splitlines()
    local = [w for w in warnings if "mcp.local" in w]
    assert len(local) == 1 and f"runs {(ws / 'tools' / 'server.py').resolve()}" in local[0]
    assert '{permission: fs.write, pattern: "{workspace}/tools/**", action: deny}' in local[0]
    assert len([w for w in warnings if "mcp.direct" in w and "run-server" in w]) == 1
    assert not [w for w in warnings if "mcp.pkg" in w]  # nothing of the workspace
    # With the deny the warning names, the script is out of reach: nothing more to say about it.
    (tmp_path / "m.yaml").write_text(base.format(rules="  - {permission: fs.write, pattern: '{workspace}/tools/**', action: deny}\n"))
    warnings = run("manifest", "check", "m.yaml", "--workspace", "ws", cwd=tmp_path).stderr.splitlines()
    assert not [w for w in warnings if "mcp.local" in w] and [w for w in warnings if "mcp.direct" in w]
