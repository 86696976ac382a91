"""Pydantic models of the manifest and rules files, as authors write them."""

from __future__ import annotations

import re
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    # Unknown keys are errors: a misspelt `requries:` must not silently grant nothing.
    model_config = ConfigDict(extra="forbid", frozen=True)


class WildcardArg(_Strict):
    wildcard: Literal[True]


class PrefixArg(_Strict):
    prefix: str = Field(min_length=1)


ArgSpec = Union[str, WildcardArg, PrefixArg]


ARG_FORMS = "an argument pattern is a string, {wildcard: true} (exactly one argument) or {prefix: TEXT}"


def _arg_ok(a: object) -> bool:
    if isinstance(a, str):
        return True
    if isinstance(a, dict) and len(a) == 1:
        return a.get("wildcard") is True or (isinstance(a.get("prefix"), str) and bool(a.get("prefix")))
    return False


class ShellSpec(_Strict):
    cmd: str = Field(min_length=1)
    args: list[ArgSpec] | None = None

    @field_validator("args", mode="before")
    @classmethod
    def _arg_forms(cls, v: object) -> object:
        # One clear message instead of one error per member of the ArgSpec union.
        if isinstance(v, list):
            bad = [i for i, a in enumerate(v) if not _arg_ok(a)]
            if bad:
                raise ValueError(f"argument {bad[0]}: {ARG_FORMS}")
        return v

    @field_validator("cmd")
    @classmethod
    def _no_space(cls, v: str) -> str:
        if any(c.isspace() for c in v):
            raise ValueError("cmd is one executable name; put arguments in args")
        return v


class FsSpec(_Strict):
    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)


class NetSpec(_Strict):
    hosts: list[str] = Field(default_factory=list)


class RequiresSpec(_Strict):
    fs: FsSpec = Field(default_factory=FsSpec)
    net: NetSpec = Field(default_factory=NetSpec)
    shell: list[ShellSpec] = Field(default_factory=list)
    capabilities: list[str] = Field(default_factory=list)


class RuleSpec(_Strict):
    permission: str = Field(min_length=1)
    pattern: str = Field(min_length=1)
    action: Literal["allow", "deny", "ask"]


class LimitsSpec(_Strict):
    read_bytes: int | None = Field(default=None, gt=0)
    glob_entries: int | None = Field(default=None, gt=0)
    grep_matches: int | None = Field(default=None, gt=0)
    bash_bytes: int | None = Field(default=None, gt=0)
    web_fetch_bytes: int | None = Field(default=None, gt=0)
    default_bytes: int | None = Field(default=None, gt=0)
    text_bytes: int | None = Field(default=None, gt=0)
    bash_timeout_s: float | None = Field(default=None, gt=0)
    bash_max_timeout_s: float | None = Field(default=None, gt=0)
    web_fetch_timeout_s: float | None = Field(default=None, gt=0)
    web_fetch_max_download: int | None = Field(default=None, gt=0)
    web_search_calls: int | None = Field(default=None, ge=0)
    web_search_timeout_s: float | None = Field(default=None, gt=0)
    task_depth: int | None = Field(default=None, ge=0, le=5)
    sidecar_bytes: int | None = Field(default=None, gt=0)
    session_sidecar_bytes: int | None = Field(default=None, gt=0)


class WatchdogSpec(_Strict):
    enabled: bool = True
    # Categories of the default watchdog to switch off, by name (see SPEC WDOG).
    disable: list[str] = Field(default_factory=list)


class SandboxSpec(_Strict):
    # What `bash` sees of the host (ENV-5). minimal: the system directories programs need plus the
    # fs.read and fs.write roots; full: the whole root read-only (user areas and secret stores still hidden).
    view: Literal["minimal", "full"] = "minimal"


class SearchProviderSpec(_Strict):
    name: str
    url: str  # a JSON search endpoint; its host must be in net.hosts


class WebSearchSpec(_Strict):
    providers: list[SearchProviderSpec] = Field(default_factory=list)


class SkillsSpec(_Strict):
    paths: list[str] = Field(default_factory=list)


class ModelSpec(_Strict):
    """Which model drives the agent (`agentcore run`, `batch`, `acp`); CLI flags override it."""

    # provider:name, e.g. "openai:gpt-4.1", "anthropic:claude-sonnet-4-5",
    # "openai-compatible:llama3" (with base_url) or "script:turns.yaml".
    id: str | None = None
    base_url: str | None = None
    # The environment variable holding the API key; the key itself never appears in a manifest.
    api_key_env: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    # Model requests per prompt before the run stops with `max_turn_requests`.
    max_turn_requests: int | None = Field(default=None, gt=0)
    # Seconds one model request may take (the whole streamed response).
    request_timeout_s: float | None = Field(default=None, gt=0)
    # The model's context window in tokens, for front ends that show how full it is (ACP usage updates).
    context_window: int | None = Field(default=None, gt=0)


