"""Servers that misbehave never take the session down: each gets a clear error, the rest keeps working.

`mcp_servers/bad_server.py` speaks raw JSON-RPC, so it can send what no SDK
would: colliding or invalid names, giant or cyclic schemas, garbage on
stdout, oversized messages, malformed results. Sandboxed by bwrap like any
stdio server.
"""

from __future__ import annotations

import gc
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from agentcore.api import Engine, compile_manifest
from mcp_support import BAD, manifest, require_bwrap, server

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

OBJ = {"type": "object", "properties": {"x": {"type": "string"}}}


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


def tool(name: str, schema: Any = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"the {name} tool", "inputSchema": OBJ if schema is None else schema, **extra}


def bad_engine(tmp_path: Path, tools: list[dict[str, Any]], calls: dict[str, str] | None = None, *, others: dict[str, Any] | None = None,
               later: list[dict[str, Any]] | None = None, results: dict[str, Any] | None = None, **entry: Any) -> Engine:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"tools": tools, "calls": calls or {}, "later": later or [], "results": results or {}}))
    mcp = {"bad": server(BAD, str(config), read=[str(config)], **entry), **(others or {})}
    return Engine(compile_manifest(manifest(mcp), workspace=tmp_path))


async def status_of(engine: Engine, session: Any, name: str = "bad") -> dict[str, Any]:
    return next(s for s in await engine.mcp_status(session) if s["name"] == name)


def cyclic() -> dict[str, Any]:
    return {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"properties": {"y": {"$ref": "#/$defs/a"}}}},
            "properties": {"x": {"$ref": "#/$defs/a"}}}


def deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"n": node}}
    return node


async def test_bad_listings_make_only_the_bad_tools_unavailable_with_the_reason(tmp_path: Path) -> None:
    giant = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "d" * 100} for i in range(1000)}}
    tools = [
        tool("fine"),
        tool("twice"), tool("twice"),
        tool("has.dot"), tool("has space"), tool("x" * 70),
        tool("giant", giant), tool("cyclic", cyclic()), tool("self_ref", {"type": "object", "properties": {"me": {"$ref": "#"}}}),
        tool("deep", deep(40)), tool("remote_ref", {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}),
        tool("not_a_schema", {"type": "object", "properties": {"x": {"type": 42}}}),
        tool("dangling", {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}),
        tool("draft7", {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                        "definitions": {"s": {"type": "string"}}, "properties": {"x": {"$ref": "#/definitions/s"}}, "required": ["x"]}),
        tool("no_description", description=""),
    ]
    engine = bad_engine(tmp_path, tools)
    with engine.open_session() as session:
        status = await status_of(engine, session)
        assert status["state"] == "ready"
        assert sorted(t["id"] for t in status["tools"]) == ["bad__draft7", "bad__fine", "bad__no_description"]
        reasons = {u["tool"]: u["reason"] for u in status["unavailable_tools"]}
        assert reasons["twice"] == "the server lists this name more than once"
        assert "characters other than" in reasons["has.dot"] and "characters other than" in reasons["has space"]
        assert "longer than 64" in reasons["x" * 70]
        assert "bytes; at most" in reasons["giant"]
        assert reasons["cyclic"] == reasons["self_ref"] == "the input schema's references form a cycle"
        assert "nests deeper than" in reasons["deep"]
        assert "outside the document" in reasons["remote_ref"]
        assert "not a valid schema" in reasons["not_a_schema"]
        assert "reference to nothing" in reasons["dangling"]
        # The working tools work, with their own schema dialect enforced.
        ok = (await engine.call(session, "bad__fine", {"x": "1"})).to_dict()
        assert ok["data"]["content"] == 'ok: {"x": "1"}'
        refused = (await engine.call(session, "bad__draft7", {"x": 5})).to_dict()
        assert refused["metadata"]["refusal"]["code"] == "invalid_arguments"
        described = next(t for t in engine.tools(session) if t.id == "bad__no_description")
        assert "gives no description" in described.description
        for name in ("twice", "cyclic", "giant"):
            env = (await engine.call(session, f"bad__{name}", {})).to_dict()
            assert env["metadata"]["error_code"] == "unknown_tool"


