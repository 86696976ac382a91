"""1 GiB of output through the truncation layer: memory and throughput.

Measured side: `Engine.call(session, "bash", {"command": "head -c 1073741824 /dev/zero"})`
through the full pipeline in the bwrap sandbox (the manifest allows
`{cmd: head, args: ["-c", {wildcard: true}, "/dev/zero"]}`). The output
streams through the tool's byte spool: a 200 KiB head in memory, everything
in a sidecar file in the session's working directory.

It runs in a child Python process so `ru_maxrss` (peak RSS of that process
only; bwrap and head are children and not counted) is not polluted by this
harness. Peak RSS increase = ru_maxrss after the call - ru_maxrss just before it
(after a small warm-up call, so imports and the bwrap self-test are in the baseline).

Anchors, interleaved in the same child, writing into the same directory:
`/bin/sh -c 'head -c N /dev/zero > FILE'` (the plain write-to-a-file cost) and
`/bin/sh -c 'head -c N /dev/zero | cat > FILE'` (the issue's "cat to a file":
the same bytes through a pipe and a reader that writes them out, which is the
shape of the pipeline's own path). Throughput ratio = pipeline bytes/s /
anchor bytes/s, for each.

The pipeline keeps two processes busy (the command writing the pipe, this
process reading it and writing the sidecar) where the anchor keeps one, so on
a loaded machine its throughput suffers more; the Python process's own CPU
time per call is reported as a load-independent figure.

Targets: peak RSS increase <= 64 MiB; throughput >= 0.5x the anchor. Also
checked: the sidecar holds exactly N bytes, and closing the session removes it.
The manifest raises `limits.sidecar_bytes` (and the session's) above N: the
default cap (64 MiB, TRUNC-9) would stop the command there.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, envelope_summary, figure, median, parse_args, result  # noqa: E402

NAME = "truncation"
GIB = 1 << 30
RSS_TARGET_MIB = 64
THROUGHPUT_TARGET = 0.5


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _current_rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def child(size: int, rounds: int) -> dict[str, Any]:
    """Runs in the child process; returns the raw measurements."""
    import anyio

    from agentcore.api import Engine, load_manifest

    out: dict[str, Any] = {"size": size, "rounds": rounds, "pipeline_s": [], "pipeline_cpu_s": [], "anchor_s": [], "cat_anchor_s": [], "checks": []}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        ws = tmp / "ws"
        ws.mkdir()
        mpath = tmp / "m.json"
        mpath.write_text(json.dumps({
            "name": "bench-truncation",
            "tools": ["bash"],
            "environment": "bwrap",
            "requires": {
                # Under the temp dir the workspace is only visible in the sandbox as a write root.
                "fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]},
                "shell": [{"cmd": "head", "args": ["-c", {"wildcard": True}, "/dev/zero"]}],
            },
            "rules": [{"permission": "bash", "pattern": "head -c * /dev/zero", "action": "allow"}],
            # The default sidecar cap (TRUNC-9) would stop the command at 64 MiB: raised here so the whole
            # GiB goes through, which is what this benchmark measures.
            "limits": {"sidecar_bytes": 2 * size, "session_sidecar_bytes": 2 * size},
        }))
        engine = Engine(load_manifest(mpath, workspace=ws))

        async def call(n: int) -> tuple[Any, float, Any]:
            session = engine.open_session(headless=True)
            c0 = _cpu_s()
            t0 = time.perf_counter()
            env = await engine.call(session, "bash", {"command": f"head -c {n} /dev/zero"})
            dt = time.perf_counter() - t0
            out["last_cpu_s"] = _cpu_s() - c0
            return env, dt, session

        env, _, session = anyio.run(call, 1024)  # warm-up below the head limit: no sidecar
        session.close()
        if env.type != "output":
            out["blocked"] = envelope_summary(env)
            return out
        out["baseline_maxrss"] = _maxrss_bytes()
        out["baseline_rss"] = _current_rss_bytes()
        anchor_file = tmp / "anchor.out"
        anchors = {
            "anchor": f"head -c {size} /dev/zero > {shlex.quote(os.fspath(anchor_file))}",
            "cat_anchor": f"head -c {size} /dev/zero | cat > {shlex.quote(os.fspath(anchor_file))}",
        }
        sides = ["pipeline", *anchors]
        for r in range(rounds):
            for side in sides[r % len(sides):] + sides[: r % len(sides)]:
                if side in anchors:
                    t0 = time.perf_counter()
                    subprocess.run(["/bin/sh", "-c", anchors[side]], check=True)
                    out[f"{side}_s"].append(time.perf_counter() - t0)
                    anchor_file.unlink()
                    continue
                env, dt, session = anyio.run(call, size)
                check: dict[str, Any] = {"type": env.type}
                if env.type != "output":
                    session.close()
                    out["blocked"] = envelope_summary(env)
                    return out
                out["pipeline_s"].append(dt)
                out["pipeline_cpu_s"].append(out["last_cpu_s"])
                path = env.output_path
                check["truncated"] = env.truncated
                check["exit_code"] = env.data.get("exit_code") if isinstance(env.data, dict) else None
                check["sidecar_bytes"] = os.stat(path).st_size if path and os.path.exists(path) else None
                check["sidecar_in_session_dir"] = bool(path) and os.path.dirname(path) == os.fspath(session.workdir)
                del env  # drop the 200 KiB head before the next round
                session.close()
                check["sidecar_removed_on_close"] = bool(path) and not os.path.exists(path)
                out["checks"].append(check)
                out.setdefault("peak_maxrss_after_first", _maxrss_bytes())
        out["final_maxrss"] = _maxrss_bytes()
        out["final_rss"] = _current_rss_bytes()
    return out


def main(quick: bool = False, profile: bool = False) -> dict[str, Any]:
    size, rounds = (16 << 20, 1) if quick else (GIB, 5)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(size), str(rounds)],
        capture_output=True, text=True, timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    raw = json.loads(proc.stdout)
    details: dict[str, Any] = {"size_bytes": size, "rounds": rounds}
    if "blocked" in raw:
        details["blocked"] = raw["blocked"]
        return result(NAME, quick=quick, figures=[], details=details, status="blocked")
    mib = 1 << 20
    rss_increase = (raw["final_maxrss"] - raw["baseline_maxrss"]) / mib
    pipe_s, anchor_s, cat_s = median(raw["pipeline_s"]), median(raw["anchor_s"]), median(raw["cat_anchor_s"])
    pipe_tp, anchor_tp, cat_tp = size / pipe_s / mib, size / anchor_s / mib, size / cat_s / mib
    checks = raw["checks"]
    sidecar_ok = all(c["sidecar_bytes"] == size for c in checks)
    removed_ok = all(c["sidecar_removed_on_close"] for c in checks)
    details |= {
        "baseline_maxrss_mib": round(raw["baseline_maxrss"] / mib, 1),
        "final_maxrss_mib": round(raw["final_maxrss"] / mib, 1),
        "baseline_rss_mib": round(raw["baseline_rss"] / mib, 1),
        "final_rss_mib": round(raw["final_rss"] / mib, 1),
        "pipeline_s": [round(x, 3) for x in raw["pipeline_s"]],
        "anchor_s": [round(x, 3) for x in raw["anchor_s"]],
        "cat_anchor_s": [round(x, 3) for x in raw["cat_anchor_s"]],
        # CPU of this Python process only (the spool's reader and writer), per call: independent of load.
        "pipeline_python_cpu_s": [round(x, 3) for x in raw["pipeline_cpu_s"]],
        "checks": checks,
    }
    figures = [
        figure("truncation: peak RSS increase for the call", rss_increase, "MiB",
               target=f"<= {RSS_TARGET_MIB} MiB", met=rss_increase <= RSS_TARGET_MIB),
        figure("truncation: throughput via pipeline (bwrap)", pipe_tp, "MiB/s", anchor="head > file",
               anchor_value=anchor_tp, target=f">= {THROUGHPUT_TARGET}x", met=pipe_tp / anchor_tp >= THROUGHPUT_TARGET),
        figure("truncation: throughput via pipeline (bwrap)", pipe_tp, "MiB/s", anchor="head | cat > file",
               anchor_value=cat_tp, target=f">= {THROUGHPUT_TARGET}x", met=pipe_tp / cat_tp >= THROUGHPUT_TARGET),
        figure("truncation: Python CPU per call (reader + sidecar writer)", median(raw["pipeline_cpu_s"]), "s",
               anchor="anchor wall time", anchor_value=anchor_s),
        figure("truncation: sidecar size == output size", float(sidecar_ok), "bool", target="1", met=sidecar_ok),
        figure("truncation: session close removes sidecar", float(removed_ok), "bool", target="1", met=removed_ok),
    ]
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        json.dump(child(int(sys.argv[2]), int(sys.argv[3])), sys.stdout)
        sys.exit(0)
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick, profile=a.profile), a.results_dir)
