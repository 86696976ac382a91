"""The public engine API: what hosts build on, with the defaults wired in this one place.

Hosts (the CLI, the agent loop, the recorder, batch runs, the ACP adapter,
the conformance harness) import from here and nothing deeper::

    import anyio
    from agentcore.api import Engine, load_manifest

    async def main() -> None:
        manifest = load_manifest("agent.yaml", workspace="proj")
        engine = Engine(manifest)                      # headless: every ask is refused
        with engine.open_session() as session:
            envelope = await engine.call(session, "read", {"path": "README.md"})
            print(envelope.to_dict())
            async with engine.stream(session, "grep", {"pattern": "TODO"}) as events:
                async for event in events:             # CallStarted, StageDecided..., CallFinished
                    print(event.to_dict())

    anyio.run(main)

The defaults: the tool catalogue is the thirteen locked tools plus the
`agentcore.tools` entry-point plugins (`default_catalog`); the watchdog is
the default one with the manifest's `watchdog:` settings
(`default_watchdog`); the broker is headless.

MCP servers (the manifest's `mcp:` block, and `McpServer`s a host passes to
`open_session`) are wired here too: a session opened by `Engine.open_session`
starts them and offers their tools; `await engine.ready(session)` waits for
their listing, `engine.mcp_status(session)` reports on them, and closing the
session stops them.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence

from .asking import (
    HEADLESS_ASK_TEXT,
    HEADLESS_QUESTION_TEXT,
    AskBroker,
    AskRequest,
    Choice,
    HeadlessBroker,
    ScriptedBroker,
    TerminalBroker,
)
from .envelope import Envelope
from .errors import CompileError, ManifestError, RegistryError
from .manifest.compiled import CompiledManifest
from .manifest.compiled import compile_manifest as _compile_manifest
from .manifest.compiled import load_manifest as _load_manifest
from .manifest.compiled import load_project_rules as _load_project_rules
from .manifest.loader import manifest_spec_from_dict, parse_document, read_manifest_spec
from .manifest.spec import ManifestSpec
from .pipeline.engine import Engine as _Engine
from .pipeline.engine import SubagentRunner
from .pipeline.events import (
    AskAnswered,
    AskRaised,
    CallFinished,
    CallStarted,
    Event,
    Observer,
    OutputChunk,
    StageDecided,
)
from .rules.model import CompiledRule, Rule, compile_rules
from .session import ClientFiles, Session
from .tools.base import CallContext, Location, Tool, ToolResult
from .tools.registry import ToolRegistry
from .vocabulary import ACP_KINDS, LOCKED_IDS, WATCHDOG_CATEGORIES
from .watchdog import CLOSED_SCREEN, OPEN_SCREEN, AllowAllWatchdog, ReadScreen, Verdict, Watchdog, WatchdogCall

__all__ = [
    "ACP_KINDS",
    "AllowAllWatchdog",
    "CLOSED_SCREEN",
    "OPEN_SCREEN",
    "ReadScreen",
    "AskAnswered",
    "AskBroker",
    "AskRaised",
    "AskRequest",
    "CallContext",
    "CallFinished",
    "CallStarted",
    "Choice",
    "CompileError",
    "CompiledManifest",
    "CompiledRule",
    "Engine",
    "Envelope",
    "Event",
    "HEADLESS_ASK_TEXT",
    "HEADLESS_QUESTION_TEXT",
    "HeadlessBroker",
    "LOCKED_IDS",
    "Location",
    "ManifestError",
    "ManifestSpec",
    "McpServer",
    "Observer",
    "OutputChunk",
    "RegistryError",
    "ScriptedBroker",
    "Session",
    "StageDecided",
    "SubagentRunner",
    "TerminalBroker",
    "Tool",
    "ToolRegistry",
    "ToolResult",
    "Verdict",
    "WATCHDOG_CATEGORIES",
    "Watchdog",
    "WatchdogCall",
    "build_catalog",
    "compile_manifest",
    "compile_rule_list",
    "default_catalog",
    "default_watchdog",
    "load_manifest",
    "load_project_rules",
    "manifest_json_schema",
    "manifest_reference",
    "manifest_warnings",
    "parse_document",
    "read_manifest_spec",
    "available_skills",
    "tools_fixed",
    "remove_tree",
]

if TYPE_CHECKING:
    from .mcp.config import McpServer


def __getattr__(name: str) -> Any:
    # `McpServer` is public, but only a host that passes servers needs its module (a command line saves 2 ms).
    if name == "McpServer":
        from .mcp.config import McpServer

        return McpServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



def remove_tree(path: str | Path, *, missing_ok: bool = True) -> None:
    """Remove the absolute `path` and everything beneath it through descriptors only, never following a link
    (on the way to it or beneath it): for hosts clearing a directory an agent wrote or may still be writing.
    Raises OSError when something could not be removed."""
    from .environments.guard import remove_tree as _remove_tree

    _remove_tree(os.fspath(path), missing_ok=missing_ok)


# -- the tool catalogue ---------------------------------------------------------------


def build_catalog(*, plugins: bool = True, extra: Iterable[Tool] = ()) -> ToolRegistry:
    """A new catalogue: the locked tools, then `extra`, then (if `plugins`) entry-point tools.

    A plugin that fails to import or register is unavailable, never fatal: the
    others keep working, and a manifest that enables it fails to compile with
    the reason (TOOL-7).
    """
    from .tools.locked import LOCKED_CLASSES, locked_factory

    # Locked tools are imported when first looked up, plugins when an id is not found otherwise
    # (or the whole list is asked for): a command that runs one `read` loads one tool.
    catalog = ToolRegistry(plugins=_load_plugins if plugins else None)
    for tool_id in LOCKED_IDS:
        assert tool_id in LOCKED_CLASSES
        catalog.register_lazy(tool_id, locked_factory(tool_id))
    for tool in extra:
        catalog.register(tool)
    return catalog


def _load_plugins(catalog: ToolRegistry) -> None:
    from importlib.metadata import entry_points  # scanning every installed distribution: only when needed

    for ep in entry_points(group="agentcore.tools"):
        try:
            obj = ep.load()
            catalog.register(obj() if isinstance(obj, type) else obj)
        except Exception as exc:
            catalog.plugin_errors[ep.name] = f"{type(exc).__name__}: {exc}"


@lru_cache(maxsize=1)
def default_catalog() -> ToolRegistry:
    """The process-wide default catalogue (built once): locked tools and installed plugins."""
    return build_catalog()


def default_watchdog(manifest: CompiledManifest) -> Watchdog:
    """The default watchdog as the manifest configures it (`watchdog: {enabled, disable}`)."""
    from .watchdog.default import default_watchdog_for

    return default_watchdog_for(manifest)


# -- manifests and rules ----------------------------------------------------------------


def load_manifest(
    path: str | Path,
    *,
    workspace: str | Path | None,
    catalog: ToolRegistry | None = None,
    ad_hoc: Sequence[Path] = (),
    user_data: Path | None = None,
    extra_protected: Sequence[Path] = (),
) -> CompiledManifest:
    """Read, validate and compile a manifest file (YAML or JSON) for `workspace`.

    Raises `ManifestError` (a `CompileError` for name and variable problems)
    whose text points at `file:line: key`.
    """
    return _load_manifest(
        Path(path),
        workspace=Path(workspace) if workspace is not None else None,
        catalog=catalog or default_catalog(),
        ad_hoc=ad_hoc,
        user_data=user_data,
        extra_protected=extra_protected,
    )


def compile_manifest(
    spec: ManifestSpec | dict[str, Any],
    *,
    workspace: str | Path | None,
    catalog: ToolRegistry | None = None,
    source: Path | None = None,
    **kwargs: Any,
) -> CompiledManifest:
    """Compile a manifest given as a `ManifestSpec` or a plain dict (validated like a file).

    A pydantic model of the manifest (`agentcore.manifest.schema.ManifestSpec`) is taken as its dump.
    """
    if not isinstance(spec, (dict, ManifestSpec)) and callable(getattr(spec, "model_dump", None)):
        spec = spec.model_dump()
    if isinstance(spec, dict):
        spec = manifest_spec_from_dict(spec)
    if not isinstance(spec, ManifestSpec):
        raise TypeError("compile_manifest takes a ManifestSpec or a mapping")
    return _compile_manifest(
        spec,
        workspace=Path(workspace) if workspace is not None else None,
        catalog=catalog or default_catalog(),
        source=source,
        **kwargs,
    )


def manifest_reference() -> str:
    """The manifest reference page (Markdown), written from the manifest models (docs/manifest.md)."""
    from .manifest.reference import reference_markdown

    return reference_markdown()


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of a manifest, from the pydantic models that validate it (for editors)."""
    from .manifest.schema import ManifestSpec as ManifestModel

    schema = ManifestModel.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "agentcore manifest"
    return schema


