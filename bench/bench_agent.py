"""The agent host: loop overhead per tool round trip, recorder cost per event, run start-up.

1. Loop overhead per tool round trip, no-op tool, scripted model. Measured
   side: a run of N turns, each calling the no-op tool once, minus the time
   spent inside the model client (the scripted model's HTTP exchange, which is
   the model's time, not the loop's); per round trip. Anchor, in the same run:
   the engine's own `Engine.call` time for those same calls, so both sides
   meet the caches as the model exchange left them. Target <= 1.2x. Also
   reported: the ratio against `Engine.call` in a tight loop with hot caches,
   which a call after a model request never sees (after ~40 ms of unrelated
   work the same call costs about 5x more).
2. Recorder cost per event: each `Recorder.observe` call timed during a
   recorded run; median per event (target <= 50 us) and the recorder's share
   of the run's wall time (target <= 10 %).
3. `agentcore run` start to the first model request: a fresh process against
   a loopback OpenAI-compatible server that notes when the first request
   arrives. Reported; target <= 1 s. Anchor: `python -c pass`.
"""

from __future__ import annotations

import http.server
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, median, parse_args, result  # noqa: E402
from agentcore.access import FsAccess  # noqa: E402
from agentcore.agent.config import ModelConfig, open_model  # noqa: E402
from agentcore.agent.loop import AgentLoop  # noqa: E402
from agentcore.api import AllowAllWatchdog, Engine, Tool, ToolResult, build_catalog, compile_manifest  # noqa: E402
from agentcore.recorder.store import Recorder  # noqa: E402

NAME = "agent"


class NoopTool(Tool):
    id = "noop"
    description = "Does nothing; touches one path so every stage does its work."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}

    def accesses(self, args: dict[str, Any], ctx: Any) -> list[Any]:
        return [FsAccess("path", args["path"], "read")]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        return ToolResult(data={"ok": True})


