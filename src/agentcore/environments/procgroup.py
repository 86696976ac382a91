"""Run one process in its own session and stream its merged output.

Shared by every environment. The process's lifetime is its process group:
when the leader exits, stragglers still in the group are killed; on timeout
or cancellation the whole group gets SIGTERM, a short grace, then SIGKILL,
and the leader is reaped before we return.

Plumbing, chosen for per-call cost (a sandboxed `true` is a few ms, so
fractions of a millisecond matter):

- the merged stdout/stderr is one pipe we create ourselves, read with
  non-blocking `os.read` of up to 1 MiB (the pipe is enlarged to match where
  the kernel allows), waiting with `anyio.wait_readable` only when it is
  empty — no stream wrapper, and far fewer wake-ups for large output;
- the exit is awaited on a pidfd (Linux >= 5.3): asyncio's own subprocess
  support starts a watcher thread per child, which costs more than the child;
- one task waits on one epoll set holding both the pipe and the pidfd,
  rather than a reader task beside a waiting one;
- the spawn itself (`subprocess.Popen`, a vfork/exec) runs in the event loop
  thread: handing it to a worker thread measured slower, not faster.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import anyio
from anyio.lowlevel import checkpoint

from ..errors import OutputCapped
from .base import OutputSink, ProcessOutcome

CHUNK = 1 << 20  # bytes per read; one read empties a full enlarged pipe
PIPE_SIZE = 1 << 20  # requested pipe capacity (default /proc/sys/fs/pipe-max-size)
TERM_GRACE_S = 1.0  # time for the group to exit after SIGTERM before SIGKILL
DRAIN_GRACE_S = 1.0  # time for pipe holders to go away once the group was killed
_POLL_MAX_S = 0.05  # exit polling interval ceiling where there are no pidfds


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already empty


class Child:
    """A spawned group leader, reaped only through `wait` (so its pid, the group id, stays reserved until then).

    Also used by the search tools for ripgrep.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.pidfd: int | None
        try:
            # Our unreaped child cannot be recycled, so the pidfd names exactly it.
            self.pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def wait(self) -> int:
        delay = 0.001
        while self.proc.poll() is None:
            if self.pidfd is not None:
                await anyio.wait_readable(self.pidfd)  # readable once the process has exited
            else:
                await anyio.sleep(delay)
                delay = min(delay * 2, _POLL_MAX_S)
        return self.proc.returncode  # type: ignore[return-value]  # poll() set it

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class _PumpState:
    def __init__(self) -> None:
        self.eof = False  # the pipe reached its end (every holder is gone)
        self.sink_error: Exception | None = None
        self.capped = False  # the sink wants no more output: the group is killed


async def read_fd(fd: int, on_chunk: Callable[[bytes], Awaitable[None]], size: int = CHUNK) -> None:
    """Read the non-blocking descriptor `fd` until EOF, awaiting `on_chunk` with each chunk (up to `size` bytes).

    Waits only when the pipe is empty. Reads that never block are no
    checkpoint, so a producer that never stops writing would starve the
    deadline and cancellation: every `size` bytes (small reads count 16 KiB
    each, so at most 64 in a row) this yields once. Shared by the sandboxed
    commands and ripgrep.
    """
    unchecked = 0  # bytes read since our last checkpoint
    while True:
        try:
            chunk = os.read(fd, size)
        except BlockingIOError:
            await anyio.wait_readable(fd)  # a checkpoint too
            unchecked = 0
            continue
        if not chunk:
            return
        await on_chunk(chunk)
        unchecked += len(chunk) + 16384
        if unchecked >= size:
            await checkpoint()
            unchecked = 0


class _SinkFailed(Exception):
    pass


