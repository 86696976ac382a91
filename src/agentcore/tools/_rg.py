"""Running the bundled ripgrep and streaming its output line by line.

rg is our own binary with argv built here (never model-supplied flags such
as --pre), and it never follows symlinks (no -L), so it runs directly; its
whole process group is killed on cancellation.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import AsyncIterator, Sequence

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from ..errors import ToolFailure


async def rg_lines(argv: Sequence[str], cwd: str, *, delimiter: bytes = b"\n") -> AsyncIterator[bytes]:
    """Yields stdout records (without the delimiter); raises ToolFailure on rg errors (exit 2)."""
    proc = await anyio.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
    )
    finished = False
    try:
        assert proc.stdout is not None
        reader = BufferedByteReceiveStream(proc.stdout)
        while True:
            try:
                line = await reader.receive_until(delimiter, 1 << 24)
            except (anyio.IncompleteRead, anyio.EndOfStream):
                break
            except anyio.DelimiterNotFound:
                raise ToolFailure("line_too_long", "a result line exceeded 16 MiB") from None
            yield line
        code = await proc.wait()
        finished = True
        if code == 2:
            err = b""
            if proc.stderr is not None:
                try:
                    err = await proc.stderr.receive(4096)
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    pass
            if b"regex" in err.lower():
                raise ToolFailure("invalid_pattern", "the regular expression is not valid Rust regex syntax")
            raise ToolFailure("search_failed", "ripgrep reported an error while searching")
    finally:
        if not finished:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            with anyio.CancelScope(shield=True):
                await proc.wait()
        await proc.aclose()


def path_key(path: str) -> bytes:
    """Results are sorted by the byte order of the UTF-8 path (FILE-16); rg's own
    sort compares component by component, which puts `a/b` before `a-c`."""
    return path.encode("utf-8", "surrogateescape")


async def list_files(rg: str, root: str, *, prefilter: str | None = None) -> list[str]:
    """Paths, relative to the directory `root`, of the regular files beneath it.

    Hidden files included, no ignore files, `.git` skipped, symlinks neither
    followed nor listed. NUL-separated, so any file name is read back intact.
    Unsorted: callers sort with `path_key`.
    """
    argv = [rg, "--files", "--null", "--hidden", "--no-ignore", "--no-messages", "--no-config"]
    if prefilter is not None:
        argv += ["--glob", prefilter]
    # Later globs take precedence in rg: the exclusion must come last, or a
    # prefilter such as `*` would bring `.git` back.
    argv += ["--glob", "!.git", "--", "."]
    out: list[str] = []
    async for raw in rg_lines(argv, root, delimiter=b"\0"):
        rel = raw.decode("utf-8", "surrogateescape")
        rel = rel[2:] if rel.startswith("./") else rel
        if ".git" not in rel.split("/"):
            out.append(rel)
    return out