class TimedClient:
    """Wraps the model client and adds up the time spent in it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = inner.name
        self.supports_images = inner.supports_images
        self.spent = 0.0

    async def request(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await self._inner.request(*args)
        finally:
            self.spent += time.perf_counter() - t0

    def problems(self) -> list[str]:
        return self._inner.problems()

    async def aclose(self) -> None:
        await self._inner.aclose()


class TimedEngine(Engine):
    """Adds up the time spent inside `call`: the anchor for what the loop adds around each call."""

    spent = 0.0

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await super().call(*args, **kwargs)
        finally:
            self.spent += time.perf_counter() - t0


def _engine(ws: Path) -> TimedEngine:
    catalog = build_catalog(plugins=False, extra=[NoopTool()])
    m = compile_manifest({"name": "bench", "tools": ["noop"], "requires": {"fs": {"read": ["{workspace}/**"]}},
                          "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]}, workspace=ws, catalog=catalog)
    return TimedEngine(m, catalog=catalog, watchdog=AllowAllWatchdog())


def _script(tmp: Path, turns: int) -> Path:
    body = [{"tool_calls": [{"tool": "noop", "args": {"path": "f.txt"}}]} for _ in range(turns)] + [{"text": "done"}]
    path = tmp / f"script-{turns}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


async def _loop_run(engine: TimedEngine, script: Path, turns: int, recorder: Recorder | None,
                    per_event: list[float]) -> tuple[float, float, float]:
    """(seconds outside the model per round trip, recorder share of the wall time, seconds in `Engine.call` per call)."""
    async with open_model(ModelConfig(provider="script", name=str(script), max_turn_requests=turns + 5)) as inner, AsyncExitStack() as stack:
        client = TimedClient(inner)
        loop = AgentLoop(engine, client, max_turn_requests=turns + 5)
        stack.callback(loop.close)
        spent_recording = 0.0
        if recorder is not None:
            def observe(event: Any) -> None:
                nonlocal spent_recording
                t0 = time.perf_counter()
                recorder.observe(event)
                dt = time.perf_counter() - t0
                spent_recording += dt
                per_event.append(dt)

            loop.add_observer(observe)
        with engine.open_session() as session:
            if recorder is not None:
                recorder.attach(session, manifest="bench", workspace=None, model=client.name)
            engine.spent = 0.0
            t0 = time.perf_counter()
            run = await loop.run(session, "go")
            wall = time.perf_counter() - t0
        assert run.stop_reason == "end_turn", run.stop_reason
        return (wall - client.spent) / turns, spent_recording / wall if wall else 0.0, engine.spent / turns


async def _direct(engine: Engine, n: int) -> float:
    with engine.open_session() as session:
        t0 = time.perf_counter()
        for _ in range(n):
            env = await engine.call(session, "noop", {"path": "f.txt"})
            assert env.type == "output"
        return (time.perf_counter() - t0) / n


# -- start-up -------------------------------------------------------------------------------------


class _FirstRequest(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        if self.server.first is None:  # type: ignore[attr-defined]
            self.server.first = time.perf_counter()  # type: ignore[attr-defined]
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(400)  # stop the run right there: only the arrival time matters
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: Any) -> None:
        pass


def _startup(tmp: Path, rounds: int) -> tuple[list[float], list[float]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FirstRequest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ws = tmp / "ws"
    manifest = tmp / "m.yaml"
    manifest.write_text(yaml.safe_dump({"name": "s", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}}}))
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    starts: list[float] = []
    anchors: list[float] = []
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            anchors.append(time.perf_counter() - t0)
            server.first = None  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "agentcore.cli.main", "run", "--manifest", str(manifest), "--workspace", str(ws),
                            "--model", "openai-compatible:m", "--base-url", url, "--no-record", "go"],
                           capture_output=True, check=False)
            starts.append(server.first - t0)  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
    return starts, anchors


def main(quick: bool = False) -> dict[str, Any]:
    # Short runs, many of them: the provider library re-encodes the whole history on every request, so a
    # long run would spend its time there (model time, excluded, but it leaves the caches cold all the same).
    turns, repeats, direct_calls, startup_rounds = (10, 2, 200, 2) if quick else (20, 25, 500, 7)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        ws = tmp / "ws"
        ws.mkdir()
        (ws / "f.txt").write_text("x\n")
        engine = _engine(ws)
        script = _script(tmp, turns)
        loop_side: list[float] = []
        in_loop_side: list[float] = []
        direct_side: list[float] = []
        per_event: list[float] = []
        shares: list[float] = []
        anyio.run(_direct, engine, 50)  # warm
        for i in range(repeats):
            direct_side.append(anyio.run(_direct, engine, direct_calls))
            outside_model, _, in_engine = anyio.run(_loop_run, engine, script, turns, None, [])
            loop_side.append(outside_model)
            in_loop_side.append(in_engine)
            with Recorder(tmp / f"db-{i}.sqlite") as rec:
                shares.append(anyio.run(_loop_run, engine, script, turns, rec, per_event)[1])
        starts, anchors = _startup(tmp, startup_rounds)
    loop_us, in_loop_us, direct_us = median(loop_side) * 1e6, median(in_loop_side) * 1e6, median(direct_side) * 1e6
    event_us = statistics.median(per_event) * 1e6
    share = median(shares)
    start_s, anchor_s = median(starts), median(anchors)
    figures = [
        figure("loop overhead per tool round trip (model time excluded)", loop_us, "us", anchor="Engine.call for the same calls",
               anchor_value=in_loop_us, target="<= 1.2x", met=loop_us / in_loop_us <= 1.2),
        figure("loop round trip against hot Engine.call in a tight loop", loop_us, "us", anchor="Engine.call, hot caches",
               anchor_value=direct_us),
        figure("recorder cost per event (median)", event_us, "us", target="<= 50 us", met=event_us <= 50),
        figure("recorder share of a run's wall time", share * 100, "%", target="<= 10 %", met=share <= 0.10),
        figure("agentcore run: start to first model request", start_s, "s", anchor="python -c pass", anchor_value=anchor_s,
               target="<= 1 s", met=start_s <= 1.0),
    ]
    details = {"turns_per_run": turns, "runs": repeats, "events_recorded": len(per_event),
               "recorder_p90_us": round(sorted(per_event)[int(len(per_event) * 0.9)] * 1e6, 1) if per_event else None,
               "startup_samples_s": [round(s, 3) for s in starts]}
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick), a.results_dir)
