"""The host commands given a hostile database or a hostile path: `sessions`, `replay`, `run --session`.

A database handed to the user (or edited) is refused in one line with exit 2, never read as agentcore's
when it is not, never a crash; what it holds is escaped on the terminal; `export -o` never writes through
a planted link nor clobbers a file when it fails.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_support import write_script

AGENTCORE = [sys.executable, "-m", "agentcore.cli.main"]
ALLOW = [{"permission": "*", "pattern": "*", "action": "allow"}]
ESC = "\x1b]52;c;ZXZpbA==\x07"


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(AGENTCORE + args, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def recorded(tmp_path: Path, write_manifest: Callable[..., Path]) -> dict[str, Any]:
    """One recorded session (a `read`, then an answer) in tmp_path/db.sqlite."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    manifest = write_manifest({"name": "rev", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}}, "rules": ALLOW})
    script = write_script(tmp_path / "s.yaml", [{"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}}]}, {"text": "done"}])
    db = tmp_path / "db.sqlite"
    done = run(["run", "--manifest", str(manifest), "--workspace", str(ws), "--model", f"script:{script}", "--db", str(db), "go"], tmp_path)
    assert done.returncode == 0, done.stderr
    sid = done.stderr.strip().splitlines()[-1].split()[-1]
    return {"tmp": tmp_path, "ws": ws, "manifest": manifest, "script": script, "db": db, "sid": sid}


def _edit(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def _one_line_refusal(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def _session_commands(r: dict[str, Any]) -> list[list[str]]:
    db = ["--db", str(r["db"])]
    return [["sessions", "list", *db], ["sessions", "show", r["sid"], *db], ["sessions", "export", r["sid"], *db],
            ["sessions", "rm", r["sid"], *db], ["replay", r["sid"], "--manifest", str(r["manifest"]), "--workspace", str(r["ws"]), *db],
            ["run", "--manifest", str(r["manifest"]), "--workspace", str(r["ws"]), "--model", f"script:{r['script']}",
             "--session", r["sid"], *db, "again"]]


def test_a_trigger_planted_in_the_database_is_refused_before_anything_is_written(recorded: dict[str, Any]) -> None:
    # A trigger fires on the INSERTs a recorded run makes: here it copies every event and rewrites the session's
    # remembered answers, which the next `run --session` would restore.
    _edit(recorded["db"], "CREATE TABLE loot(data TEXT)",
          "CREATE TRIGGER t AFTER INSERT ON events BEGIN INSERT INTO loot VALUES (new.data); "
          "UPDATE sessions SET remembered='{\"rules\": [[\"*\", \"*\", \"allow\"]]}'; END")
    for command in _session_commands(recorded):
        done = run(command, recorded["tmp"])
        _one_line_refusal(done)
        assert "not a session database agentcore wrote" in done.stderr
    conn = sqlite3.connect(recorded["db"])
    assert conn.execute("SELECT COUNT(*) FROM loot").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 1  # `rm` removed nothing either
    conn.close()


@pytest.mark.parametrize("planted", ["CREATE VIEW v AS SELECT 1", "DROP INDEX events_session",
                                     "ALTER TABLE sessions ADD COLUMN extra TEXT DEFAULT 'x'"])
def test_a_database_that_is_not_agentcores_schema_is_refused_with_exit_2(recorded: dict[str, Any], planted: str) -> None:
    _edit(recorded["db"], planted)
    for command in _session_commands(recorded):
        _one_line_refusal(run(command, recorded["tmp"]))


def test_a_database_at_this_version_without_its_tables_is_refused_with_exit_2(recorded: dict[str, Any]) -> None:
    recorded["db"].unlink()
    for side in ("-wal", "-shm"):
        Path(f"{recorded['db']}{side}").unlink(missing_ok=True)
    _edit(recorded["db"], "PRAGMA user_version=1")
    for command in _session_commands(recorded):
        _one_line_refusal(run(command, recorded["tmp"]))


def test_a_damaged_page_is_refused_with_exit_2(recorded: dict[str, Any]) -> None:
    conn = sqlite3.connect(recorded["db"])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(recorded["db"].read_bytes())
    data[4096 * 3:] = b"\xa5" * (len(data) - 4096 * 3)  # the schema page reads; the rows' pages do not
    recorded["db"].write_bytes(bytes(data))
    for command in _session_commands(recorded)[1:5]:
        _one_line_refusal(run(command, recorded["tmp"]))


def test_recorded_values_of_any_type_are_shown_escaped(recorded: dict[str, Any]) -> None:
    sid = recorded["sid"]
    _edit(recorded["db"], f"UPDATE sessions SET model='{ESC}m', workspace=x'1b5b324a', updated_at='soon'",
          f"UPDATE runs SET stop_reason='{ESC}r'",
          f"INSERT INTO decisions(session_id, call_id, tool, layer, choice, answered_by, created_at) "
          f"VALUES ('{sid}', 'c', '{ESC}t', 'l', 'allow_once', '{ESC}b', 0)")
    db = ["--db", str(recorded["db"])]
    for command in (["sessions", "list", *db], ["sessions", "list", "--json", *db], ["sessions", "show", sid, *db],
                    ["sessions", "show", sid, "--json", *db]):
        done = run(command, recorded["tmp"])
        assert done.returncode == 0, (command, done.stderr)
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout, command
    assert "\\x1b]52" in run(["sessions", "show", sid, *db], recorded["tmp"]).stdout


def test_a_damaged_envelope_is_shown_not_a_crash(recorded: dict[str, Any]) -> None:
    _edit(recorded["db"], "UPDATE parts SET data=json_set(data, '$.envelope', json('{\"metadata\": []}')) WHERE kind='tool_result'")
    done = run(["sessions", "show", recorded["sid"], "--db", str(recorded["db"])], recorded["tmp"])
    assert done.returncode == 0, done.stderr
    assert "tool result" in done.stdout


def test_the_replay_report_escapes_the_recorded_call_ids(recorded: dict[str, Any]) -> None:
    _edit(recorded["db"], f"UPDATE parts SET data=json_set(data, '$.call_id', '{ESC}x') WHERE kind='tool_result'")
    done = run(["replay", recorded["sid"], "--manifest", str(recorded["manifest"]), "--workspace", str(recorded["ws"]),
                "--db", str(recorded["db"])], recorded["tmp"])
    assert done.returncode == 0, done.stderr
    assert "recorded but not made" in done.stdout
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout


@pytest.mark.parametrize("remembered", ['{"rules": 5}', '{"rules": [["read", "*", "allow", "x"]]}', '{"watchdog_approvals": [7]}'])
def test_continuing_a_session_whose_remembered_answers_are_damaged_is_exit_2(recorded: dict[str, Any], remembered: str) -> None:
    _edit(recorded["db"], f"UPDATE sessions SET remembered='{remembered}'")
    _one_line_refusal(run(_session_commands(recorded)[-1], recorded["tmp"]))


def test_continuing_a_session_whose_parts_are_damaged_is_exit_2(recorded: dict[str, Any]) -> None:
    _edit(recorded["db"], "UPDATE parts SET data='{\"kind\": \"text\"}' WHERE kind='text'")
    _one_line_refusal(run(_session_commands(recorded)[-1], recorded["tmp"]))


def test_export_never_writes_through_a_link_planted_at_its_output(recorded: dict[str, Any]) -> None:
    outside = recorded["tmp"] / "precious.txt"
    outside.write_text("keep me\n")
    link = recorded["ws"] / "export.jsonl"  # a workspace the agent writes: it can plant this link
    link.symlink_to(outside)
    done = run(["sessions", "export", recorded["sid"], "--db", str(recorded["db"]), "-o", str(link)], recorded["tmp"])
    _one_line_refusal(done)
    assert "symbolic link" in done.stderr
    assert outside.read_text() == "keep me\n" and link.is_symlink()


def test_a_failed_export_leaves_the_output_file_as_it_was(recorded: dict[str, Any]) -> None:
    out = recorded["tmp"] / "out.jsonl"
    out.write_text("keep me\n")
    db = ["--db", str(recorded["db"])]
    _one_line_refusal(run(["sessions", "export", "ses_nosuch", *db, "-o", str(out)], recorded["tmp"]))
    assert out.read_text() == "keep me\n"
    _edit(recorded["db"], "UPDATE events SET data='[1]' WHERE id=(SELECT MAX(id) FROM events)")  # fails at the last line
    _one_line_refusal(run(["sessions", "export", recorded["sid"], *db, "-o", str(out)], recorded["tmp"]))
    assert out.read_text() == "keep me\n"
    assert sorted(p.name for p in recorded["tmp"].iterdir() if p.name.startswith(".out.jsonl")) == []


def test_an_export_is_private_to_its_owner_like_the_database(recorded: dict[str, Any]) -> None:
    out = recorded["tmp"] / "new.jsonl"
    old = os.umask(0o022)
    try:
        done = run(["sessions", "export", recorded["sid"], "--db", str(recorded["db"]), "-o", str(out)], recorded["tmp"])
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    assert out.read_text().startswith('{"record": "session"')
    done = run(["sessions", "export", recorded["sid"], "--db", str(recorded["db"]), "-o", os.devnull], recorded["tmp"])
    assert done.returncode == 0, done.stderr
