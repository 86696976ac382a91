"""The tool registry (TOOL): ids are unique, locked ids keep their shape."""

from __future__ import annotations

import json
import re
from typing import Iterable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..errors import RegistryError
from ..vocabulary import ACP_KINDS, LOCKED_IDS
from .base import Tool

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _shape(tool: Tool) -> str:
    return json.dumps(tool.parameters, sort_keys=True)


class ToolRegistry:
    """Tool ids to tools, with a prebuilt argument validator each (TOOL).

    Satisfies the manifest compiler's `ToolCatalog` protocol. The default
    registry (the locked tools plus entry-point plugins) is built in
    `agentcore.api.build_catalog`.
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._locked_shapes: dict[str, str] = {}
        # Third-party tools that failed to import or register, by entry-point name (TOOL-7).
        self.plugin_errors: dict[str, str] = {}

    def register(self, tool: Tool, *, locked: bool = False) -> None:
        tid = getattr(tool, "id", None)
        if not isinstance(tid, str) or not _ID.fullmatch(tid):
            # No '.': a tool id must never be mistaken for a capability name (TOOL-2).
            raise RegistryError(f"tool id {tid!r} is not 1-64 ASCII letters, digits, '_' or '-'")
        if tid in self._tools:
            raise RegistryError(f"tool id {tid!r} is already registered")
        if tool.kind not in ACP_KINDS:
            raise RegistryError(f"tool {tid!r} declares unknown ACP kind {tool.kind!r}")
        if not isinstance(getattr(tool, "description", None), str) or not tool.description.strip():
            raise RegistryError(f"tool {tid!r} has no description")
        try:
            Draft202012Validator.check_schema(tool.parameters)
        except SchemaError as exc:
            raise RegistryError(f"tool {tid!r} has an invalid parameter schema: {exc.message}") from None
        if tool.parameters.get("type") != "object":
            raise RegistryError(f"tool {tid!r}: parameters must be a JSON object schema")
        if tid in LOCKED_IDS and not locked:
            raise RegistryError(f"{tid!r} is a locked tool id and cannot be redefined")
        if locked:
            if tid in self._locked_shapes and self._locked_shapes[tid] != _shape(tool):
                raise RegistryError(f"locked tool {tid!r} cannot be re-registered with another shape")
            self._locked_shapes[tid] = _shape(tool)
        self._tools[tid] = tool
        self._validators[tid] = Draft202012Validator(tool.parameters, format_checker=Draft202012Validator.FORMAT_CHECKER)

    def replace(self, tool: Tool) -> None:
        """Swap the implementation of a registered tool; the shape and kind must not change."""
        old = self._tools.get(tool.id)
        if old is None:
            raise RegistryError(f"tool id {tool.id!r} is not registered")
        if _shape(old) != _shape(tool) or old.kind != tool.kind:
            raise RegistryError(f"tool {tool.id!r} cannot be replaced with another shape or kind")
        self._tools[tool.id] = tool

    def load_error(self, tool_id: str) -> str | None:
        """Why a plugin with this id failed to load, or None."""
        return self.plugin_errors.get(tool_id)

    def has(self, tool_id: str) -> bool:
        return tool_id in self._tools

    def get(self, tool_id: str) -> Tool:
        return self._tools[tool_id]

    def validator(self, tool_id: str) -> Draft202012Validator:
        return self._validators[tool_id]

    def ids(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def tools(self) -> Iterable[Tool]:
        return self._tools.values()
