"""`agentcore acp` against a hostile agent: what the model makes the adapter send to the editor.

The model is the embedded scripted model, driven through a real ACP client over stdio; each test
asserts what did not reach the client (a location the engine refused, more output than the bound).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_adapter.updates import TEXT_CAP
from acp_support import RecordingClient, Wire, acp_agent, text_block
from agent_support import write_script

pytestmark = pytest.mark.anyio


@pytest.fixture
def setup(tmp_path: Path, write_manifest: Callable[..., Path]) -> dict[str, Any]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / ".env").write_text("TOKEN=x\n")
    manifest = write_manifest({
        "name": "acp-hostile",
        "tools": ["read", "write", "bash", "task"],
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]},
                     "shell": [{"cmd": "echo", "args": [{"wildcard": True}]}, {"cmd": "cat", "args": [{"wildcard": True}]}]},
        "rules": [
            {"permission": "read", "pattern": "*", "action": "allow"},
            {"permission": "bash", "pattern": "*", "action": "allow"},
            {"permission": "task", "pattern": "*", "action": "allow"},
            {"permission": "read", "pattern": "{workspace}/.env", "action": "deny"},
        ],
    })
    return {"tmp": tmp_path, "ws": ws, "manifest": manifest, "db": tmp_path / "sessions.db"}


def _args(setup: dict[str, Any], script: Path) -> list[str]:
    return ["--manifest", str(setup["manifest"]), "--model", f"script:{script}", "--db", str(setup["db"])]


async def _run(setup: dict[str, Any], script: Path, client: RecordingClient, *, terminal: bool = False,
               wire: Wire | None = None) -> Any:
    from acp import schema

    async with acp_agent(client, *_args(setup, script), cwd=setup["tmp"], wire=wire) as (conn, _proc):
        meta = {"terminal_output": True} if terminal else None
        await conn.initialize(protocol_version=1, client_capabilities=schema.ClientCapabilities(field_meta=meta))
        new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
        return await conn.prompt(session_id=new.session_id, prompt=[text_block("go")])


def _locations(client: RecordingClient) -> list[str]:
    return [loc["path"] for u in client.updates for loc in u.get("locations") or []]


async def test_a_refused_path_never_reaches_the_editor_as_a_location(setup: dict[str, Any]) -> None:
    """An editor follows a call's `locations` (opens the file). The tool_call went out, with the path as the model
    wrote it, before any check: a read of a file outside the workspace, through `..`, or of one a rule denies
    had the editor open it although the engine refused the call. Only an allowed call shows where it works."""
    outside = setup["tmp"] / "outside.txt"
    outside.write_text("outside\n")
    script = write_script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [
            {"tool": "read", "args": {"path": str(outside)}, "expect": {"type": "error"}},
            {"tool": "read", "args": {"path": "../outside.txt"}, "expect": {"type": "error"}},
            {"tool": "read", "args": {"path": "/dev/zero"}, "expect": {"type": "error"}},
            {"tool": "read", "args": {"path": ".env"}, "expect": {"type": "error"}},
            {"tool": "read", "args": {"path": "a.txt"}, "expect": {"type": "output"}},
        ]},
        {"text": "done"},
    ])
    client, wire = RecordingClient(), Wire()
    reply = await _run(setup, script, client, wire=wire)
    assert reply.stop_reason == "end_turn"
    finals = [u["status"] for u in client.updates if u.get("status") in ("completed", "failed")]
    assert finals == ["failed"] * 4 + ["completed"]
    assert _locations(client) == [str(setup["ws"] / "a.txt")]
    wire.validate()


@pytest.mark.parametrize("terminal", [False, True])
async def test_a_command_flooding_its_output_sends_the_editor_a_bounded_amount(setup: dict[str, Any], terminal: bool) -> None:
    """Live output is bounded per call whichever way it is shown: for a client with terminal output each chunk went
    out as it came, so a command that prints without end sent the editor everything until its time limit. The
    envelope (and its sidecar) still has what the command printed."""
    (setup["ws"] / "big.txt").write_text(("y" * 1023 + "\n") * 8 * 1024)  # 8 MiB
    script = write_script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [{"tool": "bash", "args": {"command": "cat big.txt"}}]},
        {"text": "done"},
    ])
    client = RecordingClient()
    reply = await _run(setup, script, client, terminal=terminal)
    assert reply.stop_reason == "end_turn"
    updates = client.tool_updates("call_1")
    assert updates[-1]["status"] == "completed", json.dumps(updates[-1]["rawOutput"])[:600]
    live = updates[1:-1]
    if terminal:
        streamed = "".join(u["_meta"]["terminal_output"]["data"] for u in live if "terminal_output" in u.get("_meta", {}))
        assert 0 < len(streamed) <= TEXT_CAP + 200, len(streamed)
        assert streamed.rstrip().endswith("[output truncated]")
    sent = sum(len(json.dumps(u)) for u in live)
    assert sent < 10 * TEXT_CAP, sent  # against the 8 MiB the command printed


async def test_a_subagent_cannot_reuse_a_call_id_its_parent_shows(setup: dict[str, Any]) -> None:
    """The model names its calls; a subagent's loop made its ids unique in the child session only, so a child call
    could take the id of its parent's `task` card (or any other card of the thread): the editor, which keys its cards
    by toolCallId, showed the child's call, its permission request and its result on the parent's card."""
    script = write_script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [{"tool": "read", "args": {"path": "a.txt"}, "id": "shown"},
                        {"tool": "task", "args": {"description": "d", "prompt": "work"}, "id": "dup"}]},
        {"tool_calls": [{"tool": "write", "args": {"path": "child.txt", "content": "x"}, "id": "dup"},
                        {"tool": "read", "args": {"path": "a.txt"}, "id": "shown"}]},
        {"text": "child done"},
        {"text": "done"},
    ])
    client, wire = RecordingClient(), Wire()
    reply = await _run(setup, script, client, wire=wire)
    assert reply.stop_reason == "end_turn"
    started = [u["toolCallId"] for u in client.updates if u["sessionUpdate"] == "tool_call"]
    assert len(started) == 4 and len(set(started)) == 4, started  # ACP: a toolCallId is unique in its session
    assert started[:2] == ["shown", "dup"]  # the model's own ids are kept when they are fine
    # The child's write asks: its request names the child's own card, opened before it.
    [asked] = client.permissions
    assert asked["tool_call_id"] == started[2] != "dup"
    assert asked["tool_call_id"] in [u["toolCallId"] for u in client.updates[: asked["updates_before"]] if u["sessionUpdate"] == "tool_call"]
    assert (setup["ws"] / "child.txt").read_text() == "x"
    wire.validate()


async def test_a_huge_call_id_is_not_repeated_in_every_update(setup: dict[str, Any]) -> None:
    """The call id goes into every update of the call (twice with terminal output): a model naming its call with
    100,000 characters multiplied them by the number of updates; control characters went to the editor as is."""
    script = write_script(setup["tmp"] / "s.yaml", [
        {"tool_calls": [{"tool": "bash", "args": {"command": "echo hi"}, "id": "c" * 100_000},
                        {"tool": "read", "args": {"path": "a.txt"}, "id": "x\x1b]52;c;aGk=\x07"}]},
        {"text": "done"},
    ])
    client, wire = RecordingClient(), Wire()
    reply = await _run(setup, script, client, terminal=True, wire=wire)
    assert reply.stop_reason == "end_turn"
    ids = {u["toolCallId"] for u in client.updates if "toolCallId" in u}
    assert len(ids) == 2 and all(len(i) <= 64 and i.isprintable() for i in ids), [i[:80] for i in ids]
    wire.validate()


async def test_skills_the_agent_wrote_cannot_flood_or_drive_the_command_menu(
        tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    """The skills folder is in the workspace, so the agent of an earlier session could fill it: every skill went to
    the editor's slash-command menu, however many, with its description's escape sequences as they were."""
    ws = tmp_path / "ws"
    for i in range(3000):
        d = ws / "skills" / f"s{i}"
        d.mkdir(parents=True)
        (d / "SKILL.md").write_text(f"---\nname: s{i}\ndescription: \"ok \\e]52;c;aGk=\\a\\e[2J {'d' * 1000}\"\n---\nx\n")
    manifest = write_manifest({"name": "acp-skills", "tools": ["read", "skill"],
                               "requires": {"fs": {"read": ["{workspace}/**"]}}, "skills": {"paths": ["{workspace}/skills"]}})
    script = write_script(tmp_path / "s.yaml", [{"text": "x"}])
    client, wire = RecordingClient(), Wire()
    async with acp_agent(client, "--manifest", str(manifest), "--model", f"script:{script}", "--db", str(tmp_path / "db"),
                         cwd=tmp_path, wire=wire) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        await conn.new_session(cwd=str(ws), mcp_servers=[])
    [menu] = [u for u in client.updates if u["sessionUpdate"] == "available_commands_update"]
    commands = menu["availableCommands"]
    assert 0 < len(commands) <= 100 and len(json.dumps(menu)) < 256 * 1024, len(json.dumps(menu))
    assert all(c["description"].isprintable() and c["description"].startswith("ok \\x1b]52") for c in commands)
    wire.validate()
