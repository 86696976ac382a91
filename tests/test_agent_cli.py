"""`agentcore run`, `sessions`, `replay` as a user runs them: real processes, real scripted model.

Each exit code has a run that produces it; API keys never show up anywhere;
provider libraries are not imported by commands that run no model.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_support import write_script

ROOT = Path(__file__).resolve().parent.parent
AGENTCORE = [sys.executable, "-m", "agentcore.cli.main"]
ALLOW = [{"permission": "*", "pattern": "*", "action": "allow"}]


def run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(AGENTCORE + args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture
def setup(tmp_path: Path, write_manifest: Callable[..., Path]) -> dict[str, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    m = write_manifest({"name": "cli", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}}, "rules": ALLOW})
    return {"tmp": tmp_path, "ws": ws, "manifest": m, "db": tmp_path / "db.sqlite"}


def _run_script(setup: dict[str, Path], turns: list[dict[str, Any]], *extra: str) -> subprocess.CompletedProcess[str]:
    script = write_script(setup["tmp"] / "s.yaml", turns)
    return run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--model", f"script:{script}",
                "--db", str(setup["db"]), *extra, "go"], cwd=setup["tmp"])


READ = {"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}}]}


@pytest.mark.parametrize(
    "turns, extra, code, status",
    [
        ([READ, {"text": "the answer"}], [], 0, None),
        ([{"error": {"status": 503}, "repeat": "forever"}], [], 1, "failed"),
        ([READ, {"text": "x"}, {"text": "y"}], ["--max-turn-requests", "1"], 3, "max_turn_requests"),
        ([{"hang": True, "text": "slow"}], ["--timeout", "1"], 4, "timeout"),
        ([{"text": "cut", "finish": "length"}], [], 5, "max_tokens"),
        ([{"text": "no", "finish": "content_filter"}], [], 6, "refusal"),
        ([{**READ, "repeat": "forever"}], ["--token-budget", "300"], 7, "token_budget"),
        ([{"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "error"}}]}, {"text": "z"}], [], 1, "failed"),
    ],
)
def test_each_way_a_run_ends_has_its_exit_code(setup: dict[str, Path], turns: list[dict[str, Any]], extra: list[str], code: int, status: str | None) -> None:
    done = _run_script(setup, turns, *extra)
    assert done.returncode == code, done.stderr
    if status is None:
        assert done.stdout == "the answer\n"
        assert "read: Read a.txt -> ok" in done.stderr
    else:
        assert f"the run stopped ({status})" in done.stderr


def test_usage_errors_exit_2_and_say_why(setup: dict[str, Path]) -> None:
    missing_ws = run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["tmp"] / "nope"), "--model", "script:x.yaml", "go"], cwd=setup["tmp"])
    assert missing_ws.returncode == 2 and "not a directory" in missing_ws.stderr
    no_model = run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--no-record", "go"],
                   cwd=setup["tmp"], env={k: v for k, v in os.environ.items() if k != "AGENTCORE_MODEL"})
    assert no_model.returncode == 2 and "--model" in no_model.stderr
    bad_provider = run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--model", "acme:x", "go"], cwd=setup["tmp"])
    assert bad_provider.returncode == 2 and "unknown model provider" in bad_provider.stderr
    no_script = run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--model", "script:absent.yaml", "go"], cwd=setup["tmp"])
    assert no_script.returncode == 2 and "absent.yaml" in no_script.stderr
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    no_key = run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--model", "openai:gpt-x", "--no-record", "go"],
                 cwd=setup["tmp"], env=env)
    assert no_key.returncode == 2 and "OPENAI_API_KEY" in no_key.stderr
    assert "Traceback" not in no_key.stderr + bad_provider.stderr + no_script.stderr


def test_events_jsonl_streams_every_event_and_ends_with_the_answer(setup: dict[str, Path]) -> None:
    done = _run_script(setup, [READ, {"text": "the answer"}], "--events", "jsonl")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert {"call_started", "stage_decided", "call_finished", "message_added", "model_delta"} <= set(types)
    assert events[-1]["text"] == "the answer" and events[-1]["stop_reason"] == "end_turn"


def test_sessions_and_replay_from_the_command_line(setup: dict[str, Path], write_manifest: Callable[..., Path]) -> None:
    assert _run_script(setup, [READ, {"text": "the answer"}]).returncode == 0
    db = ["--db", str(setup["db"])]
    listed = json.loads(run(["sessions", "list", "--json", *db], cwd=setup["tmp"]).stdout)
    sid = listed[0]["id"]
    shown = run(["sessions", "show", sid, *db], cwd=setup["tmp"])
    assert "assistant tool call call_1: read" in shown.stdout and "tool result call_1: read -> output" in shown.stdout
    exported = run(["sessions", "export", sid, *db], cwd=setup["tmp"]).stdout.splitlines()
    assert json.loads(exported[0])["record"] == "session" and all(json.loads(x) for x in exported)
    same = run(["replay", sid, "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), *db], cwd=setup["tmp"])
    assert same.returncode == 0 and "0 change(s)" in same.stdout
    stricter = write_manifest({"name": "cli", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}},
                               "rules": [*ALLOW, {"permission": "read", "pattern": "{workspace}/a.txt", "action": "deny"}]}, name="strict")
    changed = run(["replay", sid, "--manifest", str(stricter), "--workspace", str(setup["ws"]), "--json", *db], cwd=setup["tmp"])
    assert changed.returncode == 1
    report = json.loads(changed.stdout)
    assert report["changes"] == [{"call_id": "call_1", "tool": "read", "what": "decision", "before": "output", "after": "error:permission:denied"}]
    removed = run(["sessions", "rm", sid, *db], cwd=setup["tmp"])
    assert removed.returncode == 0
    assert json.loads(run(["sessions", "list", "--json", *db], cwd=setup["tmp"]).stdout) == []


def test_a_session_can_be_continued(setup: dict[str, Path]) -> None:
    assert _run_script(setup, [{"text": "first answer"}]).returncode == 0
    db = ["--db", str(setup["db"])]
    sid = json.loads(run(["sessions", "list", "--json", *db], cwd=setup["tmp"]).stdout)[0]["id"]
    # The second run's script expects to see the first exchange in its request (it answers turn 2 of 2).
    script = write_script(setup["tmp"] / "s2.yaml", [{"text": "second answer"}])
    done = run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--model", f"script:{script}",
                *db, "--session", sid, "--events", "jsonl", "again"], cwd=setup["tmp"])
    assert done.returncode == 0, done.stderr
    info = json.loads(run(["sessions", "show", sid, "--json", *db], cwd=setup["tmp"]).stdout)
    texts = [p["text"] for m in info["messages"] for p in m["parts"] if p["kind"] == "text"]
    assert texts == ["go", "first answer", "again", "second answer"]


def test_the_session_database_is_not_the_agents_to_write(setup: dict[str, Path], write_manifest: Callable[..., Path]) -> None:
    """A recording the agent could edit would give a continued session "always" answers nobody gave: with
    the database inside the workspace and fs.write on it, the database and SQLite's side files are refused."""
    m = write_manifest({"name": "cli", "tools": ["write"], "requires": {"fs": {"write": ["{workspace}/**"]}}, "rules": ALLOW})
    db = setup["ws"] / "sessions.db"
    refused = {"type": "error", "error_code": "protected"}
    calls = [{"tool": "write", "args": {"path": p, "content": "x"}, "expect": dict(refused)} for p in ("sessions.db", "sessions.db-journal", "sessions.db-wal")]
    script = write_script(setup["tmp"] / "forge.yaml", [{"tool_calls": calls}, {"text": "done"}])
    done = run(["run", "--manifest", str(m), "--workspace", str(setup["ws"]), "--model", f"script:{script}", "--db", str(db), "go"],
               cwd=setup["tmp"])
    assert done.returncode == 0, done.stderr
    assert not (setup["ws"] / "sessions.db-journal").exists()
    assert json.loads(run(["sessions", "list", "--json", "--db", str(db)], cwd=setup["tmp"]).stdout)[0]["id"]


