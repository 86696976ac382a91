"""Turning an MCP tool result into text for the model (MCP-7).

Text parts are kept; what we cannot render (images, audio, binary resources,
unknown part types) becomes a one-line placeholder naming its type and size,
never raw bytes. Structured content is shown as JSON when there is no text.
"""

from __future__ import annotations

import json
from typing import Any

_UNSAFE = {c: " " for c in range(0x20) if c not in (0x09, 0x0A)} | {0x7F: " "}


def _placeholder(kind: str, mime: Any, data: Any) -> str:
    size = f", {len(data) * 3 // 4} bytes" if isinstance(data, str) else ""
    what = f" {mime}" if isinstance(mime, str) and len(mime) <= 100 else ""
    return f"[{kind}{what}{size}: not shown; this client renders text only]"


def _part(part: Any) -> str:
    kind = getattr(part, "type", None)
    if kind == "text":
        return str(getattr(part, "text", ""))
    if kind in ("image", "audio"):
        return _placeholder(kind, getattr(part, "mime_type", None), getattr(part, "data", None))
    if kind == "resource_link":
        return f"[resource link: {getattr(part, 'name', '')} <{getattr(part, 'uri', '')}>]"
    if kind == "resource":
        resource = getattr(part, "resource", None)
        text = getattr(resource, "text", None)
        uri = getattr(resource, "uri", "")
        if isinstance(text, str):
            return f"[resource <{uri}>]\n{text}"
        return _placeholder(f"binary resource <{uri}>", getattr(resource, "mime_type", None), getattr(resource, "blob", None))
    return f"[content of type {str(kind)[:40]!r}: not shown]"


def render_result(content: list[Any], structured: Any) -> str:
    """The text of a tool result: every part in order, separated by blank lines; control characters blanked."""
    parts = [_part(p) for p in content]
    if not any(getattr(p, "type", None) == "text" for p in content) and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str))
    return "\n\n".join(parts).translate(_UNSAFE)
