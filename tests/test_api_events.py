"""The engine's event stream, seen through the public API only (agentcore.api).

Every call emits CallStarted, one StageDecided per stage it reaches, AskRaised
and AskAnswered around an ask, OutputChunks while a tool runs, and CallFinished
with the envelope; all carry the session and call ids. Real engine, real files,
real bwrap for `bash`, a real loopback HTTP server for `web_fetch`.
"""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore.api import (
    AllowAllWatchdog,
    AskAnswered,
    AskRaised,
    CallFinished,
    CallStarted,
    Engine,
    Event,
    OutputChunk,
    ScriptedBroker,
    StageDecided,
    load_manifest,
)

pytestmark = pytest.mark.anyio

READ_ALLOW = {"permission": "read", "pattern": "*", "action": "allow"}


def _types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def _stages(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.stage, e.decision) for e in events if isinstance(e, StageDecided)]


@pytest.fixture
def ws(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace("ws", {"a.txt": "one\ntwo\n", "secret.txt": "s\n", "fifo-dir/.keep": ""})


def _engine(write_manifest: Callable[..., Path], ws: Path, *, rules: list[dict[str, str]], tools: list[str], broker: Any = None, **extra: Any) -> Engine:
    data = {
        "name": "events",
        "tools": tools,
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}, **extra.pop("requires", {})},
        "rules": rules,
        **extra,
    }
    m = load_manifest(write_manifest(data), workspace=ws)
    return Engine(m, watchdog=AllowAllWatchdog(), broker=broker)


async def test_an_allowed_call_emits_every_stage_in_order_with_its_ids(write_manifest: Callable[..., Path], ws: Path) -> None:
    engine = _engine(write_manifest, ws, rules=[READ_ALLOW], tools=["read"])
    seen: list[Event] = []
    engine.add_observer(seen.append)
    with engine.open_session() as session:
        env = await engine.call(session, "read", {"path": "a.txt", "offset": 2}, call_id="c-1")
    assert env.type == "output"
    assert _types(seen) == ["call_started"] + ["stage_decided"] * 5 + ["call_finished"]
    assert _stages(seen) == [("schema", "allow"), ("capability", "allow"), ("permission", "allow"), ("watchdog", "allow"), ("execution", "allow")]
    assert {(e.session_id, e.call_id, e.parent_call_id) for e in seen} == {(session.id, "c-1", None)}
    started = seen[0]
    assert isinstance(started, CallStarted)
    assert (started.tool, started.kind, started.title) == ("read", "read", "Read a.txt")
    assert [loc.to_dict() for loc in started.locations] == [{"path": os.path.join(ws, "a.txt"), "line": 2}]
    assert started.raw_input == {"path": "a.txt", "offset": 2}
    finished = seen[-1]
    assert isinstance(finished, CallFinished) and finished.envelope is env


async def test_a_refusal_ends_the_events_at_the_refusing_stage(write_manifest: Callable[..., Path], ws: Path) -> None:
    engine = _engine(write_manifest, ws, rules=[READ_ALLOW, {"permission": "read", "pattern": "{workspace}/secret.txt", "action": "deny"}], tools=["read"])
    seen: list[Event] = []
    with engine.open_session() as session:
        env = await engine.call(session, "read", {"path": "secret.txt"}, observer=seen.append)
    assert env.refusal == {"layer": "permission", "code": "denied", "scope": "manifest", "rule_index": 1}
    assert _stages(seen) == [("schema", "allow"), ("capability", "allow"), ("permission", "deny")]
    assert [e.code for e in seen if isinstance(e, StageDecided)][-1] == "denied"
    assert isinstance(seen[-1], CallFinished) and seen[-1].envelope is env


async def test_invalid_arguments_still_start_the_call_with_a_plain_title(write_manifest: Callable[..., Path], ws: Path) -> None:
    engine = _engine(write_manifest, ws, rules=[READ_ALLOW], tools=["read"])
    seen: list[Event] = []
    with engine.open_session() as session:
        env = await engine.call(session, "read", {"path": 7}, observer=seen.append)
    assert env.error_code == "invalid_arguments"
    assert isinstance(seen[0], CallStarted) and seen[0].title == "read" and seen[0].locations == ()
    assert _stages(seen) == [("schema", "deny")]


