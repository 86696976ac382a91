"""Which MCP servers a session connects to, and with what (MCP-1, MCP-4, MCP-11).

Servers come from the manifest's `mcp:` block and, for ACP sessions, from the
client (`session/new`'s `mcpServers`). A client's server is granted what a
manifest entry of the same name grants (and takes its `defer` and timeouts);
without one it is granted nothing: no files beyond the system view, no
network. Values written `{from_env: VAR}` are read from this process's
environment when the session starts; a missing variable makes that server
unavailable (the reason names the variable, never a value).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..manifest.spec import FromEnv, McpServerSpec
from .names import NameProblem, check_server_name

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest, EffectiveCapabilities

Transport = Literal["stdio", "http", "sse"]
MIN_SECRET_CHARS = 6  # shorter values are not scrubbed from output (they would blank ordinary words)


@dataclass(frozen=True)
class McpServer:
    """A server a host passes for one session (an ACP client's `mcpServers` entry).

    `env` and `headers` are literal values the host was given; they are used and never shown.
    """

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # the values may be secrets
        return f"McpServer(name={self.name!r}, transport={self.transport!r})"


@dataclass(frozen=True)
class ServerPlan:
    """Everything needed to run one server in one session (values resolved; secrets inside)."""

    name: str
    origin: Literal["manifest", "client"]
    transport: Transport
    command: str | None
    args: tuple[str, ...]
    url: str | None
    grant: "EffectiveCapabilities"
    defer: bool | None
    timeout_s: float
    startup_timeout_s: float
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    problem: str | None = None  # set: the server cannot start, and this says why

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never reach output: every env and header value long enough to recognise.

        Longest first: replacing a value that begins another one first would leave the rest of the longer one.
        """
        values = {v for v in (*self.env.values(), *self.headers.values()) if len(v) >= MIN_SECRET_CHARS}
        return tuple(sorted(values, key=lambda v: (-len(v), v)))

    def scrub(self, text: str) -> str:
        """`text` with every occurrence of every one of `secrets` replaced by `[secret]` (MCP-1).

        Occurrences are found in the original text and merged where they overlap or touch, so no part of
        any value is left: replacing one value at a time cut off the start of a value whose end another
        value shared, and left its rest in the output.
        """
        found = [v for v in self.secrets if v in text]
        if not found:
            return text
        covered = bytearray(len(text))
        for value in found:
            at = text.find(value)
            while at != -1:
                covered[at:at + len(value)] = b"\x01" * len(value)
                at = text.find(value, at + 1)  # overlapping occurrences of the same value too
        out: list[str] = []
        pos = 0
        for run in re.finditer(rb"\x01+", covered):
            out += [text[pos:run.start()], "[secret]"]
            pos = run.end()
        out.append(text[pos:])
        return "".join(out)

    def describe(self) -> str:
        """Where it runs, for status output: the command and args, or the URL without query (no values of env or headers)."""
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args])
        url = self.url or ""
        return url.split("?", 1)[0].split("#", 1)[0]


def _resolve(values: Mapping[str, str | FromEnv], what: str) -> tuple[dict[str, str], str | None]:
    out: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, FromEnv):
            got = os.environ.get(value.from_env)
            if got is None:
                return {}, f"the environment variable {value.from_env} (for {what} {key}) is not set"
            if any(c in got for c in "\0\r\n"):
                return {}, f"the environment variable {value.from_env} (for {what} {key}) holds NUL, CR or LF"
            out[key] = got
        else:
            out[key] = value
    return out, None


def _from_spec(name: str, spec: McpServerSpec, grant: "EffectiveCapabilities") -> ServerPlan:
    env, problem = _resolve(spec.env, "env")
    headers, problem2 = _resolve(spec.headers, "header")
    transport: Transport = spec.transport or ("stdio" if spec.command else "http")
    return ServerPlan(
        name=name, origin="manifest", transport=transport, command=spec.command, args=tuple(spec.args), url=spec.url,
        grant=grant, defer=spec.defer, timeout_s=spec.timeout_s, startup_timeout_s=spec.startup_timeout_s,
        env=env, headers=headers, problem=problem or problem2,
    )


def _from_client(server: McpServer, manifest: "CompiledManifest", empty: "EffectiveCapabilities") -> ServerPlan:
    entry = manifest.mcp_servers.get(server.name)
    spec = entry.spec if entry is not None else McpServerSpec(command="-")
    problem = None
    try:
        check_server_name(server.name)
    except NameProblem as exc:
        problem = str(exc)
    bad_values = any(c in v for v in (*server.env.values(), *server.headers.values(), *server.args) for c in "\0\r\n")
    if bad_values:
        problem = problem or "an env, header or argument value holds NUL, CR or LF"
    return ServerPlan(
        name=server.name, origin="client", transport=server.transport, command=server.command, args=tuple(server.args),
        url=server.url, grant=entry.grant if entry is not None else empty, defer=spec.defer if entry is not None else None,
        timeout_s=spec.timeout_s, startup_timeout_s=spec.startup_timeout_s,
        env=dict(server.env), headers=dict(server.headers), problem=problem,
    )


def plan_servers(manifest: "CompiledManifest", client: Sequence[McpServer] = ()) -> list[ServerPlan]:
    """The servers of one session: the manifest's, with a client server replacing a manifest entry of its name."""
    from ..manifest.compiled import EffectiveCapabilities

    empty = EffectiveCapabilities((), (), (), (), frozenset())
    by_client = {s.name: s for s in client}
    plans = [_from_spec(name, entry.spec, entry.grant) for name, entry in manifest.mcp_servers.items() if name not in by_client]
    seen: set[str] = set()
    for server in client:
        plan = _from_client(server, manifest, empty)
        if server.name in seen:
            plan = _with_problem(plan, "another server of the session has the same name")
        seen.add(server.name)
        plans.append(plan)
    return plans


def _with_problem(plan: ServerPlan, problem: str) -> ServerPlan:
    import dataclasses

    return dataclasses.replace(plan, problem=problem)
