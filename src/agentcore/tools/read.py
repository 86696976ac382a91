"""`read`: a window of a text file (FILE, TRUNC).

Reads return at most the read limit; a longer file comes back as a window
with `next_offset`, never as a sidecar (the file itself is the full output).
A file above the shared text-size bound needs an explicit window.
"""

from __future__ import annotations

import os
from typing import Any

from ..access import Access, FsAccess
from ..errors import ToolFailure
from . import _schemas
from .base import CallContext, Tool, ToolResult

DEFAULT_LINES = 2000
_SNIFF = 8192


def _check_text(sample: bytes, *, at_start: bool) -> None:
    if b"\x00" in sample:
        raise ToolFailure("binary", "the file looks binary (it contains NUL bytes); read handles text only")


def _decode(data: bytes, *, strict_tail: bool) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A byte window may cut a character at either end; anything else is not UTF-8 text.
        if exc.start >= len(data) - 3 and not strict_tail:
            return data[: exc.start].decode("utf-8", errors="strict")
        raise ToolFailure("binary", "the file is not valid UTF-8 text") from None


class ReadTool(Tool):
    id = "read"
    description = (
        "Read a UTF-8 text file. Returns up to 2000 lines from `offset` (1-based), or a byte window with "
        "`byte_offset`/`byte_length`. Long files return `next_offset` to continue."
    )
    parameters = _schemas.READ
    kind = "read"
    uses = ("fs.read",)

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        line_window = "offset" in args or "limit" in args
        byte_window = "byte_offset" in args or "byte_length" in args
        if line_window and byte_window:
            raise ToolFailure("invalid_arguments", "a line window (offset/limit) and a byte window (byte_offset/byte_length) cannot be combined")
        return [FsAccess("path", args["path"], "read")]

    def title(self, args: dict[str, Any]) -> str:
        return f"Read {args.get('path', '')}"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        path = runtime.resolved["path"]
        limits = runtime.limits
        fd = runtime.fs.open_read(path)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            import stat as _stat

            if _stat.S_ISDIR(st.st_mode):
                raise ToolFailure("is_directory", "the path is a directory; use glob to list it")
            if not _stat.S_ISREG(st.st_mode):
                raise ToolFailure("not_a_file", "the path is not a regular file")
            size = st.st_size
            if "byte_offset" in args or "byte_length" in args:
                start = int(args.get("byte_offset", 0))
                length = min(int(args.get("byte_length", limits.read_bytes)), limits.read_bytes)
                fh.seek(start)
                data = fh.read(length)
                _check_text(data, at_start=start == 0)
                text = _decode(data, strict_tail=start + len(data) >= size)
                end = start + len(data)
                return ToolResult(
                    data={
                        "path": os.fspath(path),
                        "content": text,
                        "byte_offset": start,
                        "byte_length": len(data),
                        "total_bytes": size,
                        "next_offset": end if end < size else None,
                    },
                    truncated=end < size,
                )
            explicit = "offset" in args or "limit" in args
            if size > limits.text_bytes and not explicit:
                raise ToolFailure(
                    "too_large",
                    f"the file has {size} bytes, above the text-size bound of {limits.text_bytes}; read it with offset/limit or byte_offset/byte_length",
                )
            _check_text(fh.read(_SNIFF), at_start=True)
            fh.seek(0)
            first = int(args.get("offset", 1))
            count = int(args.get("limit", DEFAULT_LINES))
            lines: list[str] = []
            used = 0
            line_no = 0
            cut = False
            total_lines = 0
            for raw in fh:  # streamed: a huge file never sits whole in memory
                line_no += 1
                if line_no < first:
                    continue
                if len(lines) >= count:
                    cut = True
                    # Keep counting lines only while cheap (bounded by the text bound).
                    if size <= limits.text_bytes:
                        continue
                    break
                if b"\x00" in raw:
                    raise ToolFailure("binary", "the file looks binary (it contains NUL bytes); read handles text only")
                if used + len(raw) > limits.read_bytes:
                    cut = True
                    if size <= limits.text_bytes:
                        continue
                    break
                used += len(raw)
                lines.append(_decode(raw, strict_tail=True))
            total_lines = line_no if (not cut or size <= limits.text_bytes) else None
            end_line = first + len(lines) - 1 if lines else first - 1
            more = cut or (total_lines is not None and end_line < total_lines)
            if first > max(line_no, 1) and size > 0:
                raise ToolFailure("offset_out_of_range", f"offset is beyond the end of the file ({line_no} lines)")
            return ToolResult(
                data={
                    "path": os.fspath(path),
                    "content": "".join(lines),
                    "start_line": first,
                    "end_line": end_line,
                    "total_lines": total_lines,
                    "next_offset": end_line + 1 if more else None,
                },
                truncated=more,
            )
