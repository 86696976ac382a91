"""The conversation as the loop keeps it: messages of typed parts, provider-neutral.

Providers translate to and from this form (`providers.py`); the recorder
stores it as JSON (`to_dict`/`from_dict`), so a recorded session loads back
into exactly the history a live one had.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Union

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True)
class TextPart:
    """Plain text: what the user wrote, or the model's answer."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ReasoningPart:
    """The model's reasoning (thinking) text, kept apart from its answer."""

    text: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class ImagePart:
    """An image in a user message (base64 data), for models that take images."""

    media_type: str
    data: str
    kind: Literal["image"] = "image"


@dataclass(frozen=True)
class ToolCallPart:
    """A tool call as the model wrote it: `arguments` is the raw JSON text, parsed only when run."""

    call_id: str
    tool: str
    arguments: str
    kind: Literal["tool_call"] = "tool_call"

    def parsed_arguments(self) -> Any:
        """The arguments as JSON, or the raw text when it is not valid JSON (the schema stage refuses it)."""
        try:
            return json.loads(self.arguments) if self.arguments.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            return self.arguments


@dataclass(frozen=True)
class ToolResultPart:
    """The envelope a tool call ended in, exactly as the engine produced (and truncated) it."""

    call_id: str
    tool: str
    envelope: dict[str, Any]
    kind: Literal["tool_result"] = "tool_result"

    def content(self) -> str:
        """What the model reads: the envelope's JSON."""
        return json.dumps(self.envelope, ensure_ascii=False, separators=(",", ":"))


Part = Union[TextPart, ReasoningPart, ImagePart, ToolCallPart, ToolResultPart]
_PARTS: dict[str, type] = {
    "text": TextPart, "reasoning": ReasoningPart, "image": ImagePart, "tool_call": ToolCallPart, "tool_result": ToolResultPart,
}


@dataclass(frozen=True)
class Message:
    """One message of the conversation: who sent it (`role`) and its parts, in order."""

    role: Role
    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        """The message's text parts, joined."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "parts": [part_to_dict(p) for p in self.parts]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Message":
        return cls(data["role"], tuple(part_from_dict(p) for p in data["parts"]))


def part_to_dict(part: Part) -> dict[str, Any]:
    return {k: getattr(part, k) for k in part.__dataclass_fields__}


def part_from_dict(data: dict[str, Any]) -> Part:
    kind = data.get("kind")
    cls = _PARTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown message part kind {kind!r}")
    return cls(**{k: v for k, v in data.items() if k != "kind"})


def user_message(text: str, images: tuple[ImagePart, ...] = ()) -> Message:
    return Message("user", (TextPart(text), *images))
