"""The runner's progress display on a real terminal (a pty) and on a plain pipe."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

AGENTCORE = Path(sys.executable).parent / "agentcore"
ARGS = ["conformance", "run", "--impl", "broken:always-allow", "--case", "perm.*", "--seed", "7", "--format", "badge"]


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every holder of the terminal's other end has closed it
            return out
        if not chunk:
            return out
        out += chunk


def test_progress_updates_one_line_on_a_terminal_and_keeps_failures() -> None:
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([os.fspath(AGENTCORE), *ARGS], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    try:
        err = _read_all(master).decode("utf-8", "replace")
    finally:
        os.close(master)
    proc.communicate(timeout=120)
    assert proc.returncode == 1  # always-allow fails cases: the run is not clean
    assert "\r\x1b[2K" in err  # the line is rewritten in place
    failing = re.findall(r"\[\s*\d+/(\d+)\] FAIL\s+(\S+) \(\d+ ms\)\r?\n    \S", err)
    assert failing, err[-2000:]  # a failure stays on screen, with its message below
    assert re.search(r"\[\d+ not passing\]", err)
    total = failing[0][0]
    last = err.rfind(f"[{total}/{total}]")
    assert last != -1 and "\r\x1b[2K" in err[last:]  # the progress line is cleared after the last case


def test_progress_is_one_plain_line_per_case_on_a_pipe() -> None:
    done = subprocess.run([os.fspath(AGENTCORE), *ARGS], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in done.stderr.splitlines() if re.match(r"\[\s*\d+/\d+\]", ln)]
    total = int(re.match(r"\[\s*\d+/(\d+)\]", lines[0]).group(1))  # type: ignore[union-attr]
    assert len(lines) == total and "\x1b" not in done.stderr
    assert any(" FAIL " in ln and " — " in ln for ln in lines)  # the reason follows a failure on its line
