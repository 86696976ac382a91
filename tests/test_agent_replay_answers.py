"""Replay answers an ask only with the answer the recording gave to that very ask."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent_support import scripted_loop, write_script
from agentcore.agent.replay import replay_session
from agentcore.api import AllowAllWatchdog, Engine, ScriptedBroker, load_manifest
from agentcore.recorder.store import Recorder

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace("ws", {"a.txt": "alpha\n"})


async def _record(path: Path, ws: Path, script: Path, db: Path, answers: list[str]) -> str:
    """Run `script` once in `ws`, the human giving `answers` in order, recorded in `db`; the session's id."""
    engine = Engine(load_manifest(path, workspace=ws), watchdog=AllowAllWatchdog(), broker=ScriptedBroker(answers))
    with Recorder(db) as recorder:
        async with scripted_loop(engine, script) as (loop, _seen):
            loop.add_observer(recorder.observe)
            with engine.open_session(headless=False) as session:
                recorder.attach(session, manifest=str(path), workspace=str(ws), model=loop.model.name, title="go")
                result = await loop.run(session, "go")
    assert result.stop_reason == "end_turn"
    return session.id


async def test_a_subagents_rejected_call_is_not_approved_by_the_parents_answer_to_the_same_call_id(
        ws: Path, tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    # Writes ask; the model (or a provider numbering calls per conversation) gives the parent's and the
    # subagent's calls the same id.
    path = write_manifest({"name": "replay", "tools": ["write", "task"], "requires": {"fs": {"write": ["{workspace}/**"]}},
                           "rules": [{"permission": "task", "pattern": "*", "action": "allow"}]})
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "write", "id": "c1", "args": {"path": "ok.txt", "content": "fine"}}]},
        {"tool_calls": [{"tool": "task", "id": "t1", "args": {"description": "d", "prompt": "child work"}}]},
        # the subagent's conversation
        {"tool_calls": [{"tool": "write", "id": "c1", "args": {"path": "pwned.txt", "content": "evil"}}]},
        {"text": "child done"},
        # back in the parent
        {"text": "done"},
    ])
    db = tmp_path / "db.sqlite"
    sid = await _record(path, ws, script, db, ["allow_once", "reject_once"])  # the human allows the first, rejects the second
    assert (ws / "ok.txt").exists() and not (ws / "pwned.txt").exists()
    (ws / "ok.txt").unlink()

    report = await replay_session(db, sid, path, ws)

    assert (ws / "ok.txt").exists()  # the approved call runs again
    assert not (ws / "pwned.txt").exists()  # the rejected one must not: nobody approved it
    assert report.changes == []


async def test_a_subagent_given_its_parents_prompt_does_not_replay_the_parents_approved_calls_again(
        ws: Path, tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    path = write_manifest({"name": "replay", "tools": ["edit", "task"], "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}},
                           "rules": [{"permission": "task", "pattern": "*", "action": "allow"},
                                     {"permission": "read", "pattern": "*", "action": "allow"}]})
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "edit", "id": "c1", "args": {"path": "a.txt", "old_string": "alpha", "new_string": "alpha!"}}]},
        {"tool_calls": [{"tool": "task", "id": "t1", "args": {"description": "d", "prompt": "go"}}]},  # the user's own words
        {"text": "child done"},  # the subagent's conversation
        {"text": "done"},
    ])
    db = tmp_path / "db.sqlite"
    sid = await _record(path, ws, script, db, ["allow_once"])
    assert (ws / "a.txt").read_text() == "alpha!\n"
    (ws / "a.txt").write_text("alpha\n")

    report = await replay_session(db, sid, path, ws)

    # Which recorded turns belong to which replayed session cannot be told: the approved edit runs at most
    # once (it ran six times, once per subagent level, when the child replayed its parent's turns and answers).
    assert (ws / "a.txt").read_text() in ("alpha\n", "alpha!\n")
    assert report.missing  # and the replay says it could not make the recorded calls
