"""Running the bundled ripgrep and reading its output in large blocks.

rg is our own binary with argv built here (never model-supplied flags such
as --pre), and it never follows symlinks (no -L), so it runs directly; its
whole process group is killed on cancellation or when the caller stops early.

Output is read from a pipe of our own with non-blocking reads of up to
1 MiB and split into records here, one C-level `split` per block, instead of
one await per record: a listing of 20,000 files is a handful of reads.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence

import anyio
from anyio.lowlevel import checkpoint

from ..environments.procgroup import Child, output_pipe
from ..errors import ToolFailure

BLOCK = 1 << 20
MAX_RECORD = 1 << 24  # a single result line longer than this is refused, not buffered
_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
_STDERR_KEEP = 4096


async def rg_blocks(argv: Sequence[str], cwd: str, on_block: Callable[[bytes], None]) -> None:
    """Run rg; call `on_block` with each raw block of its stdout as read (up to 1 MiB).

    Returns once rg has exited and all output was delivered; raises ToolFailure
    on rg errors (exit 2). If `on_block` raises, or the caller is cancelled,
    rg's group is killed and reaped first.
    """
    # stderr goes to an unnamed file, not a pipe: however much rg writes there,
    # it can never block on it while we wait for its stdout.
    err_file = tempfile.TemporaryFile()
    out_r, out_w = output_pipe()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_file.fileno(),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            env=_ENV,
        )
    except BaseException:
        os.close(out_r)
        err_file.close()
        raise
    finally:
        os.close(out_w)
    child = Child(proc)
    finished = False
    try:
        unchecked = 0  # bytes read since our last checkpoint
        while True:
            try:
                block = os.read(out_r, BLOCK)
            except BlockingIOError:
                await anyio.wait_readable(out_r)  # a checkpoint too
                unchecked = 0
                continue
            if not block:
                break
            on_block(block)
            unchecked += len(block) + 16384  # small reads count too: at most 64 in a row
            if unchecked >= BLOCK:
                # Reads that never block are no checkpoint: a fast producer
                # must not starve cancellation (or other tasks).
                await checkpoint()
                unchecked = 0
        code = await child.wait()
        finished = True
        if code == 2:
            err = os.pread(err_file.fileno(), _STDERR_KEEP, 0)
            if b"regex" in err.lower():
                raise ToolFailure("invalid_pattern", "the regular expression is not valid Rust regex syntax")
            raise ToolFailure("search_failed", "ripgrep reported an error while searching")
    finally:
        if not finished:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            with anyio.CancelScope(shield=True):
                await child.wait()
        child.close()
        os.close(out_r)
        err_file.close()


class _Splitter:
    """Blocks in, complete records out: one C-level split per block, the unfinished tail carried over."""

    def __init__(self, delimiter: bytes, on_records: Callable[[list[bytes]], None]) -> None:
        self._delimiter = delimiter
        self._on_records = on_records
        self._pending = b""

    def feed(self, block: bytes) -> None:
        if self._pending:
            block = self._pending + block
        records = block.split(self._delimiter)
        self._pending = records.pop()  # b"" when the block ended on a delimiter
        if len(self._pending) > MAX_RECORD:
            raise ToolFailure("line_too_long", "a result line exceeded 16 MiB")
        if records:
            self._on_records(records)

    def finish(self) -> None:
        if self._pending:
            self._on_records([self._pending])  # rg ends its output with a delimiter; be lenient anyway
            self._pending = b""


async def rg_run(
    argv: Sequence[str],
    cwd: str,
    on_records: Callable[[list[bytes]], None],
    *,
    delimiter: bytes = b"\n",
) -> None:
    """`rg_blocks`, delivering each block's complete records (delimiter removed) instead;
    raises ToolFailure on a record over 16 MiB."""
    splitter = _Splitter(delimiter, on_records)
    await rg_blocks(argv, cwd, splitter.feed)
    splitter.finish()


def path_key(path: str) -> bytes:
    """Results are sorted by the byte order of the UTF-8 path (FILE-16); rg's own
    sort compares component by component, which puts `a/b` before `a-c`."""
    return path.encode("utf-8", "surrogateescape")


def files_argv(rg: str, *, prefilter: str | None = None) -> list[str]:
    argv = [rg, "--files", "--null", "--hidden", "--no-ignore", "--no-messages", "--no-config"]
    if prefilter is not None:
        argv += ["--glob", prefilter]
    # Later globs take precedence in rg: the exclusion must come last, or a
    # prefilter such as `*` would bring `.git` back.
    return argv + ["--glob", "!.git", "--", "."]


_GIT_COMPONENT = re.compile(rb"(?:^|[/\0])\.git(?:[/\0]|$)")


async def list_files_raw(rg: str, root: str, *, prefilter: str | None = None) -> list[bytes]:
    """Paths (bytes, as the file system has them), relative to the directory `root`, of the regular files beneath it.

    Hidden files included, no ignore files, `.git` skipped, symlinks neither
    followed nor listed. NUL-separated, so any file name is read back intact.
    Unsorted: sorting these bytes is the FILE-16 order (one common prefix).
    Whole-listing operations only (join, replace, split): no Python work per name.
    """
    buf = bytearray()
    await rg_blocks(files_argv(rg, prefilter=prefilter), root, buf.extend)
    if not buf:
        return []
    # rg prints `./name` for the search path `.`; a NUL is always followed by the next `./`.
    data = bytes(buf).replace(b"\0./", b"\0")
    if data.startswith(b"./"):
        data = data[2:]
    out = data.split(b"\0")
    if out and not out[-1]:
        out.pop()
    if _GIT_COMPONENT.search(data):  # never in practice: rg's own `!.git` skipped them
        out = [r for r in out if b".git" not in r.split(b"/")]
    return out


def decode_all(raws: list[bytes]) -> list[str]:
    """Each name decoded with surrogateescape (exactly reversible), in one pass over the joined bytes.

    A NUL never occurs in a name and is ASCII, so no byte sequence spans two
    names and the result equals decoding each name on its own.
    """
    if not raws:
        return []
    return b"\0".join(raws).decode("utf-8", "surrogateescape").split("\0")


async def list_files(rg: str, root: str, *, prefilter: str | None = None) -> list[str]:
    """`list_files_raw`, decoded (surrogateescape: every name survives the round trip)."""
    return decode_all(await list_files_raw(rg, root, prefilter=prefilter))
