"""`agentcore acp`: our agent served to editors over the Agent Client Protocol (v1), on stdio.

One ACP session is one engine session: its `cwd` is the workspace the
manifest is compiled for, its `additionalDirectories` bind `{ad-hoc}` (so
they grant only what the manifest grants `{ad-hoc}`), and its id is the
engine session's id, the one the recorder keeps. Everything the loop and
the engine emit is translated by `updates.Translator`, the same code that
replays a recorded session on `session/load`.

Permission requests come from the engine's asks (`AcpBroker`); the
`tool_call` for a call always precedes its request, because the engine
awaits its observers in order. A second prompt while one runs is refused.
Client terminals are never used: commands run in our sandbox, and their
output streams as terminal `_meta` (clients that opt in) or as text.

MCP servers the client passes in `session/new` and `session/load` (stdio,
http, sse) run for that session like the manifest's (MCP-11): a server is
granted what a manifest entry of the same name grants, otherwise nothing (a
stdio server sees only the system view and has no network; a remote one
cannot be dialled). MCP over ACP itself (`type: acp`) is not offered.
"""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import acp
from acp import schema

from agentcore.agent.messages import ImagePart, Message, TextPart
from agentcore.textdata import printable

from .stdio_guard import guarded_stdio
from .updates import Translator, available_commands, usage_update

if TYPE_CHECKING:  # the engine and the model layer load after `initialize` has been answered
    from agentcore.agent.loop import AgentLoop
    from agentcore.agent.model import ModelClient
    from agentcore.api import AskRequest, Choice, Engine, McpServer, Session

_log = logging.getLogger("agentcore.acp")
VERSION = "0.1.0"

# Permission modes: session rules added on top of the manifest (which they can never widen past a deny).
MODES: dict[str, str] = {
    "ask": "Ask before anything the manifest does not allow",
    "read-only": "Refuse every tool that edits, moves, deletes or runs commands, and every MCP tool not known to only read",
    "auto-edit": "Allow file edits without asking (the manifest's denies still hold)",
}
_MUTATING_KINDS = frozenset({"edit", "delete", "move", "execute"})
# An MCP tool's kind comes from its server's hints (`other` when it gives none): in read-only mode only the
# kinds that change nothing let one through, since the engine cannot vouch for what a server's tool does.
_READING_KINDS = frozenset({"read", "search", "think", "fetch"})


@dataclass
class AcpOptions:
    """How `agentcore acp` was started: the manifest, the resolved model, headless mode and the session database (None: not recorded)."""

    manifest: Path
    model: Any  # ModelConfig
    headless: bool = False
    db: Path | None = None


@dataclass
class _State:
    """One ACP session."""

    engine: Engine
    session: Session
    loop: AgentLoop
    translator: Translator
    history: list[Message] = field(default_factory=list)
    cwd: str = ""
    mode: str = "ask"
    remembered_rules: list[tuple[str, str, str]] = field(default_factory=list)
    running: bool = False
    turn_open: bool = False


class AcpBroker:
    """Asks the client with `session/request_permission`; option names say exactly what is remembered."""

    name = "acp-client"

    def __init__(self, agent: "AgentcoreAcp", acp_session_id: str, headless: bool) -> None:
        self._agent = agent
        self._sid = acp_session_id
        self.headless = headless

    async def ask(self, request: AskRequest) -> Choice:
        state = self._agent.sessions.get(self._sid)
        if state is None:
            return "cancelled"  # the session was closed meanwhile: nobody is there to answer
        # The card the tool_call opened: the same toolCallId the translator gave the call.
        call_id = state.translator.tool_call_id(request.session_id, request.call_id)
        options = [
            schema.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
            schema.PermissionOption(option_id="allow_always", name=request.always_label(True), kind="allow_always"),
            schema.PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
            schema.PermissionOption(option_id="reject_always", name=request.always_label(False), kind="reject_always"),
        ]
        # The title is one line of the call (a script's first); the content says everything asked, every
        # command included, so a harmless first line cannot stand for what the user approves.
        content: list[Any] = [schema.TerminalToolCallContent(type="terminal", terminal_id=call_id)] \
            if self._agent.terminal_output and request.kind == "execute" else []
        content.append(schema.ContentToolCallContent(type="content", content=schema.TextContentBlock(type="text", text="\n".join(request.details()))))
        tool_call = schema.ToolCallUpdate(tool_call_id=call_id, title=printable(request.title), kind=request.kind,  # type: ignore[arg-type]
                                          status="pending", raw_input=request.args, content=content)
        response = await self._agent.conn.request_permission(options=options, session_id=self._sid, tool_call=tool_call)
        outcome = response.outcome
        if getattr(outcome, "outcome", None) == "selected" and outcome.option_id in ("allow_once", "allow_always", "reject_once", "reject_always"):
            return outcome.option_id  # type: ignore[no-any-return]
        return "cancelled"

    async def question(self, questions: Any) -> None:
        return None  # ACP v1 has no way to ask a structured question: the tool reports that no answer came


