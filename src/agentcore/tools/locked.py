"""The locked set (LOCK): thirteen ids every implementation ships with fixed shapes."""

from __future__ import annotations

from .base import Tool


def locked_tools() -> list[Tool]:
    from .bash import BashTool
    from .edit import EditTool
    from .glob import GlobTool
    from .grep import GrepTool
    from .question import QuestionTool
    from .read import ReadTool
    from .skill import SkillTool
    from .task import TaskTool
    from .todo import TodoTool
    from .tool_search import ToolSearchTool
    from .web_fetch import WebFetchTool
    from .web_search import WebSearchTool
    from .write import WriteTool

    return [
        ReadTool(), WriteTool(), EditTool(), GlobTool(), GrepTool(), BashTool(), TodoTool(),
        TaskTool(), QuestionTool(), WebSearchTool(), WebFetchTool(), SkillTool(), ToolSearchTool(),
    ]
