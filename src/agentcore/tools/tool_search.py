"""`tool_search` (being implemented)."""

from __future__ import annotations

from typing import Any

from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class ToolSearchTool(Tool):
    id = "tool_search"
    description = "tool_search"
    parameters = _schemas.TOOL_SEARCH
    kind = "search"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        raise ToolFailure("not_implemented", "not implemented yet")
