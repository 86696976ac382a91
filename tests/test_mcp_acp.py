"""MCP servers an editor passes in `session/new` (MCP-11), through the ACP client side, every message schema-checked.

The editor's server is granted what the manifest's entry of the same name
grants; one without such an entry is granted nothing (here: it cannot even
see its interpreter, which lives in a hidden user area, so it never starts).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_support import RecordingClient, Wire, acp_agent, text_block
from mcp_support import DEMO, manifest, require_bwrap, server

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def _script(path: Path, turns: list[dict[str, Any]]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(turns, sort_keys=False))
    return path


async def test_an_editors_mcp_servers_run_sandboxed_with_the_grant_of_their_manifest_entry(
    tmp_path: Path, write_manifest: Callable[..., Path]
) -> None:
    require_bwrap()
    from acp import schema

    ws = tmp_path / "ws"
    ws.mkdir()
    entry = server()
    entry["command"] = "/bin/false"  # the manifest's own command: the editor's entry replaces it for the session
    path = write_manifest(manifest({"demo": entry}, rules=[{"permission": "demo__getenv", "pattern": "*", "action": "allow"}]))
    secret = "editor-secret-value-77"
    script = _script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "demo__echo", "args": {"text": "via acp"}, "expect": {"data": {"content": "via acp"}}}]},
        {"tool_calls": [{"tool": "demo__getenv", "args": {"name": "TOKEN"}, "expect": {"data": {"content": "[secret]"}}}]},
        {"tool_calls": [{"tool": "other__echo", "args": {"text": "x"}, "expect": {"error_code": "unknown_tool"}}]},
        {"text": "done"},
    ])
    client, wire = RecordingClient(), Wire()
    args = ["--manifest", str(path), "--model", f"script:{script}", "--no-record"]
    async with acp_agent(client, *args, cwd=tmp_path, wire=wire) as (conn, _proc):
        init = await conn.initialize(protocol_version=1)
        caps = init.agent_capabilities.mcp_capabilities
        assert caps.http is True and caps.sse is True and not caps.acp
        demo = schema.McpServerStdio(name="demo", command=sys.executable, args=[str(DEMO)],
                                     env=[schema.EnvVariable(name="TOKEN", value=secret)])
        other = schema.McpServerStdio(name="other", command=sys.executable, args=[str(DEMO)], env=[])
        new = await conn.new_session(cwd=str(ws), mcp_servers=[demo, other])
        done = await conn.prompt(session_id=new.session_id, prompt=[text_block("use the tools")])
    assert done.stop_reason == "end_turn"
    calls = [u for u in client.updates if u["sessionUpdate"] == "tool_call"]
    kinds = {c["title"]: c["kind"] for c in calls}
    assert kinds["echo (MCP server demo)"] == "read"  # sandboxed without writes or network: its read-only hint holds
    assert kinds["getenv (MCP server demo)"] == "other"
    echo = calls[0]["toolCallId"]
    assert client.tool_updates(echo)[-1]["status"] == "completed"
    assert [p["tool_call_id"] for p in client.permissions] == [echo]  # asked (no rule allows echo); getenv was allowed
    everything = str(client.updates) + str(wire.messages)
    assert secret not in everything.replace(f"'value': '{secret}'", "").replace(f'"value": "{secret}"', "")
    assert wire.validate() > 10


async def test_read_only_mode_refuses_mcp_tools_not_known_to_only_read(tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    """Read-only refuses what edits or runs commands, and an MCP tool whose server gave no trustworthy read-only hint
    (kind `other`), even where the manifest allows it; a verified read-only MCP tool and reading tools still run."""
    require_bwrap()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    rules = [{"permission": "demo__getenv", "pattern": "*", "action": "allow"}, {"permission": "demo__echo", "pattern": "*", "action": "allow"},
             {"permission": "read", "pattern": "*", "action": "allow"}, {"permission": "write", "pattern": "*", "action": "allow"}]
    path = write_manifest(manifest({"demo": server()}, tools=["read", "write"], rules=rules))
    script = _script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "demo__echo", "args": {"text": "x"}}, {"tool": "demo__getenv", "args": {"name": "HOME"}},
                        {"tool": "read", "args": {"path": "a.txt"}}, {"tool": "write", "args": {"path": "b.txt", "content": "x"}}]},
        {"text": "done"},
    ])
    client = RecordingClient(answer=lambda tc: "allow_once")
    async with acp_agent(client, "--manifest", str(path), "--model", f"script:{script}", "--no-record", cwd=tmp_path) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        await conn.set_config_option(config_id="mode", session_id=sid, value="read-only")
        done = await conn.prompt(session_id=sid, prompt=[text_block("try everything")])
    assert done.stop_reason == "end_turn"
    calls = {u["toolCallId"]: u["title"] for u in client.updates if u["sessionUpdate"] == "tool_call"}
    status = [client.tool_updates(cid)[-1]["status"] for cid in calls]
    assert list(calls.values())[:2] == ["echo (MCP server demo)", "getenv (MCP server demo)"]
    assert status == ["completed", "failed", "completed", "failed"], (calls, status)
    assert not (ws / "b.txt").exists() and client.permissions == []
