"""`task` (being implemented)."""

from __future__ import annotations

from typing import Any

from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class TaskTool(Tool):
    id = "task"
    description = "task"
    parameters = _schemas.TASK
    kind = "other"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        raise ToolFailure("not_implemented", "not implemented yet")