async def _drain(fd: int, sink: OutputSink | None, grace_s: float) -> None:
    """Read the pipe to its end (at most `grace_s`) into `sink`, or discard it (`sink=None`, while
    cancelling); a sink that fails or is full ends the reading."""
    state = _PumpState()

    async def deliver(chunk: bytes) -> None:
        if sink is not None and not await _deliver(sink, chunk, state):
            raise _SinkFailed

    with anyio.move_on_after(grace_s):
        try:
            await read_fd(fd, deliver)
        except _SinkFailed:
            pass


async def _terminate(child: Child, fd: int, sink: OutputSink | None) -> None:
    """SIGTERM the group, short grace, SIGKILL the group, reap the leader, drain the pipe."""
    pgid = child.pid
    _killpg(pgid, signal.SIGTERM)
    with anyio.move_on_after(TERM_GRACE_S):
        await child.wait()
    # Always follow with SIGKILL: members that ignored SIGTERM, or that are
    # still alive after the leader exited, must not outlive the call.
    _killpg(pgid, signal.SIGKILL)
    await child.wait()
    # EOF on the pipe means every process that still held it has exited.
    await _drain(fd, sink, DRAIN_GRACE_S)


def _outcome(returncode: int | None, *, timed_out: bool, capped: bool) -> ProcessOutcome:
    if returncode is None:
        return ProcessOutcome(exit_code=None, timed_out=timed_out, cancelled=False, term_signal=None, output_capped=capped)
    if returncode < 0:
        return ProcessOutcome(exit_code=None, timed_out=timed_out, cancelled=False, term_signal=-returncode, output_capped=capped)
    return ProcessOutcome(exit_code=returncode, timed_out=timed_out, cancelled=False, term_signal=None, output_capped=capped)


def output_pipe() -> tuple[int, int]:
    """(read end, write end), both close-on-exec in this process; the read end is non-blocking."""
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        fcntl.fcntl(r, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (AttributeError, OSError):
        pass  # a smaller pipe only means more reads
    os.set_blocking(r, False)
    return r, w


def _spawn(argv: Sequence[str], cwd: Path | str, env: Mapping[str, str], out_fd: int, pass_fds: Sequence[int] = ()) -> Child:
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=out_fd,
        stderr=out_fd,
        cwd=os.fspath(cwd),
        env=dict(env),
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(pass_fds),
    )
    try:
        return Child(proc)
    except BaseException:
        _killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


async def _supervise(child: Child, fd: int, sink: OutputSink, state: _PumpState) -> None:
    """Copy the pipe into `sink` until the leader exits, SIGKILL what is left of its group, read on to EOF.

    One task waits on one epoll set holding the pipe and the pidfd: a reader task
    beside a waiting one cost two more loop rounds per call. After the leader
    exits, the rest of the output gets `DRAIN_GRACE_S` (a holder that left the
    group keeps the pipe open). A failing or full sink is recorded in `state` and ends it.
    """
    unchecked = 0  # bytes read since our last checkpoint (see read_fd)

    async def ready_output() -> bool:
        """Deliver what the pipe holds now; True at EOF or when the sink failed."""
        nonlocal unchecked
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except BlockingIOError:
                return False
            if not chunk:
                state.eof = True
                return True
            if not await _deliver(sink, chunk, state):
                return True
            unchecked += len(chunk) + 16384
            if unchecked >= CHUNK:
                await checkpoint()
                unchecked = 0

    with select.epoll(2) as ready:
        ready.register(fd, select.EPOLLIN)
        if child.pidfd is not None:
            ready.register(child.pidfd, select.EPOLLIN)
        delay = 0.001
        while child.proc.poll() is None:
            if not state.eof and await ready_output():
                if not state.eof:
                    return  # the sink failed or is full
                ready.unregister(fd)
            if child.pidfd is not None:
                await anyio.wait_readable(ready.fileno())
            else:
                # No pidfd: poll the exit, sleeping on the pipe (if still open) in between.
                with anyio.move_on_after(delay):
                    await (anyio.sleep_forever() if state.eof else anyio.wait_readable(fd))
                delay = min(delay * 2, _POLL_MAX_S)
            unchecked = 0
    # The leader is gone: whatever is left in its group is a straggler. (A member
    # still alive keeps the group id reserved, so this cannot hit a recycled group
    # unless the group is already empty.)
    _killpg(child.pid, signal.SIGKILL)
    with anyio.move_on_after(DRAIN_GRACE_S):
        while not state.eof and not await ready_output():
            await anyio.wait_readable(fd)


