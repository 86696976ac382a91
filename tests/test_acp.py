"""`agentcore acp` as an editor runs it: a subprocess driven through the SDK's client side.

Every message on the wire in these tests is validated against the official
ACP JSON Schema (npm `@agentclientprotocol/sdk`). The model is the embedded
scripted model, so each test controls exactly what the agent does.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_support import AGENTCORE, RecordingClient, Wire, acp_agent, text_block

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent


def _script(path: Path, turns: list[dict[str, Any]]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(turns, sort_keys=False))
    return path


@pytest.fixture
def setup(tmp_path: Path, write_manifest: Callable[..., Path]) -> dict[str, Any]:
    ws = tmp_path / "ws"
    (ws / "skills" / "review").mkdir(parents=True)
    (ws / "a.txt").write_text("alpha\n")
    (ws / ".env").write_text("TOKEN=x\n")
    (ws / "skills" / "review" / "SKILL.md").write_text("---\nname: review\ndescription: Review a change carefully.\n---\nSteps.\n")
    manifest = write_manifest({
        "name": "acp-test",
        "tools": ["read", "write", "edit", "bash", "todo", "skill"],
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]},
                     "shell": [{"cmd": "echo", "args": [{"wildcard": True}]}, {"cmd": "cat", "args": [{"wildcard": True}]}]},
        "rules": [
            {"permission": "read", "pattern": "*", "action": "allow"},
            {"permission": "todo", "pattern": "*", "action": "allow"},
            {"permission": "skill", "pattern": "*", "action": "allow"},
            {"permission": "bash", "pattern": "*", "action": "allow"},
            {"permission": "read", "pattern": "{workspace}/.env", "action": "deny"},
        ],
        "skills": {"paths": ["{workspace}/skills"]},
        "model": {"context_window": 100000},
    })
    return {"tmp": tmp_path, "ws": ws, "manifest": manifest, "db": tmp_path / "sessions.db"}


def _args(setup: dict[str, Any], script: Path, *extra: str) -> list[str]:
    return ["--manifest", str(setup["manifest"]), "--model", f"script:{script}", "--db", str(setup["db"]), *extra]


TOUR = [
    {"reasoning": "Let me look.", "text": "Looking at the files.", "tool_calls": [
        {"tool": "read", "args": {"path": "a.txt"}},
        {"tool": "read", "args": {"path": ".env"}},
        {"tool": "write", "args": {"path": "new.txt", "content": "fresh\n"}},
        {"tool": "edit", "args": {"path": "a.txt", "old_string": "alpha", "new_string": "omega"}},
        {"tool": "todo", "args": {"todos": [{"content": "check the files", "status": "in_progress"}]}},
        {"tool": "bash", "args": {"command": "echo hello"}},
    ]},
    {"text": "All done."},
]


async def test_a_prompt_streams_every_kind_of_update_in_order(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "tour.yaml", TOUR)
    client, wire = RecordingClient(), Wire()
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"], wire=wire) as (conn, _proc):
        init = await conn.initialize(protocol_version=1)
        assert init.protocol_version == 1 and init.agent_capabilities.load_session
        assert init.agent_info.name == "agentcore"
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        assert {o.root.id if hasattr(o, "root") else o.id for o in new.config_options} == {"mode", "model"}
        done = await conn.prompt(session_id=new.session_id, prompt=[text_block("look around")])
    assert done.stop_reason == "end_turn" and done.usage.output_tokens > 0
    kinds = client.kinds()
    assert kinds[0] == "available_commands_update"
    assert client.updates[0]["availableCommands"][0]["name"] == "review"
    assert {"agent_thought_chunk", "agent_message_chunk", "tool_call", "tool_call_update", "plan", "usage_update"} <= set(kinds)
    calls = [u for u in client.updates if u["sessionUpdate"] == "tool_call"]
    assert [c["kind"] for c in calls] == ["read", "read", "edit", "edit", "other", "execute"]
    assert all(c["status"] == "pending" and c["title"] for c in calls)
    assert calls[0]["locations"] == []  # shown once the call may execute (the model's path is unchecked before)
    assert calls[0]["rawInput"] == {"path": "a.txt"}
    read_ok, env_refused, write, edit, todo, bash = (c["toolCallId"] for c in calls)
    # Each call: pending, then in_progress (unless refused first), then completed or failed.
    assert [u.get("status") for u in client.tool_updates(read_ok)] == ["pending", "in_progress", "completed"]
    assert client.tool_updates(read_ok)[1]["locations"] == [{"path": str(setup["ws"] / "a.txt"), "line": 1}]
    assert client.tool_updates(read_ok)[-1]["content"][0]["content"]["text"] == "alpha\n"
    refused = client.tool_updates(env_refused)[-1]
    assert refused["status"] == "failed" and "permission layer" in refused["content"][0]["content"]["text"]
    assert refused["rawOutput"]["metadata"]["refusal"]["layer"] == "permission"
    # Diffs: a new file has oldText null on the wire; an edit shows both sides.
    (new_diff,) = client.tool_updates(write)[-1]["content"]
    assert new_diff == {"type": "diff", "path": str(setup["ws"] / "new.txt"), "newText": "fresh\n"}
    raw_write = next(m for s, m in wire.messages if s == "agent" and m.get("params", {}).get("update", {}).get("toolCallId") == write
                     and m["params"]["update"].get("status") == "completed")
    assert raw_write["params"]["update"]["content"][0]["oldText"] is None
    assert client.tool_updates(edit)[-1]["content"][0] == {"type": "diff", "path": str(setup["ws"] / "a.txt"), "oldText": "alpha\n", "newText": "omega\n"}
    plan = next(u for u in client.updates if u["sessionUpdate"] == "plan")
    assert plan["entries"] == [{"content": "check the files", "status": "in_progress", "priority": "medium"}]
    bash_updates = client.tool_updates(bash)
    assert any("hello" in json.dumps(u.get("content")) for u in bash_updates[2:-1])  # streamed while it ran
    assert bash_updates[-1]["status"] == "completed"
    usage = [u for u in client.updates if u["sessionUpdate"] == "usage_update"]
    assert usage[-1]["size"] == 100000 and usage[-1]["used"] == done.usage.total_tokens
    assert client.permissions[0]["tool_call_id"] in (write, edit)  # write and edit are not allowed by a rule: asked
    assert wire.validate() > 20


async def test_a_permission_request_follows_its_tool_call_and_names_what_is_remembered(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [{"tool": "write", "args": {"path": "x.txt", "content": "1"}}]},
        {"tool_calls": [{"tool": "write", "args": {"path": "x.txt", "content": "2"}}]},
        {"tool_calls": [{"tool": "write", "args": {"path": "y.txt", "content": "3"}}]},
        {"text": "ok"},
    ])
    answers = iter(["allow_always", "reject_once"])
    client, wire = RecordingClient(answer=lambda tc: next(answers)), Wire()
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"], wire=wire) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    # Two requests: x.txt the first time (answered "always"), y.txt; never the second x.txt.
    assert [p["tool_call_id"] for p in client.permissions] == ["call_1", "call_3"]
    first = client.permissions[0]
    target = setup["ws"] / "x.txt"
    assert first["options"] == [
        ("allow_once", "Allow once", "allow_once"),
        ("allow_always", f"Always allow writing {target} with write in this session", "allow_always"),
        ("reject_once", "Reject", "reject_once"),
        ("reject_always", f"Always reject writing {target} with write in this session", "reject_always"),
    ]
    # The tool_call for the call was on the wire before its permission request.
    assert any(u.get("toolCallId") == "call_1" and u["sessionUpdate"] == "tool_call" for u in client.updates[: first["updates_before"]])
    assert (setup["ws"] / "x.txt").read_text() == "2"
    assert not (setup["ws"] / "y.txt").exists()
    rejected = client.tool_updates("call_3")[-1]
    assert rejected["status"] == "failed" and rejected["rawOutput"]["metadata"]["refusal"]["code"] == "rejected"
    wire.validate()


@pytest.mark.parametrize("terminal", [False, True])
async def test_a_permission_request_shows_every_command_of_a_script_not_only_its_first_line(
        setup: dict[str, Any], write_manifest: Callable[..., Path], terminal: bool) -> None:
    """A title is one line; a script whose harmless first line is all a client shows must not pass for the whole
    of it. The request says how many lines follow, and its content lists why it asks and every command."""
    manifest = write_manifest({
        "name": "acp-ask", "tools": ["bash"],
        "requires": {"fs": {"read": ["{workspace}/**"]},
                     "shell": [{"cmd": "echo", "args": [{"wildcard": True}]}, {"cmd": "cat", "args": [{"wildcard": True}]}]},
    })
    script = _script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [{"tool": "bash", "args": {"command": "echo he\u202ello\n\ncat a.txt\necho done"}}]},
        {"text": "ok"},
    ])
    client = RecordingClient(answer=lambda tc: "reject_once")
    async with acp_agent(client, "--manifest", str(manifest), "--model", f"script:{script}", "--db", str(setup["db"]),
                         cwd=setup["tmp"]) as (conn, _proc):
        from acp import schema

        meta = {"terminal_output": True} if terminal else None
        await conn.initialize(protocol_version=1, client_capabilities=schema.ClientCapabilities(field_meta=meta))
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    [asked] = client.permissions
    # A right-to-left override in the model's text is shown, escaped, never applied (ASK-13).
    assert asked["title"] == "echo he\\u202ello (+2 more lines)"
    assert [u["title"] for u in client.updates if u.get("sessionUpdate") == "tool_call"] == [asked["title"]]
    # The call's terminal stays in place for a client that shows one; the details come after it.
    assert asked["content_types"] == (["terminal", "content"] if terminal else ["content"])
    [details] = asked["texts"]
    lines = details.splitlines()
    assert lines[0].startswith("permission: ")
    assert lines[1:] == ["- shell.run echo 'he\\u202ello'", "- shell.run cat a.txt", "- shell.run echo done"]


async def test_headless_sends_no_permission_request(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "s.yaml", [{"tool_calls": [{"tool": "write", "args": {"path": "x.txt", "content": "1"}}]}, {"text": "ok"}])
    client = RecordingClient()
    async with acp_agent(client, *_args(setup, script, "--headless"), cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    assert client.permissions == []
    assert client.tool_updates("call_1")[-1]["rawOutput"]["metadata"]["refusal"]["code"] == "headless"
    assert not (setup["ws"] / "x.txt").exists()


async def test_the_session_database_is_not_the_agents_to_write(setup: dict[str, Any]) -> None:
    """`session/load` restores a recording's remembered answers: with the database inside the workspace, the
    agent cannot edit it or plant a journal SQLite would apply (refused before anyone is asked)."""
    script = _script(setup["tmp"] / "s.yaml", [{"tool_calls": [{"tool": "write", "args": {"path": "sessions.db-journal", "content": "1"}}]},
                                               {"text": "ok"}])
    client = RecordingClient()
    args = ["--manifest", str(setup["manifest"]), "--model", f"script:{script}", "--db", str(setup["ws"] / "sessions.db")]
    async with acp_agent(client, *args, cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    assert client.permissions == []
    assert client.tool_updates("call_1")[-1]["rawOutput"]["metadata"]["refusal"]["code"] == "protected"
    assert not (setup["ws"] / "sessions.db-journal").exists()


# -- what the client offers ---------------------------------------------------------------------------


async def test_read_takes_the_editor_buffer_only_after_the_pipeline_allowed_it(setup: dict[str, Any]) -> None:
    """The client offers fs/read_text_file: an allowed `read` returns the unsaved buffer; a denied one
    (the manifest denies `.env`, the capability check refuses a path outside the workspace, the
    watchdog's secret screen) never reaches the client, so an editor buffer cannot leak what the rules hide."""
    from acp import schema

    ws = setup["ws"]
    outside = setup["tmp"] / "outside.txt"
    outside.write_text("outside\n")
    script = _script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [
            {"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "output", "contains": "unsaved edit"}},
            {"tool": "read", "args": {"path": ".env"}, "expect": {"type": "error"}},
            {"tool": "read", "args": {"path": str(outside)}, "expect": {"type": "error"}},
        ]},
        {"text": "done"},
    ])
    client = RecordingClient(buffers={os.fspath(ws / "a.txt"): "alpha\nunsaved edit\n", os.fspath(ws / ".env"): "TOKEN=leaked\n",
                                      os.fspath(outside): "leaked\n"})
    wire = Wire()
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"], wire=wire) as (conn, _proc):
        caps = schema.ClientCapabilities(fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=False))
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        new = await conn.new_session(cwd=str(ws), mcp_servers=[])
        reply = await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    assert reply.stop_reason == "end_turn"
    assert client.file_reads == [os.fspath(ws / "a.txt")]  # only the path the pipeline allowed
    finals = {u["toolCallId"]: u for u in client.updates if u.get("sessionUpdate") == "tool_call_update" and u.get("status") in ("completed", "failed")}
    assert "unsaved edit" in json.dumps(finals["call_1"]["rawOutput"])
    assert "leaked" not in json.dumps(client.updates)
    assert (ws / "a.txt").read_text() == "alpha\n"  # the disk file is untouched
    wire.validate()


