"""Timeouts versus aborts (ORDER-6): a call has one cancel scope, and execution puts its time limit on it.

What tells the two apart is whether the session aborted while the call ran.

- The engine's time limit firing is a `limit`/`timeout` refusal, never an abort.
- A session abort is `aborted`, never a timeout, even when the tool's cleanup
  runs past the time limit.
- A tool's own `TimeoutError` is the tool's error, not the engine's limit.

The tools here are real Tool subclasses run through the real pipeline; their
ceilings are made short by their own `default_timeout_s` (the engine adds 5 s).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore.api import AllowAllWatchdog, Engine, Envelope, Tool, ToolResult, build_catalog, load_manifest

pytestmark = pytest.mark.anyio

EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}


class Sleeper(Tool):
    """Signals that it started, then sleeps well past its ceiling (0.3 s)."""

    id = "sleeper"
    description = "Sleeps."
    parameters = EMPTY
    default_timeout_s = -4.7  # ceiling = -4.7 + 5 = 0.3 s

    def __init__(self) -> None:
        self.started = anyio.Event()

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        self.started.set()
        await anyio.sleep(30)
        return ToolResult(data={})


class SlowCleanup(Tool):
    """On cancellation, cleans up (shielded) for longer than its whole ceiling (0.3 s)."""

    id = "slow_cleanup"
    description = "Cleans up slowly."
    parameters = EMPTY
    default_timeout_s = -4.7

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cleaned = False

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        self.started.set()
        try:
            await anyio.sleep(30)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.6)  # the cleanup itself, not a synchronisation
            self.cleaned = True
        return ToolResult(data={})


class OwnTimeout(Tool):
    """Gives up with a TimeoutError of its own (as a client library's timeout would)."""

    id = "own_timeout"
    description = "Times out by itself."
    parameters = EMPTY

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        with anyio.fail_after(0.01):
            await anyio.sleep(5)
        return ToolResult(data={})


def _engine(write_manifest: Callable[..., Path], ws: Path, tool: Tool) -> Engine:
    catalog = build_catalog(plugins=False, extra=[tool])
    path = write_manifest({"name": "t", "tools": [tool.id], "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]})
    return Engine(load_manifest(path, workspace=ws, catalog=catalog), catalog=catalog, watchdog=AllowAllWatchdog())


async def test_the_time_limit_is_a_timeout_refusal_not_an_abort(write_manifest: Callable[..., Path], workspace: Path) -> None:
    engine = _engine(write_manifest, workspace, Sleeper())
    with engine.open_session() as session:
        env = await engine.call(session, "sleeper", {})
    assert env.error_code == "timeout"
    assert env.refusal == {"layer": "limit", "code": "timeout"}


async def test_an_abort_is_aborted_not_a_timeout(write_manifest: Callable[..., Path], workspace: Path) -> None:
    tool = Sleeper()
    engine = _engine(write_manifest, workspace, tool)
    with engine.open_session() as session:
        result: list[Envelope] = []
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                result.append(await engine.call(session, "sleeper", {}))

            tg.start_soon(run)
            await tool.started.wait()
            session.abort()
    (env,) = result
    assert env.error_code == "aborted" and env.refusal is None


async def test_an_abort_whose_cleanup_overruns_the_limit_is_still_an_abort(write_manifest: Callable[..., Path], workspace: Path) -> None:
    """The old engine inferred a timeout from the clock after the fact: this call
    ends after its 0.3 s ceiling, but only because the aborted tool cleaned up."""
    tool = SlowCleanup()
    engine = _engine(write_manifest, workspace, tool)
    with engine.open_session() as session:
        result: list[Envelope] = []
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                result.append(await engine.call(session, "slow_cleanup", {}))

            tg.start_soon(run)
            await tool.started.wait()
            session.abort()
    (env,) = result
    assert tool.cleaned
    assert env.duration_ms >= 300  # it did run past the ceiling
    assert env.error_code == "aborted" and env.refusal is None


async def test_a_tools_own_timeout_error_is_not_the_engines_limit(write_manifest: Callable[..., Path], workspace: Path) -> None:
    engine = _engine(write_manifest, workspace, OwnTimeout())
    with engine.open_session() as session:
        env = await engine.call(session, "own_timeout", {})
    assert env.type == "error" and env.error_code == "timeout"
    assert env.refusal is None  # a tool error, not a `limit` refusal
    assert "own" in (env.error_text or "")


async def test_an_earlier_abort_does_not_turn_a_later_timeout_into_an_abort(write_manifest: Callable[..., Path], workspace: Path) -> None:
    """The call and its time limit share one cancel scope; what tells them apart is whether the session
    aborted while this call ran, so an abort before the call started must not count."""
    engine = _engine(write_manifest, workspace, Sleeper())
    with engine.open_session() as session:
        session.abort()  # nothing in flight: it reaches no call
        env = await engine.call(session, "sleeper", {})
    assert env.error_code == "timeout" and env.refusal == {"layer": "limit", "code": "timeout"}


async def test_one_abort_ends_every_call_in_flight_as_aborted(write_manifest: Callable[..., Path], workspace: Path) -> None:
    """Two calls in flight: the abort ends both, and neither is reported as a timeout."""
    tools = [Sleeper(), Sleeper()]
    tools[1].id = "sleeper2"
    catalog = build_catalog(plugins=False, extra=tools)
    path = write_manifest({"name": "t", "tools": ["sleeper", "sleeper2"], "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]})
    engine = Engine(load_manifest(path, workspace=workspace, catalog=catalog), catalog=catalog, watchdog=AllowAllWatchdog())
    result: list[Envelope] = []
    with engine.open_session() as session:
        async with anyio.create_task_group() as tg:
            for tool in tools:
                async def run(tool_id: str = tool.id) -> None:
                    result.append(await engine.call(session, tool_id, {}))

                tg.start_soon(run)
            for tool in tools:
                await tool.started.wait()
            session.abort()
    assert sorted(e.error_code or "" for e in result) == ["aborted", "aborted"]