class ClientBuffers:
    """`read`'s text from the editor (its unsaved buffer) through `fs/read_text_file`.

    The engine asks only after the whole pipeline has allowed the call, and only for the canonical
    path it allowed; a client that cannot answer leaves the file on disk as the answer.
    """

    def __init__(self, agent: "AgentcoreAcp", session_id: str) -> None:
        self._agent = agent
        self._session_id = session_id

    async def read_text(self, path: str) -> str | None:
        response = await self._agent.conn.read_text_file(session_id=self._session_id, path=path)
        return getattr(response, "content", None)


class AgentcoreAcp:
    """The ACP agent (the SDK calls these methods; each request runs in its own task)."""

    def __init__(self, options: AcpOptions) -> None:
        self.options = options
        self._recorder: Any = None
        self.conn: Any = None
        self.sessions: dict[str, _State] = {}
        self._loading: set[str] = set()
        self._terminal_output = False
        self._client_reads = False  # the client offers fs/read_text_file
        self.model_name: str = options.model.id
        self.supports_images = options.model.provider in ("openai", "anthropic")
        self._model: ModelClient | None = None
        self._model_lock = asyncio.Lock()
        self._stack = AsyncExitStack()
        self._warming: asyncio.Task[Any] | None = None

    @property
    def terminal_output(self) -> bool:
        """The client opted in to terminal output for commands (`_meta.terminal_output` at initialize)."""
        return self._terminal_output

    def _own_files(self) -> tuple[Path, ...]:
        """The session database and its side files: a recording the agent could edit would give a loaded
        session answers nobody gave."""
        if self.options.db is None:
            return ()
        from agentcore.recorder.store import database_files

        return database_files(self.options.db)

    @property
    def recorder(self) -> Any:
        """The session database, opened when first needed (after `initialize` has been answered); None: not recorded."""
        if self._recorder is None and self.options.db is not None:
            from agentcore.recorder.store import Recorder

            self._recorder = Recorder(self.options.db)
        return self._recorder

    async def model(self) -> "ModelClient":
        """The model client, opened on first use (after `initialize` has been answered)."""
        async with self._model_lock:
            if self._model is None:
                from agentcore.agent.config import ModelConfigError, open_model

                try:
                    self._model = await self._stack.enter_async_context(open_model(self.options.model))
                except ModelConfigError as exc:
                    raise acp.RequestError.internal_error({"message": str(exc)}) from None
            return self._model

    async def _warm(self) -> None:
        """Load the engine and open the model while the client reads the `initialize` reply."""
        try:
            await asyncio.to_thread(_import_engine)
            _ = self.recorder
            await self.model()
        except Exception:  # reported when a session needs the model
            _log.debug("warm-up failed", exc_info=True)

    async def aclose(self) -> None:
        await self._stack.aclose()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # -- lifecycle ------------------------------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any) -> Any:
        caps = client_capabilities
        meta = (getattr(caps, "field_meta", None) or {}) if caps is not None else {}
        self._terminal_output = bool(meta.get("terminal_output"))
        fs = getattr(caps, "fs", None) if caps is not None else None
        self._client_reads = bool(getattr(fs, "read_text_file", False))
        if self._warming is None:
            self._warming = asyncio.get_running_loop().create_task(self._warm())
        return schema.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(image=self.supports_images, audio=False, embedded_context=True),
                mcp_capabilities=schema.McpCapabilities(http=True, sse=True, acp=False),
                session_capabilities=schema.SessionCapabilities(list=schema.SessionListCapabilities(), close=schema.SessionCloseCapabilities()),
            ),
            agent_info=schema.Implementation(name="agentcore", title="agentcore", version=VERSION),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> Any:
        return schema.AuthenticateResponse()

    async def new_session(self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: list[Any] | None = None, **kwargs: Any) -> Any:
        from agentcore.api import available_skills

        state = await self._open(cwd, additional_directories, mcp_servers, None)
        await self._send(state, available_commands(available_skills(state.engine.manifest, state.session)), force=True)
        return schema.NewSessionResponse(session_id=state.session.id, config_options=self._config_options(state))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           additional_directories: list[str] | None = None, **kwargs: Any) -> Any:
        from agentcore.api import available_skills
        from agentcore.recorder.store import RecorderError

        if self.recorder is None:
            raise acp.RequestError.invalid_params({"message": "this agent runs without a session database"})
        try:
            info = self.recorder.session(session_id)
            events = list(self.recorder.tree_events(session_id))
            history = [Message.from_dict(m) for m in self.recorder.history(session_id)]
        except RecorderError as exc:
            raise acp.RequestError.resource_not_found(session_id) from exc
        if session_id in self.sessions or session_id in self._loading:
            raise acp.RequestError.invalid_request({"message": "the session is already open"})
        self._loading.add(session_id)  # two loads of one id at once would open it twice, one copy orphaned
        try:
            state = await self._open(cwd, additional_directories, mcp_servers, session_id)
        finally:
            self._loading.discard(session_id)
        state.history = history
        same_place = info.get("workspace") == str(state.engine.manifest.workspace)
        if info.get("remembered") and same_place:
            # "Always" answers were given for that workspace: a command allowed there is not allowed here.
            state.session.restore(info["remembered"])
            # The recording's rules include the allows of the mode the session was in (auto-edit's look like
            # answers); it comes back in "ask", so they go as on a live switch of mode, MCP tools included.
            await state.engine.ready(state.session)
            self._apply_mode(state)
        # Replayed through the session's own translator: the calls of the next prompt get toolCallIds unused so far.
        for event in events:  # everything is sent before the response
            for update in state.translator.updates(event, replaying=True):
                await self._send(state, update, force=True)
        await self._send(state, available_commands(available_skills(state.engine.manifest, state.session)), force=True)
        return schema.LoadSessionResponse(config_options=self._config_options(state))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any) -> Any:
        import datetime

        # ACP paths are absolute; a NUL byte would make realpath raise (an internal error, not the client's fault).
        if cwd is not None and (not os.path.isabs(cwd) or "\0" in cwd):
            raise acp.RequestError.invalid_params({"message": "cwd must be an absolute path"})
        workspace = os.path.realpath(cwd) if cwd is not None else None
        rows = self.recorder.sessions() if self.recorder is not None else []
        out = []
        for r in rows:
            if workspace is not None and r["workspace"] != workspace:
                continue
            when = datetime.datetime.fromtimestamp(r["updated_at"], datetime.timezone.utc).isoformat()
            out.append(schema.SessionInfo(session_id=r["id"], cwd=r["workspace"] or "/", title=r["title"] or None, updated_at=when))
        return schema.ListSessionsResponse(sessions=out)

    async def close_session(self, session_id: str, **kwargs: Any) -> Any:
        state = self._state(session_id)
        state.loop.cancel(state.session)
        state.loop.close()
        state.session.close()
        self.sessions.pop(session_id, None)
        return schema.CloseSessionResponse()

    def shutdown(self) -> None:
        """The client went away: abort every session (the recorder keeps what finished)."""
        for state in list(self.sessions.values()):
            state.loop.cancel(state.session)
            state.loop.close()
            state.session.close()
        self.sessions.clear()

    # -- configuration --------------------------------------------------------------------------
    def _config_options(self, state: _State) -> list[Any]:
        mode = schema.SessionConfigOptionSelect(
            id="mode", name="Permission mode", category="mode", type="select", current_value=state.mode,
            options=[schema.SessionConfigSelectOption(value=k, name=k, description=v) for k, v in MODES.items()],
        )
        model = schema.SessionConfigOptionSelect(
            id="model", name="Model", category="model", type="select", current_value=self.model_name,
            options=[schema.SessionConfigSelectOption(value=self.model_name, name=self.model_name)],
        )
        return [mode, model]

    async def set_config_option(self, config_id: str, session_id: str, value: Any, **kwargs: Any) -> Any:
        state = self._state(session_id)
        if config_id == "mode" and value in MODES:
            await state.engine.ready(state.session)  # the mode's rules cover the session's MCP tools too
            state.mode = value
            self._apply_mode(state)
        elif not (config_id == "model" and value == self.model_name):
            raise acp.RequestError.invalid_params({"message": f"unknown value for {config_id}"})
        return schema.SetSessionConfigOptionResponse(config_options=self._config_options(state))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> Any:
        await self.set_config_option("mode", session_id, mode_id)
        return schema.SetSessionModeResponse()

    def _apply_mode(self, state: _State) -> None:
        """The mode's rules plus the remembered answers, as the session's rules. A mode's denies are pinned:
        no allow of the manifest, the project or an answer undoes them, however specific (manifest denies
        stay pinned too), and subagents inherit them pinned."""
        tools = self._mode_tools(state)
        every_mode = {r for m in MODES for r in self._mode_rules(state, m, tools)}
        state.remembered_rules = [tuple(r) for r in state.session.remembered()["rules"] if tuple(r) not in every_mode]  # type: ignore[misc]
        mode = self._mode_rules(state, state.mode, tools)
        # The mode's allows are transient: a recording never brings them back as the user's answers.
        state.session.set_session_rules(state.remembered_rules, transient=[r for r in mode if r[2] != "deny"],
                                        pinned=[(tool, pattern) for tool, pattern, action in mode if action == "deny"])

    @staticmethod
    def _mode_rules(state: _State, mode: str, tools: list[Any]) -> list[tuple[str, str, str]]:
        if mode == "read-only":
            catalog = state.engine.catalog  # the engine's own and installed tools; the rest are the session's MCP tools
            return [(t.id, "*", "deny") for t in tools
                    if t.kind in _MUTATING_KINDS or (not catalog.has(t.id) and t.kind not in _READING_KINDS)]
        if mode == "auto-edit":
            return [(t.id, "*", "allow") for t in state.engine.tools(state.session) if t.kind == "edit"]
        return []

    @staticmethod
    def _mode_tools(state: _State) -> list[Any]:
        """Every tool a call in this session or its subagents could reach: the callable ones, the deferred ones
        `tool_search` may find later, and every installed tool (a subagent's manifest may enable one this
        session's does not)."""
        engine, session = state.engine, state.session
        tools = {t.id: t for t in engine.tools(session)}
        source = session.stores.tool_source
        for tid in engine.searchable(session):
            if tid not in tools and engine.catalog.has(tid):
                tools[tid] = engine.catalog.get(tid)
            elif tid not in tools and source is not None and (entry := source.lookup(tid)) is not None:
                tools[tid] = entry.tool
        for tid in engine.catalog.ids():
            if tid not in tools:
                try:
                    tools[tid] = engine.catalog.get(tid)
                except Exception:  # noqa: BLE001 - a plugin that fails to load cannot be called either
                    continue
        return list(tools.values())

    # -- prompts --------------------------------------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        state = self._state(session_id)
        if state.running:
            raise acp.RequestError.invalid_request({"message": "a prompt is already running in this session; cancel it first"})
        message = self._message(prompt)
        state.running = state.turn_open = True
        try:
            result = await state.loop.run(state.session, message, state.history)
        finally:
            state.turn_open = state.running = False  # nothing more of this turn is sent after the reply
        state.history += result.messages
        if result.stop_reason in ("failed", "token_budget"):
            raise acp.RequestError.internal_error({"message": result.error or result.stop_reason})
        usage = schema.Usage(input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens,
                             total_tokens=result.usage.total_tokens)
        return schema.PromptResponse(stop_reason=result.stop_reason, usage=usage)  # type: ignore[arg-type]

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        state = self.sessions.get(session_id)
        if state is not None:
            state.loop.cancel(state.session)

    def _message(self, blocks: list[Any]) -> Message:
        parts: list[Any] = []
        for block in blocks:
            kind = getattr(block, "type", None)
            if kind == "text":
                parts.append(TextPart(block.text))
            elif kind == "image":
                if not self.supports_images:
                    raise acp.RequestError.invalid_params({"message": "this model does not take images"})
                parts.append(ImagePart(block.mime_type, block.data))
            elif kind == "resource_link":
                parts.append(TextPart(f"\n[Resource: {block.name} ({block.uri})]\n"))
            elif kind == "resource":
                parts.append(TextPart(_embedded(block.resource)))
            else:
                raise acp.RequestError.invalid_params({"message": f"unsupported content block {kind!r}"})
        text_parts = [p for p in parts if isinstance(p, TextPart)]
        merged = TextPart("".join(p.text for p in text_parts))
        return Message("user", (merged, *[p for p in parts if not isinstance(p, TextPart)]))

    # -- sessions ---------------------------------------------------------------------------------
    def _state(self, session_id: str) -> _State:
        state = self.sessions.get(session_id)
        if state is None:
            raise acp.RequestError.resource_not_found(session_id)
        return state

    async def _open(self, cwd: str, extra: list[str] | None, mcp_servers: list[Any] | None, session_id: str | None) -> _State:
        from agentcore.agent.loop import AgentLoop
        from agentcore.agent.model import RequestSettings
        from agentcore.api import Engine, ManifestError, load_manifest

        servers = [_mcp_server(s) for s in mcp_servers or []]
        if not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise acp.RequestError.invalid_params({"message": "cwd must be an absolute path to an existing directory"})
        for d in extra or []:
            if not os.path.isabs(d) or not os.path.isdir(d):
                raise acp.RequestError.invalid_params({"message": "additionalDirectories must be absolute paths to existing directories"})
        try:
            manifest = load_manifest(self.options.manifest, workspace=cwd, ad_hoc=[Path(d) for d in extra or []],
                                     extra_protected=self._own_files())
        except ManifestError as exc:
            raise acp.RequestError.invalid_params({"message": f"the manifest cannot be used for this workspace: {exc}"}) from None
        sid = session_id or f"ses_{os.urandom(8).hex()}"
        model = await self.model()
        engine = Engine(manifest, broker=AcpBroker(self, sid, self.options.headless))
        session = engine.open_session(session_id=sid, headless=self.options.headless, mcp_servers=servers,
                                      client_files=ClientBuffers(self, sid) if self._client_reads else None)
        config = self.options.model
        loop = AgentLoop(engine, model, max_turn_requests=config.max_turn_requests,
                         settings=RequestSettings(max_tokens=config.max_tokens, temperature=config.temperature,
                                                  timeout_s=config.request_timeout_s))
        state = _State(engine, session, loop, Translator(sid, terminal_output=self._terminal_output), cwd=cwd)
        if self.recorder is not None:
            self.recorder.attach(session, manifest=str(manifest.source), workspace=str(manifest.workspace), model=self.model_name)
            loop.add_observer(self.recorder.observe)

        async def forward(event: Any) -> None:
            for update in state.translator.updates(event.to_dict()):
                await self._send(state, update)
            if event.type == "run_finished" and event.session_id == sid and getattr(config, "context_window", None):
                await self._send(state, usage_update(event.usage["input_tokens"] + event.usage["output_tokens"], config.context_window))

        loop.add_observer(forward)
        self.sessions[sid] = state
        return state

    async def _send(self, state: _State, update: dict[str, Any], *, force: bool = False) -> None:
        if not force and not state.turn_open:
            return  # a late event of a finished turn: the client already has the reply
        # Sent as built, not through the SDK's models: they drop nulls, and a new file's diff
        # must carry `oldText: null`. The tests validate every message against the official schema.
        await self.conn._conn.send_notification(acp.CLIENT_METHODS["session_update"], {"sessionId": state.session.id, "update": update})