async def _deliver(sink: OutputSink, chunk: bytes, state: _PumpState) -> bool:
    """Write `chunk` to `sink`; False (recorded in `state`) when the sink is full or failed."""
    try:
        await sink.write(chunk)
    except OutputCapped:
        state.capped = True
        return False
    except Exception as exc:
        state.sink_error = exc
        return False
    return True


async def run_process_group(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout_s: float,
    sink: OutputSink,
    pass_fds: Sequence[int] = (),
) -> ProcessOutcome:
    """Exec `argv` (stdin /dev/null, stdout+stderr merged) and stream output into `sink`.

    `pass_fds` are inherited by the child under their own numbers. They are
    handed over: closed here as soon as the child has them (or spawning failed).
    """
    try:
        if not argv:
            raise ValueError("empty argv")
        fd, w = output_pipe()
        try:
            child = _spawn(argv, cwd, env, w, pass_fds)
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.close(w)  # only the child holds the write end now: EOF comes when its holders are gone
    finally:
        for passed in pass_fds:
            os.close(passed)
    timed_out = False
    state = _PumpState()
    try:
        with anyio.move_on_after(timeout_s) as deadline:
            await _supervise(child, fd, sink, state)
        if state.sink_error is not None:
            raise state.sink_error
        if state.capped:
            # The output reached its cap: the whole group goes as on timeout, and
            # whatever it still writes is drained and dropped, never stored.
            with anyio.CancelScope(shield=True):
                await _terminate(child, fd, None)
        elif deadline.cancelled_caught:
            # Only a leader still running at the deadline is a timeout; one that
            # exited just before it merely had stragglers (already SIGKILLed).
            timed_out = child.returncode is None
            with anyio.CancelScope(shield=True):
                await _terminate(child, fd, sink)
    except BaseException:
        # anyio cancellation (or a failing sink): kill and reap, then re-raise.
        with anyio.CancelScope(shield=True):
            await _terminate(child, fd, None)
        raise
    finally:
        # Nothing waits on either descriptor any more: every waiter above has finished.
        os.close(fd)
        child.close()
    return _outcome(child.returncode, timed_out=timed_out, capped=state.capped)


# -- long-running processes with pipes (MCP stdio servers) ----------------------------------------

STDERR_TAIL = 8192  # bytes of a spawned process's stderr kept for diagnostics (never shown to the model)