async def test_a_servers_regexes_cannot_hang_the_engine(tmp_path: Path) -> None:
    evil = "^(a+)+$"  # catastrophic backtracking on "aaaa…b"
    tools = [tool("re", {"type": "object", "properties": {"x": {"type": "string", "pattern": evil}}, "required": ["x"],
                         "additionalProperties": False}),
             tool("keys", {"type": "object", "patternProperties": {evil: {"type": "string"}}, "additionalProperties": False})]
    engine = bad_engine(tmp_path, tools)
    with engine.open_session() as session:
        await engine.ready(session)
        with anyio.fail_after(20):  # evaluating the regex on this input would take longer than the age of the universe
            env = (await engine.call(session, "bad__re", {"x": "a" * 64 + "b"})).to_dict()
            keys = (await engine.call(session, "bad__keys", {"a" * 64 + "b": "v"})).to_dict()
        assert env["data"]["content"].startswith('ok: {"x": "aaaa')  # the server applies its own regexes
        assert keys["type"] == "output"
        # The rest of the schema still holds.
        assert (await engine.call(session, "bad__re", {"x": "a", "y": 1})).to_dict()["metadata"]["error_code"] == "invalid_arguments"


@contextmanager
def loop_held_at_most(seconds: int) -> Iterator[None]:
    """A bound for the failing case only: SIGALRM interrupts whatever holds the event loop (`re` and jsonschema's Python
    loops both check for signals), so a hang ends the test with `TimeoutError` instead of stalling the run."""

    def stuck(signum: int, frame: Any) -> None:
        raise TimeoutError("the event loop was held")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


async def test_a_servers_output_schema_regexes_cannot_hang_the_engine(tmp_path: Path) -> None:
    """The SDK checks structured content against the tool's listed `outputSchema`, regexes included: a server's
    catastrophic `pattern` and a result made to match it would hold the event loop (no timeout, no abort, no other
    session) for good. The result reaches the model as the server sent it (MCP-7); the engine applies no output schema."""
    out_schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    structured = {"s": "a" * 64 + "b"}
    results = {"re": {"content": [], "structuredContent": structured}}
    engine = bad_engine(tmp_path, [tool("re", outputSchema=out_schema)], {"re": "raw"}, results=results, timeout_s=5)
    with engine.open_session() as session:
        await engine.ready(session)
        with loop_held_at_most(30):  # the call's own timeout is 5 s: it cannot fire while the loop is held
            env = (await engine.call(session, "bad__re", {})).to_dict()
        await session.stores.tool_source.aclose()
    assert env["type"] == "output", env
    assert json.loads(env["data"]["content"]) == structured


async def test_unique_items_in_a_servers_schema_cannot_hold_the_engine(tmp_path: Path) -> None:
    """jsonschema compares the items of an array of objects pairwise for `uniqueItems`: 40 000 small objects from the
    model (400 KB) would hold the event loop for many minutes. The check must stay linear and mean the same."""
    schema = {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}
    engine = bad_engine(tmp_path, [tool("u", schema)])
    many = [{"a": i} for i in range(40_000)]
    with engine.open_session() as session:
        await engine.ready(session)
        with loop_held_at_most(30):
            env = (await engine.call(session, "bad__u", {"x": many})).to_dict()
        with loop_held_at_most(30):
            dup = (await engine.call(session, "bad__u", {"x": [*many, {"a": 7.0}]})).to_dict()
        distinct = (await engine.call(session, "bad__u", {"x": [1, True, [0], [False], {"k": 0}, {"k": False}, "1"]})).to_dict()
        nested = (await engine.call(session, "bad__u", {"x": [{"k": [1, {"z": None}]}, {"k": [1.0, {"z": None}]}]})).to_dict()
        await session.stores.tool_source.aclose()
    assert env["type"] == "output", env
    assert dup["metadata"]["error_code"] == "invalid_arguments" and "uniqueItems" in dup["error_text"], dup
    assert distinct["type"] == "output", distinct  # JSON Schema tells true from 1, as jsonschema does
    assert nested["metadata"]["error_code"] == "invalid_arguments", nested  # 1 and 1.0 are the same number