# An MCP server's name: its tools become `<name>__<tool>` (MCP-2). No `__` inside and no
# `_` at either end, so the server part of an id is unambiguous.
MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
MCP_SERVER_NAME_MAX = 32
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class FromEnv(_Strict):
    """A value read from the host's environment when the server starts; never written anywhere."""

    from_env: str

    @field_validator("from_env")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _ENV_NAME.fullmatch(v):
            raise ValueError("from_env names an environment variable ([A-Za-z_][A-Za-z0-9_]*)")
        return v


SecretValue = Union[FromEnv, str]  # FromEnv first: a bad {from_env} reports its own error


def _check_value(v: SecretValue) -> None:
    if isinstance(v, str) and any(c in v for c in "\0\r\n"):
        raise ValueError("a value may not contain NUL, CR or LF")


class McpServerSpec(_Strict):
    """One MCP server (MCP-1): a stdio command, or a streamable HTTP / SSE url."""

    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretValue] = Field(default_factory=dict)
    url: str | None = Field(default=None, min_length=1)
    # stdio for a command; for a url, "http" (streamable HTTP, the default) or "sse".
    transport: Literal["stdio", "http", "sse"] | None = None
    headers: dict[str, SecretValue] = Field(default_factory=dict)
    # What the server's process may touch (stdio: its sandbox) or reach (remote: its host); counts in the effective set.
    requires: RequiresSpec = Field(default_factory=RequiresSpec)
    # Keep its tools behind tool_search (true), never (false), or when the agent has more than 20 tools (omitted).
    defer: bool | None = None
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    startup_timeout_s: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _shape(self) -> "McpServerSpec":
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server has exactly one of command (stdio) or url (http, sse)")
        if self.command is not None and self.transport not in (None, "stdio"):
            raise ValueError("a server with a command uses the stdio transport")
        if self.url is not None and self.transport == "stdio":
            raise ValueError("a server with a url uses the http or sse transport")
        if self.command is None and (self.args or self.env):
            raise ValueError("args and env belong to a stdio server (command)")
        if self.url is None and self.headers:
            raise ValueError("headers belong to a remote server (url)")
        if any(c in arg for arg in [self.command or "", *self.args] for c in "\0"):
            raise ValueError("command and args may not contain NUL")
        for name, value in self.env.items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError("env names are [A-Za-z_][A-Za-z0-9_]*")
            _check_value(value)
        for name, value in self.headers.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError("a header name is not an HTTP token")
            _check_value(value)
        return self


class ManifestSpec(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    tools: list[str] = Field(default_factory=list)
    # Non-locked tools kept out of the prompt and found with tool_search (TSRCH-1).
    deferred_tools: list[str] = Field(default_factory=list)
    requires: RequiresSpec = Field(default_factory=RequiresSpec)
    rules: list[RuleSpec] = Field(default_factory=list)
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    roots: list[str] = Field(default_factory=list)
    environment: Literal["bwrap", "none"] = "bwrap"
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    watchdog: WatchdogSpec = Field(default_factory=WatchdogSpec)
    agents: dict[str, str] = Field(default_factory=dict)  # subagent name -> manifest path (relative to this file)
    skills: SkillsSpec = Field(default_factory=SkillsSpec)
    web_search: WebSearchSpec = Field(default_factory=WebSearchSpec)
    # What the agent is for: the start of its system prompt (agent hosts).
    instructions: str = ""
    model: ModelSpec = Field(default_factory=ModelSpec)
    # MCP servers whose tools the agent may call, by name (MCP-1).
    mcp: dict[str, McpServerSpec] = Field(default_factory=dict)

    @field_validator("mcp")
    @classmethod
    def _server_names(cls, v: dict[str, McpServerSpec]) -> dict[str, McpServerSpec]:
        for name in v:
            if len(name) > MCP_SERVER_NAME_MAX or not MCP_SERVER_NAME.fullmatch(name):
                raise ValueError(
                    f"MCP server name {name!r} must be 1-{MCP_SERVER_NAME_MAX} letters and digits, "
                    "single '-' or '_' between them"
                )
        return v


class RulesFileSpec(_Strict):
    rules: list[RuleSpec] = Field(default_factory=list)
