"""`bash`: one command per call, inside the environment sandbox (SHELL, ENV, TRUNC).

The capability check has already parsed the command into simple commands and
matched every one against the shell requirements. Here it runs under
`bash --noprofile --norc -c` in the sandbox with stdin closed, a timeout,
stdout+stderr merged and streamed into the truncation spool. With net.hosts
the sandbox reaches the network only through a filtering proxy started for
this call.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import anyio
import anyio.abc

from ..access import Access, ShellAccess
from ..environments import percall
from . import _schemas
from .base import CallContext, Tool, ToolResult

SHELL = "/bin/bash"
# The proxy decisions a call's envelope carries (ENVL-7); the rest are only counted. A command opens
# connections in a loop at thousands a second, and each one is a decision.
MAX_NETWORK_DECISIONS = 100


class BashTool(Tool):
    id = "bash"
    description = (
        "Run one shell command in the workspace, sandboxed. Only commands the manifest's shell requirements allow "
        "are accepted; variables, substitutions and globs are refused. Returns combined output, exit_code and timed_out."
    )
    parameters = _schemas.BASH
    kind = "execute"
    # The sandbox shows fs.read, lets commands write fs.write and reaches net.hosts through its proxy (ENV-5, ENV-12).
    uses = ("shell.run", "fs.read", "fs.write", "net.fetch")
    needs_environment = True
    own_truncation = True
    default_timeout_s = 600.0

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        return [ShellAccess("command", args["command"])]

    def title(self, args: dict[str, Any]) -> str:
        """The first line, cut at 80 characters, and how many lines follow: a harmless first line must not
        pass for the whole script where a front end shows only the title."""
        lines = [ln for ln in str(args.get("command", "")).strip().splitlines() if ln.strip()]
        if not lines:
            return ""
        first = lines[0] if len(lines[0]) <= 80 else lines[0][:77] + "..."
        more = len(lines) - 1
        return first if not more else f"{first} (+{more} more line{'s' if more > 1 else ''})"

    def command_argv(self, args: dict[str, Any]) -> list[str]:  # noqa: D102 - see Tool
        return [SHELL, "--noprofile", "--norc", "-c", args["command"]]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        limits = runtime.limits
        timeout = limits.bash_timeout_s
        if "timeout_ms" in args:
            timeout = args["timeout_ms"] / 1000.0
        timeout = min(timeout, limits.bash_max_timeout_s)
        spool = runtime.byte_spool(limits.bash_bytes)
        sink = runtime.output_sink(spool)  # the spool, plus the call's observers when any listen
        argv = self.command_argv(args)
        policy = runtime.proc.policy
        try:
            if policy is not None and policy.network == "proxy":
                outcome = await percall.run_guarded(
                    runtime.proc.environment, policy, runtime.manifest, lambda p: self._run_with_proxy(argv, runtime, p, timeout, sink))
            else:
                outcome = await runtime.proc.run_sandboxed(argv, timeout_s=timeout, sink=sink)
        finally:
            spool.close()
        exit_code = outcome.exit_code
        if exit_code is None and outcome.term_signal:
            exit_code = 128 + outcome.term_signal  # as the shell reports it, in every environment (SHELL-9)
        data: dict[str, Any] = {
            "output": spool.head_text(),
            "exit_code": exit_code,
            "timed_out": outcome.timed_out,
        }
        if spool.truncated:
            data["head"] = data["output"]
        extra = {"network": runtime.extra["network"]} if "network" in runtime.extra else {}
        if runtime.extra.get("network_omitted"):
            extra["network_omitted"] = runtime.extra["network_omitted"]  # decisions past MAX_NETWORK_DECISIONS
        if outcome.protected_removed:
            extra["protected_removed"] = outcome.protected_removed  # a count only: never which paths (ENVL-6)
        if outcome.walk_bounded:
            extra["walk_bounded"] = outcome.walk_bounded  # why a write failed there (EROFS): a count, never which
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None, extra=extra)

    async def _run_with_proxy(self, argv: list[str], runtime: Any, policy: Any, timeout: float, sink: Any) -> Any:
        from ..net.proxy import FilteringProxy
        from ..rules.evaluator import manifest_host_denies

        # The sandbox's only way out: a socket pair. Its end goes into the sandbox (to
        # the relay alone); every connection the relay accepts arrives here as a descriptor.
        host_end, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        decisions: list[dict[str, Any]] = []
        omitted = 0

        def log(entry: dict[str, Any]) -> None:
            # Bounded: the first decisions are kept, the others counted (every output bounded).
            nonlocal omitted
            if len(decisions) < MAX_NETWORK_DECISIONS:
                decisions.append(entry)
            else:
                omitted += 1

        proxy = FilteringProxy(tuple(runtime.manifest.effective.net_hosts), log,
                               denied=manifest_host_denies(runtime.manifest.rules))
        proxy_done = anyio.Event()

        async def serve(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                await proxy.serve_channel(host_end, task_status=task_status)
            finally:
                proxy_done.set()

        try:
            async with anyio.create_task_group() as tg:
                await tg.start(serve)
                host_end = None  # serve_channel owns it now
                try:
                    outcome = await runtime.proc.environment.run(argv, policy, timeout_s=timeout, sink=sink, channel=sandbox_end)
                    # The sandbox is gone, so the channel ends and its connections close:
                    # let the proxy finish on its own (bounded) rather than cancel it mid-read.
                    with anyio.move_on_after(2.0):
                        await proxy_done.wait()
                finally:
                    tg.cancel_scope.cancel()
        finally:
            sandbox_end.close()  # no-op once the environment has taken it
            if host_end is not None:
                host_end.close()
        # Every proxy decision (host, port, verdict, reason code; never paths or queries) rides on the envelope.
        runtime.extra["network"] = decisions
        runtime.extra["network_omitted"] = omitted
        return outcome

