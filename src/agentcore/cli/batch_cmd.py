"""`agentcore batch TASKS.jsonl --manifest M --out DIR`: many headless tasks, locally or on Ray.

The work is in `agentcore.batch`; this module is the command line: flags,
the progress display on stderr, and the exit code.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ..textdata import printable
from .agent_cmds import add_model_args, model_flags

BATCH_EPILOG = (
    "exit codes: 0 every task ended with end_turn, 1 some task did not (or a task line was malformed), "
    "2 usage error (nothing ran), 130 interrupted (finished tasks are kept: run again with --resume). "
    "Writes DIR/results.jsonl (a line per finished task, as it finishes), DIR/junit.xml, DIR/summary.md, "
    "DIR/sessions.db (unless --db or --no-record), DIR/workspaces/ID (copies of workspace templates), DIR/logs/."
)


def add_subcommand(sub: Any) -> None:
    p = sub.add_parser("batch", help="run many tasks headless (ask = deny), locally or on a Ray cluster", epilog=BATCH_EPILOG)
    p.add_argument("tasks", metavar="TASKS.jsonl",
                   help='one JSON task per line: {"id", "prompt", "workspace" or "workspace_template", optional "model", "limits"}')
    p.add_argument("--manifest", required=True, help="the agents' manifest (YAML or JSON)")
    p.add_argument("--out", required=True, metavar="DIR", help="where results, reports, recordings and workspace copies go")
    p.add_argument("--concurrency", type=int, default=os.cpu_count() or 1, metavar="N", help="tasks at once (default: the number of CPUs here; with Ray, the most tasks submitted at a time)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local worker processes (default), or a Ray cluster (needs the [ray] extra)")
    p.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster to use (default $RAY_ADDRESS; without either, a local Ray instance)")
    p.add_argument("--resume", action="store_true", help="skip the tasks DIR/results.jsonl records as finished; run the others")
    add_model_args(p)
    p.add_argument("--db", metavar="PATH", help="session database for the tasks' recordings (default: DIR/sessions.db)")
    p.add_argument("--no-record", action="store_true", help="do not record the tasks' sessions")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="each task's time limit unless its limits say otherwise (default 600)")
    p.add_argument("--token-budget", type=int, metavar="N", help="each task's token budget unless its limits say otherwise (default: none)")
    p.add_argument("--max-turn-requests", type=int, metavar="N", help="model requests per task (default: the manifest's, else 50)")
    p.set_defaults(func=cmd_batch)


def cmd_batch(args: argparse.Namespace) -> int:
    import anyio

    from ..batch.progress import make_display
    from ..batch.ray_exec import RayUnavailable
    from ..batch.runner import BatchConfig, BatchUsageError, run_batch

    config = BatchConfig(
        tasks=Path(args.tasks), manifest=Path(args.manifest), out=Path(args.out), concurrency=args.concurrency,
        executor=args.executor, ray_address=args.ray_address, resume=args.resume, model=model_flags(args),
        db=Path(args.db) if args.db else None, record=not args.no_record, timeout_s=args.timeout, token_budget=args.token_budget,
    )
    display = make_display(sys.stderr)
    # `kill` stops a batch as Ctrl-C does: workers stopped, reports written, scratch files removed.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: os.kill(os.getpid(), signal.SIGINT))
    try:
        outcome = anyio.run(run_batch, config, display)
    except (BatchUsageError, RayUnavailable) as exc:
        print(f"agentcore: {printable(str(exc), lines=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        display.end(f"batch: interrupted; finished tasks are in {Path(args.out) / 'results.jsonl'} (run again with --resume)")
        return 130
    view = outcome.view
    ok = sum(1 for r in view.ordered() if r["status"] == "end_turn")
    display.end(f"batch: {len(view.ordered())}/{len(view.tasks)} finished, {ok} with end_turn"
                + (f", {outcome.skipped} of them earlier" if outcome.skipped else "")
                + (f"; {len(view.line_errors)} malformed line(s)" if view.line_errors else "")
                + f"; reports in {outcome.out}")
    return outcome.exit_code
