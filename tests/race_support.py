"""Concurrent actors for the race tests (no tests here).

Each actor is a separate process that changes the tree in a tight loop while
the test calls a tool again and again, as a background MCP server or a
parallel subagent's `bash` could: nothing synchronises it with the tool, so a
race the tool leaves open is won within a bounded number of calls.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

# renameat2(RENAME_EXCHANGE): the two names trade places atomically, so the path always exists
# (as one or the other) and a tool never fails merely on a missing name.
_EXCHANGER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
sys.stdout.write("ready\n"); sys.stdout.flush()
while True:
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        raise SystemExit(f"renameat2: {os.strerror(ctypes.get_errno())}")
"""

# Watches a directory for the temporary files `write` makes for `name` and puts a symlink to
# `victim` in the place of each one it sees.
_TEMP_SWAPPER = r"""
import os, sys
directory, name, victim = sys.argv[1:4]
prefix = "." + name + ".agentcore-"
spare = os.path.join(directory, ".racer-link")
sys.stdout.write("ready\n"); sys.stdout.flush()
while True:
    for entry in os.listdir(directory):
        if entry.startswith(prefix) and entry.endswith(".tmp"):
            try:
                os.symlink(victim, spare)
            except FileExistsError:
                pass
            try:
                os.rename(spare, os.path.join(directory, entry))
            except OSError:
                pass
"""


@contextmanager
def _actor(script: str, *args: str) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        yield
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def exchanging(a: Path, b: Path) -> AbstractContextManager[None]:
    """While active, another process swaps the names `a` and `b` as fast as it can."""
    return _actor(_EXCHANGER, os.fspath(a), os.fspath(b))


def swapping_temps(directory: Path, name: str, victim: Path) -> AbstractContextManager[None]:
    """While active, another process replaces each temporary file of `write` for `name` by a symlink to `victim`."""
    return _actor(_TEMP_SWAPPER, os.fspath(directory), name, os.fspath(victim))
