"""A run's token budget and request cap cover its subagents; ACP's read-only mode holds against deferred tools and specific allows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent_support import ALLOW_ALL, manifest, scripted_loop, write_script
from agentcore.api import AllowAllWatchdog, Engine, Tool, ToolResult, build_catalog

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace("ws", {"a.txt": "alpha\n" * 50})


TASK = {"tool": "task", "args": {"description": "d", "prompt": "work"}}


async def _delegate_three_forever(ws: Path, tmp_path: Path, **loop_kw: Any) -> tuple[Any, Any]:
    """A run whose first turn makes three `task` calls; every child (and then the parent) reads forever, so
    only the loop's caps stop them. Returns (the run's result, every event seen)."""
    engine = Engine(manifest(ws, tools=["read", "task"]), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [dict(TASK, args=dict(TASK["args"])) for _ in range(3)]},
        {"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}}], "repeat": "forever"},
    ])
    async with scripted_loop(engine, script, **loop_kw) as (loop, seen):
        with engine.open_session() as session:
            return await loop.run(session, "delegate"), seen


async def test_token_budget_is_not_multiplied_by_subagents(ws: Path, tmp_path: Path) -> None:
    """A run's token budget covers its subagents: three `task` calls in one turn must not get a full budget each."""
    budget = 400
    result, _seen = await _delegate_three_forever(ws, tmp_path, token_budget=budget)
    assert result.stop_reason == "token_budget"
    # The budget may be overshot by the last request of a run, never multiplied by the number of children.
    assert result.usage.total_tokens < 2 * budget, result.usage


async def test_the_request_cap_is_not_multiplied_by_subagents(ws: Path, tmp_path: Path) -> None:
    """`max_turn_requests` bounds the run and its subagents together: three `task` calls whose children would
    request forever make at most the cap's requests in all, and a child started with nothing left never runs."""
    cap = 7
    result, seen = await _delegate_three_forever(ws, tmp_path, max_turn_requests=cap)
    assert result.stop_reason == "max_turn_requests"
    replies = [e for e in seen.of("message_added") if e.message.role == "assistant"]
    assert len(replies) <= cap, len(replies)  # every model request of the tree, the children's included
    task_results = [e.envelope.to_dict() for e in seen.of("call_finished") if e.envelope.tool == "task"]
    assert len(task_results) == 3 and any(t["type"] == "error" for t in task_results), task_results


# -- ACP read-only mode and what a session's deny list does not name ---------------------------------

NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}


class Wiper(Tool):
    """A deferred extension tool that deletes (kind `delete`): read-only mode must refuse it."""

    id = "wipe_files"
    description = "Wipe files in the workspace."
    parameters = NO_ARGS
    kind = "delete"

    def __init__(self) -> None:
        self.ran = False

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        self.ran = True
        return ToolResult(data={"wiped": True})


def _read_only(engine: Engine, session: Any) -> None:
    from acp_adapter.agent import AcpOptions, AgentcoreAcp, _State

    acp = AgentcoreAcp(AcpOptions(manifest=Path("unused.yaml"), model=SimpleNamespace(id="m", provider="script")))
    state = _State(engine, session, loop=None, translator=None)  # type: ignore[arg-type]
    state.mode = "read-only"
    acp._apply_mode(state)


async def test_read_only_mode_covers_deferred_tools_found_later(ws: Path) -> None:
    wiper = Wiper()
    catalog = build_catalog(plugins=False, extra=[wiper])
    compiled = manifest(ws, tools=("read", "write", "tool_search"), deferred_tools=["wipe_files"], rules=ALLOW_ALL, catalog=catalog)
    engine = Engine(compiled, catalog=catalog, watchdog=AllowAllWatchdog())
    with engine.open_session(headless=True) as session:
        _read_only(engine, session)
        assert (await engine.call(session, "write", {"path": "b.txt", "content": "x"})).error_code == "denied"
        found = await engine.call(session, "tool_search", {"query": "wipe files"})
        assert [t["id"] for t in found.data["tools"]] == ["wipe_files"]
        env = await engine.call(session, "wipe_files", {})
    assert env.type == "error" and (env.refusal or {}).get("layer") == "permission", env.to_dict()
    assert not wiper.ran


