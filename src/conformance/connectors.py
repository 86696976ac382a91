"""Connectors: how the runner reaches a harness, and the client that guards it.

A transport moves one request and one reply at a time: `CommandTransport`
spawns a command and speaks line-delimited JSON over its stdin/stdout;
`InProcessTransport` runs a Python harness object in a task of the
runner's own event loop, with the same JSON round trip so nothing but
data crosses. `HarnessClient` adds what the runner enforces whatever the
transport: `seq` numbering and matching, per-request timeouts, reply
validation, and restarting a crashed or hung harness (replaying `start`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
from anyio.abc import Process, TaskGroup

from agentcore.textdata import StructureError, loads_json

from . import PROTOCOL_VERSION
from .protocol import MAX_MESSAGE_DEPTH, ProtocolViolation, check_reply, request_problem

STDERR_TAIL = 4096
# The longest reply line the runner accepts: a harness that writes more (or never ends its line) is refused.
MAX_REPLY_BYTES = 64 * 1024 * 1024


class HarnessFault(Exception):
    """The runner had to step in: `status` is timeout, crash or error (caught by the runner)."""

    def __init__(self, status: str, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"{status}: {message}")


class _Dead(Exception):
    """The transport's harness is gone (EOF, exit, escaped exception)."""


# -- transports ------------------------------------------------------------------------------


