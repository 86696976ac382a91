"""The manifest as values: frozen plain classes, read without pydantic.

`schema.py` holds the pydantic models: they are the authority on what a
manifest may say, its error messages, its JSON Schema and its reference
page. Importing pydantic and building those models costs a command line
70-80 ms, more than the rest of `agentcore call read` put together, so the
engine works with the classes below and the loader only asks pydantic when
a document is not already in its one canonical form.

A reader here accepts exactly that form (the exact Python types a YAML or
JSON parser gives, no coercion) and declines everything else; it never
decides that something is wrong. Declined input goes to pydantic, which
either rejects it with the usual messages or coerces it, and the coerced
dump is read here. So a manifest means the same whichever path read it;
tests compare the two paths field by field on every manifest the suite
loads, and on generated ones.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, ClassVar, Literal, Union

Reader = Callable[[Any], Any]


class NotCanonical(Exception):
    """A value this module does not read: pydantic decides (the key path, never the value)."""

    def __init__(self, *path: Any) -> None:
        super().__init__(path)
        self.path = path


_REQUIRED = object()


class Field:
    """One key of a value class: how its value is read, and its default (a constant or a factory)."""

    __slots__ = ("default", "factory", "read")

    def __init__(self, read: Reader, default: Any = _REQUIRED, factory: Callable[[], Any] | None = None) -> None:
        self.read, self.default, self.factory = read, default, factory

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED and self.factory is None

    def missing(self) -> Any:
        return self.factory() if self.factory is not None else self.default


class SpecValue:
    """A frozen value with declared fields; equal by type and fields, like the pydantic models it mirrors."""

    FIELDS: ClassVar[dict[str, Field]] = {}

    def __init__(self, **values: Any) -> None:
        try:
            self._fill(values)
        except NotCanonical as exc:
            raise ValueError(f"{type(self).__name__}: invalid value at {'.'.join(map(str, exc.path)) or '(top)'}") from None

    def _fill(self, values: dict[str, Any]) -> None:
        extra = values.keys() - self.FIELDS.keys()
        if extra:
            raise NotCanonical(sorted(extra)[0])
        for name, field in self.FIELDS.items():
            if name in values:
                try:
                    value = field.read(values[name])
                except NotCanonical as exc:
                    raise NotCanonical(name, *exc.path) from None
            elif field.required:
                raise NotCanonical(name)
            else:
                value = field.missing()
            object.__setattr__(self, name, value)
        if not self._consistent():
            raise NotCanonical()

    def _consistent(self) -> bool:
        """Checks across fields (pydantic's model validators); the fields alone are already read."""
        return True

    @classmethod
    def read(cls, value: Any) -> Any:
        """`value` as an instance: one already, or a mapping in canonical form."""
        if type(value) is cls:
            return value
        if type(value) is not dict:
            raise NotCanonical()
        out = cls.__new__(cls)
        out._fill(value)
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self.FIELDS)

    def __hash__(self) -> int:  # a TypeError when a field is a list, as pydantic's frozen models do
        return hash((type(self), *(getattr(self, n) for n in self.FIELDS)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.FIELDS)})"

    def as_dict(self) -> dict[str, Any]:
        """Plain data, nested values included (pydantic's `model_dump`)."""
        return {n: _plain(getattr(self, n)) for n in self.FIELDS}


def _plain(value: Any) -> Any:
    if isinstance(value, SpecValue):
        return value.as_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# Readers. Each returns the value it read or raises NotCanonical.

def text(min_length: int = 0, check: Callable[[str], bool] | None = None) -> Reader:
    def read(v: Any) -> str:
        if type(v) is not str or len(v) < min_length or (check is not None and not check(v)):
            raise NotCanonical()
        return v
    return read


def flag(v: Any) -> bool:
    if type(v) is not bool:
        raise NotCanonical()
    return v


def _bounded(v: float, gt: float | None, ge: float | None, le: float | None) -> bool:
    return (gt is None or v > gt) and (ge is None or v >= ge) and (le is None or v <= le)


