"""`skill` (being implemented)."""

from __future__ import annotations

from typing import Any

from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class SkillTool(Tool):
    id = "skill"
    description = "skill"
    parameters = _schemas.SKILL
    kind = "think"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        raise ToolFailure("not_implemented", "not implemented yet")
