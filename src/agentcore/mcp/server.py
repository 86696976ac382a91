"""One MCP server in one session: start, list its tools, serve calls, restart after a crash (MCP-8 to MCP-10).

A `ServerConnection` is driven by its owner task (`run`): connect (a
sandboxed process through `Environment.spawn`, or a vetted, pinned HTTP
client), initialize, list the tools, then wait until the connection breaks or
the session closes. A broken connection fails the calls in flight with the
reason (the SDK answers them "connection closed"; we say why), and the server
is started again after a backoff, at most `MAX_RESTARTS` times in a row.
Calls come from other tasks (`call`), each with its own deadline; a call
that is cut short (deadline or abort) makes the SDK send `notifications/cancelled`.
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ..environments.base import EnvironmentUnavailable
from ..errors import ToolFailure
from .config import ServerPlan
from .names import clean_description

if TYPE_CHECKING:
    from ..environments.base import SpawnedProcess
    from ..manifest.compiled import CompiledManifest

_log = logging.getLogger("agentcore.mcp")

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # one JSON-RPC message from a server
MAX_TOOLS = 512  # tools listed per server
MAX_PAGES = 32  # tools/list pages per listing
MAX_NAME_KEPT = 100  # characters of a listed tool's name kept: past 64, no name can make a valid id (MCP-2)
MAX_RESTARTS = 5  # consecutive failed starts before a server is given up
BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
STABLE_S = 30.0  # a connection that lasted this long resets the restart count
CLOSE_GRACE_S = 1.0
# Between calls too, what a server made that is protected lives at most about this long (ENV-7, MCP-5):
# a `.envrc` or a nested `.git/hooks` it plants while idle must not wait for its next call to be removed.
SWEEP_EVERY_S = 1.0


@dataclass(frozen=True)
class Hints:
    """The annotations of a listed tool that its kind comes from (MCP-6)."""

    read_only_hint: bool | None = None
    destructive_hint: bool | None = None


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server listed it, reduced to what is used (`ServerConnection._kept`)."""

    name: str
    description: str
    input_schema: Any  # None when the check refused it
    annotations: Hints
    checked: Any = None  # the validator for `input_schema`, or the `SchemaProblem` saying why there is none


def _check(schema: Any, secrets: Sequence[str]) -> Any:
    from .schemas import SchemaProblem, check_input_schema

    try:
        return check_input_schema(schema, secrets)
    except SchemaProblem as exc:
        # A new one, without the traceback: its frames hold the refused schema (up to 16 MiB) as long as it is kept.
        return SchemaProblem(str(exc))


class _Fatal(Exception):
    """A start failure that a restart cannot fix (no sandbox, a refused host)."""


