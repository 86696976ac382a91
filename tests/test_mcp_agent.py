"""MCP tools behind `tool_search`, end to end: the agent loop, the scripted model, real MCP servers.

TSRCH-5/6: an agent with more than 20 tools gets its MCP tools deferred
(only `tool_search` and the manifest's tools are advertised); a search
wires the found tools in for the session, and they are advertised from the
next model request on. `defer:` per server forces it either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_support import scripted_loop, write_script
from agentcore.api import Engine, compile_manifest
from mcp_support import BAD, manifest, require_bwrap, server

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


class Watching:
    """Wraps the model client to record the tool list and system prompt of every request (observes only)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.requests: list[tuple[str, list[str]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def request(self, system: str, history: Any, tools: Any, settings: Any, on_delta: Any) -> Any:
        self.requests.append((system, [t.name for t in tools]))
        return await self._inner.request(system, history, tools, settings, on_delta)


async def test_tool_search_finds_and_wires_in_deferred_mcp_tools_through_the_agent_loop(tmp_path: Path) -> None:
    data = manifest({"demo": server(defer=True)}, tools=["tool_search"])
    engine = Engine(compile_manifest(data, workspace=tmp_path))
    script = write_script(tmp_path / "turns.yaml", [
        {"tool_calls": [{"tool": "demo__echo", "args": {"text": "too early"}, "expect": {"type": "error", "error_code": "unknown_tool"}}]},
        {"tool_calls": [{"tool": "tool_search", "args": {"query": "echo the text back"}, "expect": {"type": "output", "contains": "demo__echo"}}]},
        {"tool_calls": [{"tool": "demo__echo", "args": {"text": "found it"}, "expect": {"type": "output", "data": {"content": "found it"}}}]},
        {"text": "Done."},
    ])
    with engine.open_session() as session:
        assert engine.may_wait(session)  # its MCP servers are listed before the first request
        async with scripted_loop(engine, script) as (loop, seen):
            watching = Watching(loop.model)
            loop.model = watching
            result = await loop.run(session, "echo something")
        assert result.stop_reason == "end_turn" and result.problems == [], result.problems
        advertised = [tools for _system, tools in watching.requests]
        assert advertised[0] == advertised[1] == ["tool_search"]
        assert "demo__echo" in advertised[2] and "demo__echo" in advertised[3]
        assert "more tools are available through `tool_search`" in watching.requests[0][0]
        found = [e for e in seen.of("call_finished") if e.tool == "tool_search"][0].envelope.to_dict()["data"]["tools"]
        echo = next(t for t in found if t["id"] == "demo__echo")
        assert echo["description"] == "Echo the text back unchanged." and echo["parameters"]["required"] == ["text"]
        assert echo["kind"] == "read" and "demo__echo" in session.stores.discovered_tools


async def test_more_than_twenty_tools_defers_mcp_tools_unless_the_server_says_otherwise(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"tools": [
        {"name": f"t{i:02d}", "description": f"numbered tool {i} for widgets", "inputSchema": {"type": "object"}} for i in range(16)
    ]}))
    many = server(BAD, str(config), read=[str(config)])
    pinned = server(BAD, str(config), read=[str(config)], defer=False)
    tools = ["read", "write", "edit", "glob", "grep", "tool_search"]
    engine = Engine(compile_manifest(manifest({"many": many, "pinned": pinned}, tools=tools), workspace=tmp_path))
    with engine.open_session() as session:
        await engine.ready(session)
        advertised = {t.id for t in engine.tools(session)}
        assert set(tools) <= advertised
        assert not any(t.startswith("many__") for t in advertised)  # 6 + 32 tools > 20: deferred
        assert sum(t.startswith("pinned__") for t in advertised) == 16  # defer: false
        assert sorted(engine.searchable(session))[:2] == ["many__t00", "many__t01"] and len(engine.searchable(session)) == 16
        refused = (await engine.call(session, "many__t03", {})).to_dict()
        assert refused["metadata"]["error_code"] == "unknown_tool"
        found = (await engine.call(session, "tool_search", {"query": "numbered tool 3", "max_results": 1})).to_dict()
        assert [t["id"] for t in found["data"]["tools"]] == ["many__t03"]  # pinned tools are not in the index
        assert (await engine.call(session, "many__t03", {})).to_dict()["data"]["content"] == "ok: {}"
        assert "many__t03" in {t.id for t in engine.tools(session)} and "many__t04" not in {t.id for t in engine.tools(session)}
    # 2 + 16 + 2 = 20 tools: nothing is deferred, except what `defer: true` defers.
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("a", "b")]}))
    hidden = server(BAD, str(two), read=[str(two)], defer=True)
    small = Engine(compile_manifest(manifest({"many": many, "hidden": hidden}, tools=["read", "tool_search"]), workspace=tmp_path))
    with small.open_session() as session:
        await small.ready(session)
        ids = {t.id for t in small.tools(session)}
        assert sum(t.startswith("many__") for t in ids) == 16
        assert not any(t.startswith("hidden__") for t in ids) and sorted(small.searchable(session)) == ["hidden__a", "hidden__b"]


async def test_a_subagent_does_not_get_its_parents_mcp_tools(tmp_path: Path) -> None:
    data = manifest({"demo": server()}, tools=["task"])
    engine = Engine(compile_manifest(data, workspace=tmp_path))
    script = write_script(tmp_path / "s.yaml", [
        {"tool_calls": [{"tool": "demo__echo", "args": {"text": "parent"}, "expect": {"type": "output"}}]},
        {"tool_calls": [{"tool": "task", "args": {"description": "try", "prompt": "use the MCP tool"}, "expect": {"type": "output"}}]},
        # the child's conversation: the parent's MCP tool is not there (MCP-12)
        {"tool_calls": [{"tool": "demo__echo", "args": {"text": "child"}, "expect": {"type": "error", "error_code": "unknown_tool"}}]},
        {"text": "not available here"},
        {"text": "done"},
    ])
    with engine.open_session() as session:
        async with scripted_loop(engine, script) as (loop, seen):
            result = await loop.run(session, "go")
    assert result.stop_reason == "end_turn" and result.problems == []
