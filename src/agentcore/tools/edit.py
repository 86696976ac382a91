"""`edit`: exact string replacement under the filesystem mutation invariant (FILE).

The file's current content is read during the call; the replacement applies
only if `old_string` identifies exactly one location (or `replace_all`).
Any conflict leaves the file byte-for-byte unchanged. No read-before-edit
ledger is consulted.
"""

from __future__ import annotations

import os
from typing import Any

from ..access import Access, FsAccess
from ..errors import Refusal, ToolFailure
from . import _schemas
from .base import CallContext, Tool, ToolResult


class EditTool(Tool):
    id = "edit"
    description = (
        "Replace `old_string` with `new_string` in a text file. `old_string` must occur exactly once unless "
        "`replace_all` is true; otherwise nothing changes and a conflict is reported."
    )
    parameters = _schemas.EDIT
    kind = "edit"
    uses = ("fs.read", "fs.write")

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        return [FsAccess("path", args["path"], "read"), FsAccess("path", args["path"], "write")]

    def title(self, args: dict[str, Any]) -> str:
        return f"Edit {args.get('path', '')}"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        path = runtime.resolved["path"]
        old, new = args["old_string"], args["new_string"]
        if old == new:
            raise ToolFailure("no_change", "old_string and new_string are identical")
        if runtime.fs.stat(path) is None:
            raise ToolFailure("not_found", "the file does not exist; use write to create it")
        raw = runtime.fs.read_bytes(path, runtime.limits.text_bytes)
        if b"\x00" in raw[:8192]:
            raise ToolFailure("binary", "the file looks binary; edit handles text only")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailure("binary", "the file is not valid UTF-8 text") from None
        count = text.count(old)
        if count == 0:
            raise ToolFailure("no_match", "old_string was not found in the file's current content; the file is unchanged")
        if count > 1 and not args.get("replace_all", False):
            raise ToolFailure(
                "ambiguous", f"old_string occurs {count} times; add context to make it unique or set replace_all; the file is unchanged"
            )
        updated = text.replace(old, new) if args.get("replace_all", False) else text.replace(old, new, 1)
        data = updated.encode("utf-8")
        if len(data) > runtime.limits.text_bytes:
            raise Refusal("limit", "too_large", "the edited file would exceed the text-size bound; the file is unchanged")
        runtime.fs.write_atomic(path, data)
        return ToolResult(
            data={"path": os.fspath(path), "replacements": count if args.get("replace_all", False) else 1},
            ui={"diff": {"path": os.fspath(path), "old_text": text, "new_text": updated}} if len(raw) <= 256 * 1024 else {},
        )