def test_the_answer_reaches_a_terminal_without_escape_sequences_and_a_pipe_exactly(setup: dict[str, Path]) -> None:
    """On a terminal (a real pty here), the model's answer and the tool titles lose their escape sequences,
    which could set the clipboard or make the terminal type back; a pipe gets the answer exactly."""
    import pty

    answer = "done\n\u001b]52;c;cm0gLXJmIH4=\u0007 \u001b[2Kok"
    turns = [{"tool_calls": [{"tool": "read", "args": {"path": "a.txt\u001b[1A"}}]}, {"text": answer}]
    piped = _run_script(setup, turns)
    assert piped.stdout == answer + "\n" and "\x1b" not in piped.stderr and "a.txt\\x1b[1A" in piped.stderr
    script = write_script(setup["tmp"] / "t.yaml", turns)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(AGENTCORE + ["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--model",
                                           f"script:{script}", "--no-record", "go"], cwd=setup["tmp"], stdout=follower,
                              stderr=subprocess.PIPE, text=True, timeout=120)
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in shown and b"\x07" not in shown
    assert b"done\r\n\\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b[2Kok" in shown  # the pty turns a line break into CR LF


# -- secrets ------------------------------------------------------------------------------------------------

SECRET = "sk-test-0123456789-do-not-leak"


