"""MCP servers as tools: the cost of a call through the pipeline, and of starting a sandboxed server.

1. An MCP tool call through the whole pipeline (schema, capability, rules,
   the default watchdog, the envelope with truncation) to the test demo
   server running sandboxed by bwrap, per call. Anchor, in the same run and
   interleaved: the same tool of the same server program called directly
   with the SDK's own `ClientSession` over its own stdio transport
   (unsandboxed). Target <= 1.3x.
2. Starting a stdio server and listing its tools (spawn, initialize,
   tools/list), sandboxed by bwrap vs unsandboxed (`none`), both through the
   hub; for the SDK-based demo server (mostly Python's imports) and for a
   raw JSON-RPC server (mostly the sandbox's own cost). Reported.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _common import emit, figure, median, parse_args, result  # noqa: E402
from agentcore.api import Engine, compile_manifest  # noqa: E402
from mcp_support import BAD, DEMO, PYTHON, manifest, server  # noqa: E402

NAME = "mcp"


async def _pipeline_calls(engine: Engine, session: Any, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        env = await engine.call(session, "demo__echo", {"text": f"call {i}"})
        assert env.type == "output", env.to_dict()
    return (time.perf_counter() - t0) / n


async def _direct_calls(client: Any, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        res = await client.call_tool("echo", {"text": f"call {i}"})
        assert not res.is_error
    return (time.perf_counter() - t0) / n


async def per_call(ws: Path, rounds: int, n: int) -> tuple[list[float], list[float]]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    rules = [{"permission": "demo__echo", "pattern": "*", "action": "allow"}]
    engine = Engine(compile_manifest(manifest({"demo": server()}, rules=rules), workspace=ws))  # the default watchdog
    ours: list[float] = []
    direct: list[float] = []
    params = StdioServerParameters(command=PYTHON, args=[str(DEMO)])
    with engine.open_session() as session:
        await engine.ready(session)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await client.list_tools()
            await _pipeline_calls(engine, session, 20)
            await _direct_calls(client, 20)
            for r in range(rounds):
                if r % 2:
                    direct.append(await _direct_calls(client, n))
                    ours.append(await _pipeline_calls(engine, session, n))
                else:
                    ours.append(await _pipeline_calls(engine, session, n))
                    direct.append(await _direct_calls(client, n))
    await session.stores.tool_source.aclose()
    return ours, direct


async def _start_once(ws: Path, entry: dict[str, Any], environment: str) -> float:
    engine = Engine(compile_manifest(manifest({"s": entry}, environment=environment), workspace=ws))
    t0 = time.perf_counter()
    session = engine.open_session()
    await engine.ready(session)
    elapsed = time.perf_counter() - t0
    status = await engine.mcp_status(session)
    assert status[0]["state"] == "ready", status
    session.close()
    await session.stores.tool_source.aclose()
    return elapsed


async def starts(ws: Path, rounds: int) -> dict[str, dict[str, list[float]]]:
    config = ws / "raw.json"
    config.write_text(json.dumps({"tools": [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(5)]}))
    entries = {"demo (SDK server)": server(), "raw JSON-RPC server": server(BAD, str(config), read=[str(config)])}
    out: dict[str, dict[str, list[float]]] = {k: {"bwrap": [], "none": []} for k in entries}
    for what, entry in entries.items():
        await _start_once(ws, entry, "bwrap")  # warm: bytecode caches, the bwrap self-test
        for r in range(rounds):
            order = ("bwrap", "none") if r % 2 == 0 else ("none", "bwrap")
            for env in order:
                out[what][env].append(await _start_once(ws, entry, env))
    return out


def main(quick: bool = False) -> dict[str, Any]:
    rounds, n, start_rounds = (3, 50, 2) if quick else (9, 300, 7)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        ours, direct = anyio.run(per_call, ws, rounds, n)
        started = anyio.run(starts, ws, start_rounds)
    call_us, direct_us = median(ours) * 1e6, median(direct) * 1e6
    figures = [figure("MCP tool call through the pipeline (bwrap-sandboxed stdio server)", call_us, "us",
                      anchor="direct SDK ClientSession call, same server program", anchor_value=direct_us,
                      target="<= 1.3x", met=call_us / direct_us <= 1.3)]
    details: dict[str, Any] = {"calls_per_round": n, "rounds": rounds, "pipeline_us": [round(x * 1e6, 1) for x in ours],
                               "direct_us": [round(x * 1e6, 1) for x in direct]}
    for what, sides in started.items():
        sandboxed, bare = median(sides["bwrap"]) * 1e3, median(sides["none"]) * 1e3
        figures.append(figure(f"stdio server start, sandboxed: {what}", sandboxed, "ms", anchor="unsandboxed start (environment none)",
                              anchor_value=bare, target="reported"))
        details[f"start_ms {what}"] = {k: [round(x * 1e3, 1) for x in v] for k, v in sides.items()}
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=args.quick), args.results_dir)
