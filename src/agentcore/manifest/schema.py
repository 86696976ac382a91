"""Pydantic models of the manifest and rules files, as authors write them.

They are the authority on what a manifest may say: error messages, the JSON
Schema and the reference page come from them. The engine holds the values
as the plain classes of the same names in `spec.py`; the loader asks these
models only about a document that is not already in canonical form.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .spec import ENV_NAME, MCP_SERVER_NAME_MAX, mcp_server_name_ok, mcp_shape_problem, one_word


class _Strict(BaseModel):
    # Unknown keys are errors: a misspelt `requries:` must not silently grant nothing. An infinite
    # timeout or limit (YAML's `.inf`) is an error too: every call has a bound.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class WildcardArg(_Strict):
    wildcard: Literal[True] = Field(description="Matches exactly one argument, whatever it is.")


class PrefixArg(_Strict):
    prefix: str = Field(min_length=1, description="Matches exactly one argument that starts with this text.")


ArgSpec = Union[str, WildcardArg, PrefixArg]


ARG_FORMS = "an argument pattern is a string, {wildcard: true} (exactly one argument) or {prefix: TEXT}"


def _arg_ok(a: object) -> bool:
    if isinstance(a, str):
        return True
    if isinstance(a, dict) and len(a) == 1:
        return a.get("wildcard") is True or (isinstance(a.get("prefix"), str) and bool(a.get("prefix")))
    return False


class ShellSpec(_Strict):
    """One command line `bash` may run: `cmd` exactly (no path lookup games: `./git` is not `git`), then `args`."""

    cmd: str = Field(min_length=1, description="The program name, exactly as the command line writes it.", examples=["git"])
    args: list[ArgSpec] | None = Field(
        default=None,
        description="The arguments, one pattern each and as many as there are: a literal string, "
        "`{wildcard: true}` (exactly one argument) or `{prefix: TEXT}`. Without `args` only the bare command matches.",
        examples=[["status"], [{"wildcard": True}], [{"prefix": "--format="}, {"wildcard": True}]],
    )

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
        if not one_word(v):
            raise ValueError("cmd is one executable name; put arguments in args")
        return v


class FsSpec(_Strict):
    read: list[str] = Field(
        default_factory=list,
        description="Path patterns the agent may read (`**` any depth, `*` within a name); relative ones are anchored "
        "at the workspace. Reads outside them are refused, and `bash` sees nothing else of the user's files.",
        examples=[["{workspace}/**"]],
    )
    write: list[str] = Field(
        default_factory=list,
        description="Path patterns the agent may write; reading is not implied. Protected files (`.git`, shell, "
        "editor and CI configuration) are never writable.",
        examples=[["{workspace}/src/**", "{workspace}/notes/**"]],
    )


class NetSpec(_Strict):
    hosts: list[str] = Field(
        default_factory=list,
        description="Hosts `web_fetch`, `web_search` and `bash` may reach: `name`, `*.name` (subdomains only), "
        "either with `:port`, or an IP literal. Ports 80 and 443 unless a port is given. No variables.",
        examples=[["docs.python.org", "*.github.com", "search.example.org"]],
    )


class RequiresSpec(_Strict):
    """What the agent needs; the effective set is this plus what every enabled tool declares."""

    fs: FsSpec = Field(default_factory=FsSpec, description="File-system scopes.")
    net: NetSpec = Field(default_factory=NetSpec, description="Network scope.")
    shell: list[ShellSpec] = Field(
        default_factory=list,
        description="Command lines `bash` may run; every simple command of a call must match one.",
        examples=[[{"cmd": "git", "args": ["status"]}, {"cmd": "ls", "args": [{"wildcard": True}]}]],
    )
    capabilities: list[str] = Field(
        default_factory=list,
        description="Named capabilities (two or more lowercase identifiers joined by `.`). They grant nothing by "
        "themselves: custom tools that declare them, and rules that name them, give them meaning. "
        "`manifest check` warns about one that nothing uses.",
        examples=[["db.query"]],
    )


class RuleSpec(_Strict):
    """A permission rule: the most specific matching rule decides; a manifest deny can never be overridden."""

    permission: str = Field(
        min_length=1,
        description="What the rule is about: a tool id (`read`, `bash`...), a capability (`fs.read`, `fs.write`, "
        "`net.fetch`, `shell.run` or a named one), or `*` for everything.",
        examples=["read"],
    )
    pattern: str = Field(
        min_length=1,
        description="What it matches, by kind: a path pattern, a host pattern, a command-line glob (`git *`), "
        "or `*` for everything. Variables such as `{workspace}` are expanded.",
        examples=["{workspace}/.env"],
    )
    action: Literal["allow", "deny", "ask"] = Field(
        description="`allow` runs the call, `deny` refuses it, `ask` puts it to the human (denied when headless).",
        examples=["deny"],
    )


def _limit(description: str, **bounds: float) -> object:
    return Field(default=None, description=description, **bounds)  # type: ignore[arg-type]


class LimitsSpec(_Strict):
    """Output limits and time bounds; each key overrides one default."""

    read_bytes: int | None = _limit("Bytes of a `read` result before it is cut.", gt=0)
    glob_entries: int | None = _limit("Paths a `glob` returns before the rest goes to a sidecar file.", gt=0)
    grep_matches: int | None = _limit("Matches a `grep` returns before the rest goes to a sidecar file.", gt=0)
    bash_bytes: int | None = _limit("Bytes of `bash` output kept in the result (all of it goes to a sidecar file).", gt=0)
    web_fetch_bytes: int | None = _limit("Bytes of a fetched page kept in the result.", gt=0)
    default_bytes: int | None = _limit("Bytes of any other tool's result.", gt=0)
    text_bytes: int | None = _limit("The largest file `write` and `edit` handle.", gt=0)
    bash_timeout_s: float | None = _limit("Seconds a `bash` command may run when the call gives no timeout.", gt=0)
    bash_max_timeout_s: float | None = _limit("The largest timeout a `bash` call may ask for.", gt=0)
    web_fetch_timeout_s: float | None = _limit("Seconds a whole fetch may take, redirects included.", gt=0)
    web_fetch_max_download: int | None = _limit("Bytes a fetch may download.", gt=0)
    web_search_calls: int | None = _limit("`web_search` calls per session.", ge=0)
    web_search_timeout_s: float | None = _limit("Seconds one search may take.", gt=0)
    task_depth: int | None = _limit("How deep subagents may nest (0 to 5).", ge=0, le=5)
    sidecar_bytes: int | None = _limit("Bytes one call may write to its sidecar file; the command is stopped there.", gt=0)
    session_sidecar_bytes: int | None = _limit("Bytes the sidecar files of a session and its subagents may hold together.", gt=0)
    walk_entries: int | None = _limit(
        "Entries the sandbox's per-call walk of the workspace lists; past it the rest is read-only in the sandbox, "
        "and with wildcard read denies the call is refused.", gt=0)
    walk_depth: int | None = _limit("Directory levels that walk descends; deeper directories are treated as past `walk_entries`.", gt=0)


class WatchdogSpec(_Strict):
    """The default watchdog reviews calls after the rules (exfiltration, destruction, code execution, secrets)."""

    enabled: bool = Field(default=True, description="Switch the default watchdog off entirely (not recommended).")
    disable: list[str] = Field(
        default_factory=list,
        description="Categories to switch off: `exfiltration`, `destructive`, `code_execution_wrapper`, `secrets`, "
        "`network_shell`.",
        examples=[["network_shell"]],
    )


class SandboxSpec(_Strict):
    view: Literal["minimal", "full"] = Field(
        default="minimal",
        description="What `bash` sees of the host: `minimal` shows the system directories programs need plus the "
        "`fs.read` and `fs.write` roots; `full` shows the whole root read-only (home directories and secret stores "
        "still hidden).",
    )


class SearchProviderSpec(_Strict):
    name: str = Field(description="A name for the provider, shown in results.", examples=["searx"])
    url: str = Field(
        description="A JSON search endpoint; its host must be in `requires.net.hosts`.",
        examples=["https://search.example.org/search?format=json"],
    )


class WebSearchSpec(_Strict):
    providers: list[SearchProviderSpec] = Field(default_factory=list, description="Search endpoints, tried in order.")


class SkillsSpec(_Strict):
    paths: list[str] = Field(
        default_factory=list,
        description="Directories holding skills (`<name>/SKILL.md`), relative to the workspace; protected whole: the agent cannot write there.",
        examples=[[".skills"]],
    )


class ModelSpec(_Strict):
    """Which model drives the agent (`agentcore run`, `batch`, `acp`); command-line flags override it."""

    id: str | None = Field(
        default=None,
        description="`provider:name`: `openai:…`, `anthropic:…`, `openai-compatible:…` (with `base_url`), or "
        "`script:FILE` for the embedded scripted model (offline).",
        examples=["openai-compatible:llama3.1", "anthropic:claude-sonnet-4-5", "script:scripts/tour.yaml"],
    )
    base_url: str | None = Field(default=None, description="The server of an OpenAI-compatible provider.",
                                 examples=["http://localhost:11434/v1"])
    api_key_env: str | None = Field(
        default=None,
        description="The environment variable that holds the API key; the key itself never appears in a manifest.",
        examples=["LOCAL_LLM_KEY"],
    )
    max_tokens: int | None = Field(default=None, gt=0, description="Output tokens per model response.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature (0 to 2).")
    max_turn_requests: int | None = Field(default=None, gt=0,
                                          description="Model requests per prompt before the run stops (`max_turn_requests`).")
    request_timeout_s: float | None = Field(default=None, gt=0,
                                            description="Seconds one model request may take, the whole streamed response.")
    context_window: int | None = Field(default=None, gt=0,
                                       description="The model's context window in tokens, for editors that show how full it is.")




class FromEnv(_Strict):
    """A value read from the host's environment when the server starts; never written anywhere."""

    from_env: str = Field(description="The name of the environment variable that holds the value.", examples=["GITHUB_TOKEN"])

    @field_validator("from_env")
    @classmethod
    def _name(cls, v: str) -> str:
        if not ENV_NAME.fullmatch(v):
            raise ValueError("from_env names an environment variable ([A-Za-z_][A-Za-z0-9_]*)")
        return v


