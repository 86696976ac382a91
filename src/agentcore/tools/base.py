"""The tool contract (TOOL): id, description, JSON-schema parameters, requires, ACP kind, execute.

Everything the pipeline needs to know about a tool is declared here, as a
class attribute or a method with a default, so the pipeline never tests a
tool's id or probes for attributes the contract does not name.
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from ..access import Access, FsAccess
from ..lazydc import lazy_dataclass  # made on first use: every call imports this module, few make these
from ..manifest.spec import ManifestSpec, RequiresSpec
from ..vocabulary import ACP_KINDS, AcpKind

if TYPE_CHECKING:
    from ..environments.base import SandboxPolicy
    from ..manifest.compiled import CompiledManifest
    from ..runtime import Runtime

__all__ = ["ACP_KINDS", "AcpKind", "CallContext", "Location", "Tool", "ToolResult"]


@dataclass
class ToolResult:
    """What `execute` returns; the pipeline wraps it into the envelope."""

    data: Any
    truncated: bool = False
    output_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # For front ends only (diffs, terminal ids); never serialised into the envelope.
    ui: dict[str, Any] = field(default_factory=dict)


@lazy_dataclass(frozen=True)
class Location:
    """A place a call touches, for front ends that follow along (ACP `locations`)."""

    path: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path} if self.line is None else {"path": self.path, "line": self.line}


@dataclass(frozen=True)
class CallContext:
    """What `accesses` may consult: where relative paths are anchored."""

    workspace: str
    session_dir: str
    manifest: Any = None  # the CompiledManifest, for tools whose accesses depend on configuration


class Tool(abc.ABC):
    """One tool. Subclasses set the class attributes and implement `execute`."""

    id: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    kind: ClassVar[AcpKind] = "other"
    requires: ClassVar[RequiresSpec] = RequiresSpec()
    # Capabilities whose scope the tool works within (documentation and explain only).
    uses: ClassVar[tuple[str, ...]] = ()
    # Per-call ceiling when the tool has no timeout of its own (ORDER-6).
    default_timeout_s: ClassVar[float] = 600.0

    # -- what the pipeline must know, declared rather than inferred ---------------------
    own_truncation: ClassVar[bool] = False
    """The tool applies its own output limit (TRUNC-1); otherwise the pipeline cuts the JSON of `data`."""
    needs_environment: ClassVar[bool] = False
    """The tool runs commands in the execution environment: the environment is checked before
    execution (ORDER-1) and handed to the tool; `command_argv` and `call_policy` describe the run."""
    answer_is_consent: ClassVar[bool] = False
    """A human answering the call is itself the consent a permission `ask` would seek (QSTN-2)."""
    concurrency_safe: ClassVar[bool] = False
    """Calls change nothing and may run in parallel with other such calls (an agent loop's hint)."""

    def requirements(self, manifest: ManifestSpec) -> RequiresSpec:
        """The tool's `requires`; a tool whose needs depend on configuration overrides this."""
        return self.requires

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        """Everything this call will touch, derived from validated arguments alone."""
        return []

    def title(self, args: dict[str, Any]) -> str:
        """A short human title (ACP tool_call title); never include secrets."""
        return self.id

    def locations(self, args: dict[str, Any], ctx: CallContext) -> list[Location]:
        """Where the call reads or writes, for front ends: by default the paths of its file accesses."""
        base = ctx.workspace or "/"
        return [
            Location(os.path.normpath(os.path.join(base, a.path)))
            for a in self.accesses(args, ctx)
            if isinstance(a, FsAccess)
        ]

    def command_argv(self, args: dict[str, Any]) -> Sequence[str] | None:
        """For `needs_environment` tools: the argv the environment runs (shown by explain)."""
        return None

    def call_policy(self, policy: "SandboxPolicy", manifest: "CompiledManifest") -> "SandboxPolicy":
        """For `needs_environment` tools: the sandbox policy of a call made now (per-call masks), which
        `runtime.proc.run_sandboxed` applies."""
        from ..environments import percall

        return percall.call_policy(policy, manifest)

    @abc.abstractmethod
    async def execute(self, args: dict[str, Any], runtime: "Runtime") -> ToolResult:
        """Run the call. Raise `ToolFailure` for a tool error, `Refusal` for a refusal."""
