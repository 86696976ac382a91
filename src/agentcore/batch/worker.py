"""A local batch worker process: `python -m agentcore.batch.worker [--db-dir DIR]`.

The local executor starts one per CPU (a Python process runs Python code on
one core at a time, and a scripted task is mostly Python) and sends each
at most its share of the concurrency; a worker runs the tasks it is sent
concurrently, in one event loop. The protocol is JSON Lines:

- stdin, from the driver: `{"spec": TaskSpec}` per task; end of input means
  stop (tasks still in flight are cancelled);
- stdout, to the driver: `{"id": ..., "result": {...}, "recording": PATH|null}`
  per finished task, where PATH is the task's own session database (in
  `--db-dir`), for the driver to merge into the batch's database and delete.

Nothing else may reach stdout: the worker moves it aside first and points
file descriptor 1 at stderr, which the driver sends to a log file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import anyio

from .execute import TaskSpec, execute_task


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentcore.batch.worker")
    ap.add_argument("--db-dir", type=Path, help="record each task in its own database here (default: not recorded)")
    args = ap.parse_args(argv)
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints (a library's, ours) go to the log, never into the protocol
    sys.stdout = sys.stderr
    try:
        anyio.run(_serve, sys.stdin.buffer, protocol, args.db_dir)
    except BaseException:
        # The thread blocked reading stdin is not a daemon: a normal exit would wait for it, and so would the
        # driver, for a reply that never comes. Exit for real, so the driver sees the worker die.
        import traceback

        traceback.print_exc()
        _remove_own_tmp()
        sys.stderr.flush()
        os._exit(1)
    _remove_own_tmp()
    import gc

    gc.freeze()  # as `agentcore` does at exit (cli.main.skip_final_collection): ~300 ms less of a worker's exit
    return 0


def _remove_own_tmp() -> None:
    """The driver gives each worker a TMPDIR of its own and removes it after the worker; a worker whose driver
    died removes it itself."""
    tmp = os.environ.get("TMPDIR", "")
    if os.path.basename(tmp).startswith("agentcore-worker-"):
        shutil.rmtree(tmp, ignore_errors=True)


async def _serve(inp: BinaryIO, out: TextIO, db_dir: Path | None) -> None:
    made: list[Path] = []
    try:
        async with anyio.create_task_group() as tg:
            while True:
                line = await anyio.to_thread.run_sync(inp.readline, abandon_on_cancel=True)
                if not line:
                    tg.cancel_scope.cancel()  # the driver is gone or done: nothing in flight is wanted any more
                    return
                tg.start_soon(_run_one, TaskSpec.from_dict(json.loads(line)["spec"]), out, db_dir, made)
    finally:
        _clean(made, db_dir)


def _clean(made: list[Path], db_dir: Path | None) -> None:
    """Remove this worker's task databases that are still there: the driver deletes each one it merged, so what
    remains belongs to a task that was cancelled or to a driver that died (a tmpfs must not keep them)."""
    from ..recorder.store import database_files

    for db in made:
        for f in database_files(db):
            f.unlink(missing_ok=True)
    if db_dir is not None:
        try:
            db_dir.rmdir()  # the last worker out removes the directory (a driver still running removes it anyway)
        except OSError:
            pass


async def _run_one(spec: TaskSpec, out: TextIO, db_dir: Path | None, made: list[Path]) -> None:
    db = db_dir / f"{spec.id}-{uuid.uuid4().hex[:8]}.db" if db_dir is not None else None
    if db is not None:
        made.append(db)
    result = await execute_task(spec, db)
    reply: dict[str, Any] = {"id": spec.id, "result": result, "recording": str(db) if db is not None and db.exists() else None}
    out.write(json.dumps(reply, ensure_ascii=False) + "\n")
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
