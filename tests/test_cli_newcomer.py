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

EXE = str(Path(sys.executable).parent / "agentcore")
ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def proj(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "proj"
    (ws / "src").mkdir(parents=True)
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({
        "name": "n", "tools": ["read", "write"],
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/src/**"]}},
        "rules": [{"permission": "read", "pattern": "*", "action": "allow"}],
    }))
    return ws, m


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


@pytest.mark.parametrize("args", [
    ["tools"], ["tools", "--json"], ["manifest", "schema"], ["demo"], ["demo", "--json"],
    ["conformance", "list"], ["conformance", "trace"], ["--help"],
])
def test_a_closed_pipe_is_not_a_traceback(args: list[str], proj: tuple[Path, Path]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is already gone, as after `| head` exits
    try:
        done = subprocess.run([EXE, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert done.returncode in (0, 141, 120), done.stderr


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