async def test_an_unknown_tool_is_reported_as_started_then_refused(write_manifest: Callable[..., Path], ws: Path) -> None:
    engine = _engine(write_manifest, ws, rules=[READ_ALLOW], tools=["read"])
    seen: list[Event] = []
    with engine.open_session() as session:
        env = await engine.call(session, "no_such_tool", {}, observer=seen.append)
    assert env.error_code == "unknown_tool"
    assert _types(seen) == ["call_started", "stage_decided", "call_finished"]
    assert isinstance(seen[0], CallStarted) and seen[0].kind == "other"


async def test_an_answered_ask_names_who_answered(write_manifest: Callable[..., Path], ws: Path) -> None:
    broker = ScriptedBroker(["allow_once"])
    engine = _engine(write_manifest, ws, rules=[], tools=["read"], broker=broker)
    seen: list[Event] = []
    with engine.open_session(headless=False) as session:
        env = await engine.call(session, "read", {"path": "a.txt"}, observer=seen.append)
    assert env.type == "output"
    raised = [e for e in seen if isinstance(e, AskRaised)]
    answered = [e for e in seen if isinstance(e, AskAnswered)]
    assert len(raised) == 1 and raised[0].request is broker.requests[0]
    assert [(a.choice, a.answered_by) for a in answered] == [("allow_once", "scripted")]
    # The ask comes after the stage that asked and before execution.
    order = _types(seen)
    assert order.index("ask_raised") < order.index("ask_answered") < len(order) - 2
    assert _stages(seen)[-1] == ("execution", "allow")


async def test_a_headless_ask_is_answered_by_headless(write_manifest: Callable[..., Path], ws: Path) -> None:
    engine = _engine(write_manifest, ws, rules=[], tools=["read"])
    seen: list[Event] = []
    with engine.open_session() as session:
        env = await engine.call(session, "read", {"path": "a.txt"}, observer=seen.append)
    assert env.refusal == {"layer": "ask", "code": "headless", "asked_by": "permission"}
    assert [(e.choice, e.answered_by) for e in seen if isinstance(e, AskAnswered)] == [("reject_once", "headless")]
    assert ("execution", "allow") not in _stages(seen)


async def test_stream_yields_the_same_events_ending_with_the_envelope(write_manifest: Callable[..., Path], ws: Path) -> None:
    engine = _engine(write_manifest, ws, rules=[{"permission": "*", "pattern": "*", "action": "allow"}], tools=["read", "grep"])
    engine.add_observer(lambda e: None)  # another observer does not take events away from the stream
    with engine.open_session() as session:
        streamed: list[Event] = []
        async with engine.stream(session, "grep", {"pattern": "two"}) as events:
            async for event in events:
                streamed.append(event)
        direct: list[Event] = []
        env = await engine.call(session, "grep", {"pattern": "two"}, observer=direct.append)
    assert _types(streamed) == _types(direct)
    assert isinstance(streamed[-1], CallFinished)
    assert env.type == "output" and env.data["total"] == 1
    assert streamed[-1].envelope.data["matches"] == env.data["matches"]


async def test_a_failing_observer_changes_nothing(write_manifest: Callable[..., Path], ws: Path) -> None:
    engine = _engine(write_manifest, ws, rules=[READ_ALLOW], tools=["read"])

    def broken(event: Event) -> None:
        raise RuntimeError("observer bug")

    seen: list[Event] = []
    engine.add_observer(broken)
    engine.add_observer(seen.append)
    with engine.open_session() as session:
        env = await engine.call(session, "read", {"path": "a.txt"})
    assert env.type == "output" and env.data["content"] == "one\ntwo\n"
    assert _types(seen)[-1] == "call_finished"


async def test_events_serialise_to_json(write_manifest: Callable[..., Path], ws: Path) -> None:
    import json

    broker = ScriptedBroker(["reject_once"])
    engine = _engine(write_manifest, ws, rules=[], tools=["read"], broker=broker)
    seen: list[Event] = []
    with engine.open_session(headless=False) as session:
        await engine.call(session, "read", {"path": "a.txt"}, observer=seen.append)
    docs = [json.loads(json.dumps(e.to_dict())) for e in seen]
    assert [d["type"] for d in docs] == _types(seen)
    ask = next(d for d in docs if d["type"] == "ask_raised")
    assert ask["request"]["layer"] == "permission" and ask["request"]["subjects"] == [f"fs.read {ws}/a.txt"]
    assert docs[-1]["envelope"]["metadata"]["refusal"]["code"] == "rejected"