async def test_read_only_mode_is_not_undone_by_a_specific_manifest_allow(ws: Path) -> None:
    rules = [{"permission": "write", "pattern": "{workspace}/**", "action": "allow"}, {"permission": "read", "pattern": "*", "action": "allow"}]
    engine = Engine(manifest(ws, tools=("read", "write"), rules=rules), watchdog=AllowAllWatchdog())
    with engine.open_session(headless=True) as session:
        _read_only(engine, session)
        env = await engine.call(session, "write", {"path": "b.txt", "content": "x"})
    assert env.type == "error", env.to_dict()
    assert not (ws / "b.txt").exists()


# -- pinned session denies, the core of a mode ------------------------------------------------------


async def test_a_pinned_session_deny_beats_every_allow_and_reaches_subagents(ws: Path) -> None:
    rules = [{"permission": "write", "pattern": "{workspace}/b.txt", "action": "allow"}, {"permission": "task", "pattern": "*", "action": "allow"}]
    engine = Engine(manifest(ws, tools=("write", "task"), rules=rules), watchdog=AllowAllWatchdog())
    child_envelopes: list[dict[str, Any]] = []

    async def runner(child_engine: Any, child: Any, prompt: str, description: str) -> str:
        child_envelopes.append((await child_engine.call(child, "write", {"path": "b.txt", "content": "x"})).to_dict())
        return "done"

    engine.subagent_runner = runner
    with engine.open_session(headless=True) as session:
        # The most specific allows there are: the manifest's exact path, and an "always" answer for it.
        session.set_session_rules([("write", str(ws / "b.txt"), "allow")], pinned=[("write", "*")])
        env = await engine.call(session, "write", {"path": "b.txt", "content": "x"})
        assert env.to_dict()["metadata"]["refusal"]["code"] == "denied"
        assert session.remembered()["rules"] == [["write", str(ws / "b.txt"), "allow"]]  # the mode is not an answer
        assert (await engine.call(session, "task", {"description": "d", "prompt": "write it"})).type == "output"
        with pytest.raises(ValueError):
            session.add_session_rule("write", "*", "allow", pinned=True)
    assert [e["metadata"]["refusal"]["code"] for e in child_envelopes] == ["denied"]
    assert not (ws / "b.txt").exists()


async def test_transient_session_rules_apply_but_are_never_remembered(ws: Path) -> None:
    """An editor mode's allows (auto-edit) are the host's, not the user's answers: restored elsewhere (a loaded or
    continued session), they must not come back, or the mode would outlive the editor that chose it."""
    engine = Engine(manifest(ws, tools=("write",), rules=[{"permission": "*", "pattern": "*", "action": "ask"}]),
                    watchdog=AllowAllWatchdog())
    with engine.open_session(headless=True) as session:
        session.set_session_rules([("write", str(ws / "kept.txt"), "allow")], transient=[("write", "*", "allow")])
        assert (await engine.call(session, "write", {"path": "a.txt", "content": "1"})).type == "output"  # the mode applies
        remembered = session.remembered()
    assert remembered["rules"] == [["write", str(ws / "kept.txt"), "allow"]]
    with engine.open_session(headless=True) as again:
        again.restore(remembered)
        env = await engine.call(again, "write", {"path": "b.txt", "content": "2"})
        assert env.type == "error" and env.to_dict()["metadata"]["refusal"]["layer"] == "ask", env.to_dict()
        assert (await engine.call(again, "write", {"path": "kept.txt", "content": "3"})).type == "output"  # the answer does
    assert (ws / "a.txt").read_text() == "1" and not (ws / "b.txt").exists() and (ws / "kept.txt").read_text() == "3"
