"""`write`: create or overwrite a text file atomically (FILE)."""

from __future__ import annotations

import os
from typing import Any

from ..access import Access, FsAccess
from ..errors import Refusal, ToolFailure
from . import _schemas
from .base import CallContext, Tool, ToolResult


class WriteTool(Tool):
    id = "write"
    description = "Create or overwrite a UTF-8 text file with `content`. The write is atomic; an existing file keeps its mode."
    parameters = _schemas.WRITE
    kind = "edit"
    uses = ("fs.write",)

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        return [FsAccess("path", args["path"], "write")]

    def title(self, args: dict[str, Any]) -> str:
        return f"Write {args.get('path', '')}"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        path = runtime.resolved["path"]
        data = args["content"].encode("utf-8", errors="strict")
        if len(data) > runtime.limits.text_bytes:
            raise Refusal("limit", "too_large", f"content has {len(data)} bytes, above the text-size bound of {runtime.limits.text_bytes}")
        if os.path.isdir(path):
            raise ToolFailure("is_directory", "the path is a directory")
        before = _before(runtime, path) if len(data) <= _DIFF_BYTES else _UNKNOWN
        created = runtime.fs.write_atomic(path, data)
        ui: dict[str, Any] = {}
        if before is not _UNKNOWN:  # front ends show the change as a diff (oldText null: a new file)
            ui["diff"] = {"path": os.fspath(path), "old_text": None if created else before, "new_text": args["content"]}
        return ToolResult(data={"path": os.fspath(path), "bytes_written": len(data), "created": created}, ui=ui)


_DIFF_BYTES = 256 * 1024
_UNKNOWN = object()


def _before(runtime: Any, path: Any) -> Any:
    """The file's text before the write, None when there is no file, `_UNKNOWN` when it cannot be shown:
    too large, not text, or outside what the agent may read (a diff must not reveal it)."""
    if not os.path.lexists(path):
        return None
    if not runtime.fs.may_read(os.fspath(path)):
        return _UNKNOWN
    try:
        return runtime.fs.read_bytes(path, _DIFF_BYTES).decode("utf-8")
    except (ToolFailure, Refusal, UnicodeDecodeError, OSError):
        return _UNKNOWN
