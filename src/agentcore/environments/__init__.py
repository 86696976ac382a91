"""Execution environments: where a command runs and what the OS lets it touch (ENV)."""

from __future__ import annotations

from .base import (
    Environment,
    EnvironmentUnavailable,
    OutputSink,
    ProcessOutcome,
    SandboxPolicy,
    SpawnedProcess,
    redact_command_line,
)

__all__ = [
    "Environment",
    "EnvironmentUnavailable",
    "OutputSink",
    "ProcessOutcome",
    "SandboxPolicy",
    "SpawnedProcess",
    "get_environment",
    "redact_command_line",
]


def get_environment(name: str) -> Environment:
    """`"bwrap"` or `"none"`; anything else is refused (never a silent fallback)."""
    if name == "bwrap":
        from .bwrap import BwrapEnvironment

        return BwrapEnvironment()
    if name == "none":
        from .none import NoneEnvironment

        return NoneEnvironment()
    raise EnvironmentUnavailable("unknown execution environment")