SecretValue = Union[FromEnv, str]  # FromEnv first: a bad {from_env} reports its own error


class McpServerSpec(_Strict):
    """One MCP server (MCP-1): a stdio command, or a streamable HTTP / SSE url."""

    command: str | None = Field(default=None, min_length=1, description="A stdio server: the program to run (in the sandbox).",
                                examples=["npx"])
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, SecretValue] = Field(
        default_factory=dict,
        description="Its environment (the sandbox starts from an empty one): literal values or `{from_env: VAR}`.",
        examples=[{"GITHUB_TOKEN": {"from_env": "GITHUB_TOKEN"}}],
    )
    url: str | None = Field(default=None, min_length=1, description="A remote server: its URL; the host must be in this server's `requires.net.hosts`.",
                            examples=["https://mcp.example.com/mcp"])
    transport: Literal["stdio", "http", "sse"] | None = Field(
        default=None, description="`stdio` for a command; for a url `http` (streamable HTTP, the default) or `sse`.")
    headers: dict[str, SecretValue] = Field(default_factory=dict, description="HTTP headers for a remote server, literal or `{from_env: VAR}`.")
    requires: RequiresSpec = Field(
        default_factory=RequiresSpec,
        description="What the server's process may touch (its sandbox) or, for a remote server, reach; it counts in the "
        "effective set, and nothing else of the agent's grants reaches the server.",
    )
    defer: bool | None = Field(
        default=None,
        description="Keep its tools behind `tool_search` (`true`), never (`false`), or when the agent has more than 20 "
        "tools (omitted).",
    )
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Seconds one call may take.")
    startup_timeout_s: float = Field(default=30.0, gt=0, le=600, description="Seconds the server may take to start and list its tools.")

    @model_validator(mode="after")
    def _shape(self) -> "McpServerSpec":
        problem = mcp_shape_problem(self.command, self.args, self.env, self.url, self.transport, self.headers)
        if problem:
            raise ValueError(problem)
        return self