class _EchoingServer(http.server.BaseHTTPRequestHandler):
    """A provider that fails and echoes the Authorization header in its error body, as some do."""

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        body = json.dumps({"error": {"message": f"invalid key {self.headers.get('authorization')}"}}).encode()
        status = 500 if self.server.calls < 2 else 401  # type: ignore[attr-defined]
        self.server.calls += 1  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echoing_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoingServer)
    server.calls = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_an_api_key_never_appears_in_output_events_or_recordings(setup: dict[str, Path], echoing_server: str) -> None:
    env = {**os.environ, "MY_PROVIDER_KEY": SECRET}
    done = run(["run", "--manifest", str(setup["manifest"]), "--workspace", str(setup["ws"]), "--model", "openai-compatible:m",
                "--base-url", echoing_server, "--api-key-env", "MY_PROVIDER_KEY", "--db", str(setup["db"]), "--events", "jsonl", "go"],
               cwd=setup["tmp"], env=env)
    assert done.returncode == 1  # 500, 500 (retried), then 401: failed
    assert "status 401" in done.stdout  # the run_finished event names the status
    assert SECRET not in done.stdout + done.stderr
    for path in setup["tmp"].glob("db.sqlite*"):
        assert SECRET.encode() not in path.read_bytes()
    events = [json.loads(x) for x in done.stdout.splitlines()]
    assert [e["status"] for e in events if e["type"] == "model_retried"] == [500, 500]


