"""`web_search` (being implemented)."""

from __future__ import annotations

from typing import Any

from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class WebSearchTool(Tool):
    id = "web_search"
    description = "web_search"
    parameters = _schemas.WEB_SEARCH
    kind = "fetch"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        raise ToolFailure("not_implemented", "not implemented yet")
