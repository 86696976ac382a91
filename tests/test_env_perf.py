"""Per-call overhead of the environments (measured and reported, never asserted).

Run with `-s` to see the numbers:  .venv/bin/pytest tests/test_env_perf.py -q -s
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from agentcore.environments import EnvironmentUnavailable, SandboxPolicy, get_environment, seccomp
from agentcore.environments.bwrap import bwrap_binary, self_test, with_filter_fd
from agentcore.protected import sandbox_protected_paths

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, pytest.mark.anyio]
RUNS = 100


class Null:
    async def write(self, chunk: bytes) -> None:
        pass


async def _median_ms(fn: Callable[[], Awaitable[object]]) -> float:
    await fn()  # warm-up (self-test cache, imports)
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


async def _plain(cmd: list[str]) -> None:
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env={}, check=True)


async def test_report_overhead_of_run(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        self_test(bwrap_binary())
    except EnvironmentUnavailable as exc:
        pytest.skip(f"!!! bwrap CANNOT START here: {exc.reason}")
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="envperf-", dir="/var/tmp")))
    try:
        (root / ".git").mkdir()
        (root / ".git" / "config").write_text("")
        env = {"PATH": "/usr/bin:/bin"}
        bare_policy = SandboxPolicy(cwd=root, write_roots=(root,), read_denied=(), protected=(), env=env)
        full_policy = SandboxPolicy(cwd=root, write_roots=(root,), read_denied=(), protected=tuple(sandbox_protected_paths([root])), env=env)
        bwrap, none = get_environment("bwrap"), get_environment("none")
        sink = Null()

        async def run(environment: object, pol: SandboxPolicy) -> None:
            await environment.run(["/bin/true"], pol, timeout_s=30, sink=sink)  # type: ignore[attr-defined]

        async def bare(cmd: list[str]) -> None:
            fd = seccomp.filter_fd()  # a fresh one per run, as .run does: bwrap reads it to the end
            try:
                subprocess.run(with_filter_fd(cmd, fd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env={}, check=True, pass_fds=(fd,))
            finally:
                os.close(fd)

        full_cmd = bwrap.command_line(["/bin/true"], full_policy)
        n = len(full_policy.protected)
        results = {
            "subprocess /bin/true": await _median_ms(lambda: _plain(["/bin/true"])),
            "env none .run": await _median_ms(lambda: run(none, bare_policy)),
            "bwrap .run, no protected paths": await _median_ms(lambda: run(bwrap, bare_policy)),
            f"bwrap .run, {n} protected paths (placeholders, lock, cleanup)": await _median_ms(lambda: run(bwrap, full_policy)),
            "bare bwrap, same flags, no protected paths": await _median_ms(lambda: bare(bwrap.command_line(["/bin/true"], bare_policy))),
            # Last: bare bwrap leaves its placeholder mount points behind (nobody cleans up).
            f"bare bwrap, same flags, {n} protected paths": await _median_ms(lambda: bare(full_cmd)),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    with capsys.disabled():
        print(f"\nmedian of {RUNS} runs (ms):")
        for name, ms in results.items():
            print(f"  {ms:7.2f}  {name}")
