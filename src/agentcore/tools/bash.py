"""`bash` (being implemented)."""

from __future__ import annotations

from typing import Any

from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class BashTool(Tool):
    id = "bash"
    description = "bash"
    parameters = _schemas.BASH
    kind = "execute"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        raise ToolFailure("not_implemented", "not implemented yet")
