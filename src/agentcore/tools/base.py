"""The tool contract (TOOL): id, description, JSON-schema parameters, requires, ACP kind, execute."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..access import Access
from ..manifest.schema import ManifestSpec, RequiresSpec

if TYPE_CHECKING:
    from ..runtime import Runtime

AcpKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
ACP_KINDS: frozenset[str] = frozenset(
    ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
)


@dataclass
class ToolResult:
    """What `execute` returns; the pipeline wraps it into the envelope."""

    data: Any
    truncated: bool = False
    output_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # For front ends only (diffs, terminal ids); never serialised into the envelope.
    ui: dict[str, Any] = field(default_factory=dict)


class Tool(abc.ABC):
    id: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    kind: ClassVar[AcpKind] = "other"
    requires: ClassVar[RequiresSpec] = RequiresSpec()
    # Capabilities whose scope the tool works within (documentation and explain only).
    uses: ClassVar[tuple[str, ...]] = ()
    # Per-call ceiling when the tool has no timeout of its own.
    default_timeout_s: ClassVar[float] = 600.0

    def requirements(self, manifest: ManifestSpec) -> RequiresSpec:
        """The tool's `requires`; a tool whose needs depend on configuration overrides this."""
        return self.requires

    def accesses(self, args: dict[str, Any], ctx: "CallContext") -> list[Access]:
        """Everything this call will touch, derived from validated arguments alone."""
        return []

    def title(self, args: dict[str, Any]) -> str:
        """A short human title (ACP tool_call title); never include secrets."""
        return self.id

    @abc.abstractmethod
    async def execute(self, args: dict[str, Any], runtime: "Runtime") -> ToolResult: ...


@dataclass(frozen=True)
class CallContext:
    """What `accesses` may consult: where relative paths are anchored."""

    workspace: str
    session_dir: str
    manifest: Any = None  # the CompiledManifest, for tools whose accesses depend on configuration
