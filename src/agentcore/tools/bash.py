"""`bash`: one command per call, inside the environment sandbox (SHELL, ENV, TRUNC).

The capability check has already parsed the command into simple commands and
matched every one against the shell requirements. Here it runs under
`bash --noprofile --norc -c` in the sandbox with stdin closed, a timeout,
stdout+stderr merged and streamed into the truncation spool. With net.hosts
the sandbox reaches the network only through a filtering proxy started for
this call.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.abc

from ..access import Access, ShellAccess
from ..environments import callguard, calltree, guard
from ..environments.denies import READ_DENY_PERMISSIONS, WRITE_DENY_PERMISSIONS, manifest_denies
from ..errors import ToolFailure
from . import _schemas
from .base import CallContext, Tool, ToolResult

SHELL = "/bin/bash"
# A tree walk that took less than this last time runs on the event loop: handing it to a
# worker thread and back costs 0.1-0.2 ms, more than the walk of a small workspace.
INLINE_WALK_S = 0.001
# A command that ran longer than this may have made a tree too big to sweep quickly: its sweep goes to a thread.
INLINE_SWEEP_AFTER_S = 0.05
_WALK_COSTS_MAX = 64
_walk_costs: dict[tuple[object, ...], float] = {}  # (what, write roots) -> seconds the last walk took
T = TypeVar("T")


async def _walk(what: str, roots: tuple[object, ...], fn: Callable[..., T], *args: Any, inline: bool = True) -> T:
    """`fn(*args)`, a walk of the trees under `roots`: on the loop when the last one there was quick, else in a thread.

    The first walk of a tree always goes to a thread, and a walk that turns slow
    blocks the loop once at most before its successors move off it again.
    `inline=False` sends this one to a thread whatever the last one cost.
    """
    key = (what, roots)

    def timed() -> T:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            if len(_walk_costs) >= _WALK_COSTS_MAX:
                _walk_costs.clear()
            _walk_costs[key] = time.perf_counter() - start

    if inline and _walk_costs.get(key, INLINE_WALK_S) < INLINE_WALK_S:
        return timed()
    return await anyio.to_thread.run_sync(timed)


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
        policy = runtime.proc.policy
        prepared: callguard.Prepared | None = None
        if policy is not None:
            prepared = await _walk("prepare", policy.write_roots, self.prepare, policy, runtime.manifest)
            if getattr(runtime.proc.environment, "name", None) != "bwrap":
                # Nothing mounts placeholders there: an empty `.git` the command made is its own, not a mount point.
                prepared = dataclasses.replace(prepared, placeholders=())
            policy = prepared.policy
        argv = self.command_argv(args)
        started = time.perf_counter()
        try:
            if policy is not None and policy.network == "proxy":
                outcome = await self._run_with_proxy(argv, runtime, policy, timeout, sink)
            elif policy is None:
                outcome = await runtime.proc.run_sandboxed(argv, timeout_s=timeout, sink=sink)
            else:
                outcome = await runtime.proc.environment.run(argv, policy, timeout_s=timeout, sink=sink)
        finally:
            spool.close()
            if prepared is not None:
                # Whatever ended the command (its exit, the timeout, an abort), nothing protected it made stays.
                with anyio.CancelScope(shield=True):
                    swept = await self._sweep(prepared, quick=time.perf_counter() - started < INLINE_SWEEP_AFTER_S)
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
        if prepared is not None and swept:
            extra["protected_removed"] = swept  # a count only: never which paths (ENVL-6)
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None, extra=extra)

    @staticmethod
    async def _sweep(prepared: callguard.Prepared, *, quick: bool) -> int:
        """Remove what the command left that is protected; on the loop only after a `quick` command (see `_walk`)."""
        try:
            report = await _walk("sweep", prepared.policy.write_roots, callguard.finish, prepared, inline=quick)
        except guard.GuardError:
            raise ToolFailure("unavailable", "the sandbox could not remove protected files the command created; check the workspace") from None
        return report.removed

    @classmethod
    def prepare(cls, policy: Any, manifest: Any) -> callguard.Prepared:
        """The call's policy and the state the sweep compares with (see `call_policy`)."""
        return callguard.prepare(cls.call_policy(policy, manifest, guarded=False), manifest.workspace_roots)

    @staticmethod
    def call_policy(policy: Any, manifest: Any, *, guarded: bool = True) -> Any:
        """The policy plus what exists only now: files that wildcard denies name and hard-linked files
        (calltree) and, with `guarded`, the protected entries, named git paths and git settings (callguard).

        Also what `explain` shows, so its command line is the one a call made now would run.
        """
        read_denies = manifest_denies(manifest.rules, READ_DENY_PERMISSIONS).wildcard
        write_denies = manifest_denies(manifest.rules, WRITE_DENY_PERMISSIONS).wildcard
        if policy.write_roots or read_denies or calltree.linked_inodes(policy.read_denied):
            policy = _with_tree(policy, manifest, read_denies, write_denies)
        if guarded:
            policy = callguard.prepare(policy, manifest.workspace_roots).policy
        return policy

    async def _run_with_proxy(self, argv: list[str], runtime: Any, policy: Any, timeout: float, sink: Any) -> Any:
        from ..net.proxy import FilteringProxy

        # The sandbox's only way out: a socket pair. Its end goes into the sandbox (to
        # the relay alone); every connection the relay accepts arrives here as a descriptor.
        host_end, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        decisions: list[dict[str, Any]] = []
        proxy = FilteringProxy(tuple(runtime.manifest.effective.net_hosts), decisions.append)
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
        return outcome


def _with_tree(policy: Any, manifest: Any, read_denies: Any, write_denies: Any) -> Any:
    """The per-call walk's findings folded into the policy: write-denied and nested protected entries and
    hard-linked files read-only, read-denied files hidden, roots too full of links read-only whole."""
    found = calltree.scan(
        policy.write_roots, manifest.workspace_roots, read_denies, write_denies,
        denied_paths=policy.read_denied, protected_paths=policy.protected,
    )
    # Read-only whole: a write root that is itself a hard-linked file, or one holding too many of them.
    frozen = [*found.frozen, *(r for r in policy.write_roots if calltree.linked_inodes([r]))]
    if frozen:
        writable = tuple(r for r in policy.write_roots if r not in frozen)
        policy = dataclasses.replace(policy, write_roots=writable, read_roots=(*policy.read_roots, *frozen))
    if found.protected or found.linked:
        # A hard-linked file is kept read-only like a protected one, and pinned where it is.
        kept = [*policy.protected, *found.protected, *found.linked]
        policy = dataclasses.replace(policy, protected=tuple(dict.fromkeys(kept)))
    if found.denied:
        policy = dataclasses.replace(policy, read_denied=tuple(dict.fromkeys([*policy.read_denied, *found.denied])))
    return policy
