"""The `none` environment and the shared process-group runner (no sandbox, real processes)."""

from __future__ import annotations

import os
import select
import tracemalloc
from pathlib import Path

import anyio
import pytest

from agentcore.environments import EnvironmentUnavailable, SandboxPolicy, get_environment
from agentcore.environments.none import NoneEnvironment

pytestmark = pytest.mark.anyio

ENV = {"PATH": "/usr/bin:/bin"}


def policy(cwd: Path, env: dict[str, str] | None = None) -> SandboxPolicy:
    return SandboxPolicy(cwd=cwd, write_roots=(cwd,), read_denied=(), protected=(), env=ENV if env is None else env)


class Collect:
    def __init__(self) -> None:
        self.data = bytearray()
        self.ready = anyio.Event()

    async def write(self, chunk: bytes) -> None:
        self.data += chunk
        if b"\n" in self.data:
            self.ready.set()


def _pid_exits(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone and reaped
    readable, _, _ = select.select([fd], [], [], 10)  # readable once the process has exited
    os.close(fd)
    assert readable, f"pid {pid} still running"


# `sleep` in the background, its pid printed, the shell then blocks: two members of one group.
SPAWN = ["sh", "-c", "sleep 100 & echo $!; sleep 100"]


def test_get_environment_names() -> None:
    assert isinstance(get_environment("none"), NoneEnvironment)
    assert get_environment("bwrap").name == "bwrap"
    for bad in ("", "docker", "BWRAP", "none "):
        with pytest.raises(EnvironmentUnavailable):
            get_environment(bad)


def test_command_line_is_the_argv_itself(tmp_path: Path) -> None:
    assert NoneEnvironment().command_line(["echo", "a b"], policy(tmp_path)) == ["echo", "a b"]
    with pytest.raises(EnvironmentUnavailable):
        NoneEnvironment().verify(policy(tmp_path / "missing"))


async def test_env_is_exactly_the_policy_env_and_cwd_is_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCORE_TEST_SECRET", "s3cr3t-value")
    sink = Collect()
    outcome = await NoneEnvironment().run(["/usr/bin/env"], policy(tmp_path, {"ONLY": "1"}), timeout_s=10, sink=sink)
    assert outcome.exit_code == 0
    assert bytes(sink.data) == b"ONLY=1\n"
    sink = Collect()
    await NoneEnvironment().run(["/bin/pwd"], policy(tmp_path), timeout_s=10, sink=sink)
    assert sink.data.decode().strip() == os.path.realpath(tmp_path)


async def test_stdin_is_devnull_and_stderr_is_merged(tmp_path: Path) -> None:
    sink = Collect()
    outcome = await NoneEnvironment().run(["sh", "-c", "cat; echo out; echo err >&2; exit 3"], policy(tmp_path), timeout_s=10, sink=sink)
    assert outcome.exit_code == 3 and not outcome.timed_out
    assert bytes(sink.data) == b"out\nerr\n"


async def test_timeout_kills_the_group_including_the_grandchild(tmp_path: Path) -> None:
    sink = Collect()
    outcome = await NoneEnvironment().run(SPAWN, policy(tmp_path), timeout_s=1, sink=sink)
    assert outcome.timed_out and outcome.exit_code is None and outcome.term_signal is not None
    _pid_exits(int(sink.data.split()[0]))


async def test_cancellation_kills_the_group_and_reraises(tmp_path: Path) -> None:
    sink = Collect()
    returned = False
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_started() -> None:
                await sink.ready.wait()
                scope.cancel()

            tg.start_soon(cancel_when_started)
            await NoneEnvironment().run(SPAWN, policy(tmp_path), timeout_s=60, sink=sink)
            returned = True
    assert scope.cancelled_caught and not returned
    _pid_exits(int(sink.data.split()[0]))


async def test_stragglers_in_the_group_are_killed_when_the_leader_exits(tmp_path: Path) -> None:
    sink = Collect()
    outcome = await NoneEnvironment().run(["sh", "-c", "sleep 100 & echo $!"], policy(tmp_path), timeout_s=30, sink=sink)
    assert outcome.exit_code == 0 and not outcome.timed_out
    _pid_exits(int(sink.data.split()[0]))


async def test_a_failing_sink_kills_the_process_and_propagates(tmp_path: Path) -> None:
    class Broken:
        async def write(self, chunk: bytes) -> None:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        await NoneEnvironment().run(["sh", "-c", "echo x; sleep 100"], policy(tmp_path), timeout_s=30, sink=Broken())


async def test_fifty_megabytes_stream_through_a_counting_sink(tmp_path: Path) -> None:
    class Count:
        total = 0

        async def write(self, chunk: bytes) -> None:
            self.total += len(chunk)

    size = 50 * 1024 * 1024
    sink = Count()
    tracemalloc.start()
    try:
        outcome = await NoneEnvironment().run(["head", "-c", str(size), "/dev/zero"], policy(tmp_path), timeout_s=60, sink=sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.exit_code == 0 and sink.total == size
    assert peak < 8 * 1024 * 1024, peak
