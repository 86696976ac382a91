"""Run every benchmark, print one summary table, write `<results-dir>/summary.json`.

Each benchmark runs as its own subprocess (a clean interpreter: no import
or cache state leaks from one into the next) and prints its JSON on stdout.

    .venv/bin/python bench/run_all.py            # full sizes (several minutes)
    .venv/bin/python bench/run_all.py --quick    # small sizes (smoke test)
    .venv/bin/python bench/run_all.py --only bash --only truncation

Exit status: 0 when every selected benchmark produced its JSON, whether or not
its targets were met or the engine refused the call ("blocked" — reported with
the envelope); 1 when a benchmark crashed or printed no valid JSON. Timings are
never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH_DIR, DEFAULT_RESULTS, machine  # noqa: E402

BENCHMARKS: tuple[str, ...] = ("pipeline", "search", "bash", "guard", "truncation", "cli", "agent", "acp", "mcp", "batch")
TIMEOUT_S = {"quick": 300, "full": 3600}


def run_one(name: str, *, quick: bool, results_dir: Path) -> dict[str, Any]:
    argv = [sys.executable, str(BENCH_DIR / f"bench_{name}.py"), "--results-dir", str(results_dir)]
    if quick:
        argv.append("--quick")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S["quick" if quick else "full"])
    except subprocess.TimeoutExpired:
        return {"benchmark": name, "status": "error", "error": "timed out", "figures": [], "wall_s": round(time.perf_counter() - t0, 1)}
    wall = round(time.perf_counter() - t0, 1)
    doc: dict[str, Any] | None = None
    if proc.returncode == 0:
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            doc = None
    if not isinstance(doc, dict) or doc.get("benchmark") != name:
        return {
            "benchmark": name,
            "status": "error",
            "error": f"exit {proc.returncode}; no valid JSON on stdout",
            "stderr_tail": proc.stderr[-3000:],
            "figures": [],
            "wall_s": wall,
        }
    doc["wall_s"] = wall
    return doc


def _cell(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    return str(x)


def table(docs: list[dict[str, Any]]) -> str:
    header = ("benchmark", "figure", "value", "anchor", "ratio", "target", "met?")
    rows: list[tuple[str, ...]] = []
    for d in docs:
        if d["status"] != "ok" or not d.get("figures"):
            why = d.get("error") or json.dumps(d.get("details", {}).get("blocked"))[:100]
            rows.append((d["benchmark"], f"[{d['status']}] {why}", "", "", "", "", ""))
            continue
        for f in d["figures"]:
            anchor = f"{f['anchor']} = {f['anchor_value']} {f['unit']}" if f.get("anchor") else "-"
            rows.append((
                d["benchmark"], f["figure"], f"{f['value']} {f['unit']}", anchor,
                f"{f['ratio']:.3g}x" if f.get("ratio") is not None else "-", _cell(f.get("target")), _cell(f.get("met")),
            ))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and few repetitions")
    ap.add_argument("--only", action="append", choices=BENCHMARKS, metavar="NAME", help=f"run only NAME (repeatable): {', '.join(BENCHMARKS)}")
    ap.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS)
    args = ap.parse_args(argv)
    selected = [b for b in BENCHMARKS if not args.only or b in args.only]
    docs = []
    for name in selected:
        sys.stderr.write(f"running {name}{' (quick)' if args.quick else ''} ...\n")
        docs.append(run_one(name, quick=args.quick, results_dir=args.results_dir))
    summary = {
        "quick": args.quick,
        "machine": machine(),
        "benchmarks": {d["benchmark"]: d for d in docs},
        "figures": [{"benchmark": d["benchmark"], **f} for d in docs for f in d.get("figures", [])],
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(table(docs))
    for d in docs:
        if d["status"] == "error":
            sys.stderr.write(f"\n{d['benchmark']} failed: {d.get('error')}\n{d.get('stderr_tail', '')}\n")
    return 1 if any(d["status"] == "error" for d in docs) else 0


if __name__ == "__main__":
    sys.exit(main())