def manifest_warnings(manifest: CompiledManifest, *, catalog: ToolRegistry | None = None) -> list[str]:
    """What in a valid manifest will not work as meant: a missing workspace, grants no enabled tool uses,
    named capabilities nothing uses, rules about tools that are not enabled ("file:line: key: message")."""
    from .manifest.advice import manifest_warnings  # only `manifest check` asks: a call does not import it

    return manifest_warnings(manifest, catalog or default_catalog())


def load_project_rules(path: str | Path, manifest: CompiledManifest, *, catalog: ToolRegistry | None = None) -> tuple[CompiledRule, ...]:
    """The rules of a project-rules file (`rules: [...]`), compiled for `manifest`'s variables."""
    return _load_project_rules(
        Path(path), manifest.bindings, catalog=catalog or default_catalog(), tool_prefixes=manifest.mcp_tool_prefixes
    )


def compile_rule_list(
    rules: Sequence[dict[str, str]],
    manifest: CompiledManifest,
    *,
    scope: Literal["project"] = "project",
    catalog: ToolRegistry | None = None,
) -> tuple[CompiledRule, ...]:
    """Project rules given as `{permission, pattern, action}` dicts; raises `ManifestError` on a bad rule."""
    for r in rules:
        if r.get("action") not in ("allow", "deny", "ask") or not isinstance(r.get("permission"), str) or not isinstance(r.get("pattern"), str):
            raise ManifestError("a rule needs permission, pattern and action allow|deny|ask")
    compiled = [Rule(r["permission"], r["pattern"], r["action"], scope=scope, index=i) for i, r in enumerate(rules)]  # type: ignore[arg-type]
    return compile_rules(
        compiled,
        manifest.bindings,
        known_tools=(catalog or default_catalog()).ids(),
        known_capabilities=manifest.effective.capabilities,
        known_tool_prefixes=manifest.mcp_tool_prefixes,
    )


