"""Truncation to sidecar files (TRUNC).

A spool keeps the head (up to the tool's limit) in memory and, from the
moment the limit is crossed, streams everything — head included — into a
sidecar file in the session's working directory. Nothing beyond the head is
ever held in memory, so a gigabyte of output costs a file, not RAM.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import IO, Iterator, Sequence, TypeVar

_T = TypeVar("_T")
_SLICE = 8192  # lines per sidecar write: bounded temporary strings, whatever the number of lines


def _slices(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    for i in range(0, len(items), _SLICE):
        yield items[i : i + _SLICE]


def _new_sidecar(directory: Path, tool: str) -> tuple[Path, IO[bytes]]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{tool}-output-{secrets.token_hex(6)}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    return path, os.fdopen(fd, "wb", buffering=1 << 20)


class ByteSpool:
    """Bytes in, a head of at most `limit` bytes plus an optional sidecar out."""

    def __init__(self, directory: Path, tool: str, limit: int) -> None:
        self._dir = directory
        self._tool = tool
        self._limit = limit
        self._head = bytearray()
        self._file: IO[bytes] | None = None
        self.path: Path | None = None
        self.total = 0

    async def write(self, chunk: bytes) -> None:
        self.write_sync(chunk)

    def write_sync(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.total += len(chunk)
        if self._file is not None:
            self._file.write(chunk)
            return
        room = self._limit - len(self._head)
        if len(chunk) <= room:
            self._head += chunk
            return
        self._head += chunk[:room]
        self.path, self._file = _new_sidecar(self._dir, self._tool)
        self._file.write(self._head)
        self._file.write(chunk[room:])

    @property
    def truncated(self) -> bool:
        return self.path is not None

    def head_bytes(self) -> bytes:
        return bytes(self._head)

    def head_text(self) -> str:
        # Cutting at a byte limit can split a UTF-8 sequence: drop the partial tail.
        return self._head.decode("utf-8", errors="ignore") if self.truncated else self._head.decode("utf-8", errors="replace")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class LineSpool:
    """Items (one text line each) in, the first `limit` items plus an optional sidecar out."""

    def __init__(self, directory: Path, tool: str, limit: int) -> None:
        self._dir = directory
        self._tool = tool
        self._limit = limit
        self.head: list[object] = []
        self._head_lines: list[str] = []
        self._file: IO[bytes] | None = None
        self.path: Path | None = None
        self.total = 0

    def add(self, item: object, line: str) -> None:
        self.total += 1
        if self._file is None and len(self.head) < self._limit:
            self.head.append(item)
            self._head_lines.append(line)
            return
        if self._file is None:
            self._open_sidecar()
        assert self._file is not None
        self._file.write(line.encode("utf-8", "surrogateescape") + b"\n")

    def extend(self, lines: list[str], prefix: str = "") -> None:
        """`add(prefix + line, prefix + line)` for each of `lines`, the sidecar part written in a
        few large pieces (the search tools hand over thousands of paths at once)."""
        room = self._limit - len(self.head) if self._file is None else 0
        if room > 0:
            head = [prefix + ln for ln in lines[:room]]
            self.head.extend(head)
            self._head_lines.extend(head)
            self.total += len(head)
            lines = lines[room:]
        if lines:
            sep = "\n" + prefix
            for part in _slices(lines):
                self._write_rest(len(part), (prefix + sep.join(part) + "\n").encode("utf-8", "surrogateescape"))

    def extend_raw(self, names: list[bytes], prefix: str = "") -> None:
        """`extend` for file names still in bytes (no NUL in any), surrogateescape-decoded only for the in-memory head."""
        room = self._limit - len(self.head) if self._file is None else 0
        if room > 0:
            # One decode of the joined head (a NUL is in no name and ends any byte sequence).
            head = names[:room]
            if head:
                self.extend(b"\0".join(head).decode("utf-8", "surrogateescape").split("\0"), prefix)
            names = names[room:]
        if names:
            pre = prefix.encode("utf-8", "surrogateescape")
            sep = b"\n" + pre
            for part in _slices(names):
                self._write_rest(len(part), pre + sep.join(part) + b"\n")

    @property
    def head_full(self) -> bool:
        """Whether every further line goes to the sidecar only."""
        return self._file is not None or len(self.head) >= self._limit

    def add_lines_raw(self, count: int, data: bytes) -> None:
        """`count` sidecar lines, already encoded and newline-terminated in `data`; only once `head_full`."""
        if not self.head_full:
            raise ValueError("the head is not full yet: lines must go through add()")
        self._write_rest(count, data)

    def _write_rest(self, count: int, data: bytes) -> None:
        if self._file is None:
            self._open_sidecar()
        assert self._file is not None
        self.total += count
        self._file.write(data)

    def _open_sidecar(self) -> None:
        self.path, self._file = _new_sidecar(self._dir, self._tool)
        if self._head_lines:  # the head again, in one piece
            self._file.write(("\n".join(self._head_lines) + "\n").encode("utf-8", "surrogateescape"))

    @property
    def truncated(self) -> bool:
        return self.path is not None

    def head_text(self) -> str:
        return "\n".join(self._head_lines)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