async def test_without_the_client_offer_read_uses_the_disk(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "output", "contains": "alpha"}}]},
        {"text": "done"},
    ])
    client = RecordingClient(buffers={os.fspath(setup["ws"] / "a.txt"): "unsaved\n"})
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        assert (await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])).stop_reason == "end_turn"
    assert client.file_reads == []


# -- cancel -----------------------------------------------------------------------------------------


async def test_cancel_during_a_permission_request(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "s.yaml", [{"tool_calls": [{"tool": "write", "args": {"path": "x.txt", "content": "1"}}]}, {"text": "never"}])
    state: dict[str, Any] = {}

    async def on_permission(tool_call: Any) -> None:
        await state["conn"].cancel(session_id=state["sid"])  # the client cancels, then answers `cancelled`

    client, wire = RecordingClient(answer=lambda tc: "cancelled", on_permission=on_permission), Wire()
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"], wire=wire) as (conn, _proc):
        state["conn"] = conn
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        state["sid"] = new.session_id
        done = await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
        after = len(client.updates)
        await conn.list_sessions()  # a round trip: anything sent after the reply would have arrived by now
    assert done.stop_reason == "cancelled"
    assert client.tool_updates("call_1")[-1]["status"] == "failed"
    assert len(client.updates) == after  # no update of the turn after its reply
    assert not (setup["ws"] / "x.txt").exists()
    wire.validate()


