"""Tools: the contract, the registry and the thirteen locked tools."""

from .base import CallContext, Tool, ToolResult
from .registry import LOCKED_IDS, ToolRegistry, build_registry, default_registry

__all__ = ["CallContext", "LOCKED_IDS", "Tool", "ToolRegistry", "ToolResult", "build_registry", "default_registry"]
