"""The process-group runner after the performance work: raw pipe reads, pidfd exit waits.

Real processes only. What changed is how output is read (non-blocking reads
of up to 1 MiB, checkpoints only every so often) and how the exit is awaited
(a pidfd, or polling where there is none), so these tests aim at what that
could break: a command that never stops writing must still time out and be
cancellable, output must still stream in bounded chunks, and nothing may be
left running or unreaped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from agentcore.environments import procgroup
from agentcore.environments.procgroup import CHUNK, run_process_group

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
ENV = {"PATH": "/usr/bin:/bin"}


class Count:
    def __init__(self) -> None:
        self.total = 0
        self.chunks = 0
        self.largest = 0

    async def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.chunks += 1
        self.largest = max(self.largest, len(chunk))


class Collect:
    def __init__(self) -> None:
        self.data = bytearray()

    async def write(self, chunk: bytes) -> None:
        self.data += chunk


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_endless_output_still_times_out(tmp_path: Path) -> None:
    sink = Count()
    started = time.monotonic()
    outcome = await run_process_group(["cat", "/dev/zero"], cwd=tmp_path, env=ENV, timeout_s=1, sink=sink)
    assert outcome.timed_out and outcome.exit_code is None and outcome.term_signal is not None
    assert time.monotonic() - started < 10
    assert sink.total > 0 and sink.largest <= CHUNK


async def test_endless_output_is_cancellable_and_the_group_is_reaped(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    sink = Count()
    with anyio.move_on_after(1) as scope:
        # The shell records its pid (the group leader) and then writes forever.
        await run_process_group(["sh", "-c", f"echo $$ > {pidfile}; exec cat /dev/zero"], cwd=tmp_path, env=ENV, timeout_s=60, sink=sink)
    assert scope.cancelled_caught
    pid = int(pidfile.read_text())
    assert _gone(pid)  # killed and reaped (a zombie would still answer kill(pid, 0))
    assert sink.total > 0


async def test_large_output_arrives_whole_in_bounded_chunks(tmp_path: Path) -> None:
    size = 24 * 1024 * 1024 + 123
    sink = Count()
    outcome = await run_process_group(["head", "-c", str(size), "/dev/zero"], cwd=tmp_path, env=ENV, timeout_s=60, sink=sink)
    assert outcome.exit_code == 0
    assert sink.total == size and sink.largest <= CHUNK and sink.chunks >= size // CHUNK


async def test_many_small_writes_keep_their_order(tmp_path: Path) -> None:
    sink = Collect()
    script = "i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done; echo err >&2"
    outcome = await run_process_group(["sh", "-c", script], cwd=tmp_path, env=ENV, timeout_s=30, sink=sink)
    assert outcome.exit_code == 0
    assert sink.data.decode().split() == [f"line{i}" for i in range(3000)] + ["err"]


async def test_without_pidfds_the_exit_is_still_noticed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels before 5.3 have no pidfd_open: the runner falls back to polling the child."""

    def unavailable(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(procgroup.os, "pidfd_open", unavailable)
    sink = Collect()
    outcome = await run_process_group(["sh", "-c", "echo hi; exit 4"], cwd=tmp_path, env=ENV, timeout_s=10, sink=sink)
    assert outcome.exit_code == 4 and bytes(sink.data) == b"hi\n"
    outcome = await run_process_group(["sleep", "30"], cwd=tmp_path, env=ENV, timeout_s=0.5, sink=sink)
    assert outcome.timed_out


async def test_spawn_failure_leaks_no_descriptor(tmp_path: Path) -> None:
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError):
        await run_process_group([os.fspath(tmp_path / "missing")], cwd=tmp_path, env=ENV, timeout_s=5, sink=Collect())
    await run_process_group(["true"], cwd=tmp_path, env=ENV, timeout_s=5, sink=Collect())
    assert set(os.listdir("/proc/self/fd")) <= before


async def test_a_pipe_holder_that_left_the_group_does_not_hold_the_call(tmp_path: Path) -> None:
    """After the leader exits, the rest of the output gets DRAIN_GRACE_S; a holder in its own session is not waited for."""
    sink = Collect()
    started = time.monotonic()
    # In a shell without job control `setsid` is no group leader: it starts a new session in place and execs sleep.
    outcome = await run_process_group(["sh", "-c", "setsid sleep 30 & echo $!; echo done"], cwd=tmp_path, env=ENV, timeout_s=20, sink=sink)
    pid = int(sink.data.split()[0])
    try:
        assert outcome.exit_code == 0 and not outcome.timed_out
        assert sink.data.split()[1] == b"done"
        assert time.monotonic() - started < procgroup.DRAIN_GRACE_S + 5
        assert not _gone(pid)  # it really held the pipe: outside the group, so the straggler kill missed it
    finally:
        os.kill(pid, 9)


async def test_output_written_after_the_leader_exits_is_still_delivered(tmp_path: Path) -> None:
    """A straggler killed at the leader's exit may leave output in the pipe: all of it is read."""
    sink = Collect()
    outcome = await run_process_group(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; exit 3"], cwd=tmp_path, env=ENV, timeout_s=20, sink=sink)
    assert outcome.exit_code == 3
    assert bytes(sink.data) == b"x" * 300000


async def test_a_full_sink_ends_the_group_and_reports_capped(tmp_path: Path) -> None:
    from agentcore.errors import OutputCapped

    class Capped:
        def __init__(self) -> None:
            self.calls = 0

        async def write(self, chunk: bytes) -> None:
            self.calls += 1
            raise OutputCapped()

    pidfile = tmp_path / "pid"
    sink = Capped()
    outcome = await run_process_group(["sh", "-c", f"echo $$ > {pidfile}; exec cat /dev/zero"], cwd=tmp_path, env=ENV, timeout_s=30, sink=sink)
    assert outcome.output_capped and not outcome.timed_out and sink.calls == 1
    assert _gone(int(pidfile.read_text()))
