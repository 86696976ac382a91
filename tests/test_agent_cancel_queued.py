"""A cancel stops the run: nothing the model asked for runs after it, and no further model request is made."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_support import manifest, scripted_loop, write_script
from agentcore.agent.loop import RetryPolicy
from agentcore.api import AllowAllWatchdog, Engine, Tool, ToolResult, build_catalog

pytestmark = pytest.mark.anyio

EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}


class Hang(Tool):
    id = "hang"
    description = "Runs until aborted."
    parameters = EMPTY

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError


@pytest.fixture
def ws(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace("ws", {"a.txt": "alpha\n"})


async def test_cancel_during_a_call_keeps_the_turns_later_calls_from_running(ws: Path, tmp_path: Path) -> None:
    catalog = build_catalog(plugins=False, extra=[Hang()])
    engine = Engine(manifest(ws, tools=["hang", "write"], catalog=catalog), catalog=catalog, watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "hang", "args": {}}, {"tool": "write", "args": {"path": "pwned.txt", "content": "x"}}]},
        {"text": "never reached"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            hanging: set[str] = set()

            def on_event(event: Any) -> None:
                if event.type == "call_started" and event.tool == "hang":
                    hanging.add(event.call_id)
                if event.type == "stage_decided" and event.stage == "execution" and event.call_id in hanging:
                    loop.cancel(session)  # the user presses stop while the first call runs

            loop.add_observer(on_event)
            with anyio.fail_after(20):
                result = await loop.run(session, "go")
    assert result.stop_reason == "cancelled"
    assert not (ws / "pwned.txt").exists()  # the write queued behind the cancelled call never ran
    assert [e.tool for e in seen.of("call_started")] == ["hang"]
    # the model still gets a result for every call it made
    results = [p for m in result.messages if m.role == "tool" for p in m.parts]
    assert [p.envelope["metadata"]["error_code"] for p in results] == ["aborted", "aborted"]


async def test_cancel_during_the_retry_backoff_makes_no_further_request_and_runs_nothing(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws, tools=["write"]), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"error": {"status": 429, "retry_after": 3}},
        {"tool_calls": [{"tool": "write", "args": {"path": "pwned.txt", "content": "x"}}]},
        {"text": "never reached"},
    ])
    async with scripted_loop(engine, script, retry=RetryPolicy(attempts=4, base_s=0.01, max_s=30)) as (loop, seen):
        with engine.open_session() as session:
            def on_event(event: Any) -> None:
                if event.type == "model_retried":
                    loop.cancel(session)  # the user presses stop while the loop waits to retry

            loop.add_observer(on_event)
            with anyio.fail_after(20):
                started = anyio.current_time()
                result = await loop.run(session, "go")
                elapsed = anyio.current_time() - started
    assert result.stop_reason == "cancelled"
    assert not (ws / "pwned.txt").exists()
    assert seen.of("call_started") == []
    assert elapsed < 2  # the cancel ended the wait, not the Retry-After
