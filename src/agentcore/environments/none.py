"""The `none` environment: an explicit opt-out of OS sandboxing.

It honours NOTHING of the policy's confinement: write roots, read denials,
protected paths, network mode and the seccomp filter are all ignored, and
`verify` never refuses a policy for them. A manifest that selects `none`
accepts that the capability check and the rules are the only guard.

What it still does, because these are hygiene rather than confinement: the
command gets exactly `policy.env` (nothing inherited from this process),
runs in `policy.cwd`, reads /dev/null, and lives in its own process group
that is killed on timeout or cancellation. A grandchild that starts its own
session escapes that group; only `bwrap` contains it.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from .base import Environment, EnvironmentUnavailable, OutputSink, ProcessOutcome, SandboxPolicy, SpawnedProcess
from .procgroup import run_process_group, spawn_process_group


class NoneEnvironment(Environment):
    name = "none"

    def verify(self, policy: SandboxPolicy) -> None:
        # Only what is needed to start the process at all; no confinement is checked.
        if not policy.cwd.is_absolute() or not policy.cwd.is_dir():
            raise EnvironmentUnavailable("the working directory does not exist or is not an absolute directory path")

    def command_line(self, argv: Sequence[str], policy: SandboxPolicy) -> list[str]:
        return list(argv)

    async def run(
        self,
        argv: Sequence[str],
        policy: SandboxPolicy,
        *,
        timeout_s: float,
        sink: OutputSink,
        channel: socket.socket | None = None,
    ) -> ProcessOutcome:
        if channel is not None:
            channel.close()  # unconfined: the command has the host's network, not a proxy
        self.verify(policy)
        return await run_process_group(self.command_line(argv, policy), cwd=policy.cwd, env=policy.env, timeout_s=timeout_s, sink=sink)

    async def spawn(
        self,
        argv: Sequence[str],
        policy: SandboxPolicy,
        *,
        channel: socket.socket | None = None,
    ) -> SpawnedProcess:
        """Start `argv` unconfined, with exactly `policy.env`, in `policy.cwd` and its own process group."""
        if channel is not None:
            channel.close()
        self.verify(policy)
        return spawn_process_group(self.command_line(argv, policy), cwd=policy.cwd, env=policy.env)