async def test_cancel_during_a_long_command_kills_it(setup: dict[str, Any]) -> None:
    os.mkfifo(setup["ws"] / "gate")
    script = _script(setup["tmp"] / "s.yaml", [{"tool_calls": [{"tool": "bash", "args": {"command": "echo started; cat gate"}}]}, {"text": "never"}])
    state: dict[str, Any] = {}

    async def on_update(update: dict[str, Any]) -> None:
        if "started" in json.dumps(update.get("content", "")) and not state.get("sent"):
            state["sent"] = True
            await state["conn"].cancel(session_id=state["sid"])

    client = RecordingClient(on_update=on_update)
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"]) as (conn, _proc):
        state["conn"] = conn
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        state["sid"] = new.session_id
        with anyio.fail_after(60):
            done = await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    assert done.stop_reason == "cancelled"
    final = client.tool_updates("call_1")[-1]
    assert final["status"] == "failed" and final["rawOutput"]["metadata"]["error_code"] == "aborted"
    with pytest.raises(OSError) as exc:  # nobody reads the FIFO any more: the command is dead
        os.open(setup["ws"] / "gate", os.O_WRONLY | os.O_NONBLOCK)
    assert exc.value.errno == errno.ENXIO


async def test_terminal_output_for_clients_that_opt_in(setup: dict[str, Any]) -> None:
    from acp import schema

    script = _script(setup["tmp"] / "s.yaml", [{"tool_calls": [{"tool": "bash", "args": {"command": "echo hello"}}]}, {"text": "ok"}])
    client, wire = RecordingClient(), Wire()
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"], wire=wire) as (conn, _proc):
        await conn.initialize(protocol_version=1, client_capabilities=schema.ClientCapabilities(field_meta={"terminal_output": True}))
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    updates = client.tool_updates("call_1")
    assert updates[0]["content"] == [{"type": "terminal", "terminalId": "call_1"}]
    assert updates[0]["_meta"]["terminal_info"]["terminal_id"] == "call_1"
    streamed = "".join(u["_meta"]["terminal_output"]["data"] for u in updates if "terminal_output" in u.get("_meta", {}))
    assert streamed == "hello\n"
    assert updates[-1]["_meta"]["terminal_exit"] == {"terminal_id": "call_1", "exit_code": 0, "signal": None}
    wire.validate()


