"""The `agentcore` console script, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXE = str(Path(sys.executable).parent / "agentcore")

MANIFEST = """\
name: demo
tools: [read, write, edit, glob, grep, bash]
requires:
  fs: {read: ["{workspace}/**"], write: ["{workspace}/src/**"]}
  net: {hosts: ["api.github.com"]}
  shell: [{cmd: git, args: ["status"]}, {cmd: ls, args: [{wildcard: true}]}]
  capabilities: []
rules:
  - {permission: read, pattern: "{workspace}/.env", action: deny}
  - {permission: write, pattern: "*", action: ask}
  - {permission: "*", pattern: "*", action: allow}
"""


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture()
def proj(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "proj"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("print('hi')\n")
    (ws / ".env").write_text("TOKEN=sk-live-should-not-leak\n")
    m = tmp_path / "demo.yaml"
    m.write_text(MANIFEST)
    return ws, m


def test_manifest_check_prints_expanded_effective_set(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = run("manifest", "check", str(m), "--workspace", str(ws))
    assert r.returncode == 0, r.stderr
    assert f"fs.read:   {ws}/**" in r.stdout
    assert f"fs.write:  {ws}/src/**" in r.stdout
    assert "net.hosts: api.github.com" in r.stdout
    j = run("manifest", "check", str(m), "--workspace", str(ws), "--json")
    data = json.loads(j.stdout)
    assert data["effective"]["fs"]["write"] == [f"{ws}/src/**"]
    assert data["tools"]["bash"]["kind"] == "execute" and data["tools"]["grep"]["kind"] == "search"


def test_manifest_errors_exit_2_with_file_line_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrules:\n  - {permission: read, pattern: '*', action: maybe}\n")
    r = run("manifest", "check", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    assert f"{bad}:3" in r.stderr and "rules.0.action" in r.stderr
    typo = tmp_path / "typo.yaml"
    typo.write_text("name: x\nrequires:\n  fs: {read: ['{wrkspace}/**']}\n")
    r = run("manifest", "check", str(typo))
    assert r.returncode == 2 and "unknown variable {wrkspace}" in r.stderr


def test_call_prints_one_envelope_and_exits_0_even_for_errors(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    ok = run("call", "--manifest", str(m), "--workspace", str(ws), "--headless", "read", '{"path": "src/a.py"}')
    assert ok.returncode == 0
    env = json.loads(ok.stdout)
    assert env["type"] == "output" and env["data"]["content"] == "print('hi')\n"
    assert env["metadata"]["kind"] == "read" and isinstance(env["metadata"]["duration_ms"], int)
    denied = run("call", "--manifest", str(m), "--workspace", str(ws), "--headless", "read", '{"path": ".env"}')
    assert denied.returncode == 0
    env = json.loads(denied.stdout)
    assert env["type"] == "error" and env["metadata"]["refusal"] == {"layer": "permission", "code": "denied", "scope": "manifest", "rule_index": 0}
    assert "sk-live" not in denied.stdout


def test_call_usage_errors_exit_2(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = run("call", "--manifest", str(m), "--workspace", str(ws), "read", "{not json")
    assert r.returncode == 2 and "ARGS_JSON" in r.stderr and r.stdout == ""
    r = run("call", "--manifest", str(m), "--workspace", str(ws / "missing"), "read", "{}")
    assert r.returncode == 2


def test_headless_ask_is_denied_and_nothing_is_written(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = run("call", "--manifest", str(m), "--workspace", str(ws), "--headless", "write", '{"path": "src/new.py", "content": "x"}')
    env = json.loads(r.stdout)
    assert env["metadata"]["refusal"]["layer"] == "ask" and env["metadata"]["refusal"]["code"] == "headless"
    assert not (ws / "src" / "new.py").exists()


@pytest.mark.parametrize(("answer", "written"), [("o\n", True), ("a\n", True), ("r\n", False), ("", False)])
def test_interactive_ask_reads_the_answer_from_the_terminal(proj: tuple[Path, Path], answer: str, written: bool) -> None:
    ws, m = proj
    r = run("call", "--manifest", str(m), "--workspace", str(ws), "write", '{"path": "src/new.py", "content": "x"}', stdin=answer)
    env = json.loads(r.stdout)
    assert "permission needed" in r.stderr
    assert (env["type"] == "output") is written
    assert (ws / "src" / "new.py").exists() is written


HOSTILE = "src/\u001b[2K\r\u001b]52;c;cm0gLXJmIH4=\u0007\u202eyp.exe"


def test_a_permission_prompt_never_sends_escape_sequences_to_the_terminal(proj: tuple[Path, Path]) -> None:
    """A path the model wrote is shown on the human's terminal: an escape sequence in it could erase the
    prompt's lines and show another call, or set the clipboard (OSC 52). Every control and format
    character is shown, escaped, instead (and the call still goes through the pipeline as written)."""
    ws, m = proj
    r = run("call", "--manifest", str(m), "--workspace", str(ws), "write", json.dumps({"path": HOSTILE, "content": "x"}), stdin="r\n")
    assert "permission needed" in r.stderr
    assert not any(c in r.stderr for c in "\x1b\x07\r\u202e"), repr(r.stderr)
    assert "\\x1b[2K\\x0d\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202eyp.exe" in r.stderr
    assert json.loads(r.stdout)["metadata"]["refusal"]["code"] == "rejected"


def test_a_question_never_sends_escape_sequences_to_the_terminal(tmp_path: Path) -> None:
    m = tmp_path / "q.yaml"
    m.write_text("name: q\ntools: [question]\nrules: [{permission: question, pattern: '*', action: allow}]\n")
    question = {"question": "Pick one\n\u001b]52;c;cm0gLXJmIH4=\u0007", "header": "H\u001b[31m",
                "options": [{"label": "yes\u001b[2K", "description": "d\r"}, {"label": "no", "description": "n"}]}
    r = run("call", "--manifest", str(m), "--workspace", str(tmp_path), "question", json.dumps({"questions": [question]}), stdin="2\n")
    assert "Pick one\n" in r.stderr  # a line break in the question is kept
    assert not any(c in r.stderr for c in "\x1b\x07\r"), repr(r.stderr)
    assert json.loads(r.stdout)["type"] == "output", r.stdout


def test_explain_executes_nothing_and_names_the_deciding_rule(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = run("explain", "--manifest", str(m), "--workspace", str(ws), "--json", "write", '{"path": "src/x.py", "content": "y"}')
    assert r.returncode == 0
    rep = json.loads(r.stdout)
    layers = {layer["layer"]: layer for layer in rep["layers"]}
    assert layers["capability"]["checks"][0]["canonical"] == f"{ws}/src/x.py"
    assert layers["capability"]["checks"][0]["scope"] == [f"{ws}/src/**"]
    subj = layers["permission"]["subjects"][0]
    assert subj["action"] == "ask" and subj["rule"]["index"] == 1
    assert not (ws / "src" / "x.py").exists()
    text = run("explain", "--manifest", str(m), "--workspace", str(ws), "bash", '{"command": "ls src"}')
    assert "command line:" in text.stdout and "--unshare-all" in text.stdout


def test_demo_runs_on_embedded_defaults() -> None:
    r = run("demo", "--json")
    assert r.returncode == 0, r.stderr
    steps = json.loads(r.stdout)
    by_step = {s["step"]: s["envelope"] for s in steps}
    assert by_step["read a source file"]["type"] == "output"
    assert by_step["read .env (a manifest deny: pinned)"]["metadata"]["refusal"]["layer"] == "permission"
    assert by_step["bash ls (rule says ask; headless means deny)"]["metadata"]["refusal"]["code"] == "headless"


def test_cli_does_not_import_the_acp_sdk(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    code = (
        "import sys, runpy; sys.argv=['agentcore','call','--manifest',%r,'--workspace',%r,'--headless','read','{\"path\": \"src/a.py\"}'];"
        "from agentcore.cli.main import main; main(); assert 'acp' not in sys.modules, 'acp imported'"
    ) % (str(m), str(ws))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
