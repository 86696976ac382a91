"""The Ray executor: each task is a Ray task that runs `execute_task` on a worker.

`--executor ray` (the optional extra `agentcore-toolspec[ray]`) connects to
the cluster at `--ray-address` (or `$RAY_ADDRESS`); without one it starts a
local Ray instance for the batch and stops it at the end. At most
`--concurrency` tasks are submitted at a time; each asks Ray for one CPU.

A task on a worker runs exactly what a local task runs (`execute_task`, that
is `run_headless`). Workers cannot write the driver's session database, so
each task records into a database of its own in a temporary directory on
the worker, and returns it (bytes, next to the result); the driver merges it
into the batch's database (`Recorder.absorb`). Nothing secret travels: the
task spec names the API key's variable, and the worker reads it from its own
environment.

What a worker node needs is in the README ("Batches"): this package
installed, `bwrap` able to create unprivileged user namespaces, the paths a
task names (manifest, workspaces, templates, scripts, and `OUT` when
templates are copied) reachable at the same place, and the API key variable.

A task whose worker dies is retried by Ray (`MAX_RETRIES` times; a template
is copied afresh, a workspace used in place is not reset), then fails.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

import anyio

from .execute import TaskSpec, execute_task, failure_result, worker_name
from .local import OnDone, OnStart

MAX_RETRIES = 2


async def _daemon_call(fn: Callable[[], Any]) -> Any:
    """`fn()` on a daemon thread, abandoned on cancel.

    Not an anyio worker thread: those are not daemons, and a `ray.wait` still running when an
    interrupt shuts Ray down never returns, so the process could not exit.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(value)

    def run() -> None:
        try:
            value, error = fn(), None
        except BaseException as exc:  # handed to the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=run, name="agentcore-ray-wait", daemon=True).start()
    return await future


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached."""


def run_on_worker(spec_doc: dict[str, Any], record: bool) -> dict[str, Any]:
    """The Ray task: run one task here; return its result and its recording (bytes) if recorded."""
    spec = TaskSpec.from_dict(spec_doc)
    with tempfile.TemporaryDirectory(prefix="agentcore-task-") as tmp:
        db = Path(tmp) / "session.db" if record else None
        result = anyio.run(execute_task, spec, db)
        recording = db.read_bytes() if db is not None and db.exists() else None
    result["worker"] = f"ray:{worker_name()}"
    return {"result": result, "recording": recording}


def require_ray() -> None:
    _ray()


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--executor ray needs Ray: pip install 'agentcore-toolspec[ray]'") from None
    return ray


class RayExecutor:
    def __init__(self, concurrency: int, *, address: str | None, scratch: Path, record: bool) -> None:
        self.concurrency = max(1, concurrency)
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.scratch = scratch
        self.record = record
        self.started_s: float | None = None  # how long connecting (or starting a local instance) took
        self.worker_tmp: str | None = None

    def _init(self) -> None:
        ray = _ray()
        t0 = time.perf_counter()
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        host_sigterm = signal.getsignal(signal.SIGTERM)
        try:
            if self.address:
                ray.init(address=self.address, **quiet)
            else:
                # A local instance's workers get a TMPDIR of their own, removed at shutdown: a worker killed
                # mid-task (Ray retries the task elsewhere) leaves its session directory there, not in /tmp.
                self.worker_tmp = tempfile.mkdtemp(prefix="agentcore-ray-")
                ray.init(include_dashboard=False, runtime_env={"env_vars": {"TMPDIR": self.worker_tmp}}, **quiet)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
            if self.worker_tmp is not None:
                shutil.rmtree(self.worker_tmp, ignore_errors=True)
                self.worker_tmp = None
            raise RayUnavailable(f"cannot {'connect to the Ray cluster' if self.address else 'start a local Ray instance'}: "
                                 f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        finally:
            # ray.init makes SIGTERM exit the process on the spot; the host's handler stops the batch in order.
            if host_sigterm is not None:
                signal.signal(signal.SIGTERM, host_sigterm)
        self.started_s = time.perf_counter() - t0

    async def run(self, specs: Sequence[TaskSpec], on_start: OnStart, on_done: OnDone) -> None:
        if not specs:
            return
        ray = _ray()
        self._init()  # on the main thread (Ray installs its signal handlers there); the display waits a few seconds
        pending: dict[Any, tuple[TaskSpec, float, float]] = {}
        try:
            remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(run_on_worker)
            queue = list(reversed(specs))
            while queue or pending:
                while queue and len(pending) < self.concurrency:
                    spec = queue.pop()
                    pending[remote.remote(spec.to_dict(), self.record)] = (spec, time.time(), time.perf_counter())
                    on_start(spec)
                ready, _rest = await _daemon_call(lambda: ray.wait(list(pending), num_returns=1, timeout=1.0))
                for ref in ready:
                    await self._collect(ray, ref, pending.pop(ref), on_done)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._shutdown, ray, list(pending))
                if self.worker_tmp is not None:
                    shutil.rmtree(self.worker_tmp, ignore_errors=True)

    async def _collect(self, ray: Any, ref: Any, entry: tuple[TaskSpec, float, float], on_done: OnDone) -> None:
        spec, started, t0 = entry
        try:
            reply = ray.get(ref)
        except Exception as exc:  # the task could not run to its end on any worker
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            error = f"the Ray task failed: {type(exc).__name__}{': ' + first[:300] if first else ''}"
            await on_done(failure_result(spec, error, started=started, duration_s=time.perf_counter() - t0), None)
            return
        recording = None
        if reply.get("recording") is not None:
            recording = self.scratch / f"{spec.id}-{uuid.uuid4().hex[:8]}.db"
            recording.write_bytes(reply["recording"])
        await on_done(reply["result"], recording)

    @staticmethod
    def _shutdown(ray: Any, pending: list[Any]) -> None:
        for ref in pending:  # interrupted: stop what still runs
            try:
                ray.cancel(ref)
            except Exception:
                pass
        ray.shutdown()