class GroupProcess:
    """A spawned process group leader with its own stdin, stdout and stderr pipes (see `spawn_process_group`).

    `send`/`receive` move bytes; `kill` is synchronous and safe at any time
    (the group is signalled only while the leader is unreaped, so its id
    cannot have been recycled); `aclose` ends it politely: stdin closed, a
    grace period, SIGTERM to the group, SIGKILL, reaped.
    """

    def __init__(self, child: Child, stdin_fd: int, stdout_fd: int, stderr_fd: int,
                 cleanup: Callable[[], Awaitable[None]] | None = None) -> None:
        self._child = child
        self.pid = child.pid
        self._stdin: int | None = stdin_fd
        self._stdout: int | None = stdout_fd
        self._stderr: int | None = stderr_fd
        self._cleanup = cleanup
        self._tail = bytearray()
        self._closed = False

    @property
    def returncode(self) -> int | None:
        """The exit status once reaped (negative: killed by that signal), else None."""
        return self._child.proc.poll()

    async def send(self, data: bytes) -> None:
        """Write all of `data` to the process's stdin; `BrokenPipeError` when it is gone."""
        view = memoryview(data)
        while view:
            fd = self._stdin
            if fd is None:
                raise BrokenPipeError("stdin is closed")
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
            view = view[n:]

    async def receive(self, max_bytes: int = CHUNK) -> bytes:
        """Up to `max_bytes` of stdout; b"" at EOF (or once closed)."""
        while True:
            fd = self._stdout
            if fd is None:
                return b""
            try:
                return os.read(fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(fd)

    async def drain_stderr(self) -> None:
        """Read stderr until EOF, keeping only its last `STDERR_TAIL` bytes (run as a task)."""
        fd = self._stderr
        if fd is None:
            return

        async def keep(chunk: bytes) -> None:
            self._tail += chunk
            del self._tail[:-STDERR_TAIL]

        try:
            await read_fd(fd, keep, 65536)
        except OSError:
            pass

    def stderr_tail(self) -> bytes:
        return bytes(self._tail)

    async def wait(self) -> int:
        """Wait for the leader to exit (reaping it)."""
        return await self._child.wait()

    def kill(self) -> None:
        """SIGKILL the whole group now, if the leader is not yet reaped (synchronous)."""
        if self._child.returncode is None and self._child.proc.returncode is None:
            _killpg(self.pid, signal.SIGKILL)

    def _close_fd(self, name: str) -> None:
        fd = getattr(self, name)
        if fd is not None:
            setattr(self, name, None)
            anyio.notify_closing(fd)
            os.close(fd)

    async def aclose(self, grace_s: float = 2.0) -> None:
        """Close stdin, give the process `grace_s` to exit, then SIGTERM and SIGKILL its group; reap; release."""
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            self._close_fd("_stdin")
            if self._child.returncode is None:
                with anyio.move_on_after(grace_s):
                    await self._child.wait()
            if self._child.returncode is None:
                _killpg(self.pid, signal.SIGTERM)
                with anyio.move_on_after(TERM_GRACE_S):
                    await self._child.wait()
            # Members that ignored SIGTERM, or outlived the leader, go too.
            _killpg(self.pid, signal.SIGKILL)
            await self._child.wait()
            self._closed = True
            self._close_fd("_stdout")
            self._close_fd("_stderr")
            self._child.close()
            if self._cleanup is not None:
                cleanup, self._cleanup = self._cleanup, None
                await cleanup()


def spawn_process_group(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    pass_fds: Sequence[int] = (),
    cleanup: Callable[[], Awaitable[None]] | None = None,
) -> GroupProcess:
    """Start `argv` in its own session with stdin, stdout and stderr pipes; returns at once.

    `pass_fds` are handed over like `run_process_group`'s (closed here once the
    child has them). `cleanup` runs after the process has been reaped by `aclose`.
    """
    if not argv:
        for passed in pass_fds:
            os.close(passed)
        raise ValueError("empty argv")
    ours: list[int] = []
    theirs: list[int] = []
    try:
        for _ in range(3):
            r, w = os.pipe2(os.O_CLOEXEC)
            ours.append(r)
            theirs.append(w)
        # stdin: the child reads r0, we write w0.
        stdin_r, stdin_w = ours[0], theirs[0]
        proc = subprocess.Popen(
            list(argv),
            stdin=stdin_r,
            stdout=theirs[1],
            stderr=theirs[2],
            cwd=os.fspath(cwd),
            env=dict(env),
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    except BaseException:
        for fd in ours + theirs:
            os.close(fd)
        raise
    finally:
        for passed in pass_fds:
            os.close(passed)
    os.close(stdin_r)
    os.close(theirs[1])
    os.close(theirs[2])
    for fd in (stdin_w, ours[1], ours[2]):
        os.set_blocking(fd, False)
    try:
        child = Child(proc)
    except BaseException:
        _killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return GroupProcess(child, stdin_w, ours[1], ours[2], cleanup)
