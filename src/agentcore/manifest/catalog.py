"""What the manifest compiler needs to know about tools, as a protocol.

The compiler checks tool names and folds each enabled tool's requirements
into the effective set. It takes the catalogue as a parameter (a
`ToolRegistry` satisfies this protocol); the default catalogue is wired in
`agentcore.api`, never here.
"""

from __future__ import annotations

from typing import Protocol

from .spec import ManifestSpec, RequiresSpec


class ToolDeclaration(Protocol):
    """The part of a tool the compiler consults."""

    def requirements(self, manifest: ManifestSpec) -> RequiresSpec:
        """The tool's `requires`, given the manifest that enables it."""
        ...


class ToolCatalog(Protocol):
    """Tool ids to tools; `load_error` explains an id whose plugin failed to load."""

    def has(self, tool_id: str) -> bool: ...

    def get(self, tool_id: str) -> ToolDeclaration: ...

    def ids(self) -> tuple[str, ...]: ...

    def load_error(self, tool_id: str) -> str | None: ...
