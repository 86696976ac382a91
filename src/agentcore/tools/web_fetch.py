"""`web_fetch` (being implemented)."""

from __future__ import annotations

from typing import Any

from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class WebFetchTool(Tool):
    id = "web_fetch"
    description = "web_fetch"
    parameters = _schemas.WEB_FETCH
    kind = "fetch"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        raise ToolFailure("not_implemented", "not implemented yet")
