"""The local executor: worker processes on this machine.

`--concurrency N` tasks run at once, spread over `min(N, CPUs, tasks)` worker
processes (`worker.py`), each running its share concurrently in its own event
loop. Processes, not one event loop: a scripted task is mostly Python, and one
process runs Python on one core at a time; model-bound tasks (a real provider)
mostly wait, and waiting is what an event loop shares well.

A worker that dies (killed, out of memory, a crash in native code) fails the
tasks it had in flight, and a new worker takes its place; after
`MAX_FRESH_DEATHS` workers in a row die before finishing any task, the slot is
not refilled, so a worker that cannot start does not loop. Each worker's
stderr goes to `OUT/logs/worker-<n>.log`.
Cancelling `run` (Ctrl-C) closes the workers' input, which cancels their
tasks, and kills any worker still running after a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from .execute import TaskSpec, failure_result

OnStart = Callable[[TaskSpec], None]
OnDone = Callable[[dict[str, Any], "Path | None"], Awaitable[None]]

MAX_REPLY_BYTES = 256 * 1024 * 1024
STOP_GRACE_S = 5.0
# Workers of one slot that may die in a row before finishing a task. One is not enough: a first task that gets its
# worker killed (out of memory) would fail every task after it, with one worker on a one-CPU runner.
MAX_FRESH_DEATHS = 3


def shares(concurrency: int, processes: int) -> list[int]:
    """How many tasks each of `processes` workers may run at once, `concurrency` in all."""
    return [concurrency // processes + (1 if i < concurrency % processes else 0) for i in range(processes)]


class LocalExecutor:
    def __init__(self, concurrency: int, *, log_dir: Path, db_dir: Path | None, cpus: int | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.log_dir = log_dir
        self.db_dir = db_dir
        self.cpus = cpus or os.cpu_count() or 1

    async def run(self, specs: Sequence[TaskSpec], on_start: OnStart, on_done: OnDone) -> None:
        if not specs:
            return
        queue: deque[TaskSpec] = deque(specs)
        processes = min(self.concurrency, self.cpus, len(specs))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        async with anyio.create_task_group() as tg:
            for n, slots in enumerate(shares(self.concurrency, processes)):
                tg.start_soon(self._slot, n, slots, queue, on_start, on_done)
        now = time.time()
        while queue:  # every worker died without finishing anything
            spec = queue.popleft()
            await on_done(failure_result(spec, f"no worker process could run it (see {self.log_dir})", started=now, duration_s=0.0), None)

    async def _slot(self, n: int, slots: int, queue: deque[TaskSpec], on_start: OnStart, on_done: OnDone) -> None:
        """Keep one worker process busy while tasks remain, replacing it when it dies."""
        fresh_deaths = 0
        while queue:
            finished = await _Worker(self, n, slots).drive(queue, on_start, on_done)
            fresh_deaths = 0 if finished else fresh_deaths + 1
            if fresh_deaths >= MAX_FRESH_DEATHS:
                return

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "agentcore.batch.worker"]
        return argv + ["--db-dir", str(self.db_dir)] if self.db_dir is not None else argv


class _Worker:
    def __init__(self, executor: LocalExecutor, n: int, slots: int) -> None:
        self.executor = executor
        self.n = n
        self.slots = slots
        self.inflight: dict[str, tuple[TaskSpec, float, float]] = {}  # id -> (spec, started_at, perf_counter)
        self.finished = 0

    async def drive(self, queue: deque[TaskSpec], on_start: OnStart, on_done: OnDone) -> int:
        """Run tasks from `queue` until it is empty or the process dies; returns how many finished."""
        # The worker's own TMPDIR (its sessions' directories and sidecars): removed once the process is gone,
        # so a worker that is killed mid-task leaves nothing behind.
        tmp = tempfile.mkdtemp(prefix="agentcore-worker-")
        log = open(self.executor.log_dir / f"worker-{self.n}.log", "ab")
        try:
            proc = await anyio.open_process(self.executor.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                            env={**os.environ, "TMPDIR": tmp},
                                            start_new_session=True)  # Ctrl-C reaches the driver, which stops workers in order
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            log.close()
        try:
            await self._loop(proc, queue, on_start, on_done)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.BrokenResourceError, anyio.ClosedResourceError,
                OSError, ValueError, KeyError, TypeError):  # the process died, or broke the protocol (a reply too long): it is lost
            await self._lost(proc, on_done)
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(proc)
                shutil.rmtree(tmp, ignore_errors=True)
        return self.finished

    async def _loop(self, proc: Process, queue: deque[TaskSpec], on_start: OnStart, on_done: OnDone) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        replies = BufferedByteReceiveStream(proc.stdout)
        while True:
            await self._refill(proc, queue, on_start)
            if not self.inflight:
                return
            reply = json.loads(await replies.receive_until(b"\n", MAX_REPLY_BYTES))
            self.inflight.pop(reply["id"])
            self.finished += 1
            # The freed slot gets its next task before the result is absorbed (recording merged, line
            # printed): the worker computes while the driver does its part. A worker that broke meanwhile
            # still has this result absorbed before it is declared lost (every task is reported once).
            broken: Exception | None = None
            try:
                await self._refill(proc, queue, on_start)
            except Exception as exc:
                broken = exc
            await on_done(reply["result"], Path(reply["recording"]) if reply.get("recording") else None)
            if broken is not None:
                raise broken

    async def _refill(self, proc: Process, queue: deque[TaskSpec], on_start: OnStart) -> None:
        assert proc.stdin is not None
        while len(self.inflight) < self.slots and queue:
            spec = queue.popleft()
            self.inflight[spec.id] = (spec, time.time(), time.perf_counter())
            on_start(spec)
            await proc.stdin.send((json.dumps({"spec": spec.to_dict()}) + "\n").encode())

    async def _lost(self, proc: Process, on_done: OnDone) -> None:
        with anyio.move_on_after(STOP_GRACE_S):
            await proc.wait()
        code = proc.returncode
        why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        for spec, started, t0 in list(self.inflight.values()):
            error = f"the worker process running the task ended ({why}; see {self.executor.log_dir}/worker-{self.n}.log)"
            await on_done(failure_result(spec, error, started=started, duration_s=time.perf_counter() - t0, worker=f"local:{proc.pid}"), None)
        self.inflight.clear()


async def _stop(proc: Process) -> None:
    """Close the worker's input (it cancels what it still runs and exits); kill it if it does not."""
    if proc.stdin is not None:
        try:
            await proc.stdin.aclose()
        except (OSError, anyio.BrokenResourceError):
            pass
    with anyio.move_on_after(STOP_GRACE_S):
        await proc.wait()
    if proc.returncode is None:
        proc.kill()
    await proc.aclose()
