"""Shared plumbing for the benchmarks: timing, figures, results.

Every benchmark measures its anchor in the same run, interleaved with the
measured side, and reports RATIOS: absolute times on a shared 2-core machine
drift by tens of percent between minutes, ratios much less. Nothing here
asserts on timings; a missed target is a reported fact, not a failure.

Each `bench_<name>.py` prints one JSON document on stdout and writes the same
document to `<results-dir>/<name>.json` (default `bench/results/`, gitignored).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_RESULTS = BENCH_DIR / "results"


def parse_args(description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke test)")
    ap.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS, help="where <name>.json is written")
    ap.add_argument("--profile", action="store_true", help="print a profile of the measured side to stderr")
    if extra is not None:
        extra(ap)
    return ap.parse_args()


def median(xs: Iterable[float]) -> float:
    return statistics.median(list(xs))


def p90(xs: Iterable[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * 0.9))]


def interleaved(sides: dict[str, Callable[[], Any]], rounds: int, *, per_round: int = 1) -> dict[str, list[float]]:
    """Seconds per call for each side, measured round-robin with a rotating start.

    Interleaving puts every side under the same background load, so a burst
    from another process on the machine skews all sides alike.
    """
    names = list(sides)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            fn = sides[name]
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                out[name].append(time.perf_counter() - t0)
    return out


def wait_until_settled(root: Path) -> None:
    """Wait until no directory under `root` changed too recently for its ctime to tell a later change apart
    (`agentcore.timestamps.recent`), as in a tree nobody has touched for a moment: the per-call walks reuse
    only such a tree's findings. A ctime cannot be dated back, so this waits (50 ms, or 3 s for whole seconds)."""
    from agentcore.timestamps import settling_ns

    stamps = [os.lstat(d).st_ctime_ns for d, _dirs, _files in os.walk(root)]
    wait_ns = max(s + settling_ns(s) for s in stamps) - time.time_ns()
    if wait_ns >= 0:
        time.sleep(wait_ns / 1e9 + 0.01)


def figure(
    name: str,
    value: float,
    unit: str,
    *,
    anchor: str | None = None,
    anchor_value: float | None = None,
    target: str | None = None,
    met: bool | None = None,
    ratio: float | None = None,
) -> dict[str, Any]:
    """One row of the summary table. `ratio` defaults to value / anchor_value."""
    if ratio is None and anchor_value:
        ratio = value / anchor_value
    return {
        "figure": name,
        "value": _round(value),
        "unit": unit,
        "anchor": anchor,
        "anchor_value": _round(anchor_value) if anchor_value is not None else None,
        "ratio": round(ratio, 3) if ratio is not None else None,
        "target": target,
        "met": met,
    }


def _round(x: float) -> float:
    if x == 0 or abs(x) >= 100:
        return round(x, 1)
    # Three significant digits whatever the unit.
    from math import floor, log10

    return round(x, max(0, 2 - int(floor(log10(abs(x))))))


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def result(name: str, *, quick: bool, figures: list[dict[str, Any]], details: dict[str, Any], status: str = "ok", **more: Any) -> dict[str, Any]:
    return {"benchmark": name, "status": status, "quick": quick, "figures": figures, "details": details, "machine": machine(), **more}


def emit(name: str, doc: dict[str, Any], results_dir: Path) -> None:
    text = json.dumps(doc, indent=2, sort_keys=False, default=str)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"{name}.json").write_text(text + "\n")
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def profile_to_stderr(title: str, fn: Callable[[], Any], *, top: int = 25, sort: str = "tottime") -> None:
    prof = cProfile.Profile()
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats(sort).print_stats(top)
    sys.stderr.write(f"==== profile: {title} ====\n{buf.getvalue()}\n")


def envelope_summary(env: Any) -> dict[str, Any]:
    """The envelope without bulky output (bash heads can be 200 KiB)."""
    d = env.to_dict()
    data = d.get("data")
    if isinstance(data, dict):
        d["data"] = {k: (v if not isinstance(v, str) or len(v) <= 200 else f"<{len(v)} chars>") for k, v in data.items()}
    return d
