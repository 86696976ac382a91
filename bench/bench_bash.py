"""Per-call overhead of the `bash` tool through the pipeline, in the bwrap sandbox.

Measured side: `Engine.call(session, "bash", {"command": "true"})` with a
manifest whose shell requirements allow `{cmd: true}`, an allow rule for it,
and environment `bwrap`. Anchors, interleaved in the same run (>= 50 each):

- bare bwrap: the exact argv the environment would exec for this call
  (`env.command_line(tool.command_argv(args), policy)` with `(env, policy) =
  engine.environment()`), run with `subprocess.run` — same flags, same mounts;
- bare `/bin/true` via `subprocess.run` (process-spawn floor).

Target: pipeline <= 1.3x bare bwrap.

The workspace lives under the temp directory, which the sandbox replaces by a
private /tmp unless the workspace is a write root, so the manifest grants
fs.write on it (as a coding agent's manifest does). bwrap creates mount-point
placeholders in the workspace; the pipeline removes its own after each run, and
this benchmark removes those of the bare runs (outside the timed region) so
both sides always start from the same tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, envelope_summary, figure, median, p90, parse_args, profile_to_stderr, result  # noqa: E402

from agentcore.manifest import load_manifest  # noqa: E402
from agentcore.pipeline.engine import Engine  # noqa: E402

NAME = "bash"
ARGS = {"command": "true"}
TARGET = 1.3


def manifest_doc() -> dict[str, Any]:
    return {
        "name": "bench-bash",
        "tools": ["bash"],
        "environment": "bwrap",
        "requires": {
            "fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]},
            "shell": [{"cmd": "true"}],
        },
        "rules": [{"permission": "bash", "pattern": "true", "action": "allow"}],
    }


def _restore(ws: Path, before: set[str]) -> None:
    """Remove what a bare bwrap run left in the workspace (its mount-point placeholders)."""
    for name in set(os.listdir(ws)) - before:
        p = ws / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def stage_costs(engine: Engine, argv: list[str], n: int) -> dict[str, float]:
    """Milliseconds of the environment's public steps that the engine runs per call."""
    env, policy = engine.environment()
    out: dict[str, float] = {}
    for label, fn in (("environment.verify_ms", lambda: env.verify(policy)), ("environment.command_line_ms", lambda: env.command_line(argv, policy))):
        xs = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - t0)
        out[label] = round(median(xs) * 1000, 3)
    return out


async def _run(engine: Engine, ws: Path, bare_argv: list[str], rounds: int) -> dict[str, Any]:
    session = engine.open_session(headless=True)
    before = set(os.listdir(ws))
    samples: dict[str, list[float]] = {"pipeline": [], "bare_bwrap": [], "bare_true": []}
    names = list(samples)

    def bare(argv: list[str], cwd: str) -> float:
        t0 = time.perf_counter()
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={}, cwd=cwd, start_new_session=True)
        dt = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"bare run failed (exit {done.returncode}): {done.stdout[-500:]!r}")
        return dt

    try:
        for r in range(rounds):
            order = names[r % 3:] + names[: r % 3]
            for name in order:
                if name == "pipeline":
                    t0 = time.perf_counter()
                    env = await engine.call(session, "bash", ARGS)
                    dt = time.perf_counter() - t0
                    if env.type != "output" or env.data.get("exit_code") != 0:
                        return {"blocked": envelope_summary(env), "after_calls": len(samples["pipeline"])}
                elif name == "bare_bwrap":
                    dt = bare(bare_argv, "/")
                    _restore(ws, before)
                else:
                    dt = bare(["/bin/true"], os.fspath(ws))
                samples[name].append(dt)
    finally:
        session.close()
    return {"samples": samples}


def main(quick: bool = False, profile: bool = False) -> dict[str, Any]:
    rounds = 6 if quick else 60
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        ws = tmp / "ws"
        ws.mkdir()
        (ws / "README").write_text("bench\n")
        mpath = tmp / "m.json"
        mpath.write_text(json.dumps(manifest_doc()))
        engine = Engine(load_manifest(mpath, workspace=ws))
        tool = engine.registry.get("bash")
        argv = tool.command_argv(ARGS)  # type: ignore[attr-defined]
        details: dict[str, Any] = {"rounds": rounds}
        try:
            env, policy = engine.environment()
            env.verify(policy)
            bare_argv = env.command_line(argv, policy)
        except Exception as exc:  # EnvironmentUnavailable or a half-finished environment layer
            details["blocked"] = {"stage": "environment", "error": f"{type(exc).__name__}: {exc}"}
            return result(NAME, quick=quick, figures=[], details=details, status="blocked")
        details["bare_bwrap_argc"] = len(bare_argv)
        warm = anyio.run(_run, engine, ws, bare_argv, 3)  # imports, bwrap self-test, page cache
        if "blocked" in warm:
            details["blocked"] = warm["blocked"]
            return result(NAME, quick=quick, figures=[], details=details, status="blocked")
        got = anyio.run(_run, engine, ws, bare_argv, rounds)
        if "blocked" in got:
            details["blocked"] = got["blocked"]
            return result(NAME, quick=quick, figures=[], details=details, status="blocked")
        details["per_call_stages"] = stage_costs(engine, argv, 5 if quick else 30)
        if profile:
            async def many() -> None:
                s = engine.open_session(headless=True)
                for _ in range(20):
                    await engine.call(s, "bash", ARGS)
                s.close()
            profile_to_stderr("bash true x 20 through the pipeline", lambda: anyio.run(many), sort="cumulative", top=40)
    samples = got["samples"]
    med = {k: median(v) * 1000 for k, v in samples.items()}
    details |= {f"{k}_ms": {"median": round(v, 3), "p90": round(p90(samples[k]) * 1000, 3)} for k, v in med.items()}
    details["overhead_vs_bare_bwrap_ms"] = round(med["pipeline"] - med["bare_bwrap"], 3)
    ratio = med["pipeline"] / med["bare_bwrap"]
    figures = [
        figure("bash `true` via pipeline (bwrap)", med["pipeline"], "ms", anchor="bare bwrap, same argv",
               anchor_value=med["bare_bwrap"], target=f"<= {TARGET}x", met=ratio <= TARGET),
        figure("bash `true` via pipeline (bwrap)", med["pipeline"], "ms", anchor="bare /bin/true", anchor_value=med["bare_true"]),
        figure("bare bwrap `true`", med["bare_bwrap"], "ms", anchor="bare /bin/true", anchor_value=med["bare_true"]),
    ]
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick, profile=a.profile), a.results_dir)
