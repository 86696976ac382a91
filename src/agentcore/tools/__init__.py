"""Tools: the contract, the registry and the thirteen locked tools."""

from ..vocabulary import LOCKED_IDS
from .base import CallContext, Tool, ToolResult
from .registry import ToolRegistry

__all__ = ["CallContext", "LOCKED_IDS", "Tool", "ToolRegistry", "ToolResult"]
