"""The ACP adapter: start to the `initialize` reply, and the cost of a tool call over ACP.

1. `agentcore acp` start to the `initialize` reply. Measured side: a fresh
   `agentcore acp` process, from spawn until the client has the reply.
   Anchor, interleaved in the same run: a bare agent on the same SDK that
   answers `initialize` and nothing else. Target <= 1.1x.
2. Per tool call, updates included. Measured side: one `agentcore acp`
   process; a prompt whose scripted turn makes N `read` calls, minus a prompt
   whose turn makes none, divided by N — every call's `tool_call`,
   `in_progress` and final `tool_call_update` reach the client. Anchor: the
   same two scripts run by the headless loop (`run_headless` in this
   process, no recording), the same subtraction. Target <= 1.2x.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, median, parse_args, result  # noqa: E402

NAME = "acp"
AGENTCORE = str(Path(sys.executable).parent / "agentcore")

BARE_AGENT = '''
import asyncio, acp
from acp import schema

class Bare:
    def on_connect(self, conn): pass
    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        return schema.InitializeResponse(protocol_version=protocol_version)

asyncio.run(acp.run_agent(Bare()))
'''


class _Client:
    """Counts updates; answers nothing else (the manifest allows every call)."""

    def __init__(self) -> None:
        self.updates = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the benchmark's manifest allows every call")

    def on_connect(self, conn: Any) -> None:
        pass


async def _time_to_initialize(argv: list[str], cwd: Path) -> float:
    import acp

    t0 = time.perf_counter()
    async with acp.spawn_agent_process(_Client(), argv[0], *argv[1:], cwd=str(cwd)) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        return time.perf_counter() - t0


def _script(path: Path, calls: int, prompts: int) -> Path:
    """The turns of `prompts` prompts (the scripted model serves turns in order, whoever asks)."""
    turn: dict[str, Any] = {"text": "reading"}
    if calls:
        turn["tool_calls"] = [{"tool": "read", "args": {"path": "a.txt"}} for _ in range(calls)]
    one = [turn, {"text": "done"}] if calls else [turn]
    path.write_text(json.dumps(one * prompts))  # JSON: YAML would share the repeated turns through aliases, which are refused
    return path


def _setup(tmp: Path, calls: int, prompts: int) -> dict[str, Any]:
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n" * 20)
    manifest = tmp / "m.yaml"
    manifest.write_text(yaml.safe_dump({
        "name": "bench", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}},
        "rules": [{"permission": "*", "pattern": "*", "action": "allow"}],
    }))
    return {"ws": ws, "manifest": manifest, "many": _script(tmp / "many.json", calls, prompts + 1),
            "none": _script(tmp / "none.json", 0, prompts + 1)}


async def _acp_prompt(setup: dict[str, Any], script: Path, prompts: int) -> list[float]:
    """Seconds per prompt, each in a new session of one `agentcore acp` process."""
    import acp
    from acp import schema

    client = _Client()
    argv = ["acp", "--manifest", str(setup["manifest"]), "--model", f"script:{script}", "--no-record"]
    out = []
    async with acp.spawn_agent_process(client, AGENTCORE, *argv, cwd=str(setup["ws"])) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        for _ in range(prompts + 1):  # the first prompt warms the engine and the model up
            new = await conn.new_session(cwd=str(setup["ws"]), mcp_servers=[])
            t0 = time.perf_counter()
            reply = await conn.prompt(session_id=new.session_id, prompt=[schema.TextContentBlock(type="text", text="go")])
            out.append(time.perf_counter() - t0)
            assert reply.stop_reason == "end_turn", reply
    return out[1:]


async def _headless(setup: dict[str, Any], script: Path, prompts: int) -> list[float]:
    from agentcore.agent.headless import HeadlessRequest, ModelFlags, run_headless

    out = []
    for _ in range(prompts + 1):
        request = HeadlessRequest(manifest=setup["manifest"], workspace=setup["ws"], prompt="go", model=ModelFlags(model=f"script:{script}"), db=None)
        t0 = time.perf_counter()
        outcome = await run_headless(request, [])
        out.append(time.perf_counter() - t0)
        assert outcome.status == "end_turn", outcome.error
    return out[1:]


def main(quick: bool = False) -> dict[str, Any]:
    rounds = 3 if quick else 15
    calls = 10 if quick else 40
    prompts = 2 if quick else 8
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        setup = _setup(tmp, calls, prompts)
        bare = tmp / "bare.py"
        bare.write_text(BARE_AGENT)
        ours = [AGENTCORE, "acp", "--manifest", str(setup["manifest"]), "--model", f"script:{setup['none']}", "--no-record"]
        start: dict[str, list[float]] = {"agentcore": [], "bare": []}
        for r in range(rounds):
            for side in (("agentcore", "bare") if r % 2 == 0 else ("bare", "agentcore")):
                argv = ours if side == "agentcore" else [sys.executable, str(bare)]
                start[side].append(asyncio.run(_time_to_initialize(argv, tmp)))
        per_call: dict[str, float] = {}
        samples: dict[str, dict[str, list[float]]] = {}
        for side, fn in (("acp", _acp_prompt), ("headless", _headless)):
            many = asyncio.run(fn(setup, setup["many"], prompts))
            none = asyncio.run(fn(setup, setup["none"], prompts))
            samples[side] = {"many": many, "none": none}
            per_call[side] = (median(many) - median(none)) / calls
    init_ours, init_bare = median(start["agentcore"]), median(start["bare"])
    ratio_start = init_ours / init_bare
    ratio_call = per_call["acp"] / per_call["headless"]
    figures = [
        figure("acp: start to the initialize reply", init_ours, "s", anchor="a bare SDK agent", anchor_value=init_bare,
               target="<= 1.1x", met=ratio_start <= 1.1),
        figure("acp: per tool call, updates included", per_call["acp"], "s", anchor="the headless loop",
               anchor_value=per_call["headless"], target="<= 1.2x", met=ratio_call <= 1.2),
    ]
    details = {"rounds": rounds, "calls_per_prompt": calls, "prompts": prompts,
               "start_s": {k: [round(x, 4) for x in v] for k, v in start.items()},
               "prompt_medians_s": {s: {k: round(median(v), 4) for k, v in d.items()} for s, d in samples.items()},
               "cpus": os.cpu_count()}
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick), a.results_dir)