class ManifestSpec(_Strict):
    """An agent: its tools, what they may touch, the rules, and how it runs."""

    name: str = Field(min_length=1, description="The agent's name (required).", examples=["inventory-helper"])
    description: str = Field(default="", description="What the agent does, for people (and for `task` when it is a subagent).")
    instructions: str = Field(default="", description="The start of the agent's system prompt.")
    tools: list[str] = Field(
        default_factory=list,
        description="The tools the agent may call (see `agentcore tools`). Enabling a tool adds what it needs to the "
        "effective set.",
        examples=[["read", "glob", "grep", "write", "bash"]],
    )
    deferred_tools: list[str] = Field(
        default_factory=list,
        description="Further tools (not of the locked 13) kept out of the prompt until `tool_search` finds them.",
    )
    requires: RequiresSpec = Field(default_factory=RequiresSpec, description="What the agent may touch.")
    rules: list[RuleSpec] = Field(
        default_factory=list,
        description="Permission rules. Without a matching rule a call is asked (denied when headless).",
        examples=[[{"permission": "read", "pattern": "{workspace}/.env", "action": "deny"},
                   {"permission": "*", "pattern": "*", "action": "allow"}]],
    )
    limits: LimitsSpec = Field(default_factory=LimitsSpec, description="Output limits and time bounds.")
    roots: list[str] = Field(
        default_factory=list,
        description="More workspace roots, relative to the manifest file; `{workspace}` expands to every root.",
        examples=[["../shared-lib"]],
    )
    environment: Literal["bwrap", "none"] = Field(
        default="bwrap",
        description="Where `bash` runs: `bwrap` (a bubblewrap sandbox) or `none` (no sandbox: only for trusted setups).",
    )
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec, description="What the sandbox shows.")
    watchdog: WatchdogSpec = Field(default_factory=WatchdogSpec, description="The default watchdog.")
    agents: dict[str, str] = Field(
        default_factory=dict,
        description="Named subagents for `task`: name to manifest path (relative to this file). A subagent never "
        "gets more than its parent.",
        examples=[{"reviewer": "agents/reviewer.yaml"}],
    )
    skills: SkillsSpec = Field(default_factory=SkillsSpec, description="Where skills are found.")
    web_search: WebSearchSpec = Field(default_factory=WebSearchSpec, description="Search providers for `web_search`.")
    model: ModelSpec = Field(default_factory=ModelSpec, description="The model that drives the agent.")
    mcp: dict[str, McpServerSpec] = Field(
        default_factory=dict,
        description="MCP servers whose tools the agent may call, by name; a server's tools are named "
        "`<server>__<tool>`. A stdio server runs in its own sandbox with only its own `requires`.",
        examples=[{"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"],
                             "requires": {"fs": {"read": ["/srv/docs/**"]}}}}],
    )

    @field_validator("mcp")
    @classmethod
    def _server_names(cls, v: dict[str, McpServerSpec]) -> dict[str, McpServerSpec]:
        for name in v:
            if not mcp_server_name_ok(name):
                raise ValueError(
                    f"MCP server name {name!r} must be 1-{MCP_SERVER_NAME_MAX} letters and digits, "
                    "single '-' or '_' between them"
                )
        return v


class RulesFileSpec(_Strict):
    """A project rules file (`--project-rules`): rules a project adds; they can never override a manifest deny."""

    rules: list[RuleSpec] = Field(default_factory=list, description="Permission rules, as in the manifest.")