def _mcp_server(server: Any) -> "McpServer":
    """An ACP `McpServer` entry as the engine takes it; values stay literal and are never shown."""
    from agentcore.api import McpServer

    kind = getattr(server, "type", None)
    if kind in ("http", "sse"):
        headers = {h.name: h.value for h in server.headers or []}
        return McpServer(name=server.name, transport=kind, url=server.url, headers=headers)
    if kind is None and getattr(server, "command", None) is not None:
        env = {e.name: e.value for e in server.env or []}
        return McpServer(name=server.name, transport="stdio", command=server.command, args=tuple(server.args or []), env=env)
    raise acp.RequestError.invalid_params({"message": "only stdio, http and sse MCP servers are supported (mcpCapabilities)"})


def _embedded(resource: Any) -> str:
    text = getattr(resource, "text", None)
    uri = getattr(resource, "uri", "")
    if text is None:
        return f"\n[Embedded binary resource: {uri}]\n"
    return f"\nContents of {uri}:\n```\n{text}\n```\n"


def _import_engine() -> None:
    import agentcore.agent.loop  # noqa: F401
    import agentcore.api  # noqa: F401


async def serve(options: AcpOptions) -> int:
    """Run the agent on stdin/stdout until the client disconnects."""
    agent = AgentcoreAcp(options)
    reader, writer, pump = await guarded_stdio()
    try:
        # session/close is still marked unstable in the SDK; we implement it.
        await acp.run_agent(agent, input_stream=writer, output_stream=reader, use_unstable_protocol=True)
    finally:
        pump.cancel()
        agent.shutdown()
        await agent.aclose()
        if agent._recorder is not None:
            agent._recorder.close()
    return 0