def whole(gt: float | None = None, ge: float | None = None, le: float | None = None) -> Reader:
    def read(v: Any) -> int:
        if type(v) is not int or not _bounded(v, gt, ge, le):
            raise NotCanonical()
        return v
    return read


def real(gt: float | None = None, ge: float | None = None, le: float | None = None) -> Reader:
    def read(v: Any) -> float:
        # An int is read as pydantic reads it, as a float; one too big to be exact is left to pydantic.
        if type(v) is int and abs(v) <= 2**53:
            v = float(v)
        if type(v) is not float or not math.isfinite(v) or not _bounded(v, gt, ge, le):
            raise NotCanonical()
        return v
    return read


def one_of(*values: Any) -> Reader:
    def read(v: Any) -> Any:
        if not any(type(v) is type(x) and v == x for x in values):
            raise NotCanonical()
        return v
    return read


def optional(inner: Reader) -> Reader:
    return lambda v: None if v is None else inner(v)


def list_of(inner: Reader) -> Reader:
    def read(v: Any) -> list[Any]:
        if type(v) is not list:
            raise NotCanonical()
        out = []
        for i, item in enumerate(v):
            try:
                out.append(inner(item))
            except NotCanonical as exc:
                raise NotCanonical(i, *exc.path) from None
        return out
    return read


def dict_of(inner: Reader, key: Callable[[str], bool] | None = None) -> Reader:
    def read(v: Any) -> dict[str, Any]:
        if type(v) is not dict:
            raise NotCanonical()
        out = {}
        for k, item in v.items():
            if type(k) is not str or (key is not None and not key(k)):
                raise NotCanonical()
            try:
                out[k] = inner(item)
            except NotCanonical as exc:
                raise NotCanonical(k, *exc.path) from None
        return out
    return read


def first_of(*readers: Reader) -> Reader:
    """The first reader that accepts (the union's members accept disjoint canonical forms)."""
    def read(v: Any) -> Any:
        for r in readers:
            try:
                return r(v)
            except NotCanonical:
                continue
        raise NotCanonical()
    return read


def nested(cls: type[SpecValue]) -> Field:
    """A nested section that defaults to its own defaults."""
    return Field(cls.read, factory=cls)


def listed(inner: Reader) -> Field:
    return Field(list_of(inner), factory=list)


# Checks that pydantic's validators in schema.py make too (they call these).

def one_word(cmd: str) -> bool:
    return not any(c.isspace() for c in cmd)


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# An MCP server's name: its tools become `<name>__<tool>` (MCP-2). No `__` inside and no
# `_` at either end, so the server part of an id is unambiguous.
MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
MCP_SERVER_NAME_MAX = 32


def mcp_server_name_ok(name: str) -> bool:
    return len(name) <= MCP_SERVER_NAME_MAX and bool(MCP_SERVER_NAME.fullmatch(name))


def value_ok(value: Any) -> bool:
    """An env or header value: no NUL, CR or LF in a literal."""
    return not (isinstance(value, str) and any(c in value for c in "\0\r\n"))


def mcp_shape_problem(command: str | None, args: list[str], env: dict[str, Any], url: str | None,
                      transport: str | None, headers: dict[str, Any]) -> str | None:
    """What is wrong with one MCP server's combination of keys, or None."""
    if (command is None) == (url is None):
        return "an MCP server has exactly one of command (stdio) or url (http, sse)"
    if command is not None and transport not in (None, "stdio"):
        return "a server with a command uses the stdio transport"
    if url is not None and transport == "stdio":
        return "a server with a url uses the http or sse transport"
    if command is None and (args or env):
        return "args and env belong to a stdio server (command)"
    if url is None and headers:
        return "headers belong to a remote server (url)"
    if any("\0" in arg for arg in [command or "", *args]):
        return "command and args may not contain NUL"
    for name, value in env.items():
        if not ENV_NAME.fullmatch(name):
            return "env names are [A-Za-z_][A-Za-z0-9_]*"
        if not value_ok(value):
            return "a value may not contain NUL, CR or LF"
    for name, value in headers.items():
        if not HEADER_NAME.fullmatch(name):
            return "a header name is not an HTTP token"
        if not value_ok(value):
            return "a value may not contain NUL, CR or LF"
    return None