def test_commands_that_run_no_model_do_not_import_provider_libraries(setup: dict[str, Path]) -> None:
    code = (
        "import sys; from agentcore.cli.main import main; "
        f"main(['sessions', 'list', '--db', {str(setup['db'])!r}]); "
        f"main(['call', '--manifest', {str(setup['manifest'])!r}, '--workspace', {str(setup['ws'])!r}, 'read', '{{\"path\": \"a.txt\"}}']); "
        "print(sorted(m for m in ('pydantic_ai', 'openai', 'anthropic', 'acp', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=setup["tmp"], timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_example_tour_runs_offline(tmp_path: Path) -> None:
    """The README's main job: the example manifest's scripted model over a copy of the example workspace."""
    ws = tmp_path / "workspace"
    shutil.copytree(ROOT / "examples" / "workspace", ws)
    done = run(["run", "--manifest", str(ROOT / "examples" / "manifest.yaml"), "--workspace", str(ws), "--db", str(tmp_path / "db.sqlite"),
                "List the open TODOs and write them to notes/todo-summary.md"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "two open TODOs" in done.stdout
    assert "read: Read .env -> refused by permission (denied)" in done.stderr
    assert "refused by watchdog (code_execution_wrapper)" in done.stderr
    assert "refused by ask (headless, asked by permission)" in done.stderr
    assert (ws / "notes" / "todo-summary.md").read_text().startswith("# Open TODOs")
    assert "example-not-a-real-token" not in done.stdout + done.stderr


@pytest.mark.parametrize(("flag", "value"), [("--timeout", "nan"), ("--timeout", "-1"), ("--timeout", "inf"), ("--timeout", "soon"),
                                             ("--max-turn-requests", "0"), ("--token-budget", "-5")])
def test_run_refuses_a_bound_that_bounds_nothing(flag: str, value: str, tmp_path: Path) -> None:
    """`--timeout nan` was an internal error, `-1` a run that timed out at once, `--max-turn-requests 0` ignored."""
    examples = ROOT / "examples"
    proc = run(["run", "--manifest", str(examples / "manifest.yaml"), "--workspace", str(tmp_path), "--model",
                f"script:{examples / 'scripts' / 'tour.yaml'}", "--db", str(tmp_path / "s.db"), flag, value, "hi"], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"argument {flag}:" in proc.stderr and value not in proc.stderr.split(f"argument {flag}:")[1]
    assert not (tmp_path / "s.db").exists()


def _session_id(setup: dict[str, Path], db: Path) -> str:
    listed = run(["sessions", "list", "--json", "--db", str(db)], cwd=setup["tmp"])
    return str(json.loads(listed.stdout)[0]["id"])


def test_replay_never_writes_the_session_database(setup: dict[str, Path], write_manifest: Callable[..., Path]) -> None:
    """The recorded run was refused writing the database it was recorded in (it is protected): replaying that
    call must be refused the same way, not overwrite the recording it is reading."""
    m = write_manifest({"name": "cli", "tools": ["write"], "requires": {"fs": {"write": ["{workspace}/**"]}}, "rules": ALLOW})
    db = setup["ws"] / "sessions.db"
    calls = [{"tool": "write", "args": {"path": p, "content": "x"}} for p in ("sessions.db", "sessions.db-wal")]
    script = write_script(setup["tmp"] / "forge.yaml", [{"tool_calls": calls}, {"text": "done"}])
    done = run(["run", "--manifest", str(m), "--workspace", str(setup["ws"]), "--model", f"script:{script}", "--db", str(db), "go"],
               cwd=setup["tmp"])
    assert done.returncode == 0, done.stderr
    sid = _session_id(setup, db)
    replayed = run(["replay", sid, "--manifest", str(m), "--workspace", str(setup["ws"]), "--db", str(db), "--json"], cwd=setup["tmp"])
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["changes"] == []
    assert db.read_bytes()[:16] == b"SQLite format 3\x00"
    assert _session_id(setup, db) == sid


def test_replaying_an_unattended_run_reports_no_change_for_its_refused_asks(setup: dict[str, Path], write_manifest: Callable[..., Path]) -> None:
    """`agentcore run` refuses every ask (headless); replayed with the same manifest, the same call is refused the
    same way, and nothing changed."""
    m = write_manifest({"name": "cli", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}}, "rules": []}, name="asks")
    script = write_script(setup["tmp"] / "s.yaml", [READ, {"text": "the answer"}])
    done = run(["run", "--manifest", str(m), "--workspace", str(setup["ws"]), "--model", f"script:{script}", "--db", str(setup["db"]), "go"],
               cwd=setup["tmp"])
    assert done.returncode == 0 and "refused by ask (headless" in done.stderr
    sid = _session_id(setup, setup["db"])
    replayed = run(["replay", sid, "--manifest", str(m), "--workspace", str(setup["ws"]), "--db", str(setup["db"]), "--json"], cwd=setup["tmp"])
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout) == {"session_id": sid, "calls": 1, "changes": [], "missing": []}


@pytest.mark.parametrize("table, data", [("parts", "{not json"), ("parts", "[1, 2]"), ("parts", '{"kind": "tool_call", "tool": 7}'),
                                         ("events", "{not json"), ("runs", "usage")])
def test_a_damaged_recording_is_a_clear_error_and_replays_nothing(setup: dict[str, Path], write_manifest: Callable[..., Path],
                                                                 table: str, data: str) -> None:
    m = write_manifest({"name": "cli", "tools": ["write"], "requires": {"fs": {"write": ["{workspace}/**"]}}, "rules": ALLOW}, name="w")
    script = write_script(setup["tmp"] / "w.yaml", [{"tool_calls": [{"tool": "write", "args": {"path": "out.txt", "content": "x"}}]},
                                                    {"text": "done"}])
    db = setup["db"]
    assert run(["run", "--manifest", str(m), "--workspace", str(setup["ws"]), "--model", f"script:{script}", "--db", str(db), "go"],
               cwd=setup["tmp"]).returncode == 0
    sid = _session_id(setup, db)
    (setup["ws"] / "out.txt").unlink()
    conn = sqlite3.connect(db)
    with conn:
        if table == "runs":
            conn.execute("UPDATE runs SET usage='{broken'")
        elif table == "parts":  # the assistant's tool call
            conn.execute("UPDATE parts SET data=? WHERE kind='tool_call'", (data,))
        else:
            conn.execute("UPDATE events SET data=? WHERE id=(SELECT MAX(id) FROM events)", (data,))
    conn.close()
    commands = [["sessions", "show", sid], ["sessions", "show", sid, "--json"], ["sessions", "export", sid],
                ["replay", sid, "--manifest", str(m), "--workspace", str(setup["ws"])]]
    for command in commands:
        if table == "events" and command[1] == "show":
            continue  # show reads no events
        if data.startswith('{"kind"') and command[1] in ("show", "export") and command != ["sessions", "show", sid]:
            continue  # a well-formed part missing fields is printed as it is; what reads it as a message refuses it
        done = run([*command, "--db", str(db)], cwd=setup["tmp"])
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "damaged" in done.stderr and "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (setup["ws"] / "out.txt").exists()  # the replay ran no call
