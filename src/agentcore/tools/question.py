"""`question`: ask the human a structured question (QSTN).

Headless runs get a fixed refusal; answers are never invented.
"""

from __future__ import annotations

from typing import Any

from ..asking import HEADLESS_QUESTION_TEXT
from ..errors import ToolFailure
from . import _schemas
from .base import Tool, ToolResult


class QuestionTool(Tool):
    id = "question"
    description = "Pause and ask the user one or more structured questions; returns one list of answers per question."
    parameters = _schemas.QUESTION
    kind = "other"
    answer_is_consent = True  # answering the question is the human's consent (QSTN-2)
    default_timeout_s = 24 * 3600.0  # a human may take a while; abort still cancels

    def title(self, args: dict[str, Any]) -> str:
        return "Ask the user"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        if runtime.session.headless or runtime.broker.headless:
            raise ToolFailure("headless", HEADLESS_QUESTION_TEXT)
        answers = await runtime.broker.question(args["questions"])
        if answers is None:
            raise ToolFailure("cancelled", "the question was dismissed or could not be answered; no answer was invented")
        if len(answers) != len(args["questions"]) or not all(isinstance(a, list) and all(isinstance(x, str) for x in a) for a in answers):
            raise ToolFailure("cancelled", "the host returned answers of the wrong shape; no answer was invented")
        return ToolResult(data={"answers": answers})
