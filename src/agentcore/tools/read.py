"""`read`: a window of a text file (FILE, TRUNC).

Reads return at most the read limit; a longer file comes back as a window
with `next_offset`, never as a sidecar (the file itself is the full output).
A file above the shared text-size bound needs an explicit window.
"""

from __future__ import annotations

import io
import os
import stat as _stat
from collections.abc import Iterator
from typing import Any

from ..access import Access, FsAccess
from ..errors import Refusal, ToolFailure
from . import _schemas
from .base import CallContext, Location, Tool, ToolResult

DEFAULT_LINES = 2000
_SNIFF = 8192


def _check_text(sample: bytes, *, at_start: bool) -> None:
    if b"\x00" in sample:
        raise ToolFailure("binary", "the file looks binary (it contains NUL bytes); read handles text only")


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure("binary", "the file is not valid UTF-8 text") from None


def _decode_window(data: bytes, *, at_start: bool, at_eof: bool) -> tuple[str, int, int]:
    """(text, bytes skipped at the start, bytes decoded) of a byte window.

    A window may cut a character at either end: up to three continuation
    bytes at the start and an incomplete sequence at the end are left out
    (and not counted), so paging with `next_offset` never splits a character.
    Anything else that is not UTF-8 is refused as binary.
    """
    lead = 0
    if not at_start:
        while lead < min(3, len(data)) and 0x80 <= data[lead] <= 0xBF:
            lead += 1
    body = data[lead:]
    try:
        return body.decode("utf-8"), lead, len(body)
    except UnicodeDecodeError as exc:
        if not at_eof and exc.reason == "unexpected end of data" and exc.start >= len(body) - 3:
            return body[: exc.start].decode("utf-8"), lead, exc.start
        raise ToolFailure("binary", "the file is not valid UTF-8 text") from None


def _lines(fh: Any, keep: int) -> Iterator[tuple[bytes, int]]:
    """Each line of `fh` (newline included) as (its first `keep` bytes at most, its full length).

    Memory stays within `keep` bytes however long a line is (a 1 GiB file
    without newlines included); `readline(keep)` keeps the common case of
    short lines in C.
    """
    while True:
        raw = fh.readline(keep)
        if not raw:
            return
        length = len(raw)
        if length == keep and not raw.endswith(b"\n"):
            while True:  # the rest of a long line: counted, not kept
                more = fh.readline(keep)
                length += len(more)
                if len(more) < keep or more.endswith(b"\n"):
                    break
        yield raw, length


def _count_lines(fh: Any) -> int:
    """Lines from the current position to the end (a last line without a newline counts)."""
    n = 0
    last = b"\n"
    while block := fh.read(1 << 20):
        n += block.count(b"\n")
        last = block[-1:]
    return n + (last != b"\n")


class ReadTool(Tool):
    id = "read"
    description = (
        "Read a UTF-8 text file. Returns up to 2000 lines from `offset` (1-based), or a byte window with "
        "`byte_offset`/`byte_length`. Long files return `next_offset` to continue."
    )
    parameters = _schemas.READ
    kind = "read"
    own_truncation = True  # a window and next_offset, never a sidecar (TRUNC-7)
    concurrency_safe = True
    uses = ("fs.read",)

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        line_window = "offset" in args or "limit" in args
        byte_window = "byte_offset" in args or "byte_length" in args
        if line_window and byte_window:
            raise ToolFailure("invalid_arguments", "a line window (offset/limit) and a byte window (byte_offset/byte_length) cannot be combined")
        return [FsAccess("path", args["path"], "read")]

    def title(self, args: dict[str, Any]) -> str:
        return f"Read {args.get('path', '')}"

    def locations(self, args: dict[str, Any], ctx: CallContext) -> list[Location]:
        # A line window starts at a known line; a byte window does not.
        line = args.get("offset", 1) if "byte_offset" not in args and "byte_length" not in args else None
        return [Location(loc.path, line) for loc in super().locations(args, ctx)]

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        path = runtime.resolved["path"]
        fd = runtime.fs.open_read(path)
        # Checked on the raw fd: os.fdopen itself raises on a directory.
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            os.close(fd)
            if _stat.S_ISDIR(st.st_mode):
                raise ToolFailure("is_directory", "the path is a directory; use glob to list it")
            raise ToolFailure("not_regular", "the path is not a regular file")
        with os.fdopen(fd, "rb") as fh:
            # FILE-1: the first 8 KiB of the file decide "binary", whatever the window.
            _check_text(os.pread(fh.fileno(), _SNIFF, 0), at_start=True)
            text = await _client_text(runtime, path)
            if text is None:
                return _window(fh, st.st_size, args, runtime.limits, path)
        # The front end's text of this file (an unsaved buffer), asked for only now: after the whole
        # pipeline allowed reading this very path, and the file itself passed every check above.
        data = text.encode("utf-8", "surrogatepass")
        _check_text(data[:_SNIFF], at_start=True)
        return _window(io.BytesIO(data), len(data), args, runtime.limits, path)