# The values, in the order and with the defaults of schema.py (a test holds the two together).

class WildcardArg(SpecValue):
    wildcard: Literal[True]
    FIELDS = {"wildcard": Field(one_of(True))}


class PrefixArg(SpecValue):
    prefix: str
    FIELDS = {"prefix": Field(text(1))}


ArgSpec = Union[str, WildcardArg, PrefixArg]


class ShellSpec(SpecValue):
    cmd: str
    args: list[ArgSpec] | None
    FIELDS = {
        "cmd": Field(text(1, one_word)),
        "args": Field(optional(list_of(first_of(text(), WildcardArg.read, PrefixArg.read))), None),
    }


class FsSpec(SpecValue):
    read: list[str]
    write: list[str]
    FIELDS = {"read": listed(text()), "write": listed(text())}


class NetSpec(SpecValue):
    hosts: list[str]
    FIELDS = {"hosts": listed(text())}


class RequiresSpec(SpecValue):
    fs: FsSpec
    net: NetSpec
    shell: list[ShellSpec]
    capabilities: list[str]
    FIELDS = {"fs": nested(FsSpec), "net": nested(NetSpec), "shell": listed(ShellSpec.read), "capabilities": listed(text())}


class RuleSpec(SpecValue):
    permission: str
    pattern: str
    action: Literal["allow", "deny", "ask"]
    FIELDS = {"permission": Field(text(1)), "pattern": Field(text(1)), "action": Field(one_of("allow", "deny", "ask"))}


def _limit(read: Reader) -> Field:
    return Field(optional(read), None)


class LimitsSpec(SpecValue):
    FIELDS = {
        "read_bytes": _limit(whole(gt=0)),
        "glob_entries": _limit(whole(gt=0)),
        "grep_matches": _limit(whole(gt=0)),
        "bash_bytes": _limit(whole(gt=0)),
        "web_fetch_bytes": _limit(whole(gt=0)),
        "default_bytes": _limit(whole(gt=0)),
        "text_bytes": _limit(whole(gt=0)),
        "bash_timeout_s": _limit(real(gt=0)),
        "bash_max_timeout_s": _limit(real(gt=0)),
        "web_fetch_timeout_s": _limit(real(gt=0)),
        "web_fetch_max_download": _limit(whole(gt=0)),
        "web_search_calls": _limit(whole(ge=0)),
        "web_search_timeout_s": _limit(real(gt=0)),
        "task_depth": _limit(whole(ge=0, le=5)),
        "sidecar_bytes": _limit(whole(gt=0)),
        "session_sidecar_bytes": _limit(whole(gt=0)),
        "walk_entries": _limit(whole(gt=0)),
        "walk_depth": _limit(whole(gt=0)),
    }


class WatchdogSpec(SpecValue):
    enabled: bool
    disable: list[str]
    FIELDS = {"enabled": Field(flag, True), "disable": listed(text())}


class SandboxSpec(SpecValue):
    view: Literal["minimal", "full"]
    FIELDS = {"view": Field(one_of("minimal", "full"), "minimal")}


class SearchProviderSpec(SpecValue):
    name: str
    url: str
    FIELDS = {"name": Field(text()), "url": Field(text())}


class WebSearchSpec(SpecValue):
    providers: list[SearchProviderSpec]
    FIELDS = {"providers": listed(SearchProviderSpec.read)}


class SkillsSpec(SpecValue):
    paths: list[str]
    FIELDS = {"paths": listed(text())}


