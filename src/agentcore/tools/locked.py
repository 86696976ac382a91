"""The locked set (LOCK): thirteen ids every implementation ships with fixed shapes."""

from __future__ import annotations

import importlib
from typing import Callable

from .base import Tool

# Where each locked tool lives, so that a registry can import only the tools a manifest enables.
LOCKED_CLASSES: dict[str, tuple[str, str]] = {
    "read": ("read", "ReadTool"), "write": ("write", "WriteTool"), "edit": ("edit", "EditTool"),
    "glob": ("glob", "GlobTool"), "grep": ("grep", "GrepTool"), "bash": ("bash", "BashTool"),
    "todo": ("todo", "TodoTool"), "task": ("task", "TaskTool"), "question": ("question", "QuestionTool"),
    "web_search": ("web_search", "WebSearchTool"), "web_fetch": ("web_fetch", "WebFetchTool"),
    "skill": ("skill", "SkillTool"), "tool_search": ("tool_search", "ToolSearchTool"),
}


def locked_factory(tool_id: str) -> Callable[[], Tool]:
    """A function that imports the locked tool `tool_id` and makes it."""
    module, name = LOCKED_CLASSES[tool_id]

    def make() -> Tool:
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)()

    return make


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
