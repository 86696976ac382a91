"""`todo`: replace the session's todo list (TODO). Session-internal, no capability."""

from __future__ import annotations

import copy
from typing import Any

from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class TodoTool(Tool):
    id = "todo"
    description = "Replace the session's todo list. Each item has `content` and `status` (pending, in_progress, completed)."
    parameters = _schemas.TODO
    kind = "other"

    def title(self, args: dict[str, Any]) -> str:
        return "Update todo list"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        todos = copy.deepcopy(args["todos"])
        if sum(1 for t in todos if t["status"] == "in_progress") > 1:
            raise ToolFailure("invalid_arguments", "at most one item can be in_progress")
        runtime.session.stores.todos = todos
        return ToolResult(data={"todos": todos})