def available_skills(manifest: CompiledManifest, session: Session) -> list[Any]:
    """Name, one-line description and path of each skill the agent can load (empty without `skill`)."""
    if "skill" not in manifest.tools:
        return []
    from .tools.skill import available_skills as _skills

    return _skills(manifest, session)


def tools_fixed(engine: _Engine, session: Session) -> bool:
    """Whether `engine.tools`, `engine.searchable` and `available_skills` stay as they are for `session`: no
    deferred tool to discover, no tool source (MCP) that relists, no `skill` tool whose directories may gain a skill.
    The catalogue itself can still change (`ToolRegistry.replace` gives a tool another description): a host
    keeping what it built from the tools checks `engine.catalog.version` too."""
    manifest = engine.manifest
    return not manifest.deferred and session.stores.tool_source is None and "skill" not in manifest.tools


# -- the engine -------------------------------------------------------------------------


class Engine(_Engine):
    """The pipeline for one compiled manifest, with the defaults filled in.

    - `catalog`: `default_catalog()` unless given;
    - `watchdog`: `default_watchdog(manifest)` unless given;
    - `broker`: headless unless given (`TerminalBroker`, `ScriptedBroker`, or a host's own);
    - `observers`: called with every `Event` of every call (see `add_observer`, `stream`).

    Main methods: `open_session`, `call`, `stream`, `explain`, `tools`, `ready`, `mcp_status`.
    """

    def __init__(
        self,
        manifest: CompiledManifest,
        *,
        catalog: ToolRegistry | None = None,
        watchdog: Watchdog | None = None,
        broker: AskBroker | None = None,
        project_rules: tuple[CompiledRule, ...] = (),
        environment: str | None = None,
        observers: Sequence[Observer] = (),
        subagent_runner: SubagentRunner | None = None,
    ) -> None:
        super().__init__(
            manifest,
            catalog=catalog or default_catalog(),
            watchdog=watchdog if watchdog is not None else default_watchdog(manifest),
            broker=broker,
            project_rules=project_rules,
            environment=environment,
            observers=observers,
            subagent_runner=subagent_runner,
        )

    def open_session(
        self,
        *,
        headless: bool | None = None,
        session_id: str | None = None,
        parent: Session | None = None,
        parent_call_id: str | None = None,
        mcp_servers: Sequence[McpServer] = (),
        client_files: ClientFiles | None = None,
    ) -> Session:
        """A new session; its MCP servers (the manifest's, plus `mcp_servers` from the host) start with it.

        They start at once when called inside a running event loop, else at the
        session's first call or `ready`; `close()` kills them. `client_files` lets a front end supply
        the text `read` returns (an editor's unsaved buffer), asked only after the whole pipeline has
        allowed the call, for the path it allowed.
        """
        session = super().open_session(headless=headless, session_id=session_id, parent=parent, parent_call_id=parent_call_id,
                                       client_files=client_files)
        if parent is None and (self.manifest.mcp_servers or mcp_servers):
            from .mcp.config import plan_servers
            from .mcp.hub import McpHub  # only sessions with servers import the hub and its transports

            hub = McpHub(self.manifest, plan_servers(self.manifest, mcp_servers), environment=self.environment_name,
                         reserved_ids=self.catalog.ids())
            session.stores.tool_source = hub
            session.on_close(hub.close)
            hub.start_if_running()
        return session

    async def mcp_status(self, session: Session) -> list[dict[str, Any]]:
        """Each MCP server of `session` once started: name, transport, state, reason, its tools with kinds.

        Never includes an env or header value (only their names).
        """
        source = session.stores.tool_source
        from .mcp.hub import McpHub

        if not isinstance(source, McpHub):
            return []
        await source.ready()
        return source.status()