# -- output while a tool runs ------------------------------------------------------------------


async def test_bash_output_arrives_while_the_command_runs(agent_for: Callable[..., Any], lab: Any) -> None:
    """The command blocks on a FIFO that only the observer opens, after it has seen the first line:
    the call can finish only if that line was delivered while the command was still running."""
    from test_bash_support import ANY, allow

    os.mkfifo(lab.ws / "gate")
    agent = agent_for([allow("echo", ANY), allow("cat", ANY)])
    seen: list[Event] = []

    def open_gate() -> None:
        with open(lab.ws / "gate", "w") as f:
            f.write("released\n")

    async def observer(event: Event) -> None:
        seen.append(event)
        if isinstance(event, OutputChunk) and "waiting" in event.text:
            await anyio.to_thread.run_sync(open_gate)

    with anyio.fail_after(60):
        env = await agent.engine.call(agent.session, "bash", {"command": "echo waiting; cat gate; echo done"}, observer=observer)
    assert env.type == "output", env.to_dict()
    assert env.data["output"] == "waiting\nreleased\ndone\n"
    chunks = [e for e in seen if isinstance(e, OutputChunk)]
    assert "".join(c.text for c in chunks) == env.data["output"]
    assert {c.stream for c in chunks} == {"output"}
    assert seen.index(chunks[-1]) < len(seen) - 1 and isinstance(seen[-1], CallFinished)
    assert ("environment", "allow") in _stages(seen)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/start":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.end_headers()
            return
        body = b"x" * (600 * 1024)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


async def test_web_fetch_reports_progress_without_the_url(write_manifest: Callable[..., Path], ws: Path, http_server: int) -> None:
    host = f"127.0.0.1:{http_server}"
    engine = _engine(
        write_manifest, ws, rules=[{"permission": "*", "pattern": "*", "action": "allow"}], tools=["web_fetch"],
        requires={"net": {"hosts": [host]}},
    )
    seen: list[Event] = []
    with engine.open_session() as session:
        env = await engine.call(session, "web_fetch", {"url": f"http://{host}/start"}, observer=seen.append)
    assert env.type == "output", env.to_dict()
    notes = [e.text for e in seen if isinstance(e, OutputChunk)]
    assert {e.stream for e in seen if isinstance(e, OutputChunk)} == {"progress"}
    assert notes[0] == "redirect 1 (status 302)"
    assert "received 614400 bytes in all" in notes
    assert any(n.startswith("received ") and n != "received 614400 bytes in all" for n in notes)  # during the body
    assert not any("127.0.0.1" in n or "/page" in n for n in notes)


# -- subagents -------------------------------------------------------------------------------


async def test_a_subagents_events_are_attributed_to_the_parents_task_call(write_manifest: Callable[..., Path], ws: Path) -> None:
    async def runner(child_engine: Engine, child: Any, prompt: str, description: str) -> str:
        env = await child_engine.call(child, "read", {"path": "a.txt"}, call_id="child-read")
        return env.data["content"]

    engine = _engine(
        write_manifest, ws, rules=[READ_ALLOW, {"permission": "task", "pattern": "*", "action": "allow"}], tools=["read", "task"]
    )
    engine.subagent_runner = runner
    seen: list[Event] = []
    engine.add_observer(seen.append)
    with engine.open_session() as session:
        env = await engine.call(session, "task", {"description": "d", "prompt": "p"}, call_id="task-1")
    assert env.type == "output" and env.data["result"] == "one\ntwo\n"
    child_events = [e for e in seen if e.call_id == "child-read"]
    assert child_events and {e.parent_call_id for e in child_events} == {"task-1"}
    assert {e.session_id for e in child_events} != {session.id}
    task_events = [e for e in seen if e.call_id == "task-1"]
    assert {e.parent_call_id for e in task_events} == {None}
    # The child's whole call happens inside the parent's task call.
    assert seen.index(task_events[0]) < seen.index(child_events[0]) < seen.index(child_events[-1]) < seen.index(task_events[-1])
