"""Run one process in its own session and stream its merged output.

Shared by every environment. The process's lifetime is its process group:
when the leader exits, stragglers still in the group are killed; on timeout
or cancellation the whole group gets SIGTERM, a short grace, then SIGKILL,
and the leader is reaped before we return.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from .base import OutputSink, ProcessOutcome

CHUNK = 65536
TERM_GRACE_S = 1.0  # time for the group to exit after SIGTERM before SIGKILL
DRAIN_GRACE_S = 1.0  # time for pipe holders to go away once the group was killed


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already empty


class _PumpState:
    def __init__(self) -> None:
        self.eof = anyio.Event()
        self.sink_error: Exception | None = None


async def _pump(stream: ByteReceiveStream, sink: OutputSink | None, state: _PumpState, stop: anyio.CancelScope | None = None) -> None:
    """Copy the pipe into `sink` until EOF; `sink=None` discards (used while cancelling).

    A failing sink is recorded (not raised inside the task group, where it would
    arrive wrapped in an ExceptionGroup) and `stop` is cancelled.
    """
    try:
        while True:
            try:
                chunk = await stream.receive(CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            if sink is None:
                continue
            try:
                await sink.write(chunk)
            except Exception as exc:
                state.sink_error = exc
                if stop is not None:
                    stop.cancel()
                return
    finally:
        state.eof.set()


async def _drain(stream: ByteReceiveStream, sink: OutputSink | None, grace_s: float) -> None:
    with anyio.move_on_after(grace_s):
        await _pump(stream, sink, _PumpState())


async def _terminate(proc: Process, stream: ByteReceiveStream, sink: OutputSink | None) -> None:
    """SIGTERM the group, short grace, SIGKILL the group, reap the leader, drain the pipe."""
    pgid = proc.pid
    _killpg(pgid, signal.SIGTERM)
    with anyio.move_on_after(TERM_GRACE_S):
        await proc.wait()
    # Always follow with SIGKILL: members that ignored SIGTERM, or that are
    # still alive after the leader exited, must not outlive the call.
    _killpg(pgid, signal.SIGKILL)
    await proc.wait()
    # EOF on the pipe means every process that still held it has exited.
    await _drain(stream, sink, DRAIN_GRACE_S)


def _outcome(returncode: int | None, *, timed_out: bool) -> ProcessOutcome:
    if returncode is None:
        return ProcessOutcome(exit_code=None, timed_out=timed_out, cancelled=False, term_signal=None)
    if returncode < 0:
        return ProcessOutcome(exit_code=None, timed_out=timed_out, cancelled=False, term_signal=-returncode)
    return ProcessOutcome(exit_code=returncode, timed_out=timed_out, cancelled=False, term_signal=None)


async def run_process_group(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout_s: float,
    sink: OutputSink,
) -> ProcessOutcome:
    """Exec `argv` (stdin /dev/null, stdout+stderr merged) and stream output into `sink`."""
    if not argv:
        raise ValueError("empty argv")
    proc = await anyio.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=os.fspath(cwd),
        env=dict(env),
        start_new_session=True,
    )
    stream = proc.stdout
    assert stream is not None  # stdout=PIPE
    timed_out = False
    state = _PumpState()
    try:
        with anyio.move_on_after(timeout_s) as deadline:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump, stream, sink, state, tg.cancel_scope)
                await proc.wait()
                # The leader is gone: whatever is left in its group is a straggler.
                # (A member still alive keeps the group id reserved, so this cannot
                # hit a recycled group unless the group is already empty.)
                _killpg(proc.pid, signal.SIGKILL)
                with anyio.move_on_after(DRAIN_GRACE_S):
                    await state.eof.wait()
                tg.cancel_scope.cancel()  # a holder that left the group keeps the pipe open: stop reading
        if state.sink_error is not None:
            raise state.sink_error
        if deadline.cancelled_caught:
            # Only a leader still running at the deadline is a timeout; one that
            # exited just before it merely had stragglers (already SIGKILLed).
            timed_out = proc.returncode is None
            with anyio.CancelScope(shield=True):
                await _terminate(proc, stream, sink)
    except BaseException:
        # anyio cancellation (or a failing sink): kill and reap, then re-raise.
        with anyio.CancelScope(shield=True):
            await _terminate(proc, stream, None)
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
    return _outcome(proc.returncode, timed_out=timed_out)