# -- session/load, list, close ---------------------------------------------------------------------


def _comparable(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Updates without what differs from run to run (durations) and without available commands."""
    out = []
    for u in updates:
        if u["sessionUpdate"] in ("available_commands_update", "user_message_chunk", "usage_update"):
            continue
        u = json.loads(json.dumps(u))
        if isinstance(u.get("rawOutput"), dict):
            u["rawOutput"].get("metadata", {}).pop("duration_ms", None)
        out.append(u)
    return out


async def test_session_load_replays_what_the_live_session_showed_then_continues(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "s.yaml", [
        *TOUR,
        {"tool_calls": [{"tool": "write", "args": {"path": "new.txt", "content": "again\n"}}]},  # asked before: remembered
        {"text": "continued"},
    ])
    answers = iter(["allow_always", "allow_once"])
    live = RecordingClient(answer=lambda tc: next(answers))
    async with acp_agent(live, *_args(setup, script), cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("look around")])
    # A new agent process, a new client: load the session.
    replay, wire = RecordingClient(), Wire()
    rest = _script(setup["tmp"] / "rest.yaml", TOUR[:0] + [
        {"tool_calls": [{"tool": "write", "args": {"path": "new.txt", "content": "again\n"}}]},
        {"text": "continued"},
    ])
    async with acp_agent(replay, *_args(setup, rest), cwd=setup["tmp"], wire=wire) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        listed = await conn.list_sessions()
        assert [s.session_id for s in listed.sessions] == [sid]
        await conn.load_session(cwd=str(setup["ws"]), session_id=sid, mcp_servers=[])
        replayed = list(replay.updates)
        done = await conn.prompt(session_id=sid, prompt=[text_block("again")])
        await conn.close_session(session_id=sid)
    assert [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"][0]["content"]["text"] == "look around"
    assert _comparable(replayed) == _comparable(live.updates)
    # The next prompt's calls do not take the toolCallId of a replayed card (the scripted model numbers them anew).
    started = [u["toolCallId"] for u in replay.updates if u["sessionUpdate"] == "tool_call"]
    assert len(started) == len(set(started)) == 7, started
    # The remembered "always" answer came back with the session: no request for the same write.
    assert done.stop_reason == "end_turn" and replay.permissions == []
    assert (setup["ws"] / "new.txt").read_text() == "again\n"
    wire.validate()


async def test_bad_requests_get_errors_and_the_connection_stays_up(setup: dict[str, Any]) -> None:
    import acp

    script = _script(setup["tmp"] / "s.yaml", [{"hang": True, "text": "slow"}])
    client = RecordingClient()
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        with pytest.raises(acp.RequestError):
            await conn.new_session(cwd="relative/path", mcp_servers=[])
        with pytest.raises(acp.RequestError) as mcp_exc:
            from acp import schema

            # MCP over ACP itself is not offered (initialize says acp: false): refused, the connection stays up.
            await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[schema.AcpMcpServer(type="acp", name="x", server_id="s1")])
        assert "MCP" in json.dumps(mcp_exc.value.data)
        with pytest.raises(acp.RequestError):
            await conn.prompt(session_id="ses_unknown", prompt=[text_block("x")])
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.prompt, new.session_id, [text_block("first")])
            while not any(u["sessionUpdate"] == "agent_message_chunk" for u in client.updates):
                await anyio.wait_all_tasks_blocked()  # until the first prompt is streaming
            with pytest.raises(acp.RequestError) as second:
                await conn.prompt(session_id=new.session_id, prompt=[text_block("second")])
            assert "already running" in json.dumps(second.value.data)
            await conn.cancel(session_id=new.session_id)


def _raw(setup: dict[str, Any], script: Path, lines: list[bytes]) -> list[dict[str, Any]]:
    proc = subprocess.run([AGENTCORE, "acp", *_args(setup, script)], input=b"".join(lines), capture_output=True, timeout=120, cwd=setup["tmp"])
    return [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]


def test_malformed_json_and_a_50_mb_line_get_errors_not_a_crash(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "s.yaml", [{"text": "x"}])
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).encode() + b"\n"
    huge = b'{"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {"cwd": "' + b"a" * (50 * 1024 * 1024) + b'"}}\n'
    after = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}}).encode() + b"\n"
    replies = _raw(setup, script, [b"this is not json\n", init, huge, b'{"jsonrpc": "2.0", "id": 9, "method": 5}\n', after])
    by_id = {r.get("id"): r for r in replies}
    assert "result" in by_id[1]  # initialize answered after the garbage
    assert any("error" in r and r.get("id") is None for r in replies)  # the parse error got an error response
    assert "result" in by_id[3]  # and the connection was still up after the 50 MB line
    assert 2 not in by_id or "error" in by_id[2] or "result" in by_id[2]


async def test_a_disconnect_aborts_the_session_and_the_recording_stays_consistent(setup: dict[str, Any]) -> None:
    script = _script(setup["tmp"] / "s.yaml", [{"reasoning": "thinking", "hang": True, "text": "this stalls"}])
    client = RecordingClient()
    proc_ref: dict[str, Any] = {}
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"]) as (conn, proc):
        proc_ref["proc"] = proc
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        async with anyio.create_task_group() as tg:
            async def prompt() -> None:
                try:
                    await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
                except Exception:
                    pass  # the connection goes away under it

            tg.start_soon(prompt)
            while not client.updates or client.updates[-1]["sessionUpdate"] != "agent_message_chunk":
                await anyio.wait_all_tasks_blocked()
            proc.stdin.close()  # the client disconnects
            with anyio.fail_after(30):
                await proc.wait()
            tg.cancel_scope.cancel()
    assert proc_ref["proc"].returncode == 0
    db = sqlite3.connect(setup["db"])
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    (stop,) = db.execute("SELECT stop_reason FROM runs").fetchone()
    assert stop == "cancelled"


# -- a real third-party client -------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["--approve-all", "--deny-all"])
def test_acpx_drives_a_session_end_to_end(setup: dict[str, Any], policy: str) -> None:
    """acpx (npm) runs `agentcore acp` as its agent; its JSON output is the wire log."""
    from acp_support import acpx_bin

    script = _script(setup["tmp"] / "s.yaml", [
        {"text": "Reading.", "tool_calls": [{"tool": "read", "args": {"path": "a.txt"}},
                                            {"tool": "write", "args": {"path": "b.txt", "content": "new\n"}}]},
        {"text": "Done."},
    ])
    agent = " ".join([AGENTCORE, "acp", *_args(setup, script)])
    done = subprocess.run([acpx_bin(), "--format", "json", policy, "--cwd", str(setup["ws"]), "--agent", agent, "exec", "hi"],
                          capture_output=True, text=True, timeout=120, cwd=setup["tmp"])
    # acpx exits 5 (its PERMISSION_DENIED) when it denied a request, 0 otherwise.
    assert done.returncode == (0 if policy == "--approve-all" else 5), done.stderr
    messages = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    result = next(m["result"] for m in messages if m.get("id") == 2 and "result" in m)
    assert result["stopReason"] == "end_turn"
    updates = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    finals = {u["toolCallId"]: u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")}
    asked = [m for m in messages if m.get("method") == "session/request_permission"]
    assert [a["params"]["toolCall"]["toolCallId"] for a in asked] == ["call_2"]  # read is allowed by a rule; write asks
    if policy == "--approve-all":
        assert finals == {"call_1": "completed", "call_2": "completed"}
        assert (setup["ws"] / "b.txt").read_text() == "new\n"
    else:
        assert finals == {"call_1": "completed", "call_2": "failed"}
        assert not (setup["ws"] / "b.txt").exists()
    assert Wire.from_log(messages).validate() == len(messages)


async def _an_always_answer(tmp_path: Path, write_manifest: Callable[..., Path]) -> tuple[Path, Path, Path, Path, Path, str]:
    """A live ACP session in `ws` whose human answered "always" for `echo hello`: (ws, elsewhere, manifest,
    script, database, session id)."""
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    for d in (ws, elsewhere):
        d.mkdir()
    manifest = write_manifest({"name": "acp-remember", "tools": ["bash"],
                               "requires": {"shell": [{"cmd": "echo", "args": [{"wildcard": True}]}]}})
    script = _script(tmp_path / "echo.yaml", [{"tool_calls": [{"tool": "bash", "args": {"command": "echo hello"}}]}, {"text": "done"}])
    db = tmp_path / "sessions.db"
    live = RecordingClient(answer=lambda tc: "allow_always")
    async with acp_agent(live, "--manifest", str(manifest), "--model", f"script:{script}", "--db", str(db), cwd=tmp_path) as (conn, _p):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("say hello")])
    assert len(live.permissions) == 1
    return ws, elsewhere, manifest, script, db, sid


async def test_remembered_answers_come_back_only_in_the_workspace_they_were_given_for(
        tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    """An "always" for a command holds in its workspace: loading the session elsewhere asks again."""
    ws, elsewhere, manifest, script, db, sid = await _an_always_answer(tmp_path, write_manifest)
    # (In its own workspace first: a session continued elsewhere is recorded there from then on.)
    for cwd, asked in ((ws, 0), (elsewhere, 1)):
        client = RecordingClient(answer=lambda tc: "reject_once")
        async with acp_agent(client, "--manifest", str(manifest), "--model", f"script:{script}", "--db", str(db),
                             cwd=tmp_path) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(cwd), session_id=sid, mcp_servers=[])
            await conn.prompt(session_id=sid, prompt=[text_block("again")])
        assert len(client.permissions) == asked, cwd


async def test_a_headless_run_continuing_a_session_elsewhere_does_not_inherit_its_answers(
        tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    ws, elsewhere, manifest, script, db, sid = await _an_always_answer(tmp_path, write_manifest)
    outcomes = []
    for where in (ws, elsewhere):
        done = subprocess.run([AGENTCORE, "run", "--manifest", str(manifest), "--workspace", str(where), "--model", f"script:{script}",
                               "--db", str(db), "--session", sid, "--events", "jsonl", "again"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        finished = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        outcomes.append([e.get("envelope", {}).get("type") for e in finished if e.get("type") == "call_finished"])
    # In its workspace the remembered "always" holds; elsewhere it is not restored, so the headless run refuses the ask.
    assert outcomes == [["output"], ["error"]]


async def test_a_loaded_session_does_not_keep_the_auto_edit_mode_as_remembered_answers(setup: dict[str, Any]) -> None:
    """A session in auto-edit mode is recorded with the mode's allows among its rules; loaded again it comes back
    in "ask" mode, so a write must be asked (and refused here), not let through by the old mode's rules."""
    live_script = _script(setup["tmp"] / "live.yaml", [{"tool_calls": [{"tool": "write", "args": {"path": "x.txt", "content": "1"}}]},
                                                       {"text": "ok"}])
    live = RecordingClient(answer=lambda tc: "reject_once")
    async with acp_agent(live, *_args(setup, live_script), cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])).session_id
        await conn.set_config_option(config_id="mode", session_id=sid, value="auto-edit")
        await conn.prompt(session_id=sid, prompt=[text_block("write")])
    assert live.permissions == [] and (setup["ws"] / "x.txt").read_text() == "1"  # the mode allowed it
    script = _script(setup["tmp"] / "again.yaml", [{"tool_calls": [{"tool": "write", "args": {"path": "y.txt", "content": "2"}}]},
                                                   {"text": "ok"}])
    client = RecordingClient(answer=lambda tc: "reject_once")
    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        loaded = await conn.load_session(cwd=str(setup["ws"]), session_id=sid, mcp_servers=[])
        mode = next(o.root if hasattr(o, "root") else o for o in loaded.config_options if (o.root if hasattr(o, "root") else o).id == "mode")
        assert mode.current_value == "ask"
        await conn.prompt(session_id=sid, prompt=[text_block("write again")])
    assert [p["tool_call_id"] for p in client.permissions] == ["call_1-2"]  # "call_1" is the replayed card's
    assert not (setup["ws"] / "y.txt").exists()



async def test_a_cwd_that_is_no_path_is_invalid_params_not_an_internal_error(setup: dict[str, Any]) -> None:
    """`session/list` filtered by a cwd that cannot be a path (a NUL byte) or is relative: invalid params, and the
    agent still answers; before, a NUL byte in it was an internal error with a traceback once a session was recorded."""
    import acp

    script = _script(setup["tmp"] / "s.yaml", [{"text": "x"}])
    async with acp_agent(RecordingClient(), *_args(setup, script), cwd=setup["tmp"]) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])).session_id
        for cwd in (str(setup["ws"]) + "\x00", "ws"):
            with pytest.raises(acp.RequestError) as exc:
                await conn.list_sessions(cwd=cwd)
            assert exc.value.code == -32602, cwd
        assert [s.session_id for s in (await conn.list_sessions(cwd=str(setup["ws"]))).sessions] == [sid]
