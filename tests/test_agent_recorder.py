"""The recorder: what a run did goes into SQLite and comes back out exactly.

Real runs (scripted model server, real engine) recorded into real SQLite
files; `kill -9` of a real `agentcore run` process at many points, then the
database opened and every completed part loaded.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_support import manifest, scripted_loop, write_script
from agentcore.agent.messages import Message
from agentcore.api import AllowAllWatchdog, Engine, ScriptedBroker
from agentcore.recorder.store import SCHEMA_VERSION, Recorder, RecorderError, connect

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ws(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace("ws", {"a.txt": "alpha\n", "secret.txt": "s\n"})


async def _recorded_run(ws: Path, tmp_path: Path, broker: Any = None) -> tuple[Recorder, Any, Any, Any]:
    rules = [{"permission": "read", "pattern": "{workspace}/a.txt", "action": "allow"},
             {"permission": "grep", "pattern": "*", "action": "allow"}]
    engine = Engine(manifest(ws, rules=rules), watchdog=AllowAllWatchdog(), broker=broker)
    script = write_script(tmp_path / "s.yaml", [
        {"reasoning": "plan", "text": "looking", "tool_calls": [
            {"tool": "read", "args": {"path": "a.txt"}},
            {"tool": "read", "args": {"path": "secret.txt"}},  # default ask: the broker answers
            {"tool": "grep", "args": {"pattern": "alpha"}},
        ]},
        {"text": "all done"},
    ])
    recorder = Recorder(tmp_path / "db.sqlite")
    async with scripted_loop(engine, script) as (loop, seen):
        loop.add_observer(recorder.observe)
        with engine.open_session(headless=broker is None) as session:
            recorder.attach(session, manifest="m.yaml", workspace=str(ws), model=loop.model.name, title="first prompt")
            result = await loop.run(session, "first prompt")
    return recorder, session, result, seen


async def test_a_run_is_recorded_and_loads_back_exactly(ws: Path, tmp_path: Path) -> None:
    broker = ScriptedBroker(["allow_always"])
    recorder, session, result, seen = await _recorded_run(ws, tmp_path, broker)
    with recorder:
        info = recorder.session(session.id)
        history = [Message.from_dict(m) for m in recorder.history(session.id)]
        events = list(recorder.events(session.id))
    # Messages and parts: the same conversation the loop had.
    assert history == result.messages
    kinds = [p.kind for m in history for p in m.parts]
    assert kinds == ["text", "reasoning", "text", "tool_call", "tool_call", "tool_call",
                     "tool_result", "tool_result", "tool_result", "text"]
    # Runs with usage and stop reason; decisions with who answered.
    (run,) = info["runs"]
    assert run["stop_reason"] == "end_turn" and run["usage"]["requests"] == 2 and run["usage"]["output_tokens"] > 0
    assert info["decisions"] == [{"call_id": "call_2", "tool": "read", "layer": "permission", "choice": "allow_always", "answered_by": "scripted"}]
    # The remembered answer (an exact rule) is stored for a reloaded session.
    assert info["remembered"]["rules"] == [["read", str(ws / "secret.txt"), "allow"]]
    # Events: re-emitted exactly as they were emitted live.
    assert events == [e.to_dict() for e in seen.events]


async def test_remembered_answers_restore_into_a_new_session(ws: Path, tmp_path: Path) -> None:
    recorder, session, _result, _seen = await _recorded_run(ws, tmp_path, ScriptedBroker(["allow_always"]))
    with recorder:
        remembered = recorder.session(session.id)["remembered"]
    engine = Engine(manifest(ws, rules=[]), watchdog=AllowAllWatchdog())
    with engine.open_session() as fresh:
        before = await engine.call(fresh, "read", {"path": "secret.txt"})
        fresh.restore(remembered)
        after = await engine.call(fresh, "read", {"path": "secret.txt"})
    assert before.refusal and before.refusal["code"] == "headless"
    assert after.type == "output"


async def test_sessions_list_show_export_and_remove(ws: Path, tmp_path: Path) -> None:
    recorder, session, _result, _seen = await _recorded_run(ws, tmp_path)
    with recorder:
        rows = recorder.sessions()
        assert [r["id"] for r in rows] == [session.id] and rows[0]["last_stop_reason"] == "end_turn"
        records = list(recorder.export(session.id))
        assert records[0]["record"] == "session" and {r["record"] for r in records} == {"session", "message", "event"}
        json.dumps(records)  # JSON Lines-ready
        assert recorder.remove(session.id) == 1
        assert recorder.sessions() == []
        with pytest.raises(RecorderError):
            recorder.session(session.id)
        # An unknown id is refused by the call itself, not later by whoever iterates (export streams).
        for streaming in (recorder.iter_history, recorder.events, recorder.tree_events):
            with pytest.raises(RecorderError, match="no recorded session"):
                streaming(session.id)


async def test_export_streams_the_history_message_by_message(ws: Path, tmp_path: Path) -> None:
    # A long session is written out as it is read: the first messages come out before a damaged part
    # near the end is even reached (reading it all first would give nothing but the error).
    recorder, session, _result, _seen = await _recorded_run(ws, tmp_path)
    with recorder:
        whole = [r for r in recorder.export(session.id) if r["record"] == "message"]
        assert len(whole) >= 4 and whole == [{"record": "message", "session_id": session.id, **m} for m in recorder.history(session.id)]
        conn = sqlite3.connect(tmp_path / "db.sqlite")
        with conn:
            conn.execute("UPDATE parts SET data='{broken' WHERE id=(SELECT MAX(id) FROM parts)")
        conn.close()
        got: list[dict[str, Any]] = []
        with pytest.raises(RecorderError, match="damaged"):
            for record in recorder.export(session.id):
                got.append(record)
        assert [r for r in got if r["record"] == "message"] == whole[:-1]


def test_the_schema_is_versioned_and_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(RecorderError, match="schema version"):
        connect(path)
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(RecorderError):
        connect(tmp_path / "junk.sqlite")


# -- kill -9 at many points ------------------------------------------------------------------------------


def _kill_script(tmp_path: Path, turns: int) -> Path:
    body = []
    for i in range(turns):
        body.append({"reasoning": f"step {i}", "text": f"turn {i} " * 20,
                     "tool_calls": [{"tool": "read", "args": {"path": "a.txt"}}, {"tool": "grep", "args": {"pattern": "alpha"}}]})
    body.append({"text": "finished"})
    return write_script(tmp_path / "long.yaml", body)


@pytest.mark.parametrize("kill_after", [1, 7, 23, 58, 131, 260])
def test_kill_9_at_any_point_leaves_a_database_that_loads(ws: Path, tmp_path: Path, write_manifest: Callable[..., Path], kill_after: int) -> None:
    """`agentcore run --events jsonl` prints each event after the recorder committed it; after
    `kill_after` lines the process is killed with SIGKILL mid-run. The database must pass an
    integrity check, every message must have all its parts, the session must load, and every
    event printed before the kill must be in it, in order."""
    script = _kill_script(tmp_path, 40)
    mpath = write_manifest({"name": "k", "tools": ["read", "grep"], "requires": {"fs": {"read": ["{workspace}/**"]}},
                            "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]})
    db = tmp_path / "db.sqlite"
    cmd = [sys.executable, "-m", "agentcore.cli.main", "run", "--manifest", str(mpath), "--workspace", str(ws),
           "--model", f"script:{script}", "--db", str(db), "--events", "jsonl", "go"]
    # A killed process cannot remove its session directory: give it a temp dir of this test's own.
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path, env={**os.environ, "TMPDIR": str(own_tmp)})
    assert proc.stdout is not None
    printed: list[dict[str, Any]] = []
    for line in proc.stdout:
        printed.append(json.loads(line))
        if len(printed) >= kill_after:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before the kill point"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    empty = conn.execute("SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM parts p WHERE p.message_id = m.id)").fetchone()[0]
    assert empty == 0
    conn.close()
    with Recorder(db) as rec:
        (row,) = rec.sessions()
        history = [Message.from_dict(m) for m in rec.history(row["id"])]
        events = list(rec.events(row["id"]))
    assert events[: len(printed)] == printed  # everything reported before the kill is there
    assert len(history) == sum(1 for e in events if e["type"] == "message_added")
    assert [m.to_dict() for m in history] == [e["message"] for e in events if e["type"] == "message_added"]


def test_the_database_path_honours_xdg_data_home(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-c", "from agentcore.recorder.store import default_db_path; print(default_db_path())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / "data" / "agentcore" / "sessions.db")


def test_a_new_database_and_its_side_files_are_private_to_their_owner(tmp_path: Path) -> None:
    """Recordings hold prompts and what tools read; `--db` may point into a directory others can read."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    old = os.umask(0o022)
    try:
        conn = connect(shared / "s.db")
        conn.execute("INSERT INTO sessions(id, created_at, updated_at) VALUES ('s', 0, 0)")  # a write: the -wal file appears
        made = [p for p in shared.iterdir()]
        assert {p.name for p in made} >= {"s.db", "s.db-wal"}
        assert {p.name: p.stat().st_mode & 0o777 for p in made} == {p.name: 0o600 for p in made}
        conn.close()
        # An existing database keeps the mode its owner gave it.
        os.chmod(shared / "s.db", 0o640)
        connect(shared / "s.db").close()
        assert (shared / "s.db").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


