"""The uniform result envelope every tool call ends in (ENVL, TRUNC)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class Envelope:
    """The one result of a call: output or error, truncated, with its metadata and ACP kind."""

    type: Literal["output", "error"]
    data: Any = None
    error_text: str | None = None
    duration_ms: int = 0
    truncated: bool = False
    output_path: str | None = None
    kind: str = "other"
    tool: str = ""
    refusal: dict[str, Any] | None = None
    error_code: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    ui: dict[str, Any] = field(default_factory=dict)  # front-end hints, not part of the wire envelope

    @property
    def ok(self) -> bool:
        return self.type == "output"

    def to_dict(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"duration_ms": self.duration_ms}
        if self.truncated:
            metadata["truncated"] = True
        if self.output_path is not None:
            metadata["output_path"] = self.output_path
        metadata["kind"] = self.kind
        metadata["tool"] = self.tool
        if self.refusal is not None:
            metadata["refusal"] = self.refusal
        if self.error_code is not None:
            metadata["error_code"] = self.error_code
        metadata.update(self.extra)
        out: dict[str, Any] = {"type": self.type}
        if self.type == "output":
            out["data"] = self.data
        else:
            out["error_text"] = self.error_text or ""
        out["metadata"] = metadata
        return out


def output(data: Any) -> Envelope:
    return Envelope(type="output", data=data)


def error(text: str, *, code: str | None = None, refusal: dict[str, Any] | None = None) -> Envelope:
    return Envelope(type="error", error_text=text, error_code=code, refusal=refusal)