async def test_what_a_listing_keeps_is_bounded_whatever_the_server_sends(tmp_path: Path) -> None:
    """Each tools/list page may be 16 MiB, and a listing up to 32 pages: what the session keeps of it afterwards must
    not grow with what was sent (huge descriptions, names, annotation titles, output schemas, schemas that fail the
    check, the traceback of that failure), only with what is used: a cut description, a checked schema, two hints."""
    import tracemalloc

    big = 1_000_000
    oversized = {"type": "object", "properties": {f"p{i}": {} for i in range(big // 10)}}

    def page(n: int) -> list[dict[str, Any]]:
        return [
            tool(f"d{n}", description="d" * big),
            tool(f"n{n}" + "x" * big),
            tool(f"t{n}", annotations={"title": "t" * big, "readOnlyHint": True}),
            tool(f"o{n}", outputSchema={"type": "object", "properties": {f"q{i}": {} for i in range(big // 10)}}),
            tool(f"s{n}", oversized),
        ]

    config = tmp_path / "bad.json"
    # A small last page: the SDK's reader holds the last message it passed on until the next one (one message).
    config.write_text(json.dumps({"pages": [*(page(n) for n in range(6)), [tool("last")]]}))
    engine = Engine(compile_manifest(manifest({"bad": server(BAD, str(config), read=[str(config)])}), workspace=tmp_path))
    with engine.open_session() as session:  # a first session: the modules it imports are not counted below
        await engine.ready(session)
        await session.stores.tool_source.aclose()
    gc.collect()
    tracemalloc.start()
    try:
        with engine.open_session() as session:
            with anyio.fail_after(120):
                status = await status_of(engine, session)
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0]
            [d0] = [t for t in engine.tools(session) if t.id == "bad__d0"]
            await session.stores.tool_source.aclose()
    finally:
        tracemalloc.stop()
    assert status["state"] == "ready" and {"bad__d0", "bad__t0", "bad__o0", "bad__d5"} <= {t["id"] for t in status["tools"]}, status
    assert len(d0.description) == 4000 and {t["id"]: t["kind"] for t in status["tools"]}["bad__t0"] == "read"
    assert kept < 20_000_000, kept  # before: 239 MB kept (the server sends 27 MB of JSON; 32 pages of 16 MiB could be sent)


async def test_a_listing_that_is_not_valid_mcp_makes_the_server_unavailable(tmp_path: Path) -> None:
    engine = bad_engine(tmp_path, [tool("fine"), tool("array_top", {"type": "array"})], others={"good": server()})
    with engine.open_session() as session:
        status = await status_of(engine, session)
        assert status["state"] == "failed" and status["reason"] == "answered initialize or tools/list with something that is not valid MCP"
        assert (await engine.call(session, "good__echo", {"text": "ok"})).type == "output"


async def test_garbage_on_stdout_fails_the_call_at_once_and_the_server_restarts(tmp_path: Path) -> None:
    engine = bad_engine(tmp_path, [tool("garbage"), tool("fine")], {"garbage": "garbage"}, timeout_s=60)
    with engine.open_session() as session:
        with anyio.fail_after(20):  # far less than the call's 60 s: the break is noticed at once
            env = (await engine.call(session, "bad__garbage", {})).to_dict()
        assert env["metadata"]["error_code"] == "server_failed" and "not JSON-RPC" in env["error_text"]
        assert "html" not in env["error_text"]  # what the server sent is never repeated
        assert (await engine.call(session, "bad__fine", {})).type == "output"
        assert (await status_of(engine, session))["restarts"] == 1


async def test_a_message_beyond_the_bound_breaks_the_connection_not_the_session(tmp_path: Path) -> None:
    engine = bad_engine(tmp_path, [tool("huge"), tool("large"), tool("fine")], {"huge": "huge:17000000", "large": "huge:3000000"})
    with engine.open_session() as session:
        large = (await engine.call(session, "bad__large", {})).to_dict()
        assert large["metadata"]["truncated"] is True and Path(large["metadata"]["output_path"]).stat().st_size == 3_000_000
        env = (await engine.call(session, "bad__huge", {})).to_dict()
        assert env["metadata"]["error_code"] == "server_failed" and "larger than 16777216 bytes" in env["error_text"]
        assert (await engine.call(session, "bad__fine", {})).type == "output"


async def test_malformed_results_and_json_rpc_errors_are_tool_errors(tmp_path: Path) -> None:
    engine = bad_engine(tmp_path, [tool("invalid"), tool("error"), tool("fine")], {"invalid": "invalid", "error": "error"})
    with engine.open_session() as session:
        invalid = (await engine.call(session, "bad__invalid", {})).to_dict()
        assert invalid["metadata"]["error_code"] == "invalid_result"
        error = (await engine.call(session, "bad__error", {"x": "secret-looking-argument"})).to_dict()
        assert error["metadata"]["error_code"] == "server_error" and "code -32602" in error["error_text"]
        assert "secret-looking-argument" not in error["error_text"]  # the server's message echoes arguments: not shown
        assert (await engine.call(session, "bad__fine", {})).type == "output"


async def test_a_server_that_keeps_dying_is_given_up_and_its_tools_withdrawn(tmp_path: Path) -> None:
    engine = bad_engine(tmp_path, [tool("die")], {"die": "exit"}, others={"good": server()})
    with engine.open_session() as session:
        for _ in range(8):
            env = (await engine.call(session, "bad__die", {})).to_dict()
            if env["metadata"]["error_code"] != "server_failed":
                break
        assert env["metadata"]["error_code"] in ("unknown_tool", "server_unavailable")
        with anyio.fail_after(30):
            while (await status_of(engine, session))["state"] != "failed":
                await anyio.sleep(0.05)  # waiting for the last backoff to run out (bounded)
        status = await status_of(engine, session)
        assert status["tools"] == [] and "exited or crashed" in status["reason"]
        assert "bad__die" not in [t.id for t in engine.tools(session)]
        assert (await engine.call(session, "good__echo", {"text": "fine"})).to_dict()["data"]["content"] == "fine"


async def test_a_server_that_never_answers_initialize_is_reported_and_the_session_goes_on(tmp_path: Path) -> None:
    engine = Engine(compile_manifest(manifest({
        "mute": {"command": "/bin/sleep", "args": ["600"], "startup_timeout_s": 0.5},
        "good": server(),
    }), workspace=tmp_path))
    with engine.open_session() as session:
        with anyio.fail_after(30):
            await engine.ready(session)
        mute = await status_of(engine, session, "mute")
        assert mute["state"] in ("restarting", "failed") and "did not start within 0.5 s" in mute["reason"]
        assert (await engine.call(session, "good__echo", {"text": "ok"})).type == "output"


async def test_a_changed_tool_list_is_taken_up(tmp_path: Path) -> None:
    engine = bad_engine(tmp_path, [tool("first")], {"first": "relist"}, later=[tool("second")])
    with engine.open_session() as session:
        assert (await engine.call(session, "bad__first", {})).type == "output"
        with anyio.fail_after(20):
            while "bad__second" not in [t.id for t in engine.tools(session)]:
                await anyio.sleep(0.02)  # the notification is handled by the server's owner task (bounded wait)
        assert "bad__first" not in [t.id for t in engine.tools(session)]
        assert (await engine.call(session, "bad__second", {})).type == "output"


async def test_an_id_colliding_with_a_registered_tool_is_refused(tmp_path: Path) -> None:
    from agentcore.api import Tool, ToolResult, build_catalog

    class Plugin(Tool):
        id = "bad__plugin"
        description = "a plugin whose id looks like an MCP tool's"
        parameters = {"type": "object"}

        async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
            return ToolResult(data={"plugin": True})

    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"tools": [tool("plugin"), tool("fine")]}))
    catalog = build_catalog(plugins=False, extra=[Plugin()])
    compiled = compile_manifest(manifest({"bad": server(BAD, str(config), read=[str(config)])}, tools=["read", "bad__plugin"]),
                                workspace=tmp_path, catalog=catalog)
    engine = Engine(compiled, catalog=catalog)
    with engine.open_session() as session:
        status = await status_of(engine, session)
        assert status["unavailable_tools"] == [{"tool": "plugin", "reason": "its id collides with a registered tool's id"}]
        assert (await engine.call(session, "bad__plugin", {})).to_dict()["data"] == {"plugin": True}


async def test_endless_list_changed_notifications_keep_memory_bounded(tmp_path: Path) -> None:
    """A server that answers every tools/list with another list_changed: what the hub keeps per listing must not pile up."""
    config = tmp_path / "bad.json"
    tools = [tool(f"t{i}", {"type": "object", "properties": {f"p{j}": {"type": "string"} for j in range(20)}}) for i in range(50)]
    config.write_text(json.dumps({"tools": tools, "relist_always": True}))
    engine = Engine(compile_manifest(manifest({"bad": server(BAD, str(config), read=[str(config)])}), workspace=tmp_path))
    with engine.open_session() as session:
        assert (await status_of(engine, session))["state"] == "ready"
        hub = session.stores.tool_source
        # Wait until the session has taken 20 new listings (each makes new tool objects), whatever the machine's speed.
        listings, previous = 0, None
        with anyio.fail_after(60):
            while listings < 20:
                first = next((t for t in engine.tools(session) if t.id == "bad__t0"), None)
                if first is not None and first is not previous:
                    listings, previous = listings + 1, first
                await anyio.sleep(0.005)
        previous = first = None
        gc.collect()
        kept = sum(1 for o in gc.get_objects() if type(o).__name__ == "ListedTool")
        ok = (await engine.call(session, "bad__t0", {})).type
        await hub.aclose()
    assert ok == "output"
    assert kept <= 3 * len(tools), kept  # the current listing and the one in the making, not every past one


async def test_checking_many_large_schemas_never_blocks_the_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each schema may take a fraction of a second to check, but a listing of many must let everything else run
    between two checks: other calls, their timeouts and cancels. A ticking task counts the loop's turns, and
    each check notes the count it saw."""
    from agentcore.mcp import schemas

    def big(i: int) -> dict[str, Any]:
        return {"type": "object", "properties": {f"p{i}_{j}": {"type": "string"} for j in range(1800)}}

    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"tools": [tool(f"t{i}", big(i)) for i in range(16)]}))
    engine = Engine(compile_manifest(manifest({"bad": server(BAD, str(config), read=[str(config)])}), workspace=tmp_path))
    ticks = [0]
    seen: list[int] = []
    check = schemas.check_input_schema

    def noting(schema: Any, *rest: Any) -> Any:
        seen.append(ticks[0])
        return check(schema, *rest)

    monkeypatch.setattr(schemas, "check_input_schema", noting)

    async def ticker() -> None:
        while True:
            await anyio.lowlevel.checkpoint()
            ticks[0] += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        with engine.open_session() as session:
            with anyio.fail_after(120):
                await engine.ready(session)
            status = await status_of(engine, session)
            await session.stores.tool_source.aclose()
        tg.cancel_scope.cancel()
    assert status["state"] == "ready" and len(status["tools"]) == 16, status
    assert len(seen) >= 16 and all(b > a for a, b in zip(seen, seen[1:])), seen  # the loop turned between every two checks


async def test_a_secret_in_a_tool_description_never_reaches_the_model(tmp_path: Path) -> None:
    """A server that puts its own credential in a description (a connection string, say): the model is shown `[secret]`."""
    value = "pg-pass-0a1b2c3d4e5f"
    engine = bad_engine(tmp_path, [tool("query", description=f"Runs SQL on postgres://app:{value}@db/main")], env={"DB_PASSWORD": value})
    with engine.open_session() as session:
        assert (await status_of(engine, session))["state"] == "ready"
        [query] = [t for t in engine.tools(session) if t.id == "bad__query"]
        description = query.description
        await session.stores.tool_source.aclose()
    assert value not in description and "[secret]" in description, description


async def test_a_tool_whose_schema_holds_a_secret_is_unavailable_and_the_value_never_shows(tmp_path: Path) -> None:
    """MCP-1: a secret in an input schema (a `default`, an `enum`, a property name) cannot be scrubbed without changing
    what the schema means, so the tool is withdrawn with the reason; the other tools stay."""
    value = "tok-7f3a9c1e55d0"
    schemas = {
        "in_default": {"type": "object", "properties": {"key": {"type": "string", "default": value}}},
        "in_enum": {"type": "object", "properties": {"key": {"enum": ["a", f"Bearer {value}"]}}},
        "in_name": {"type": "object", "properties": {value: {"type": "string"}}},
    }
    engine = bad_engine(tmp_path, [*(tool(n, s) for n, s in schemas.items()), tool("plain")], env={"API_TOKEN": value})
    with engine.open_session() as session:
        status = await status_of(engine, session)
        ids = {t.id for t in engine.tools(session)}
        await session.stores.tool_source.aclose()
    reasons = {u["tool"]: u["reason"] for u in status["unavailable_tools"]}
    assert set(reasons) == set(schemas) and ids >= {"bad__plain"} and not ids & {f"bad__{n}" for n in schemas}, (reasons, ids)
    assert all(r == "the input schema holds a value the server's configuration keeps secret" for r in reasons.values())
    assert value not in json.dumps(status)
