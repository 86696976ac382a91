"""The contract between the runtime and an execution environment (ENV).

A `SandboxPolicy` says what a command may touch; an `Environment` either
enforces all of it or refuses with `EnvironmentUnavailable` (fail closed:
there is no silent downgrade to running unsandboxed).
"""

from __future__ import annotations

import abc
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol


@dataclass(frozen=True)
class SandboxPolicy:
    """What one sandboxed command may see and change. All paths must be absolute."""

    cwd: Path
    """The workspace root; the command's working directory."""
    write_roots: tuple[Path, ...]
    """Bound read-write. Each must exist (a directory or a file)."""
    read_denied: tuple[Path, ...]
    """Masked: directories become an empty read-only tmpfs, files read as /dev/null."""
    protected: tuple[Path, ...]
    """Stay read-only even inside write roots. A missing one gets a placeholder over
    its first missing component so the command cannot create it."""
    network: Literal["none", "proxy"] = "none"
    """none: no network at all; proxy: only 127.0.0.1:proxy_port, whose connections the
    in-sandbox relay hands to the host-side filtering proxy over the `channel` given to `run`."""
    proxy_port: int = 3128
    """The in-sandbox relay listens on 127.0.0.1:proxy_port."""
    relay_script: Path | None = None
    """Stdlib-only relay run inside the sandbox before the command (`relay.py CHANNEL_FD PORT --ready-fd FD`);
    None: the one shipped in `agentcore/net/relay.py`."""
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """The COMPLETE environment of the command; nothing is inherited."""
    hidden_trees: tuple[Path, ...] = ()
    """View "full": user areas (home directories, /srv, /mnt, …) replaced by an empty read-only tree, except
    the parts that are write roots or read roots (re-bound at their own paths). View "minimal" shows none of them."""
    read_roots: tuple[Path, ...] = ()
    """Paths the command may read (the workspace roots, the bases of fs.read patterns): bound read-only
    where the sandbox would otherwise not show them."""
    view: Literal["minimal", "full"] = "minimal"
    """What the root shows. minimal: only the system directories programs need (`/usr`, `/bin`, `/lib*`,
    `/etc`, ...) plus the read and write roots; full: the host's whole `/` read-only, minus `hidden_trees`."""


class EnvironmentUnavailable(Exception):
    """The environment cannot enforce a policy (missing binary, failed self-test, unsupported policy)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ProcessOutcome:
    """How a command ended.

    `exit_code` is None when the process was ended by a signal (`term_signal`).
    `run()` re-raises anyio cancellation after cleanup, so it never returns
    `cancelled=True` itself; the field lets callers that turn a cancellation into
    a result say so.
    """

    exit_code: int | None
    timed_out: bool
    cancelled: bool
    term_signal: int | None
    output_capped: bool = False
    """The sink refused more output (OutputCapped), so the process group was killed as on timeout."""
    protected_removed: int = 0
    """Protected entries the command created that were removed after it (`percall.run_guarded`)."""
    walk_bounded: int = 0
    """Writable directories the per-call walk's bounds left unlisted, read-only for the command (ENV-13)."""


class OutputSink(Protocol):
    async def write(self, chunk: bytes) -> None:
        """Take one chunk; raise `errors.OutputCapped` to say that no more is wanted (the command is then killed)."""
        ...


class SpawnedProcess(Protocol):
    """A long-running process started by `Environment.spawn`, in its own process group.

    Implemented by `procgroup.GroupProcess`.
    """

    pid: int

    @property
    def returncode(self) -> int | None: ...

    async def send(self, data: bytes) -> None:
        """Write all of `data` to stdin (`BrokenPipeError` once the process is gone)."""
        ...

    async def receive(self, max_bytes: int = ...) -> bytes:
        """Up to `max_bytes` of stdout; b"" at end of file."""
        ...

    async def drain_stderr(self) -> None:
        """Read stderr to its end, keeping a short tail (run it as a task)."""
        ...

    def stderr_tail(self) -> bytes: ...

    async def wait(self) -> int: ...

    def kill(self) -> None:
        """SIGKILL the whole process group now (synchronous; a no-op once reaped)."""
        ...

    async def aclose(self, grace_s: float = ...) -> None:
        """Close stdin, wait `grace_s`, then SIGTERM and SIGKILL the group; reap it and release what it held."""
        ...


class Environment(abc.ABC):
    name: str

    @abc.abstractmethod
    def verify(self, policy: SandboxPolicy) -> None:
        """Raise EnvironmentUnavailable if this environment cannot enforce `policy`."""

    @abc.abstractmethod
    def command_line(self, argv: Sequence[str], policy: SandboxPolicy) -> list[str]:
        """The exact argv that `run` will exec (shown by `explain`; see `redact_command_line`)."""

    @abc.abstractmethod
    async def run(
        self,
        argv: Sequence[str],
        policy: SandboxPolicy,
        *,
        timeout_s: float,
        sink: OutputSink,
        channel: socket.socket | None = None,
    ) -> ProcessOutcome:
        """Run `argv` under `policy`.

        stdin is /dev/null; stdout and stderr share one pipe streamed chunk by
        chunk into `sink`; the command gets its own session/process group, which
        is killed (SIGTERM, short grace, SIGKILL) and reaped on timeout, when
        the sink raises `OutputCapped` (the outcome then says `output_capped`)
        or on anyio cancellation. Cancellation is re-raised after the cleanup.

        `channel` (network "proxy"): the sandbox's end of a connected unix socket
        pair whose other end a `FilteringProxy.serve_channel` serves. The
        environment takes ownership and closes it whatever happens.
        """

    async def spawn(
        self,
        argv: Sequence[str],
        policy: SandboxPolicy,
        *,
        channel: socket.socket | None = None,
    ) -> SpawnedProcess:
        """Start `argv` under `policy` as a long-running process with stdin/stdout/stderr pipes.

        Unlike `run`, it returns once the process is started; the caller owns
        it and ends it with `aclose` (or `kill`). The policy is enforced exactly
        as for `run`, `channel` likewise. An environment that cannot do this
        refuses (fail closed).
        """
        if channel is not None:
            channel.close()
        raise EnvironmentUnavailable(f"the {self.name} environment cannot start long-running processes")


# Variable names whose values are credentials by convention (AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, ...).
_SECRET_NAME = re.compile(r"(?i)(token|secret|passw|pwd|key|auth|credential|cookie|session|private|signature)")
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]+@")


def secret_looking(name: str, value: str) -> bool:
    """Whether an environment value must not be displayed: a credential-like name, or a URL carrying a password."""
    return bool(_SECRET_NAME.search(name) or _URL_USERINFO.search(value))


def redact_command_line(argv: Sequence[str]) -> list[str]:
    """`argv` for display: every `--setenv NAME VALUE` whose value looks secret shows `***` instead.

    Everything else is shown as it will run (the policy's own variables are
    PATH, HOME, LANG, ... and the proxy URLs; a host-supplied variable may not be).
    """
    out = list(argv)
    i = 0
    while i < len(out):
        if out[i] == "--setenv" and i + 2 < len(out):
            if secret_looking(out[i + 1], out[i + 2]):
                out[i + 2] = "***"
            i += 3
        elif out[i] == "--":
            break  # the command itself starts here
        else:
            i += 1
    return out