class ModelSpec(SpecValue):
    id: str | None
    base_url: str | None
    api_key_env: str | None
    max_tokens: int | None
    temperature: float | None
    max_turn_requests: int | None
    request_timeout_s: float | None
    context_window: int | None
    FIELDS = {
        "id": Field(optional(text()), None),
        "base_url": Field(optional(text()), None),
        "api_key_env": Field(optional(text()), None),
        "max_tokens": _limit(whole(gt=0)),
        "temperature": _limit(real(ge=0, le=2)),
        "max_turn_requests": _limit(whole(gt=0)),
        "request_timeout_s": _limit(real(gt=0)),
        "context_window": _limit(whole(gt=0)),
    }


class FromEnv(SpecValue):
    """A value read from the host's environment when the server starts; never written anywhere."""

    from_env: str
    FIELDS = {"from_env": Field(text(check=ENV_NAME.fullmatch))}  # type: ignore[arg-type]


SecretValue = Union[FromEnv, str]
_secret = first_of(FromEnv.read, text())


class McpServerSpec(SpecValue):
    command: str | None
    args: list[str]
    env: dict[str, SecretValue]
    url: str | None
    transport: Literal["stdio", "http", "sse"] | None
    headers: dict[str, SecretValue]
    requires: RequiresSpec
    defer: bool | None
    timeout_s: float
    startup_timeout_s: float
    FIELDS = {
        "command": Field(optional(text(1)), None),
        "args": listed(text()),
        "env": Field(dict_of(_secret), factory=dict),
        "url": Field(optional(text(1)), None),
        "transport": Field(optional(one_of("stdio", "http", "sse")), None),
        "headers": Field(dict_of(_secret), factory=dict),
        "requires": nested(RequiresSpec),
        "defer": Field(optional(flag), None),
        "timeout_s": Field(real(gt=0, le=3600), 60.0),
        "startup_timeout_s": Field(real(gt=0, le=600), 30.0),
    }

    def _consistent(self) -> bool:
        return mcp_shape_problem(self.command, self.args, self.env, self.url, self.transport, self.headers) is None


class _Located(SpecValue):
    """A whole document: where each key was written, once the loader read it from a file."""

    _lines: dict[Any, int] = {}
    _file: str | None = None

    def located(self, lines: dict[Any, int], file: str) -> None:
        object.__setattr__(self, "_lines", dict(lines))
        object.__setattr__(self, "_file", file)


class ManifestSpec(_Located):
    """An agent: its tools, what they may touch, the rules, and how it runs."""

    name: str
    description: str
    instructions: str
    tools: list[str]
    deferred_tools: list[str]
    requires: RequiresSpec
    rules: list[RuleSpec]
    limits: LimitsSpec
    roots: list[str]
    environment: Literal["bwrap", "none"]
    sandbox: SandboxSpec
    watchdog: WatchdogSpec
    agents: dict[str, str]
    skills: SkillsSpec
    web_search: WebSearchSpec
    model: ModelSpec
    mcp: dict[str, McpServerSpec]
    FIELDS = {
        "name": Field(text(1)),
        "description": Field(text(), ""),
        "instructions": Field(text(), ""),
        "tools": listed(text()),
        "deferred_tools": listed(text()),
        "requires": nested(RequiresSpec),
        "rules": listed(RuleSpec.read),
        "limits": nested(LimitsSpec),
        "roots": listed(text()),
        "environment": Field(one_of("bwrap", "none"), "bwrap"),
        "sandbox": nested(SandboxSpec),
        "watchdog": nested(WatchdogSpec),
        "agents": Field(dict_of(text()), factory=dict),
        "skills": nested(SkillsSpec),
        "web_search": nested(WebSearchSpec),
        "model": nested(ModelSpec),
        "mcp": Field(dict_of(McpServerSpec.read, key=mcp_server_name_ok), factory=dict),
    }


class RulesFileSpec(_Located):
    """A project rules file (`--project-rules`): rules a project adds; they can never override a manifest deny."""

    rules: list[RuleSpec]
    FIELDS = {"rules": listed(RuleSpec.read)}


def read_spec(cls: type[SpecValue], data: Any) -> Any:
    """`data` as a `cls`, or None when it is not in canonical form (then pydantic decides)."""
    try:
        return cls.read(data)
    except NotCanonical:
        return None