class CommandTransport:
    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.env = env
        self._proc: Process | None = None
        self._buf = b""
        self._stderr = bytearray()
        self._tg: TaskGroup | None = None
        self._scratch: str | None = None

    @property
    def description(self) -> str:
        return "command:" + shlex.join(self.argv)

    async def start(self, tg: TaskGroup) -> None:
        self._buf = b""
        self._stderr = bytearray()
        # Each harness process gets its own TMPDIR, removed once the process is gone: what a harness
        # (or an implementation) leaves there, even when it is killed, does not outlive the run.
        self._scratch = tempfile.mkdtemp(prefix="conformance-impl-")
        env = dict(self.env if self.env is not None else os.environ, TMPDIR=self._scratch)
        # Its own process group (and session): whatever it spawns is ended with it (`_end`).
        self._proc = await anyio.open_process(self.argv, env=env, start_new_session=True)
        tg.start_soon(self._drain_stderr, self._proc)

    async def _drain_stderr(self, proc: Process) -> None:
        assert proc.stderr is not None
        try:
            async for chunk in proc.stderr:
                self._stderr += chunk
                del self._stderr[:-STDERR_TAIL]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")[-1000:]

    async def exchange(self, request: dict[str, Any]) -> Any:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise _Dead("the harness is not running")
        try:
            await proc.stdin.send(json.dumps(request, separators=(",", ":")).encode() + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise _Dead("the harness closed its stdin") from None
        limit = MAX_REPLY_BYTES
        buf = bytearray(self._buf)
        scanned = 0  # look for the newline only in bytes not searched yet (no quadratic rescans)
        while (end := buf.find(b"\n", scanned)) < 0:
            if len(buf) > limit:
                self._buf = b""
                raise ProtocolViolation(f"the harness wrote a reply line longer than {limit} bytes")
            scanned = len(buf)
            try:
                chunk = await proc.stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise _Dead("the harness closed its stdout") from None
            buf += chunk
        if end > limit:
            self._buf = b""
            raise ProtocolViolation(f"the harness wrote a reply line longer than {limit} bytes")
        line, self._buf = bytes(buf[:end]), bytes(buf[end + 1:])
        try:
            return loads_json(line, max_depth=MAX_MESSAGE_DEPTH)
        except StructureError as exc:  # a duplicate key or deep nesting: refused, never recursed into
            raise ProtocolViolation(f"the harness wrote a line that is refused: {exc.message}") from None
        except ValueError:  # UnicodeDecodeError included
            raise ProtocolViolation("the harness wrote a line that is not JSON") from None

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        scratch, self._scratch = self._scratch, None
        if proc is not None:
            await self._end(proc)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    async def _end(self, proc: Process) -> None:
        with anyio.CancelScope(shield=True):
            try:
                if proc.stdin is not None:
                    await proc.stdin.aclose()
            except Exception:
                pass
            with anyio.move_on_after(2):
                await proc.wait()
            if proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
            _kill_group(proc.pid)  # children left behind would run on after the run, holding its pipes
            try:
                await proc.aclose()  # waits and closes every pipe, so nothing outlives the loop
            except Exception:
                pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class InProcessTransport:
    """A Python harness class run inside the runner's event loop.

    `factory()` must return an async context manager whose value has
    `async handle(request) -> reply-without-seq` (see harness_agentcore).
    """

    def __init__(self, factory: Callable[[], Any], *, label: str = "inprocess") -> None:
        self.factory = factory
        self.label = label
        self._requests: Any = None
        self._replies: Any = None
        self._scope: anyio.CancelScope | None = None
        self._dead: str | None = None

    @property
    def description(self) -> str:
        return self.label

    async def start(self, tg: TaskGroup) -> None:
        self._requests, req_recv = anyio.create_memory_object_stream[dict[str, Any]](1)
        rep_send, self._replies = anyio.create_memory_object_stream[Any](1)
        self._dead = None
        scope = anyio.CancelScope()
        self._scope = scope
        tg.start_soon(self._serve, scope, req_recv, rep_send)

    async def _serve(self, scope: anyio.CancelScope, requests: Any, replies: Any) -> None:
        with scope:
            try:
                async with self.factory() as harness:
                    async for line in requests:
                        req = json.loads(line)
                        reply = await harness.handle(req)
                        # The same JSON round trip as over a pipe: only data crosses.
                        await replies.send(json.dumps({"seq": req.get("seq"), **reply}, default=str))
            except Exception as exc:  # the harness died: the runner reports a crash
                self._dead = f"{type(exc).__name__}: {exc}"
            finally:
                await replies.aclose()

    def stderr_tail(self) -> str:
        return self._dead or ""

    async def exchange(self, request: dict[str, Any]) -> Any:
        try:
            await self._requests.send(json.dumps(request))
            line = await self._replies.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise _Dead(self._dead or "the in-process harness stopped") from None
        return json.loads(line)

    async def stop(self) -> None:
        if self._requests is not None:
            await self._requests.aclose()
        if self._scope is not None:
            self._scope.cancel()
        self._requests = None
        self._scope = None


# -- the guarded client ------------------------------------------------------------------------


@dataclass
class Reply:
    """A checked reply from the harness: which kind it is (`key`) and its body."""

    key: str             # result | envelope | ask | skip | error
    payload: dict[str, Any]


@dataclass
class HarnessClient:
    """The runner's guarded connection to a harness: numbered and checked requests and replies, timeouts, restarts."""

    transport: Any
    timeout: float = 15.0
    start_timeout: float = 120.0
    max_restarts: int = 25
    hello: dict[str, Any] = field(default_factory=dict)
    restarts: int = 0
    _seq: int = 0
    _tg: TaskGroup | None = None
    _broken: str | None = None

    @property
    def features(self) -> frozenset[str]:
        return frozenset(self.hello.get("features", []))

    @property
    def implementation(self) -> dict[str, Any]:
        return dict(self.hello.get("implementation", {}))

    async def __aenter__(self) -> "HarnessClient":
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._launch()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.transport.stop()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)

    async def _launch(self) -> None:
        assert self._tg is not None
        await self.transport.start(self._tg)
        reply = await self._raw("start", {"protocol": PROTOCOL_VERSION}, self.start_timeout)
        if reply.key != "result":
            raise HarnessFault("error", f"start failed: {reply.payload.get('message') or reply.payload}")
        if reply.payload.get("protocol") != PROTOCOL_VERSION:
            raise HarnessFault("error", f"the harness speaks protocol {reply.payload.get('protocol')!r}, the runner {PROTOCOL_VERSION}")
        self.hello = reply.payload

    async def restart(self) -> None:
        """Stop whatever runs and start afresh, replaying `start`."""
        await self.transport.stop()
        if self.restarts >= self.max_restarts:
            self._broken = "too many restarts"
            raise HarnessFault("crash", "the harness was restarted too often; giving up")
        self.restarts += 1
        try:
            await self._launch()
        except HarnessFault as exc:
            self._broken = exc.message
            raise

    async def _raw(self, op: str, fields: dict[str, Any], timeout: float) -> Reply:
        self._seq += 1
        request = {"seq": self._seq, "op": op, **fields}
        problem = request_problem(request)
        if problem is not None:  # the runner's own message breaks the published schema: a suite bug
            raise ValueError(f"the runner built an invalid {op} request: {problem}")
        try:
            with anyio.fail_after(timeout):
                raw = await self.transport.exchange(request)
            key = check_reply(request, raw, self.features)
        except TimeoutError:
            raise HarnessFault("timeout", f"no reply to {op} within {timeout:g} s") from None
        except _Dead as exc:
            tail = self.transport.stderr_tail().strip()
            raise HarnessFault("crash", f"harness died during {op}: {exc}" + (f"; stderr: {tail[-400:]}" if tail else "")) from None
        except ProtocolViolation as exc:
            raise HarnessFault("error", f"protocol violation in reply to {op}: {exc}") from None
        return Reply(key, raw[key])

    async def request(self, op: str, **fields: Any) -> Reply:
        """One operation; on a fault the harness is restarted before the fault is raised."""
        if self._broken is not None:
            raise HarnessFault("crash", f"the harness could not be restarted: {self._broken}")
        try:
            return await self._raw(op, fields, self.timeout)
        except HarnessFault as fault:
            try:
                await self.restart()
            except HarnessFault:
                pass
            raise fault


# -- connector specs -------------------------------------------------------------------------


def transport_for(spec: str | None, *, mutant: str | None = None) -> Any:
    """`None`/`inprocess` (our engine), `command:<command line>`, or `broken:<name>` (in-process).

    With `mutant`, the transport is wrapped in the mutating proxy (conformance.mutants).
    """
    if mutant is not None:
        from .mutants import MutatingTransport, make

        return MutatingTransport(transport_for(spec), make(mutant))
    if spec in (None, "", "inprocess", "agentcore"):
        from .harness_agentcore import AgentcoreHarness

        return InProcessTransport(AgentcoreHarness, label="inprocess:agentcore")
    assert spec is not None
    if spec.startswith("command:"):
        argv = shlex.split(spec[len("command:"):])
        if not argv:
            raise ValueError("command: needs a command line")
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the runner's own interpreter, so the package is importable
        env = dict(os.environ)
        return CommandTransport(argv, env=env)
    if spec.startswith("broken:"):
        from .broken import broken_harness

        name = spec[len("broken:"):]
        return InProcessTransport(broken_harness(name), label=f"inprocess:broken:{name}")
    raise ValueError(f"unknown implementation spec {spec!r} (use command:..., broken:NAME or inprocess)")
