"""The agent loop end to end: real scripted model server, real provider code, real engine.

Covers tool execution order (safe calls in parallel, others in order), bad
model output (malformed arguments, unknown tools), stop reasons, provider
failures (5xx, 429, 4xx, broken streams) with retries, cancellation in the
middle of a stream and of a tool, subagents, and headless asking.
"""

from __future__ import annotations

import copy
import errno
import http.server
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_support import ALLOW_ALL, manifest, scripted_loop, tool_results, write_script
from agentcore.agent.config import ModelConfig, open_model
from agentcore.agent.loop import AgentLoop
from agentcore.agent.model import RequestSettings
from agentcore.agent.providers import MAX_RESPONSE_CHARS
from agentcore.api import AllowAllWatchdog, Engine, Tool, ToolResult, build_catalog

pytestmark = pytest.mark.anyio

EMPTY = {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": False}


@pytest.fixture
def ws(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace("ws", {"a.txt": "alpha\nTODO one\n", "b.txt": "beta\n"})


# -- order of tool calls ----------------------------------------------------------------------


class Gate:
    """Records when calls start and end; safe calls wait until both of a pair have started."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.both = anyio.Event()
        self.started = 0


class SafeProbe(Tool):
    id = "safe_probe"
    description = "A read-only probe."
    parameters = EMPTY
    concurrency_safe = True

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        name = args["name"]
        self.gate.log.append(f"start {name}")
        self.gate.started += 1
        if name in ("a", "b"):  # a and b must overlap: each waits until both have started
            if self.gate.started >= 2:
                self.gate.both.set()
            with anyio.fail_after(10):  # guards the test: sequential execution would deadlock here
                await self.gate.both.wait()
        self.gate.log.append(f"end {name}")
        return ToolResult(data={"name": name})


class UnsafeProbe(Tool):
    id = "unsafe_probe"
    description = "A probe that changes things."
    parameters = EMPTY

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        self.gate.log.append(f"start {args['name']}")
        await anyio.sleep(0)  # a checkpoint: another task could run here if the loop let it
        self.gate.log.append(f"end {args['name']}")
        return ToolResult(data={"name": args["name"]})


async def test_safe_calls_run_together_and_the_others_alone_in_order(ws: Path, tmp_path: Path) -> None:
    gate = Gate()
    catalog = build_catalog(plugins=False, extra=[SafeProbe(gate), UnsafeProbe(gate)])
    engine = Engine(manifest(ws, tools=["safe_probe", "unsafe_probe"], catalog=catalog), catalog=catalog, watchdog=AllowAllWatchdog())
    calls = [("safe_probe", "a"), ("safe_probe", "b"), ("unsafe_probe", "c"), ("unsafe_probe", "d"), ("safe_probe", "e")]
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": t, "args": {"name": n}} for t, n in calls]},
        {"text": "done"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            assert not engine.may_wait(session)  # no MCP server: the loop has nothing to wait for
            result = await loop.run(session, "go")
    assert result.stop_reason == "end_turn" and result.tool_calls == 5
    log = gate.log
    assert {log[0], log[1]} == {"start a", "start b"}  # a and b overlapped
    assert log[4:] == ["start c", "end c", "start d", "end d", "start e", "end e"]
    # Results go back in the order the model asked for them, whatever order they finished in.
    results = seen.of("message_added")[-2].message.parts
    assert [p.envelope["data"]["name"] for p in results] == ["a", "b", "c", "d", "e"]


# -- bad model output ---------------------------------------------------------------------------


async def test_malformed_arguments_and_unknown_tools_become_error_envelopes(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [
            {"tool": "read", "arguments": '{"path": "a.txt"', "expect": {"type": "error", "error_code": "invalid_arguments", "refusal_layer": "schema"}},
            {"tool": "no_such_tool", "args": {}, "expect": {"type": "error", "error_code": "unknown_tool"}},
            {"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "output", "contains": "TODO one"}},
        ]},
        {"text": "recovered"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "go")
    assert result.stop_reason == "end_turn" and result.text == "recovered"
    assert result.problems == []  # the script server saw the three envelopes it expected
    assert result.refusals == {"schema": 2}
    started = {e.call_id: e for e in seen.of("call_started")}
    assert started["call_1"].raw_input == '{"path": "a.txt"'  # the raw text, as the model wrote it


async def test_an_endless_tool_loop_stops_at_the_request_cap(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [{"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}}], "repeat": "forever"}])
    async with scripted_loop(engine, script, max_turn_requests=7) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "go")
    assert result.stop_reason == "max_turn_requests"
    assert result.usage.requests == 7 and result.tool_calls == 7
    assert seen.of("run_finished")[0].stop_reason == "max_turn_requests"


@pytest.mark.parametrize("finish, stop", [("length", "max_tokens"), ("content_filter", "refusal"), ("stop", "end_turn")])
async def test_finish_reasons_map_to_stop_reasons(ws: Path, tmp_path: Path, finish: str, stop: str) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [{"text": "partial answer", "finish": finish}])
    async with scripted_loop(engine, script) as (loop, _seen):
        with engine.open_session() as session:
            result = await loop.run(session, "go")
    assert result.stop_reason == stop and result.text == "partial answer"


# -- provider failures ----------------------------------------------------------------------------


async def test_server_errors_are_retried_then_the_run_goes_on(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"error": {"status": 500}, "repeat": 2},
        {"error": {"status": 429, "retry_after": 0.02}},
        {"text": "fine"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "go")
    assert result.stop_reason == "end_turn" and result.text == "fine"
    retries = seen.of("model_retried")
    assert [r.status for r in retries] == [500, 500, 429]
    assert retries[-1].delay_s == 0.02  # the server's Retry-After, not the backoff
    assert result.usage.requests == 4


async def test_a_broken_stream_is_retried_and_its_partial_text_is_marked_void(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"broken": True, "text": "this answer breaks off midway through, so it must be dropped"},
        {"text": "fine"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "go")
    assert result.stop_reason == "end_turn" and result.text == "fine"
    (retry,) = seen.of("model_retried")
    assert retry.status is None and retry.partial  # text had streamed before the break
    assert [m.message.text for m in seen.of("message_added") if m.message.role == "assistant"] == ["fine"]


async def test_persistent_failures_fail_the_run_naming_the_status(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [{"error": {"status": 503}, "repeat": "forever"}])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "go")
    assert result.stop_reason == "failed"
    assert "status 503" in (result.error or "") and "after 4 attempts" in (result.error or "")
    assert len(seen.of("model_retried")) == 3


async def test_a_client_error_is_not_retried(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [{"error": {"status": 400, "message": "bad request"}}, {"text": "never"}])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "go")
    assert result.stop_reason == "failed" and "status 400" in (result.error or "")
    assert seen.of("model_retried") == []


class _EndlessText(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose answer never ends: 64 KiB of text per event until the client hangs up."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        piece = "x" * 65536
        try:
            while self.server.sent < 1 << 30:  # type: ignore[attr-defined]
                doc = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                       "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}]}
                data = f"data: {json.dumps(doc)}\n\n".encode()
                self.wfile.write(data)
                self.server.sent += len(data)  # type: ignore[attr-defined]
        except OSError:
            pass  # the client hung up

    def log_message(self, *args: Any) -> None:
        pass


async def test_a_response_that_never_ends_is_cut_off_and_fails_the_run(ws: Path) -> None:
    """Every output bounded: a model server streaming without end made the host hold all of it until the
    request's deadline (10 minutes by default). The response is cut off at MAX_RESPONSE_CHARS, unretried."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EndlessText)
    server.sent = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
        config = ModelConfig(provider="openai-compatible", name="m", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1")
        async with open_model(config) as client:
            loop = AgentLoop(engine, client, settings=RequestSettings(timeout_s=60))
            with engine.open_session() as session, anyio.fail_after(55):
                result = await loop.run(session, "go")
    finally:
        server.shutdown()
        server.server_close()
    assert result.stop_reason == "failed"
    assert f"passed {MAX_RESPONSE_CHARS >> 20} MiB" in (result.error or "") and "after 1 attempt" in (result.error or "")
    assert server.sent < 4 * MAX_RESPONSE_CHARS  # type: ignore[attr-defined]  # read no further than the cap (and buffers)


# -- cancellation -----------------------------------------------------------------------------------


async def test_cancel_mid_stream_ends_the_run_cancelled(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [{"hang": True, "text": "thinking about it..."}])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            def on_event(event: Any) -> None:
                if event.type == "model_delta":
                    loop.cancel(session)  # the stream has started and now stalls

            loop.add_observer(on_event)
            with anyio.fail_after(20):
                result = await loop.run(session, "go")
    assert result.stop_reason == "cancelled"
    assert seen.types()[-1] == "run_finished"
    assert [m.message.role for m in seen.of("message_added")] == ["user"]  # the stalled turn was never added


async def test_cancel_mid_tool_aborts_the_tool_and_kills_its_process(lab: Any, tmp_path: Path) -> None:
    """bash blocks reading a FIFO; cancel arrives once its output shows it is running."""
    fifo = lab.ws / "gate"
    os.mkfifo(fifo)
    shell = [{"cmd": "echo", "args": [{"wildcard": True}]}, {"cmd": "cat", "args": [{"wildcard": True}]}]
    engine = Engine(manifest(lab.ws, tools=["bash"], shell=shell), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "bash", "args": {"command": "echo waiting; cat gate"}}]},
        {"text": "never reached"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            def on_event(event: Any) -> None:
                if event.type == "output_chunk" and "waiting" in event.text:
                    loop.cancel(session)

            loop.add_observer(on_event)
            with anyio.fail_after(30):
                result = await loop.run(session, "go")
    assert result.stop_reason == "cancelled"
    (finished,) = seen.of("call_finished")
    assert finished.envelope.error_code == "aborted"
    assert seen.types()[-1] == "run_finished"
    # Nobody holds the FIFO open for reading any more: the sandboxed `cat` is dead.
    with pytest.raises(OSError) as exc:
        os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    assert exc.value.errno == errno.ENXIO


# -- subagents --------------------------------------------------------------------------------------


async def test_task_runs_a_subagent_through_the_same_loop(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws, tools=["read", "task"]), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "task", "args": {"description": "look", "prompt": "read a.txt and report"},
                         "expect": {"type": "output", "data": {"agent": "general", "result": "a.txt says alpha"}}}]},
        # the child's conversation
        {"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "output"}}]},
        {"text": "a.txt says alpha"},
        # back in the parent
        {"text": "the subagent says alpha"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "delegate")
    assert result.stop_reason == "end_turn" and result.text == "the subagent says alpha"
    assert result.problems == []
    child_runs = [e for e in seen.of("run_started") if e.parent_session_id == session.id]
    assert len(child_runs) == 1 and child_runs[0].parent_call_id == "call_1"
    child_calls = [e for e in seen.of("call_started") if e.session_id == child_runs[0].session_id]
    assert [c.tool for c in child_calls] == ["read"] and {c.parent_call_id for c in child_calls} == {"call_1"}
    assert result.usage.output_tokens > 0


async def test_cancel_reaches_a_running_subagent(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws, tools=["read", "task"]), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "task", "args": {"description": "look", "prompt": "child work"}}]},
        {"hang": True, "text": "the child is thinking"},
        {"text": "never"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            def on_event(event: Any) -> None:
                if event.type == "model_delta" and event.session_id != session.id:
                    loop.cancel(session)  # the parent's cancel, while the child's stream stalls

            loop.add_observer(on_event)
            with anyio.fail_after(20):
                result = await loop.run(session, "delegate")
    assert result.stop_reason == "cancelled"
    (task_done,) = [e for e in seen.of("call_finished") if e.session_id == session.id]
    assert task_done.envelope.error_code == "aborted"
    finished = seen.of("run_finished")
    assert {f.stop_reason for f in finished} == {"cancelled"} and len(finished) == 2  # the child's run ended too


# -- headless ---------------------------------------------------------------------------------------


async def test_headless_asks_are_denied_and_questions_refused(ws: Path, tmp_path: Path) -> None:
    rules = [{"permission": "read", "pattern": "*", "action": "allow"}]  # question and write: default ask
    engine = Engine(manifest(ws, tools=["read", "write", "question"], rules=rules), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [
            {"tool": "write", "args": {"path": "new.txt", "content": "x"}, "expect": {"type": "error", "error_code": "headless", "refusal_layer": "ask"}},
            {"tool": "question", "args": {"questions": [{"question": "ok?"}]}, "expect": {"type": "error", "error_code": "headless"}},
        ]},
        {"text": "done"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session(headless=True) as session:
            result = await loop.run(session, "go")
    assert result.problems == [] and result.stop_reason == "end_turn"
    assert not (ws / "new.txt").exists()
    answered = seen.of("ask_answered")
    assert answered and {a.answered_by for a in answered} == {"headless"}
    results = tool_results(seen.of("message_added"))
    assert "headless run" in results["call_2"]["error_text"] or "headless" in results["call_2"]["error_text"]
    assert ALLOW_ALL  # the module's default rules are not what this test used


class _Widget(Tool):
    id = "widget_counter"
    description = "Counts widgets in the warehouse."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        return ToolResult(data={"count": 3})


async def test_the_cached_prompt_follows_what_tool_search_wires_in(tmp_path: Path) -> None:
    from agentcore.agent.prompt import PromptCache, system_prompt, tool_specs

    catalog = build_catalog(plugins=False, extra=[_Widget()])
    compiled = manifest(tmp_path, tools=("read", "tool_search"), deferred_tools=["widget_counter"], catalog=catalog)
    engine = Engine(compiled, catalog=catalog, watchdog=AllowAllWatchdog())
    cache = PromptCache()
    with engine.open_session(headless=True) as session:
        before, specs = cache.get(engine, session)
        assert "widget_counter" not in [s.name for s in specs] and "1 more tools are available" in before
        assert cache.get(engine, session)[0] is before  # nothing changed: the cached text itself
        found = await engine.call(session, "tool_search", {"query": "count widgets"})
        assert found.type == "output", found.to_dict()
        after, specs = cache.get(engine, session)
        assert "widget_counter" in [s.name for s in specs] and "- widget_counter (" in after
        # Exactly what an uncached build gives.
        assert after == system_prompt(engine, session) and specs == tool_specs(engine.tools(session))


async def test_a_run_stopped_by_its_cap_keeps_that_reason_and_reports_the_unchecked_expectation(ws: Path, tmp_path: Path) -> None:
    engine = Engine(manifest(ws), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "output"}}]},
        {"text": "never reached"},
    ])
    async with scripted_loop(engine, script, max_turn_requests=1) as (loop, _seen):
        with engine.open_session() as session:
            capped = await loop.run(session, "go")
    # The cap is why it stopped (exit 3 for a CI operator), not "failed"; what went unchecked is still said.
    assert capped.stop_reason == "max_turn_requests" and capped.error is None
    assert capped.problems and "never sent back" in capped.problems[0]
    # Control: a failed expectation on a run that ends normally is a failure.
    wrong = write_script(tmp_path / "w.yaml", [
        {"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "error"}}]},
        {"text": "done"},
    ])
    async with scripted_loop(engine, wrong) as (loop, _seen):
        with engine.open_session() as session:
            failed = await loop.run(session, "go")
    assert failed.stop_reason == "failed" and failed.problems


@pytest.mark.parametrize(("after", "expected"), [(float("nan"), None), (float("inf"), "max"), (-3.0, 0.0), (2.0, 2.0)])
def test_a_retry_after_outside_the_usual_is_bounded(after: float, expected: object) -> None:
    from agentcore.agent.loop import RetryPolicy

    policy = RetryPolicy()
    delay = policy.delay(1, after)
    assert 0.0 <= delay <= policy.max_s
    if expected == "max":
        assert delay == policy.max_s
    elif expected is not None:
        assert delay == expected


class _CountingEngine(Engine):
    """Counts `tools` lookups: the prompt cache of a session whose tools cannot change makes none after its first."""

    lookups = 0

    def tools(self, session: Any) -> list[Tool]:
        self.lookups += 1
        return super().tools(session)


def test_only_a_session_whose_tools_cannot_change_keeps_its_prompt_unchecked(tmp_path: Path) -> None:
    from agentcore.agent.prompt import PromptCache
    from agentcore.api import tools_fixed

    (tmp_path / "skills").mkdir()
    catalog = build_catalog(plugins=False, extra=[_Widget()])
    changing = {
        "deferred": manifest(tmp_path, tools=("read", "tool_search"), deferred_tools=["widget_counter"], catalog=catalog),
        "skill": manifest(tmp_path, tools=("read", "skill"), skills={"paths": ["skills"]}),
        "mcp": manifest(tmp_path, tools=("read",), mcp={"s": {"command": "never-started"}}),
    }
    for name, compiled in changing.items():
        engine = _CountingEngine(compiled, catalog=catalog if name == "deferred" else None, watchdog=AllowAllWatchdog())
        with engine.open_session(headless=True) as session:
            assert not tools_fixed(engine, session), name
            cache = PromptCache()
            for _ in range(3):
                cache.get(engine, session)
            assert engine.lookups == 3, name  # the key is checked before every request
    fixed = _CountingEngine(manifest(tmp_path, tools=("read", "write")), watchdog=AllowAllWatchdog())
    with fixed.open_session(headless=True) as session:
        assert tools_fixed(fixed, session)
        cache = PromptCache()
        first = cache.get(fixed, session)
        assert all(cache.get(fixed, session)[0] is first[0] for _ in range(3))
        assert fixed.lookups == 1
        # A tool replaced in the catalogue (same parameters, another description) shows at the next request.
        other = copy.copy(fixed.catalog.get("read"))
        other.description = "Reads a file another way. It is the replacement."
        fixed.catalog.replace(other)
        system, specs = cache.get(fixed, session)
        assert "- read (read): Reads a file another way." in system and "Reads a file another way." not in first[0]
        assert [s.description for s in specs if s.name == "read"] == [other.description]
        assert cache.get(fixed, session)[0] is system and fixed.lookups == 2


async def test_a_subagent_keeps_its_parents_session_asks(ws: Path, tmp_path: Path) -> None:
    """A host's session-scope `ask` (here: ask before any write) holds in a subagent as in its parent.
    Before, only session denies were copied: a headless parent's write was refused, but the agent could
    have a general subagent make it, unasked."""
    engine = Engine(manifest(ws, tools=["write", "task"]), watchdog=AllowAllWatchdog())
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "task", "args": {"description": "w", "prompt": "write it"}}]},
        {"tool_calls": [{"tool": "write", "args": {"path": "planted.txt", "content": "x\n"}}]},
        {"text": "done"},
        {"text": "the subagent is done"},
    ])
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session(headless=True) as session:
            session.add_session_rule("write", "*", "ask")
            await loop.run(session, "delegate")
    (child_write,) = [e for e in seen.of("call_finished") if e.session_id != session.id]
    assert child_write.envelope.refusal is not None and child_write.envelope.refusal["code"] == "headless"
    assert not (ws / "planted.txt").exists()


async def test_a_finished_subagents_session_is_let_go(ws: Path, tmp_path: Path) -> None:
    """A closed child session is dropped from its parent's `children`: before, every `task` call of a
    long-lived session left its child (rules, stores, skill cache) behind for good, and every abort walked them all."""
    engine = Engine(manifest(ws, tools=["read", "task"]), watchdog=AllowAllWatchdog())
    turns: list[dict[str, Any]] = []
    for _ in range(3):
        turns += [{"tool_calls": [{"tool": "task", "args": {"description": "d", "prompt": "p"}}]}, {"text": "child"}]
    turns.append({"text": "parent"})
    script = write_script(tmp_path / "s.yaml", turns)
    async with scripted_loop(engine, script) as (loop, seen):
        with engine.open_session() as session:
            result = await loop.run(session, "delegate")
            assert result.text == "parent" and len(seen.of("run_started")) == 4
            assert session.children == []
