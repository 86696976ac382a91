"""What a batch shows while it runs, on stderr.

- On a terminal: one live line, rewritten in place (`\\r` + erase line):
  finished out of total, failed, running, and the ETA (from the rate so far);
  a task that does not end with `end_turn` gets a line of its own above it,
  which stays on screen.
- On a pipe or a file: one plain line per finished task, no escape sequences.

Malformed lines of the tasks file are listed first in both cases.
"""

from __future__ import annotations

import os
import time
from typing import Any, TextIO

from ..textdata import printable
from .results import is_success


def make_display(out: TextIO, total_label: str = "batch") -> "Display":
    try:
        live = out.isatty()
    except (AttributeError, ValueError):
        live = False
    return LiveDisplay(out, total_label) if live else PlainDisplay(out, total_label)


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _refusals(refusals: dict[str, int]) -> str:
    return ", ".join(f"{layer} {n}" for layer, n in sorted(refusals.items())) or "none"


def describe(result: dict[str, Any]) -> str:
    """One line about a finished task (no newline); error texts come from providers and are made printable."""
    head = f"{result['id']}  {result['status']}"
    if not is_success(result):
        head += f" (exit {result['exit_code']})"
    tail = f"  {result.get('duration_s', 0):.1f} s  {result.get('tool_calls', 0)} tool calls  refusals: {_refusals(result.get('refusals') or {})}"
    error = result.get("error")
    problems = result.get("problems") or []
    why = f"  — {error}" if error else (f"  — {problems[0]}" if problems else "")
    return head + tail + printable(why)


class Display:
    """Counts; subclasses decide how to show them."""

    live = False

    def __init__(self, out: TextIO, label: str) -> None:
        self.out = out
        self.label = label
        self.total = 0
        self.finished = 0
        self.failed = 0
        self.running: set[str] = set()
        self.t0 = time.monotonic()

    def begin(self, *, total: int, skipped: int, line_errors: list[str]) -> None:
        self.total = total
        self.t0 = time.monotonic()
        for error in line_errors:
            self._print(f"malformed task line: {printable(error)}")
        if skipped:
            self._print(f"{self.label}: {skipped} task(s) already finished (--resume), {total} to run")

    def started(self, task_id: str) -> None:
        self.running.add(task_id)
        self.tick()

    def finished_task(self, result: dict[str, Any]) -> None:
        self.running.discard(result["id"])
        self.finished += 1
        if not is_success(result):
            self.failed += 1
        self._finished(result)

    def end(self, line: str) -> None:
        self._print(line)

    def eta(self) -> str:
        if not self.finished:
            return "--"
        elapsed = time.monotonic() - self.t0
        return _duration(elapsed / self.finished * (self.total - self.finished))

    def tick(self) -> None:
        pass

    def _finished(self, result: dict[str, Any]) -> None:
        raise NotImplementedError

    def _print(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()


class PlainDisplay(Display):
    def _finished(self, result: dict[str, Any]) -> None:
        width = len(str(self.total))
        mark = "ok  " if is_success(result) else "FAIL"
        self._print(f"[{self.finished:>{width}}/{self.total}] {mark} {describe(result)}")


class LiveDisplay(Display):
    live = True
    _ERASE = "\r\x1b[2K"

    def _status(self) -> str:
        line = (f"{self.label}: {self.finished}/{self.total} finished, {self.failed} failed, "
                f"{len(self.running)} running, ETA {self.eta()}")
        return line[: self._width() - 1]

    def _width(self) -> int:
        try:
            return os.get_terminal_size(self.out.fileno()).columns or 100  # an unsized terminal says 0
        except (OSError, ValueError, AttributeError):
            return 100

    def tick(self) -> None:
        self.out.write(self._ERASE + self._status())
        self.out.flush()

    def _finished(self, result: dict[str, Any]) -> None:
        if not is_success(result):  # a failure stays on screen above the live line
            self.out.write(f"{self._ERASE}FAIL {describe(result)}\n")
        self.tick()

    def _print(self, line: str) -> None:
        self.out.write(f"{self._ERASE}{line}\n")
        self.out.flush()

    def end(self, line: str) -> None:
        self.out.write(self._ERASE)
        self._print(line)