def test_two_processes_creating_the_same_database_at_once_both_open_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `agentcore run`s starting together on a new database: both read schema version 0, one migrates,
    the other must then find the schema there rather than create its tables a second time. A real second
    process migrates the database at the worst moment: after this one read the version, before it locks."""
    path = tmp_path / "db.sqlite"
    real_connect = sqlite3.connect
    other: list[subprocess.CompletedProcess[str]] = []

    def connect_with_a_rival(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)

        def before(statement: str) -> None:
            if statement.startswith("BEGIN IMMEDIATE") and not other:
                code = "import sys; from pathlib import Path; from agentcore.recorder.store import connect; connect(Path(sys.argv[1])).close()"
                other.append(subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}))

        conn.set_trace_callback(before)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_with_a_rival)
    conn = connect(path)
    conn.set_trace_callback(None)
    monkeypatch.undo()
    assert other and other[0].returncode == 0, other[0].stderr if other else "the rival never ran"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='sessions'").fetchone()[0] == 1
    conn.close()


def test_a_database_created_through_a_dangling_symlink_is_private(tmp_path: Path) -> None:
    """`--db` naming a symlink to a file not yet there: the file SQLite creates at the target is the owner's alone."""
    target_dir = tmp_path / "elsewhere"
    target_dir.mkdir(mode=0o755)
    link = tmp_path / "link.db"
    link.symlink_to(target_dir / "real.db")
    old = os.umask(0o022)
    try:
        with Recorder(link) as rec:
            assert rec.sessions() == []
            made = list(target_dir.iterdir())
            assert {p.name for p in made} >= {"real.db"}
            assert {p.name: p.stat().st_mode & 0o777 for p in made} == {p.name: 0o600 for p in made}
    finally:
        os.umask(old)
    assert link.is_symlink()  # the link is followed, not replaced