class ServerConnection:
    """One server's connection; `run` is its owner task."""

    def __init__(self, plan: ServerPlan, manifest: "CompiledManifest", environment: str,
                 on_tools: Callable[["ServerConnection"], None]) -> None:
        self.plan = plan
        self.name = plan.name
        self._manifest = manifest
        self.environment = environment if plan.transport == "stdio" else "remote"
        self._on_tools = on_tools
        self.state = "unavailable" if plan.problem else "starting"
        self.reason: str | None = plan.problem
        self.tools: list[ListedTool] = []
        self.notes: list[str] = []  # listing problems (too many tools, pages)
        self.restarts = 0
        self.network: list[dict[str, Any]] = []  # the last proxy decisions (host, port, verdict, reason)
        self._client: Any = None
        self._process: SpawnedProcess | None = None
        self._closing = False
        self._closed = anyio.Event()  # set by kill_now: ends a backoff wait at once
        self._first = anyio.Event()  # the first start attempt has ended
        self._changed = anyio.Event()  # set (and replaced) at every change of state
        self._broken = anyio.Event()
        self._broken_reason: str | None = None
        self._wake = anyio.Event()  # a break, or the server said its tools changed
        self._relist = False
        self._guarded: Any = None  # the sandbox policy before the guard (for re-observing its writable roots)
        self._prepared: Any = None  # the guard's last observation: what a sweep compares with (ENV-7)
        self._pins: Any = None  # the inodes this start's sandbox holds read-only, kept open until its last sweep
        self._sweeping = anyio.Lock()  # a call's sweep and the periodic one never compare against one observation twice

    # -- status ---------------------------------------------------------------------------
    @property
    def verified_read_only(self) -> bool:
        """Its process can change nothing outside its sandbox and send nothing anywhere (KIND-3, MCP-6)."""
        g = self.plan.grant
        return self.environment == "bwrap" and not g.fs_write and not g.net_hosts

    async def first_attempt(self) -> None:
        """Return once the first start attempt has ended (ready, failed, or restarting)."""
        await self._first.wait()

    def kill_now(self) -> None:
        """Stop at once (session closing): SIGKILL the server's process group; the owner task reaps it."""
        self._closing = True
        self._closed.set()
        if self._process is not None:
            self._process.kill()
        self._broken.set()
        self._wake.set()

    # -- the owner task --------------------------------------------------------------------
    def _set_state(self, state: str, reason: str | None) -> None:
        self.state, self.reason = state, reason
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def run(self) -> None:
        """Connect, serve, restart after a break with backoff; returns when closed or given up."""
        if self.plan.problem:
            self._first.set()
            return
        try:
            await self._run()
        except Exception:  # a bug here must not leave calls waiting: the server is given up
            _log.exception("MCP server %s: the owner task failed", self.name)
            self._set_state("failed", "internal error while running the server")
        finally:
            if self._closing:
                self._set_state("closed", "the session was closed")
            self._first.set()

    async def _run(self) -> None:
        failures = 0
        while not self._closing:
            started = anyio.current_time()
            reason, fatal = await self._connect_once()
            if self._closing:
                return
            _log.info("MCP server %s: %s", self.name, reason)
            failures = 1 if anyio.current_time() - started >= STABLE_S else failures + 1
            if fatal or failures > MAX_RESTARTS:
                self.tools = []
                self._on_tools(self)  # its tools are no longer offered
                self._set_state("failed", reason)
                return
            self._set_state("restarting", reason)
            self.restarts += 1
            self._first.set()
            with anyio.move_on_after(BACKOFF_S[min(failures - 1, len(BACKOFF_S) - 1)]):
                await self._closed.wait()

    async def _connect_once(self) -> tuple[str, bool]:
        """One connection from start to end; (why it ended, whether restarting is pointless)."""
        self._broken = anyio.Event()
        self._broken_reason = None
        self._wake = anyio.Event()
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._open(stack)
                client = await stack.enter_async_context(_client_session()(read, write, message_handler=self._on_message))
                with anyio.fail_after(self.plan.startup_timeout_s):
                    await client.initialize()
                    await self._list(client)
                self._client = client
                self._set_state("ready", None)
                self._first.set()
                await self._serve(client)
                return self._broken_reason or "the connection ended", False
        except Exception as exc:  # the server misbehaved while starting; never fatal to the session
            leaf = _leaf(exc)
            _log.debug("MCP server %s: the connection ended", self.name, exc_info=True)
            if isinstance(leaf, _Fatal):
                return str(leaf), True
            if isinstance(leaf, TimeoutError):
                return self._broken_reason or f"did not start within {self.plan.startup_timeout_s:g} s", False
            if type(leaf).__name__ == "ValidationError":  # pydantic's: the same answer would come again
                return "answered initialize or tools/list with something that is not valid MCP", True
            return self._broken_reason or _describe(leaf), False
        finally:
            self._client = None
            self._process = None

    async def _serve(self, client: Any) -> None:
        """Wait for a break or a close, re-listing the tools when the server says they changed."""
        while not self._broken.is_set():
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._relist and not self._broken.is_set():
                self._relist = False
                with anyio.move_on_after(self.plan.startup_timeout_s):
                    await self._list(client)

    def _break(self, reason: str) -> None:
        if self._broken_reason is None:
            self._broken_reason = reason
        self._broken.set()
        self._wake.set()
        if self.state == "ready" and not self._closing:
            self._set_state("restarting", self._broken_reason)  # new calls wait for the restart

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._break(f"broke the connection ({type(message).__name__})")
        elif getattr(message, "method", None) == "notifications/tools/list_changed":
            self._relist = True
            self._wake.set()

    async def _list(self, client: Any) -> None:
        import mcp_types as types

        listed: list[ListedTool] = []
        cursor: str | None = None
        beyond = 0
        self.notes = []
        for _page in range(MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await client.list_tools(params=params)
            cursor, page = result.next_cursor, result.tools
            del result
            room = MAX_TOOLS - len(listed)
            beyond += max(0, len(page) - room)
            # Each tool is reduced to what is used as soon as its page arrives, and each schema checked here, in
            # the owner task, one at a time with a checkpoint between them: a page may be 16 MiB and a listing
            # MAX_PAGES of them, and what the session keeps must not grow with it; a listing of many large schemas
            # never holds the event loop for long, and the listing's deadline can cut it short.
            for t in page[:room]:
                listed.append(self._kept(t))
                await anyio.lowlevel.checkpoint()
            del page
            if not cursor or len(listed) >= MAX_TOOLS:
                break
        if cursor:
            self.notes.append(f"the listing was cut at {len(listed) + beyond} tools")
        if beyond:
            self.notes.append(f"only the first {MAX_TOOLS} tools are used")
        self.tools = listed
        self._on_tools(self)

    def _kept(self, t: Any) -> ListedTool:
        """What is kept of a listed tool: its name (cut past any valid length), its description as the model will
        see it (MCP-3), its schema only when it passed the check, and the two hints its kind comes from."""
        checked = _check(t.input_schema, self.plan.secrets)
        annotations = t.annotations
        return ListedTool(
            t.name[:MAX_NAME_KEPT],
            clean_description(t.description or "", self.name, t.name[:MAX_NAME_KEPT], self.plan.scrub),
            None if isinstance(checked, Exception) else t.input_schema,
            Hints(getattr(annotations, "read_only_hint", None), getattr(annotations, "destructive_hint", None)),
            checked,
        )

    # -- transports -----------------------------------------------------------------------
    async def _open(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        if self.plan.transport == "stdio":
            return await self._open_stdio(stack)
        from .remote import open_remote

        try:
            return await open_remote(self.plan, stack, MAX_MESSAGE_BYTES, self._manifest.rules)
        except PermissionError as exc:
            raise _Fatal(str(exc)) from None

    async def _open_stdio(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        from ..environments import get_environment
        from ..environments.policy import server_policy
        from .stdio import process_streams

        try:
            environment = get_environment(self.environment)
            policy = _with_env(server_policy(self._manifest, self.plan.grant), self.plan.env)
            environment.verify(policy)
            if policy.write_roots:
                # Protected entries read-only, a missing .git placeholdered; what the server makes is swept (guard).
                self._guarded = policy
                self._unpin()  # a start that failed before its process ran leaves nothing held to this one
                self._prepared = await self._observe(start=True)
                policy = self._prepared.policy
        except EnvironmentUnavailable as exc:
            raise _Fatal(f"cannot be sandboxed: {exc.reason}") from None
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        channel = await self._start_proxy(tg) if policy.network == "proxy" else None
        try:
            proc = await environment.spawn([self.plan.command or "", *self.plan.args], policy, channel=channel)
        except EnvironmentUnavailable as exc:
            self._unpin()  # no process holds those inodes: their descriptors go now, not at the next start
            raise _Fatal(f"cannot be sandboxed: {exc.reason}") from None
        except OSError as exc:
            self._unpin()
            raise _Fatal(f"could not be started ({exc.strerror or type(exc).__name__})") from None
        self._process = proc
        stack.push_async_callback(self._close_process, proc)
        tg.start_soon(proc.drain_stderr)
        if self._guarded is not None:
            tg.start_soon(self._sweep_while_running)
        return await stack.enter_async_context(process_streams(proc, max_message_bytes=MAX_MESSAGE_BYTES, on_broken=self._break))

    async def _observe(self, *, start: bool = False) -> Any:
        """The protected state now, for the next sweep to compare with. What the sandbox holds read-only
        is fixed when the server starts (`start`, which keeps those inodes open): every later look keeps it."""
        import dataclasses

        from ..environments import callguard

        prepared = await anyio.to_thread.run_sync(callguard.prepare, self._guarded, self._manifest.workspace_roots)
        if self.environment != "bwrap":
            return callguard.unmounted(prepared)
        if not start:
            return dataclasses.replace(prepared, held=self._prepared.held)
        prepared, self._pins = callguard.pin(prepared)
        return prepared

    def _unpin(self) -> None:
        if self._pins is not None:
            self._pins.close()
            self._pins = None

    async def _sweep_while_running(self) -> None:
        """Sweep every SWEEP_EVERY_S while the process runs; a sweep that fails has broken the connection."""
        while True:
            await anyio.sleep(SWEEP_EVERY_S)
            try:
                removed = await self.sweep()
            except ToolFailure:
                return
            if removed:
                _log.warning("MCP server %s: removed %d protected entries it created between calls", self.name, removed)

    async def sweep(self) -> int:
        """Remove the protected entries the server made since the last look (ENV-7); how many. Then look again."""
        with anyio.CancelScope(shield=True):
            async with self._sweeping:
                return await self._sweep_once()

    async def _sweep_once(self) -> int:
        from ..environments import callguard, guard

        prepared = self._prepared
        if prepared is None:
            return 0
        try:
            report = await anyio.to_thread.run_sync(callguard.finish, prepared)
            # Compared from now on with what the sweep left, not with a fresh look, which would take in
            # what the server made in between.
            self._prepared = callguard.rebase(await self._observe(), prepared, report)
        except (guard.GuardError, EnvironmentUnavailable):
            self._break("left protected files that could not be removed")
            raise ToolFailure("unavailable", f"the sandbox could not remove protected files the MCP server {self.name} created") from None
        return int(report.removed)

    async def _close_process(self, proc: "SpawnedProcess") -> None:
        try:
            await proc.aclose(0 if self._closing or self._broken.is_set() else CLOSE_GRACE_S)
        except BaseException:  # cancelled from outside (an event loop shutting down): never leave it running
            proc.kill()
            raise
        if self._prepared is not None:
            from ..environments import callguard, guard

            with anyio.CancelScope(shield=True):
                async with self._sweeping:  # the periodic sweep may be halfway through one
                    try:
                        if self._prepared is not None:
                            await anyio.to_thread.run_sync(callguard.finish, self._prepared)
                    except guard.GuardError:
                        _log.warning("MCP server %s: protected files it created could not be removed", self.name)
                    self._prepared = None
                    self._unpin()
        code = proc.returncode
        if self._broken_reason and code is not None and "exited" in self._broken_reason:
            self._broken_reason = f"{self._broken_reason}; exit status {code}" if code >= 0 else f"{self._broken_reason}; killed by signal {-code}"
        if proc.stderr_tail():
            _log.debug("MCP server %s stderr (tail): %s", self.name, self.plan.scrub(proc.stderr_tail().decode("utf-8", "replace")))

    async def _start_proxy(self, tg: Any) -> socket.socket:
        """The server's only way out: a filtering proxy for its own net.hosts, reached over a socket pair."""
        from ..net.proxy import FilteringProxy
        from ..rules.evaluator import manifest_host_denies

        host_end, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

        def log(decision: dict[str, Any]) -> None:
            self.network.append(decision)
            del self.network[:-100]

        proxy = FilteringProxy(tuple(self.plan.grant.net_hosts), log, denied=manifest_host_denies(self._manifest.rules))
        try:
            await tg.start(proxy.serve_channel, host_end)
        except BaseException:
            host_end.close()
            sandbox_end.close()
            raise
        return sandbox_end

    # -- calls --------------------------------------------------------------------------------
    async def call(self, tool: str, args: dict[str, Any], progress: Callable[[str], Awaitable[None]] | None = None) -> Any:
        """`tools/call` with the server's deadline; every failure is a `ToolFailure` naming what happened."""
        timeout = self.plan.timeout_s
        with anyio.move_on_after(timeout) as deadline:
            client = await self._wait_up()
            return await self._call(client, tool, args, progress)
        if deadline.cancelled_caught:
            raise ToolFailure("timeout", f"the MCP server {self.name} did not answer within {timeout:g} s; the call was cancelled")
        raise ToolFailure("server_failed", f"the MCP server {self.name} failed during the call")  # pragma: no cover

    async def _wait_up(self) -> Any:
        while self.state in ("starting", "restarting"):
            await self._changed.wait()
        client = self._client
        if self.state != "ready" or client is None:
            raise ToolFailure("server_unavailable", f"the MCP server {self.name} is {self.state}: {self.reason or 'not running'}")
        return client

    async def _call(self, client: Any, tool: str, args: dict[str, Any], progress: Callable[[str], Awaitable[None]] | None) -> Any:
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                await progress(f"progress {done:g}" + (f"/{total:g}" if total else ""))

        try:
            return await client.call_tool(tool, args, progress_callback=on_progress)
        except MCPError as exc:
            if _closed(exc) or self._broken.is_set():
                self._break("closed the connection")  # keeps a reason the transport gave first
                raise ToolFailure("server_failed", f"the MCP server {self.name} {self._broken_reason}") from None
            code = getattr(getattr(exc, "error", None), "code", None)
            raise ToolFailure("server_error", f"the MCP server {self.name} answered with a JSON-RPC error (code {code})") from None
        except ValidationError:
            raise ToolFailure("invalid_result", f"the MCP server {self.name} sent a result that is not a valid tools/call result") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ToolFailure("server_failed", f"the MCP server {self.name} {self._broken_reason or 'closed the connection'}") from None
        except RuntimeError:
            raise ToolFailure("server_error", f"the MCP server {self.name} asked for input this client does not provide") from None
        except Exception as exc:
            if self.plan.transport != "stdio":
                self._break(f"broke the connection ({type(exc).__name__})")
            raise ToolFailure("server_failed", f"the MCP server {self.name} failed during the call ({type(exc).__name__})") from None


@functools.cache
def _client_session() -> type:
    """The SDK's `ClientSession`, except that it never checks a result against the tool's listed `outputSchema`.

    That check runs the server's regular expressions (`pattern`) on the server's structured content, in the
    event loop, where Python's `re` cannot be interrupted: a catastrophic pattern would hold every session,
    every timeout and every abort for good (the reason MCP-3 skips the regexes of input schemas). A schema the
    server wrote says nothing its result can be trusted for; the result is shown as it came (MCP-7).
    """
    from mcp.client.session import ClientSession

    class Session(ClientSession):
        async def validate_tool_result(self, name: str, result: Any) -> None:
            return None

        def _absorb_tool_listing(self, result: Any, *, complete: bool) -> Any:
            # The SDK keeps every listed tool's output schema (every page's, up to 16 MiB each) for that check;
            # never used here, so never kept.
            for tool in result.tools:
                tool.output_schema = None
            return super()._absorb_tool_listing(result, complete=complete)

    return Session


def _closed(exc: Exception) -> bool:
    from mcp_types import CONNECTION_CLOSED

    return getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED


def _with_env(policy: Any, env: dict[str, str] | Any) -> Any:
    import dataclasses
    from types import MappingProxyType

    return dataclasses.replace(policy, env=MappingProxyType({**policy.env, **dict(env)}))


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: what actually went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """A failure named by type only: an exception's text may carry what the server sent."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        code = getattr(getattr(exc, "error", None), "code", None)
        return f"failed to start (JSON-RPC error {code})"
    return f"failed to start ({type(exc).__name__})"


