"""The recorder: sessions, messages, parts, decisions and events in SQLite.

- WAL mode; every event is written in a transaction of its own (a message
  with its parts in one), so a `kill -9` at any moment leaves a database
  that opens and a session whose every completed part loads.
- The schema is versioned with `PRAGMA user_version`; `MIGRATIONS[n]` takes a
  database from version n to n + 1, and opening a database runs what is
  missing, in one transaction each. A database newer than this code is
  refused rather than misread.
- API keys never reach it: they live in the model client, and no event
  carries one.

The recorder is an observer: `AgentLoop.add_observer(recorder.observe)`.
`attach(session, ...)` names a top-level session's manifest, workspace and
model; subagents' sessions are recorded with their parent when their first
run starts.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

SCHEMA_VERSION = 1
# Output chunks kept per call; beyond it the envelope's head (and its sidecar) hold the output.
CHUNK_BYTES_PER_CALL = 256 * 1024

MIGRATIONS: dict[int, str] = {
    0: """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        parent_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
        parent_call_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        manifest TEXT,
        workspace TEXT,
        model TEXT,
        title TEXT,
        headless INTEGER,
        remembered TEXT
    );
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        started_at REAL NOT NULL,
        finished_at REAL,
        prompt TEXT,
        stop_reason TEXT,
        error TEXT,
        usage TEXT
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        run_id TEXT,
        role TEXT NOT NULL,
        created_at REAL NOT NULL,
        usage TEXT
    );
    CREATE TABLE parts (
        id INTEGER PRIMARY KEY,
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE TABLE decisions (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        call_id TEXT,
        tool TEXT,
        layer TEXT,
        choice TEXT NOT NULL,
        answered_by TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        run_id TEXT,
        call_id TEXT,
        data TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX events_session ON events(session_id, id);
    CREATE INDEX messages_session ON messages(session_id, id);
    CREATE INDEX parts_message ON parts(message_id, seq);
    CREATE INDEX runs_session ON runs(session_id, started_at);
    """,
}


class RecorderError(Exception):
    """The database cannot be used (newer schema, not a database, unknown session)."""


def database_files(path: Path) -> tuple[Path, ...]:
    """The database and the side files SQLite keeps beside it. A host that records a session keeps them
    from the agent (`extra_protected`): a recording it could edit could give a continued session
    "always" answers nobody gave, or a replay consent nobody gave."""
    return tuple(Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm", "-journal"))


def default_db_path() -> Path:
    """`$XDG_DATA_HOME/agentcore/sessions.db` (default `~/.local/share/agentcore/sessions.db`)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "agentcore" / "sessions.db"


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating and migrating) the database at `path`."""
    # Through a symlink, the file (and SQLite's side files beside it) is the link's target: create that one
    # privately, as a dangling link would otherwise have SQLite create it with the umask's mode.
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _create_private(path)
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses at most the last commits, never consistency
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        _migrate(conn)
        _check_schema(conn, path)
    except (sqlite3.DatabaseError, RecorderError) as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, RecorderError):
            raise
        raise RecorderError(f"{path} is not a usable session database ({exc})") from None
    return conn


def _check_schema(conn: sqlite3.Connection, path: Path) -> None:
    """A database handed to the user may carry, at this schema version, tables that are not ours or objects
    agentcore never makes: a trigger runs on every INSERT this code does (it could rewrite a session's
    remembered answers as a run is recorded), a view or a missing table turns every read into an error.
    Anything but exactly the schema the migrations make is refused, before one statement touches it."""
    found = _schema_of(conn)
    if found != _expected_schema():
        extra = sorted(f"{kind} {name}" for kind, name, _ in found - _expected_schema())
        missing = sorted(f"{kind} {name}" for kind, name, _ in _expected_schema() - found)
        detail = "; ".join(filter(None, (extra and "not agentcore's: " + ", ".join(extra[:5]),
                                          missing and "changed or missing: " + ", ".join(missing[:5]))))
        raise RecorderError(f"{path} is not a session database agentcore wrote ({detail})")


def _schema_of(conn: sqlite3.Connection) -> frozenset[tuple[str, str, str]]:
    # SQLite's own objects (automatic indexes, sqlite_sequence, the statistics ANALYZE keeps) are not ours to judge;
    # whitespace is not part of a definition.
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").fetchall()
    return frozenset((str(kind), str(name), " ".join(str(sql).split())) for kind, name, sql in rows)


@functools.cache
def _expected_schema() -> frozenset[tuple[str, str, str]]:
    """The schema objects a database this code made holds (the migrations, run on an empty database)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _migrate(conn)
        return _schema_of(conn)
    finally:
        conn.close()


def _create_private(path: Path) -> None:
    """A new database starts as an empty file only its owner can read: recordings hold prompts and what tools
    read, and `--db` may point into a directory others can list. SQLite gives its -wal and -shm files the
    database file's mode."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass  # an existing database keeps the mode its owner gave it
    except OSError as exc:
        raise RecorderError(f"cannot create the session database {path}: {exc.strerror}") from None


def _migrate(conn: sqlite3.Connection) -> None:
    version = _user_version(conn)
    while version < SCHEMA_VERSION:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Read again under the write lock: another process opening the same database may have
            # migrated it since the read above, and its tables must not be created a second time.
            version = _user_version(conn)
            if version < SCHEMA_VERSION:
                for statement in (s.strip() for s in MIGRATIONS[version].split(";")):
                    if statement:
                        conn.execute(statement)
                version += 1
                conn.execute(f"PRAGMA user_version={version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    if version > SCHEMA_VERSION:
        raise RecorderError(f"the session database has schema version {version}; this agentcore reads up to {SCHEMA_VERSION}")


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _loaded(text: Any, what: str) -> dict[str, Any]:
    """A JSON column read back; a row that is not what this code wrote (edited, damaged) is a RecorderError
    saying so, never a traceback or a value of the wrong type handed on."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise RecorderError(f"the session database is damaged: {what} is not a JSON object")
    return value


@dataclass
class _Live:
    """What the recorder remembers about a session while it is being recorded."""

    session: Any = None  # the engine Session (top-level sessions only), for its remembered answers
    asks: dict[str, dict[str, Any]] | None = None  # call id -> ask request (for decisions)
    chunk_bytes: dict[str, int] | None = None  # call id -> output bytes recorded


class Recorder:
    """Writes what an agent run does; reads it back for `sessions` and replay."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = connect(self.path)
        self._live: dict[str, _Live] = {}
        self._known: set[str] = set()  # sessions with a row already (saves a statement per event)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------
    def attach(self, session: Any, *, manifest: str, workspace: str | None, model: str, title: str = "") -> None:
        """Record `session` (a top-level one) with what it runs; idempotent."""
        now = time.time()
        with self._tx():
            self._db.execute(
                "INSERT INTO sessions(id, created_at, updated_at, manifest, workspace, model, title, headless) VALUES (?,?,?,?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET updated_at=excluded.updated_at, model=excluded.model",
                (session.id, now, now, manifest, workspace, model, title[:200], int(bool(session.headless))),
            )
        self._known.add(session.id)
        self._live.setdefault(session.id, _Live()).session = session

    def observe(self, event: Any) -> None:
        """Record one loop or engine event (an observer for `AgentLoop.add_observer`)."""
        handler = _HANDLERS.get(event.type)
        doc = event.to_dict()
        row = (event.session_id, event.type, doc.get("run_id"), doc.get("call_id"), json.dumps(doc, ensure_ascii=False), time.time())
        if handler is _on_other and event.session_id in self._known:
            # Nothing but the event row to write (most events): one statement is a transaction of its
            # own, as atomic as BEGIN ... COMMIT around it and two round trips cheaper.
            self._db.execute(_INSERT_EVENT, row)
            return
        with self._tx():
            if handler is not None and handler(self, event, doc) is False:
                return  # the handler chose not to keep this event (an output chunk past the bound)
            self._db.execute(_INSERT_EVENT, row)

    def _tx(self) -> "_Tx":
        return _Tx(self._db)

    def _ensure_session(self, session_id: str, parent_id: str | None = None, parent_call_id: str | None = None) -> None:
        if session_id in self._known and parent_id is None:
            return
        self._known.add(session_id)
        now = time.time()
        self._db.execute(
            "INSERT INTO sessions(id, parent_id, parent_call_id, created_at, updated_at) VALUES (?,?,?,?,?) ON CONFLICT(id) DO NOTHING",
            (session_id, parent_id, parent_call_id, now, now),
        )

    def _on_run_started(self, event: Any, doc: dict[str, Any]) -> None:
        if event.parent_session_id is not None:
            self._ensure_session(event.parent_session_id)
        self._ensure_session(event.session_id, event.parent_session_id, event.parent_call_id)
        if event.parent_session_id is not None:  # the row may predate the run (an event came first)
            self._db.execute("UPDATE sessions SET parent_id=?, parent_call_id=? WHERE id=? AND parent_id IS NULL",
                             (event.parent_session_id, event.parent_call_id, event.session_id))
        self._db.execute("UPDATE sessions SET updated_at=?, model=COALESCE(model, ?), title=COALESCE(NULLIF(title, ''), ?) WHERE id=?",
                         (time.time(), event.model, event.prompt[:200], event.session_id))
        self._db.execute("INSERT OR REPLACE INTO runs(id, session_id, started_at, prompt) VALUES (?,?,?,?)",
                         (event.run_id, event.session_id, time.time(), event.prompt))

    def _on_message(self, event: Any, doc: dict[str, Any]) -> None:
        self._ensure_session(event.session_id)
        cur = self._db.execute("INSERT INTO messages(session_id, run_id, role, created_at, usage) VALUES (?,?,?,?,?)",
                               (event.session_id, event.run_id, event.message.role, time.time(),
                                json.dumps(event.usage) if event.usage else None))
        message_id = cur.lastrowid
        self._db.executemany(
            "INSERT INTO parts(message_id, seq, kind, data) VALUES (?,?,?,?)",
            [(message_id, i, p["kind"], json.dumps(p, ensure_ascii=False)) for i, p in enumerate(doc["message"]["parts"])],
        )

    def _on_run_finished(self, event: Any, doc: dict[str, Any]) -> None:
        self._db.execute("UPDATE runs SET finished_at=?, stop_reason=?, error=?, usage=? WHERE id=?",
                         (time.time(), event.stop_reason, event.error, json.dumps(event.usage), event.run_id))
        live = self._live.get(event.session_id)
        remembered = json.dumps(live.session.remembered()) if live is not None and live.session is not None else None
        self._db.execute("UPDATE sessions SET updated_at=?, remembered=COALESCE(?, remembered) WHERE id=?",
                         (time.time(), remembered, event.session_id))

    def _on_ask_raised(self, event: Any, doc: dict[str, Any]) -> None:
        live = self._live.setdefault(event.session_id, _Live())
        live.asks = live.asks or {}
        live.asks[event.call_id] = doc["request"]
        self._ensure_session(event.session_id)

    def _on_ask_answered(self, event: Any, doc: dict[str, Any]) -> None:
        live = self._live.get(event.session_id)
        request = (live.asks or {}).pop(event.call_id, {}) if live else {}
        self._ensure_session(event.session_id)
        self._db.execute(
            "INSERT INTO decisions(session_id, call_id, tool, layer, choice, answered_by, created_at) VALUES (?,?,?,?,?,?,?)",
            (event.session_id, event.call_id, request.get("tool"), request.get("layer"), event.choice, event.answered_by, time.time()),
        )

    def _on_chunk(self, event: Any, doc: dict[str, Any]) -> bool:
        live = self._live.setdefault(event.session_id, _Live())
        live.chunk_bytes = live.chunk_bytes or {}
        used = live.chunk_bytes.get(event.call_id, 0)
        size = len(event.text.encode("utf-8", "replace"))
        if used + size > CHUNK_BYTES_PER_CALL:
            return False
        live.chunk_bytes[event.call_id] = used + size
        self._ensure_session(event.session_id)
        return True

    def _on_other(self, event: Any, doc: dict[str, Any]) -> None:
        self._ensure_session(event.session_id)

    # -- reading ---------------------------------------------------------------------------
    def sessions(self, *, include_children: bool = False) -> list[dict[str, Any]]:
        """Recorded sessions, newest first."""
        where = "" if include_children else "WHERE s.parent_id IS NULL"
        rows = self._db.execute(
            "SELECT s.id, s.parent_id, s.created_at, s.updated_at, s.manifest, s.workspace, s.model, s.title, "
            "(SELECT COUNT(*) FROM runs r WHERE r.session_id = s.id), "
            "(SELECT stop_reason FROM runs r WHERE r.session_id = s.id ORDER BY started_at DESC LIMIT 1) "
            f"FROM sessions s {where} ORDER BY s.updated_at DESC"
        ).fetchall()
        keys = ("id", "parent_id", "created_at", "updated_at", "manifest", "workspace", "model", "title", "runs", "last_stop_reason")
        return [dict(zip(keys, row)) for row in rows]

    def session(self, session_id: str) -> dict[str, Any]:
        """One session's record: metadata, runs and decisions; RecorderError when unknown."""
        row = self._db.execute(
            "SELECT id, parent_id, parent_call_id, created_at, updated_at, manifest, workspace, model, title, headless, remembered "
            "FROM sessions WHERE id=?", (session_id,)).fetchone()
        if row is None:
            raise RecorderError(f"no recorded session has the id {session_id!r}")
        keys = ("id", "parent_id", "parent_call_id", "created_at", "updated_at", "manifest", "workspace", "model", "title", "headless", "remembered")
        out = dict(zip(keys, row))
        out["remembered"] = _loaded(out["remembered"], f"the remembered answers of session {session_id}") if out["remembered"] else None
        out["runs"] = [dict(zip(("id", "started_at", "finished_at", "prompt", "stop_reason", "error", "usage"),
                                r[:6] + (_loaded(r[6], f"the usage of run {r[0]}") if r[6] else None,)))
                       for r in self._db.execute("SELECT id, started_at, finished_at, prompt, stop_reason, error, usage FROM runs "
                                                 "WHERE session_id=? ORDER BY started_at", (session_id,))]
        out["decisions"] = [dict(zip(("call_id", "tool", "layer", "choice", "answered_by"), r))
                            for r in self._db.execute("SELECT call_id, tool, layer, choice, answered_by FROM decisions "
                                                      "WHERE session_id=? ORDER BY id", (session_id,))]
        out["children"] = [r[0] for r in self._db.execute("SELECT id FROM sessions WHERE parent_id=? ORDER BY created_at", (session_id,))]
        return out

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """The conversation, message by message (`{role, parts}`), as the loop had it (for continuing a session)."""
        return list(self.iter_history(session_id))

    def iter_history(self, session_id: str) -> Iterator[dict[str, Any]]:
        """`history`, one message at a time: `export` writes a long session without holding all of it.

        An unknown id is an error here, not an empty history, and raised by this call, not by the first
        `next` (which is why this is not itself a generator)."""
        self.session(session_id)
        return self._history_rows(session_id)

    def _history_rows(self, session_id: str) -> Iterator[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT m.id, m.role, p.data, p.id FROM messages m LEFT JOIN parts p ON p.message_id = m.id "
            "WHERE m.session_id=? ORDER BY m.id, p.seq", (session_id,))
        current: tuple[int, str, list[dict[str, Any]]] | None = None
        for mid, role, data, part_id in rows:
            if current is None or current[0] != mid:
                if current is not None:
                    yield {"role": current[1], "parts": current[2]}
                current = (mid, role, [])
            if data is not None:
                part = _loaded(data, f"part {part_id}")
                if not isinstance(part.get("kind"), str):
                    raise RecorderError(f"the session database is damaged: part {part_id} has no kind")
                current[2].append(part)
        if current is not None:
            yield {"role": current[1], "parts": current[2]}

    def events(self, session_id: str) -> Iterator[dict[str, Any]]:
        """The session's recorded events, in order, as they were emitted (their JSON form); an unknown id raises now."""
        self.session(session_id)
        return self._loaded_events("SELECT id, data FROM events WHERE session_id=? ORDER BY id", (session_id,))

    def tree_events(self, session_id: str) -> Iterator[dict[str, Any]]:
        """The events of the session and of its subagents' sessions, interleaved as they happened; an unknown id raises now."""
        ids = self._tree(session_id)
        marks = ",".join("?" * len(ids))
        return self._loaded_events(f"SELECT id, data FROM events WHERE session_id IN ({marks}) ORDER BY id", ids)

    def _loaded_events(self, sql: str, params: Sequence[str]) -> Iterator[dict[str, Any]]:
        # The query runs at the first `next`, as it did when the public methods were generators themselves.
        for event_id, data in self._db.execute(sql, params):
            yield _loaded(data, f"event {event_id}")

    def _tree(self, session_id: str) -> list[str]:
        self.session(session_id)
        ids = [session_id]
        i = 0
        while i < len(ids):
            ids += [r[0] for r in self._db.execute("SELECT id FROM sessions WHERE parent_id=?", (ids[i],))]
            i += 1
        return ids

    def remove(self, session_id: str) -> int:
        """Delete a session with its runs, messages, events and subagent sessions; returns sessions removed."""
        ids = self._tree(session_id)
        with self._tx():
            for sid in reversed(ids):
                for table in ("events", "decisions", "parts", "messages", "runs"):
                    if table == "parts":
                        self._db.execute("DELETE FROM parts WHERE message_id IN (SELECT id FROM messages WHERE session_id=?)", (sid,))
                    else:
                        self._db.execute(f"DELETE FROM {table} WHERE session_id=?", (sid,))
                self._db.execute("DELETE FROM sessions WHERE id=?", (sid,))
        return len(ids)

    def absorb(self, other: Path) -> list[str]:
        """Copy every session recorded in the database at `other` into this one; returns their ids.

        For batch workers, which record into a database of their own. Session and run ids are kept;
        row ids are renumbered (in order, so messages, parts and events load as they were written).
        All or nothing: a session id this database already has is an error, and nothing is copied.
        """
        self._attach(os.fspath(other))
        try:
            ids = [r[0] for r in self._db.execute("SELECT id FROM src.sessions ORDER BY rowid")]
            clash = self._db.execute("SELECT id FROM main.sessions WHERE id IN (SELECT id FROM src.sessions) LIMIT 1").fetchone()
            if clash is not None:
                raise RecorderError(f"the session {clash[0]!r} is recorded already")
            with self._tx():
                self._db.execute("PRAGMA defer_foreign_keys=ON")
                self._copy_rows()
        finally:
            self._db.execute("DETACH DATABASE src")
        return ids

    def _attach(self, path: str) -> None:
        """Attach `path` as `src`, at this schema.

        A worker of this agentcore wrote it at this schema: attached as it is.
        Anything else (an older schema, a newer one, not a database) goes through
        `connect` first, which migrates it or says why it cannot be read. Opening
        a second connection for every worker database cost the batch driver more
        than copying its rows.
        """
        try:
            self._db.execute("ATTACH DATABASE ? AS src", (path,))
        except sqlite3.DatabaseError:
            connect(Path(path)).close()  # raises RecorderError with the reason
            raise
        try:
            version = self._db.execute("PRAGMA src.user_version").fetchone()[0]
        except sqlite3.DatabaseError:
            version = None  # not readable as it is: connect() below says why
        if version == SCHEMA_VERSION:
            return
        self._db.execute("DETACH DATABASE src")
        connect(Path(path)).close()
        self._db.execute("ATTACH DATABASE ? AS src", (path,))

    def _copy_rows(self) -> None:
        offset = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM main.messages").fetchone()[0]
        self._db.execute("INSERT INTO main.sessions SELECT * FROM src.sessions ORDER BY rowid")
        self._db.execute("INSERT INTO main.runs SELECT * FROM src.runs ORDER BY rowid")
        self._db.execute("INSERT INTO main.messages(id, session_id, run_id, role, created_at, usage) "
                         "SELECT id + ?, session_id, run_id, role, created_at, usage FROM src.messages ORDER BY id", (offset,))
        self._db.execute("INSERT INTO main.parts(message_id, seq, kind, data) SELECT message_id + ?, seq, kind, data FROM src.parts ORDER BY id",
                         (offset,))
        self._db.execute("INSERT INTO main.decisions(session_id, call_id, tool, layer, choice, answered_by, created_at) "
                         "SELECT session_id, call_id, tool, layer, choice, answered_by, created_at FROM src.decisions ORDER BY id")
        self._db.execute("INSERT INTO main.events(session_id, type, run_id, call_id, data, created_at) "
                         "SELECT session_id, type, run_id, call_id, data, created_at FROM src.events ORDER BY id")

    def export(self, session_id: str) -> Iterator[dict[str, Any]]:
        """JSON Lines records: the session, then its messages, decisions and events (children follow their parent)."""
        info = self.session(session_id)
        yield {"record": "session", **{k: v for k, v in info.items() if k not in ("children",)}}
        for message in self.iter_history(session_id):
            yield {"record": "message", "session_id": session_id, **message}
        for event in self.events(session_id):
            yield {"record": "event", **event}
        for child in info["children"]:
            yield from self.export(child)


_INSERT_EVENT = "INSERT INTO events(session_id, type, run_id, call_id, data, created_at) VALUES (?,?,?,?,?,?)"


class _Tx:
    """One write transaction (BEGIN IMMEDIATE … COMMIT, rolled back on error)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self._db.execute("ROLLBACK" if kind is not None else "COMMIT")


_HANDLERS: dict[str, Any] = {
    "run_started": Recorder._on_run_started,
    "message_added": Recorder._on_message,
    "run_finished": Recorder._on_run_finished,
    "ask_raised": Recorder._on_ask_raised,
    "ask_answered": Recorder._on_ask_answered,
    "output_chunk": Recorder._on_chunk,
}


def _on_other(recorder: Recorder, event: Any, doc: dict[str, Any]) -> None:
    recorder._on_other(event, doc)


for _t in ("call_started", "stage_decided", "call_finished", "model_delta", "model_retried"):
    _HANDLERS[_t] = _on_other
