"""Truncation to sidecar files (TRUNC).

A spool keeps the head (up to the tool's limit) in memory and, from the
moment the limit is crossed, streams everything — head included — into a
sidecar file in the session's working directory. Nothing beyond the head is
ever held in memory, so a gigabyte of output costs a file, not RAM — and
the file itself is bounded (TRUNC-9): every byte written to a sidecar is
taken from the call's `SidecarAllowance`, which draws on the per-call cap
and on the `SidecarBudget` of the session tree. When the allowance runs out
the spool writes what fits (whole lines for line spools), marks itself
capped and raises `OutputCapped`, so the producer stops.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Iterator, Sequence, TypeVar

from .errors import OutputCapped
from .limits import Limits

_T = TypeVar("_T")
_SLICE = 8192  # lines per sidecar write: bounded temporary strings, whatever the number of lines


def _slices(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    for i in range(0, len(items), _SLICE):
        yield items[i : i + _SLICE]


def _new_sidecar(directory: Path, tool: str) -> tuple[Path, IO[bytes]]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{tool}-output-{os.urandom(6).hex()}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    return path, os.fdopen(fd, "wb", buffering=1 << 20)


class SidecarBudget:
    """The sidecar bytes one session may have on disk, its children's included (TRUNC-9).

    A child's budget charges every ancestor as well, so the whole tree shares
    the root's cap; a closed session gives its bytes back, because its
    sidecars are deleted with its working directory.
    """

    def __init__(self, limit: int, parent: "SidecarBudget | None" = None) -> None:
        self.limit = limit
        self.used = 0
        self._parent = parent

    def room(self) -> int:
        room = self.limit - self.used
        if self._parent is not None:
            room = min(room, self._parent.room())
        return max(room, 0)

    def charge(self, n: int) -> None:
        budget: SidecarBudget | None = self
        while budget is not None:
            budget.used += n
            budget = budget._parent

    def close(self) -> None:
        """The session's sidecars are gone: what they took is free again for its ancestors."""
        budget, n = self._parent, self.used
        while budget is not None:
            budget.used -= n
            budget = budget._parent
        self.used = 0


class SidecarAllowance:
    """What one call may still write to sidecars: its own cap and its session tree's room (TRUNC-9)."""

    def __init__(self, call_limit: int, budget: SidecarBudget | None = None) -> None:
        self._left = call_limit
        self._budget = budget
        self.capped = False
        """Set once some output was cut at the cap: the envelope says `output_capped`."""

    def room(self) -> int:
        if self._budget is None:
            return self._left
        return min(self._left, self._budget.room())

    def take(self, n: int) -> None:
        self._left -= n
        if self._budget is not None:
            self._budget.charge(n)


def _default_allowance() -> SidecarAllowance:
    return SidecarAllowance(Limits().sidecar_bytes)


class ByteSpool:
    """Bytes in, a head of at most `limit` bytes plus an optional sidecar out, the sidecar within `allowance`."""

    def __init__(self, directory: Path, tool: str, limit: int, allowance: SidecarAllowance | None = None) -> None:
        self._dir = directory
        self._tool = tool
        self._limit = limit
        self._allow = allowance or _default_allowance()
        self._head = bytearray()
        self._file: IO[bytes] | None = None
        self.path: Path | None = None
        self.total = 0
        self.capped = False

    async def write(self, chunk: bytes) -> None:
        self.write_sync(chunk)

    def write_sync(self, chunk: bytes) -> None:
        """Take `chunk`; raises OutputCapped once the sidecar has reached its cap (this chunk's fitting part written)."""
        if not chunk:
            return
        if self.capped:
            raise OutputCapped("the output reached its cap")
        self.total += len(chunk)
        if self._file is not None:
            self._spill(chunk)
            return
        room = self._limit - len(self._head)
        if len(chunk) <= room:
            self._head += chunk
            return
        self._head += chunk[:room]
        self.path, self._file = _new_sidecar(self._dir, self._tool)
        self._spill(self._head)
        self._spill(chunk[room:])

    def write_all(self, data: bytes) -> None:
        """`write_sync` for output that is already complete: a cap only cuts the sidecar (`capped` tells)."""
        try:
            self.write_sync(data)
        except OutputCapped:
            pass

    def _spill(self, data: bytes | bytearray) -> None:
        assert self._file is not None
        room = self._allow.room()
        if len(data) <= room:
            self._file.write(data)
            self._allow.take(len(data))
            return
        self._file.write(data[:room])
        self._allow.take(room)
        self.capped = self._allow.capped = True
        raise OutputCapped("the output reached its cap")

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
    """Items (one text line each) in, the first `limit` items plus an optional sidecar out.

    The sidecar holds whole lines only, within `allowance`; `total` counts the
    items kept (head and sidecar), so after a cap it counts what was kept.
    """

    def __init__(self, directory: Path, tool: str, limit: int, allowance: SidecarAllowance | None = None) -> None:
        self._dir = directory
        self._tool = tool
        self._limit = limit
        self._allow = allowance or _default_allowance()
        self.head: list[object] = []
        self._head_lines: list[str] = []
        self._file: IO[bytes] | None = None
        self.path: Path | None = None
        self.total = 0
        self.capped = False

    def add(self, item: object, line: str) -> None:
        if self._file is None and len(self.head) < self._limit:
            self.total += 1
            self.head.append(item)
            self._head_lines.append(line)
            return
        self._write_rest(1, line.encode("utf-8", "surrogateescape") + b"\n")

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
        """`count` lines beyond the head, newline-terminated in `data`; raises OutputCapped at the cap."""
        if self.capped:
            raise OutputCapped("the output reached its cap")
        if self._file is None:
            self._open_sidecar()
        written = self._spill(data)
        self.total += count if written < 0 else written
        if written >= 0:
            raise OutputCapped("the output reached its cap")

    def _open_sidecar(self) -> None:
        self.path, self._file = _new_sidecar(self._dir, self._tool)
        if self._head_lines and self._spill(("\n".join(self._head_lines) + "\n").encode("utf-8", "surrogateescape")) >= 0:
            raise OutputCapped("the output reached its cap")  # the head again, in one piece, if it fits

    def _spill(self, data: bytes) -> int:
        """Write `data` if it fits the allowance (-1), else its whole lines that fit: their number, the spool now capped."""
        assert self._file is not None
        room = self._allow.room()
        if len(data) <= room:
            self._file.write(data)
            self._allow.take(len(data))
            return -1
        cut = data.rfind(b"\n", 0, room) + 1
        self._file.write(data[:cut])
        self._allow.take(cut)
        self.capped = self._allow.capped = True
        return data.count(b"\n", 0, cut)

    @property
    def truncated(self) -> bool:
        return self.path is not None

    def head_text(self) -> str:
        return "\n".join(self._head_lines)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
