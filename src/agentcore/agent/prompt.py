"""The system prompt, assembled from the manifest.

In order: the manifest's `instructions` (or a short default), the workspace,
the skills' one-line descriptions, and a line per tool the agent may call.
The tools' full definitions (description and parameter schema) go to the
model through the provider's tool API (`tool_specs`).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..api import Engine, Session, Tool, available_skills, tools_fixed
from .model import ToolSpec

DEFAULT_INSTRUCTIONS = (
    "You are a careful software agent. Work in the workspace with the tools you are given; every call is checked "
    "against what this agent may do, and a refused call says why. Do not retry a refused call unchanged."
)


def tool_specs(tools: Sequence[Tool]) -> list[ToolSpec]:
    return [ToolSpec(t.id, t.description, t.parameters) for t in tools]


class PromptCache:
    """The system prompt and tool definitions of a session, rebuilt only when what they list changes.

    They change when `tool_search` discovers a tool, an MCP server lists its tools, or a skill
    appears; the key holds exactly those, so a cached prompt is never stale. A session where none of
    them can happen (`api.tools_fixed`) keeps its entry without checking the key again, while the
    catalogue is unchanged (a replaced tool may describe itself otherwise): the check ran before every
    model request, after the request's own work had left the caches cold.
    """

    def __init__(self) -> None:
        # session id -> (tools, key, system prompt, tool specs, catalogue version if the tools are fixed else None)
        self._entries: dict[str, tuple[tuple[Tool, ...], tuple[Any, ...], str, list[ToolSpec], int | None]] = {}

    def get(self, engine: Engine, session: Session) -> tuple[str, list[ToolSpec]]:
        hit = self._entries.get(session.id)
        if hit is not None and hit[4] == engine.catalog.version:
            return hit[2], hit[3]
        tools = tuple(engine.tools(session))
        key = (tuple(available_skills(engine.manifest, session)), len(engine.searchable(session)))
        # Tools compare by identity; the entry holds them, so a freed tool's id is never reused under it.
        if hit is not None and hit[1] == key and len(hit[0]) == len(tools) and all(a is b for a, b in zip(hit[0], tools)):
            return hit[2], hit[3]
        system, specs = system_prompt(engine, session, tools), tool_specs(tools)
        self._entries[session.id] = (tools, key, system, specs, engine.catalog.version if tools_fixed(engine, session) else None)
        return system, specs

    def forget(self, session: Session) -> None:
        self._entries.pop(session.id, None)


def system_prompt(engine: Engine, session: Session, tools: Sequence[Tool] | None = None) -> str:
    manifest = engine.manifest
    lines: list[str] = [manifest.spec.instructions.strip() or DEFAULT_INSTRUCTIONS, ""]
    roots = ", ".join(str(p) for p in manifest.workspace_roots)
    lines.append(f"Workspace: {roots}" if roots else "There is no workspace.")
    skills = available_skills(manifest, session)
    if skills:
        lines += ["", "Skills (load one with the `skill` tool when it fits the task):"]
        lines += [f"- {s.name}: {s.description}" for s in skills]
    lines += ["", "Tools:"]
    lines += [f"- {t.id} ({t.kind}): {_first_sentence(t.description)}" for t in (engine.tools(session) if tools is None else tools)]
    deferred = engine.searchable(session)
    if deferred:
        lines.append(f"- {len(deferred)} more tools are available through `tool_search`.")
    return "\n".join(lines)


def _first_sentence(text: str) -> str:
    head = text.strip().split(". ", 1)[0]
    return head if head.endswith(".") else head + "."


def describe(tools: Sequence[Any]) -> list[str]:
    return [t.id for t in tools]