async def _client_text(runtime: Any, path: Any) -> str | None:
    source = getattr(runtime.session, "client_files", None)
    if source is None:
        return None
    try:
        text = await source.read_text(os.fspath(path))
    except Exception:  # the front end could not give it: the file on disk is the answer
        return None
    return text if isinstance(text, str) else None


def _window(fh: Any, size: int, args: dict[str, Any], limits: Any, path: Any) -> ToolResult:
    """The result for the window `args` ask for, from a binary file object `fh` of `size` bytes."""
    if "byte_offset" in args or "byte_length" in args:
        return _byte_window(fh, size, args, limits, path)
    explicit = "offset" in args or "limit" in args
    if size > limits.text_bytes and not explicit:
        raise Refusal(
            "limit",
            "too_large",
            f"the file has {size} bytes, above the text-size bound of {limits.text_bytes}; read it with offset/limit or byte_offset/byte_length",
        )
    return _line_window(fh, size, args, limits, path)


def _byte_window(fh: Any, size: int, args: dict[str, Any], limits: Any, path: Any) -> ToolResult:
    start = int(args.get("byte_offset", 0))
    asked = int(args.get("byte_length", limits.read_bytes))
    length = min(asked, limits.read_bytes)
    fh.seek(start)
    data = fh.read(length)
    # Narrow the window to character boundaries: skip UTF-8 continuation bytes at the start.
    skip = 0
    while skip < min(3, len(data)) and start > 0 and (data[skip] & 0xC0) == 0x80:
        skip += 1
    data = data[skip:]
    start += skip
    text, lead, used = _decode_window(data, at_start=start == 0, at_eof=start + len(data) >= size)
    if data and lead + used == 0:
        raise Refusal("schema", "invalid_arguments", "byte_length is too small to hold one character at this offset")
    start += lead
    end = start + used
    return ToolResult(
        data={
            "path": os.fspath(path),
            "content": text,
            "byte_offset": start,
            "byte_length": used,
            "total_bytes": size,
            "next_offset": end if end < size else None,
        },
        # Cut by the read limit only when more was asked for than it allows (TRUNC-7).
        truncated=asked > limits.read_bytes and end < size,
    )


def _line_window(fh: Any, size: int, args: dict[str, Any], limits: Any, path: Any) -> ToolResult:
    fh.seek(0)
    first = int(args.get("offset", 1))
    count = int(args.get("limit", DEFAULT_LINES))
    lines: list[str] = []
    used = 0
    line_no = 0
    cut = False
    cut_by_bytes = False
    # Streamed, and a line is kept only up to the read limit: neither a huge
    # file nor a huge line ever sits whole in memory. No line is longer than the file: a manifest's
    # `read_bytes` past what readline takes (10**30) raised OverflowError on every read.
    for raw, length in _lines(fh, min(limits.read_bytes, max(size, 0)) + 1):
        line_no += 1
        if line_no < first:
            continue
        # Once the window is full (by count or by bytes) nothing more is
        # appended: a later, shorter line must not slip in after a gap.
        if len(lines) >= count:
            cut = True
            break
        if used + length > limits.read_bytes:
            cut = cut_by_bytes = True
            if not lines:
                # One line longer than the limit: return its head and move on past it.
                text, _, used = _decode_window(raw[: limits.read_bytes], at_start=True, at_eof=False)
                lines.append(text)
            break
        used += length  # the whole line fits the limit, so `raw` is all of it
        lines.append(_decode(raw))
    if cut and size <= limits.text_bytes:
        # The lines after the window are only counted (the line that ended it already was).
        line_no += _count_lines(fh)
    total_lines = line_no if (not cut or size <= limits.text_bytes) else None
    end_line = first + len(lines) - 1 if lines else first - 1
    more = cut or (total_lines is not None and end_line < total_lines)
    return ToolResult(
        data={
            "path": os.fspath(path),
            "content": "".join(lines),
            "start_line": first,
            "end_line": end_line,
            "total_lines": total_lines,
            "next_offset": end_line + 1 if more else None,
        },
        truncated=cut_by_bytes,
    )
