"""Typed errors shared across the engine."""

from __future__ import annotations


class AgentCoreError(Exception):
    """Base class for every error the engine raises on purpose."""


class ManifestError(AgentCoreError):
    """A manifest or rules file could not be loaded or validated.

    `location` is "file:line: key" when it is known, so a CLI can point the
    author at the exact place.
    """

    def __init__(self, message: str, *, location: str | None = None, also: tuple[str, ...] = ()) -> None:
        self.message = message
        self.location = location
        # Further problems found in the same pass, each a whole "file:line: key: message" line.
        self.also = also
        first = f"{location}: {message}" if location else message
        super().__init__("\n".join((first, *also)))


class CompileError(ManifestError):
    """The manifest parsed but could not be compiled (unknown variable, bad pattern)."""


class RegistryError(AgentCoreError):
    """A tool registration broke the registry's invariants."""


class Refusal(AgentCoreError):
    """A call was refused by one of the layers.

    `code` is a stable machine-readable reason; `message` is safe to show to
    the model and never contains argument values.
    """

    def __init__(self, layer: str, code: str, message: str, **extra: object) -> None:
        self.layer = layer
        self.code = code
        self.message = message
        self.extra = extra
        super().__init__(message)


class OutputCapped(AgentCoreError):
    """A sidecar reached its cap (TRUNC-9): whatever produces the output must stop.

    Raised by the truncation spools; the process runner answers it by killing
    the command's process group, and the search tools by stopping the search.
    """


class ToolFailure(AgentCoreError):
    """A tool ran but failed in a way the model should see as an error envelope."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)
