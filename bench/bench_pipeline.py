"""Pipeline overhead per no-op call, with 10 and with 1,000 rules.

Measured side: `Engine.call(session, "noop", {"path": "src/main.py"})` for a
tool whose `execute` does nothing but whose one path access makes every
stage (schema, capability, rules, default watchdog, execution scopes,
envelope) do its real work. Anchor, in the same run and interleaved: the
same tool's `execute` awaited directly. Overhead = median(call) - median(anchor).

Targets: overhead <= 100 us (10 rules) and <= 200 us (1,000 rules). Also
reported: the cost of the event stream when one no-op observer listens, and
when nobody listens. With nobody listening no event object is built: the
hot stage decisions test `c.observers` before awaiting the hook at all, and
the rarer ones await a hook that returns at the same test. The figure is an
upper bound: the hook awaited with no observer (against an empty loop),
multiplied by the events a call emits, as if every site awaited it.
The 1,000-rule manifest mixes tools, capabilities and actions with literal
prefixes (realistic); an extra informational case uses 1,000 rules that all
start with a wildcard, so the rule engine's literal-prefix filter cannot skip
any of them (worst case).
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
from _common import emit, figure, median, p90, parse_args, profile_to_stderr, result  # noqa: E402
from agentcore.access import FsAccess  # noqa: E402
from agentcore.api import (
    Engine,  # noqa: E402
    load_manifest,  # noqa: E402
)
from agentcore.api import build_catalog as build_registry  # noqa: E402
from agentcore.tools.base import Tool, ToolResult  # noqa: E402

NAME = "pipeline"
ARGS = {"path": "src/main.py"}


class NoopTool(Tool):
    id = "noop"
    description = "Does nothing; touches one path subject so rules are evaluated."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}
    kind = "other"
    uses = ("fs.read",)

    def accesses(self, args: dict[str, Any], ctx: Any) -> list[Any]:
        return [FsAccess("path", args["path"], "read")]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        return ToolResult(data={"ok": True})


def realistic_rules(n: int) -> list[dict[str, str]]:
    perms = ["read", "write", "grep", "fs.read", "fs.write", "bash", "*", "noop"]
    rules = []
    for i in range(n - 1):
        perm = perms[i % len(perms)]
        if perm == "bash":
            pattern = f"tool{i} *"
        else:
            pattern = f"{{workspace}}/dir{i}/**/*.py" if i % 2 else f"{{workspace}}/file{i}.txt"
        rules.append({"permission": perm, "pattern": pattern, "action": ["allow", "deny", "ask"][i % 3]})
    rules.append({"permission": "*", "pattern": "*", "action": "allow"})
    return rules


def wildcard_rules(n: int) -> list[dict[str, str]]:
    # No literal prefix: every rule must be matched against every path subject.
    rules = [{"permission": "noop", "pattern": f"**/*.gen{i}", "action": ["deny", "ask"][i % 2]} for i in range(n - 1)]
    rules.append({"permission": "*", "pattern": "*", "action": "allow"})
    return rules


def _engine(tmp: Path, ws: Path, registry: Any, label: str, rules: list[dict[str, str]], observed: bool = False) -> Engine:
    manifest = tmp / f"{label}.json"
    manifest.write_text(json.dumps({
        "name": f"bench-{label}",
        "tools": ["noop"],
        "requires": {"fs": {"read": ["{workspace}/**"]}},
        "rules": rules,
        "watchdog": {"enabled": True},
    }))
    # No watchdog given: the engine installs the manifest's default watchdog, as in production.
    engine = Engine(load_manifest(manifest, workspace=ws, catalog=registry), catalog=registry)
    if observed:
        engine.add_observer(lambda event: None)  # someone listens: every event is built and delivered
    return engine


async def _measure(engines: dict[str, Engine], rounds: int, per_round: int) -> dict[str, list[float]]:
    """Microseconds per call; sides interleaved in blocks of `per_round`, rotating the start."""
    tool = NoopTool()
    sessions = {k: e.open_session(headless=True) for k, e in engines.items()}
    names = ["anchor", *engines]
    out: dict[str, list[float]] = {n: [] for n in names}
    clock = time.perf_counter_ns
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                samples = out[name]
                if name == "anchor":
                    for _ in range(per_round):
                        t0 = clock()
                        await tool.execute(ARGS, None)
                        samples.append((clock() - t0) / 1000)
                    continue
                engine, session = engines[name], sessions[name]
                for _ in range(per_round):
                    t0 = clock()
                    env = await engine.call(session, "noop", ARGS)
                    samples.append((clock() - t0) / 1000)
                    if env.type != "output":
                        raise RuntimeError(f"{name}: the no-op call was refused: {env.to_dict()}")
    finally:
        for s in sessions.values():
            s.close()
    return out


class _Counter:
    def __init__(self) -> None:
        self.events = 0

    def __call__(self, event: Any) -> None:
        self.events += 1


async def _silent_hook_us(engine: Engine, n: int) -> float:
    """Microseconds per event hook when nobody listens: the stage-decision hook awaited, minus an empty loop."""

    class _NoObservers:  # what the hook reads of a call when deciding whether to build an event
        observers: tuple[Any, ...] = ()

    c = _NoObservers()
    hook = engine._decided  # the one hook every stage decision goes through
    clock = time.perf_counter_ns
    best_hook = best_empty = float("inf")
    for _ in range(5):
        t0 = clock()
        for _ in range(n):
            await hook(c, "schema", "allow")  # type: ignore[arg-type]
        best_hook = min(best_hook, (clock() - t0) / n)
        t0 = clock()
        for _ in range(n):
            pass
        best_empty = min(best_empty, (clock() - t0) / n)
    return (best_hook - best_empty) / 1000


async def _events_per_call(engine: Engine) -> int:
    counter = _Counter()
    engine.add_observer(counter)
    try:
        with engine.open_session(headless=True) as session:
            await engine.call(session, "noop", ARGS)
    finally:
        engine.remove_observer(counter)
    return counter.events


def main(quick: bool = False, profile: bool = False) -> dict[str, Any]:
    registry = build_registry(plugins=False)
    registry.register(NoopTool())
    rounds, per_round = (4, 50) if quick else (30, 100)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        ws = tmp / "ws"
        (ws / "src").mkdir(parents=True)
        (ws / "src" / "main.py").write_text("print(1)\n")
        engines = {
            "rules_10": _engine(tmp, ws, registry, "r10", realistic_rules(10)),
            "rules_1000": _engine(tmp, ws, registry, "r1000", realistic_rules(1000)),
            "rules_1000_wildcard": _engine(tmp, ws, registry, "r1000w", wildcard_rules(1000)),
            "rules_10_observed": _engine(tmp, ws, registry, "r10o", realistic_rules(10), observed=True),
        }
        anyio.run(_measure, engines, 2, 100)  # warm: compiled matchers, candidate lists, watchdog state
        samples = anyio.run(_measure, engines, rounds, per_round)
        if profile:
            profile_to_stderr("rules_10 x 2000 calls", lambda: anyio.run(_measure, {"rules_10": engines["rules_10"]}, 20, 100))
    anchor = median(samples["anchor"])
    details: dict[str, Any] = {"calls_per_side": len(samples["anchor"]), "anchor_direct_execute_us": round(anchor, 2)}
    figures = []
    targets = {"rules_10": 100.0, "rules_1000": 200.0, "rules_1000_wildcard": None, "rules_10_observed": None}
    for name, target in targets.items():
        med = median(samples[name])
        overhead = med - anchor
        details[name] = {"median_us": round(med, 1), "p90_us": round(p90(samples[name]), 1), "overhead_us": round(overhead, 1)}
        figures.append(figure(
            f"pipeline overhead/call, {name.replace('_', ' ')}",
            overhead,
            "us",
            anchor="direct execute()",
            anchor_value=anchor,
            ratio=med / anchor,
            target=f"<= {target:.0f} us" if target else None,
            met=(overhead <= target) if target else None,
        ))
    # What listening costs: the same 10-rule call with one no-op observer (7 events per call).
    listening = median(samples["rules_10_observed"]) - median(samples["rules_10"])
    details["events_with_one_observer_us"] = round(listening, 1)
    figures.append(figure("events per call, one no-op observer", listening, "us", anchor="rules_10 unobserved",
                          anchor_value=median(samples["rules_10"]), ratio=median(samples["rules_10_observed"]) / median(samples["rules_10"])))
    # What the event stream costs when nobody listens (the bound: <= 10 us per call).
    per_call = anyio.run(_events_per_call, engines["rules_10"])
    hook_us = anyio.run(_silent_hook_us, engines["rules_10"], 20_000 if quick else 200_000)
    silent = per_call * hook_us
    details["events_per_call"] = per_call
    details["silent_hook_us"] = round(hook_us, 3)
    figures.append(figure("events per call, nobody listening", silent, "us", anchor="rules_10 unobserved",
                          anchor_value=median(samples["rules_10"]), ratio=silent / median(samples["rules_10"]),
                          target="<= 10 us", met=silent <= 10))
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick, profile=a.profile), a.results_dir)
