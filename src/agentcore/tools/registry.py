"""The tool registry (TOOL): ids are unique, locked ids keep their shape."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ..errors import RegistryError
from ..vocabulary import ACP_KINDS, LOCKED_IDS
from .base import Tool

if TYPE_CHECKING:
    # Imported where a schema is first checked or a validator first built (about 35 ms):
    # a run's first model request needs neither.
    from jsonschema import Draft202012Validator

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _shape(tool: Tool) -> str:
    return json.dumps(tool.parameters, sort_keys=True)


class ToolRegistry:
    """Tool ids to tools, each with its argument validator (TOOL).

    Satisfies the manifest compiler's `ToolCatalog` protocol. The default
    registry (the locked tools plus entry-point plugins) is built in
    `agentcore.api.build_catalog`.

    Work is done when it is first needed, so that a command that uses one tool
    pays for one: a tool added with `register_lazy` is imported and checked
    when first looked up, a validator is built for the first call, and the
    plugin loader runs only when an id is not found otherwise or the whole
    list is asked for.
    """

    def __init__(self, *, plugins: Callable[["ToolRegistry"], None] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._factories: dict[str, Callable[[], Tool]] = {}
        self._order: list[str] = []
        self._validators: dict[str, Draft202012Validator] = {}
        self._locked_shapes: dict[str, str] = {}
        self._plugin_loader = plugins
        # Third-party tools that failed to import or register, by entry-point name (TOOL-7).
        self._plugin_errors: dict[str, str] = {}
        # Counts the changes a listing could show (a tool added, one replaced): a host that keeps what it
        # built from the tools (a system prompt) keeps it while this stays the same.
        self.version = 0

    @property
    def plugin_errors(self) -> dict[str, str]:
        self._plugins()
        return self._plugin_errors

    def _plugins(self) -> None:
        loader, self._plugin_loader = self._plugin_loader, None
        if loader is not None:
            loader(self)

    def register(self, tool: Tool, *, locked: bool = False) -> None:
        tid = getattr(tool, "id", None)
        self._check_id(tid)
        assert isinstance(tid, str)
        if tid in self._factories:
            self._materialise(tid)  # a locked id being registered again: compare with the real one
        if tid in self._tools:
            raise RegistryError(f"tool id {tid!r} is already registered")
        self._check(tool, locked=locked, trusted=False)
        self._tools[tid] = tool
        self._order.append(tid)
        self.version += 1

    def register_lazy(self, tool_id: str, factory: Callable[[], Tool]) -> None:
        """A locked tool of this package, made (and checked, but its schema trusted) when first looked up."""
        self._check_id(tool_id)
        if tool_id in self._tools or tool_id in self._factories:
            raise RegistryError(f"tool id {tool_id!r} is already registered")
        self._factories[tool_id] = factory
        self._order.append(tool_id)

    @staticmethod
    def _check_id(tid: object) -> None:
        if not isinstance(tid, str) or not _ID.fullmatch(tid):
            # No '.': a tool id must never be mistaken for a capability name (TOOL-2).
            raise RegistryError(f"tool id {tid!r} is not 1-64 ASCII letters, digits, '_' or '-'")

    def _check(self, tool: Tool, *, locked: bool, trusted: bool) -> None:
        tid = tool.id
        if tool.kind not in ACP_KINDS:
            raise RegistryError(f"tool {tid!r} declares unknown ACP kind {tool.kind!r}")
        if not isinstance(getattr(tool, "description", None), str) or not tool.description.strip():
            raise RegistryError(f"tool {tid!r} has no description")
        if not trusted:  # the locked tools' schemas are checked by the test suite, not at every start
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

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

    def _materialise(self, tid: str) -> Tool:
        tool = self._factories.pop(tid)()
        if tool.id != tid:
            raise RegistryError(f"the tool registered as {tid!r} has the id {tool.id!r}")
        self._check(tool, locked=True, trusted=True)
        self._tools[tid] = tool
        return tool

    def replace(self, tool: Tool) -> None:
        """Swap the implementation of a registered tool; the shape and kind must not change."""
        old = self._tools.get(tool.id) or (self._materialise(tool.id) if tool.id in self._factories else None)
        if old is None:
            raise RegistryError(f"tool id {tool.id!r} is not registered")
        if _shape(old) != _shape(tool) or old.kind != tool.kind:
            raise RegistryError(f"tool {tool.id!r} cannot be replaced with another shape or kind")
        self._tools[tool.id] = tool
        self._validators.pop(tool.id, None)
        self.version += 1

    def load_error(self, tool_id: str) -> str | None:
        """Why a plugin with this id failed to load, or None."""
        return self.plugin_errors.get(tool_id)

    def has(self, tool_id: str) -> bool:
        if tool_id in self._tools or tool_id in self._factories:
            return True
        self._plugins()
        return tool_id in self._tools

    def __contains__(self, tool_id: object) -> bool:
        return isinstance(tool_id, str) and self.has(tool_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids())

    def get(self, tool_id: str) -> Tool:
        tool = self._tools.get(tool_id)
        if tool is not None:
            return tool
        if tool_id in self._factories:
            return self._materialise(tool_id)
        self._plugins()
        return self._tools[tool_id]

    def validator(self, tool_id: str) -> Draft202012Validator:
        found = self._validators.get(tool_id)
        if found is None:
            from jsonschema import Draft202012Validator

            found = Draft202012Validator(self.get(tool_id).parameters, format_checker=Draft202012Validator.FORMAT_CHECKER)
            self._validators[tool_id] = found
        return found

    def ids(self) -> tuple[str, ...]:
        self._plugins()
        return tuple(self._order)

    def tools(self) -> Iterable[Tool]:
        return [self.get(tid) for tid in self.ids()]
