"""MCP stdio servers through the whole pipeline: a real MCPServer (the SDK's FastMCP), sandboxed by bwrap.

Every call here is a real `tools/call` to a real server process; what a
test claims about the server (it never ran, it was cancelled, it is gone)
is read from the side effects it leaves (marker files, /proc).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore.api import Engine, compile_manifest
from mcp_support import manifest, require_bwrap, server

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


def _engine(ws: Path, mcp: dict[str, Any], **kw: Any) -> Engine:
    watchdog = kw.pop("watchdog", None)
    environment = kw.pop("environment_override", None)
    return Engine(compile_manifest(manifest(mcp, **kw), workspace=ws), watchdog=watchdog, environment=environment)


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = {int(x) for x in f.read().split()}
                todo += list(kids - out)
                out |= kids
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _written(path: Path) -> Callable[[], bool]:
    """The server has created `path` and written into it: another process creates a file before it writes
    (checking `exists` alone then reads it empty)."""
    return lambda: path.exists() and path.stat().st_size > 0


async def _until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.02)  # polling a condition another process sets; bounded by fail_after


async def test_tools_are_listed_as_tools_with_ids_descriptions_schemas_and_kinds(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"demo": server()})
    with engine.open_session() as session:
        await engine.ready(session)
        tools = {t.id: t for t in engine.tools(session)}
        assert "read" in tools and "demo__echo" in tools and "demo__write_file" in tools
        echo = tools["demo__echo"]
        assert echo.description == "Echo the text back unchanged."
        assert echo.parameters["properties"]["text"]["type"] == "string" and echo.parameters["required"] == ["text"]
        # readOnlyHint is believed only because this sandbox makes it true: no fs.write, no net.hosts.
        assert echo.kind == "read" and tools["demo__read_file"].kind == "read"
        assert tools["demo__write_file"].kind == "delete"  # readOnlyHint false, destructiveHint true
        assert tools["demo__fetch"].kind == "other"  # no annotations
        (status,) = await engine.mcp_status(session)
        assert status["state"] == "ready" and status["sandbox"] == "bwrap" and status["unavailable_tools"] == []


async def test_a_read_only_hint_is_not_believed_when_the_server_can_write_or_send(tmp_path: Path) -> None:
    for extra in ({"write": [f"{tmp_path}/**"]}, {"hosts": ["example.com"]}):
        engine = _engine(tmp_path, {"demo": server(**extra)})
        with engine.open_session() as session:
            await engine.ready(session)
            tools = {t.id: t for t in engine.tools(session)}
            assert tools["demo__echo"].kind == "other", extra  # a client would approve a `read` tool unasked
            assert not tools["demo__echo"].concurrency_safe


async def test_a_call_passes_every_stage_and_invalid_arguments_never_reach_the_server(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    engine = _engine(tmp_path, {"demo": server(write=[f"{out}/**"])})
    seen: list[Any] = []
    engine.add_observer(seen.append)
    with engine.open_session() as session:
        env = await engine.call(session, "demo__echo", {"text": "hi there"})
        assert env.to_dict()["data"] == {"content": "hi there", "is_error": False}
        assert env.to_dict()["metadata"]["kind"] == "other"  # it may write: the read-only hint is not believed
        stages = [(e.stage, e.decision) for e in seen if e.type == "stage_decided"]
        assert stages == [("schema", "allow"), ("capability", "allow"), ("permission", "allow"), ("watchdog", "allow"), ("execution", "allow")]
        # Missing `content`: the schema stage refuses, and the file is never written.
        bad = await engine.call(session, "demo__write_file", {"path": str(out / "x.txt")})
        assert bad.to_dict()["metadata"]["refusal"] == {"layer": "schema", "code": "invalid_arguments"}
        assert not (out / "x.txt").exists()
        good = await engine.call(session, "demo__write_file", {"path": str(out / "x.txt"), "content": "1"})
        assert good.type == "output" and (out / "x.txt").read_text() == "1"  # control: the same call, valid, does write


async def test_the_permission_is_the_tool_id_and_the_default_is_ask(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    rules = [{"permission": "demo__echo", "pattern": "*", "action": "allow"},
             {"permission": "demo__getenv", "pattern": "*", "action": "deny"}]
    engine = _engine(tmp_path, {"demo": server(write=[f"{out}/**"])}, rules=rules)
    with engine.open_session() as session:
        assert (await engine.call(session, "demo__echo", {"text": "a"})).type == "output"
        asked = (await engine.call(session, "demo__write_file", {"path": str(out / "w"), "content": "1"})).to_dict()
        assert asked["metadata"]["refusal"] == {"layer": "ask", "code": "headless", "asked_by": "permission"}
        assert not (out / "w").exists()
        denied = (await engine.call(session, "demo__getenv", {"name": "PATH"})).to_dict()
        assert denied["metadata"]["refusal"]["layer"] == "permission" and "manifest rule #2" in denied["error_text"]


async def test_the_watchdog_reviews_mcp_calls_too(tmp_path: Path) -> None:
    from agentcore.api import default_watchdog

    secret = tmp_path / ".env"
    secret.write_text("TOKEN=do-not-show\n")
    data = manifest({"demo": server(read=[f"{tmp_path}/**"])})
    compiled = compile_manifest(data, workspace=tmp_path)
    engine = Engine(compiled, watchdog=default_watchdog(compiled))
    with engine.open_session() as session:
        env = (await engine.call(session, "demo__read_file", {"path": str(secret)})).to_dict()
        assert env["metadata"]["refusal"] == {"layer": "ask", "code": "headless", "asked_by": "watchdog"}
        assert "do-not-show" not in json.dumps(env)
        (tmp_path / "plain.txt").write_text("plain\n")
        ok = (await engine.call(session, "demo__read_file", {"path": str(tmp_path / "plain.txt")})).to_dict()
        assert ok["data"]["content"] == "plain\n"  # control


async def test_big_output_is_cut_at_the_limit_with_the_whole_text_in_a_sidecar(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"demo": server()}, limits={"default_bytes": 10_000})
    with engine.open_session() as session:
        env = (await engine.call(session, "demo__big", {"size": 300_000})).to_dict()
        meta = env["metadata"]
        assert meta["truncated"] is True and len(env["data"]["content"].encode()) <= 10_000
        assert env["data"]["head"] == env["data"]["content"]
        full = Path(meta["output_path"]).read_text()
        assert len(full) == 300_000 and full.startswith(env["data"]["content"])
        small = (await engine.call(session, "demo__big", {"size": 100})).to_dict()
        assert "truncated" not in small["metadata"] and len(small["data"]["content"]) == 100


async def test_content_we_cannot_render_becomes_placeholders(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"demo": server()})
    with engine.open_session() as session:
        env = (await engine.call(session, "demo__media", {})).to_dict()
        text = env["data"]["content"]
        assert "[image image/png" in text and "[audio audio/wav" in text and "[binary resource <file:///x.bin>" in text
        assert "and some text" in text
        assert "PNG" not in text and "RIFF" not in text and "AAEC" not in text  # never the bytes, not even base64


async def test_secrets_from_the_environment_reach_the_server_but_never_output_or_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    value = "sk-test-1234567890abcdef"
    monkeypatch.setenv("DEMO_SECRET_FOR_TEST", value)
    engine = _engine(tmp_path, {"demo": server(env={"TOKEN": {"from_env": "DEMO_SECRET_FOR_TEST"}, "PLAIN": "visible-value"})})
    seen: list[Any] = []
    engine.add_observer(seen.append)
    with engine.open_session() as session:
        env = (await engine.call(session, "demo__getenv", {"name": "TOKEN"})).to_dict()
        assert env["data"]["content"] == "[secret]"  # the server got it, and echoed it; the echo is scrubbed
        assert (await engine.call(session, "demo__getenv", {"name": "HOME"})).to_dict()["data"]["content"] == "/tmp"
        assert (await engine.call(session, "demo__getenv", {"name": "SSH_AUTH_SOCK"})).to_dict()["data"]["content"] == "(unset)"
        status = json.dumps(await engine.mcp_status(session))
        assert value not in status and "visible-value" not in status and "TOKEN" in status
        assert value not in json.dumps([e.to_dict() for e in seen])
    monkeypatch.delenv("DEMO_SECRET_FOR_TEST")
    engine = _engine(tmp_path, {"demo": server(env={"TOKEN": {"from_env": "DEMO_SECRET_FOR_TEST"}})})
    with engine.open_session() as session:
        (status,) = await engine.mcp_status(session)
        assert status["state"] == "unavailable" and "DEMO_SECRET_FOR_TEST" in status["reason"]
        assert (await engine.call(session, "demo__echo", {"text": "x"})).to_dict()["metadata"]["error_code"] == "unknown_tool"


async def test_a_crash_fails_its_call_cleanly_and_the_server_is_restarted(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"demo": server()})
    with engine.open_session() as session:
        crashed = (await engine.call(session, "demo__crash", {})).to_dict()
        assert crashed["type"] == "error" and crashed["metadata"]["error_code"] == "server_failed"
        assert "exited or crashed" in crashed["error_text"]
        again = (await engine.call(session, "demo__echo", {"text": "back"})).to_dict()  # waits for the restart
        assert again["data"]["content"] == "back"
        (status,) = await engine.mcp_status(session)
        assert status["state"] == "ready" and status["restarts"] == 1


async def test_a_hung_call_times_out_and_the_server_is_sent_the_cancel(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    marker = out / "cancelled"
    engine = _engine(tmp_path, {"demo": server(write=[f"{out}/**"], timeout_s=1.5)})
    with engine.open_session() as session:
        env = (await engine.call(session, "demo__hang", {"marker": str(marker)})).to_dict()
        assert env["metadata"]["error_code"] == "timeout" and "did not answer within 1.5 s" in env["error_text"]
        await _until(_written(marker), "the server to record the cancellation")
        assert marker.read_text() == "cancelled"
        assert (await engine.call(session, "demo__echo", {"text": "still up"})).to_dict()["data"]["content"] == "still up"


async def test_an_abort_cancels_the_call_in_flight_and_the_server_hears_of_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    marker = out / "cancelled"
    engine = _engine(tmp_path, {"demo": server(write=[f"{out}/**"])})
    seen: list[Any] = []
    engine.add_observer(seen.append)
    with engine.open_session() as session:
        await engine.ready(session)
        result: dict[str, Any] = {}

        async def call() -> None:
            result["env"] = (await engine.call(session, "demo__hang", {"marker": str(marker)})).to_dict()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _until(lambda: any(e.type == "stage_decided" and e.stage == "execution" for e in seen), "the call to start")
            session.abort()
        assert result["env"]["metadata"]["error_code"] == "aborted"
        await _until(_written(marker), "the server to record the cancellation")


async def test_closing_the_session_kills_the_servers_whole_process_group(tmp_path: Path) -> None:
    engine = _engine(tmp_path, {"demo": server()})
    session = engine.open_session()
    await engine.ready(session)
    (await engine.call(session, "demo__sleeper", {})).to_dict()  # a process in a session of its own, inside the sandbox
    hub = session.stores.tool_source
    leader = hub._connections[0]._process.pid  # the sandbox's outermost process, ours
    inside = _descendants(leader)
    assert len(inside) >= 2 and all(_alive(p) for p in inside)
    session.close()
    await _until(lambda: not _alive(leader) and not any(_alive(p) for p in inside), "every process of the server to be gone")
    await hub.aclose()


async def test_servers_start_with_the_session_and_a_second_loop_starts_them_again(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    marker = out / "started"
    engine = _engine(tmp_path, {"demo": server(write=[f"{out}/**"], env={"DEMO_MARKER": str(marker)})})
    session = engine.open_session()  # opened inside the loop: the server starts now, before any call
    await _until(_written(marker), "the server to start with the session")
    assert (await engine.call(session, "demo__echo", {"text": "1"})).type == "output"
    session.close()
    await session.stores.tool_source.aclose()
    assert marker.read_text() == "started\n"


def test_a_session_opened_outside_an_event_loop_starts_its_servers_at_the_first_call(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    marker = out / "started"
    engine = _engine(tmp_path, {"demo": server(write=[f"{out}/**"], env={"DEMO_MARKER": str(marker)})})
    with engine.open_session() as session:
        assert not marker.exists()
        env = anyio.run(engine.call, session, "demo__echo", {"text": "lazy"})
        assert env.to_dict()["data"]["content"] == "lazy" and marker.exists()


async def test_a_secret_that_begins_with_another_is_scrubbed_whole(tmp_path: Path) -> None:
    """Two values where one starts the other (a key and its longer form): no part of the longer one shows."""
    short, long = "acct-7f3a9c", "acct-7f3a9c-SECRETPART-d41d8cd9"
    engine = _engine(tmp_path, {"demo": server(env={"ACCOUNT": short, "API_KEY": long})})
    with engine.open_session() as session:
        env = (await engine.call(session, "demo__getenv", {"name": "API_KEY"})).to_dict()
        await session.stores.tool_source.aclose()
    assert env["type"] == "output" and "SECRETPART" not in json.dumps(env), env
    assert env["data"]["content"] == "[secret]"
