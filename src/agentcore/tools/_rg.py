"""Running the bundled ripgrep and reading its output in large blocks.

rg is our own binary with argv built here (never model-supplied flags such
as --pre), and it never follows symlinks (no -L), so it runs directly; its
whole process group is killed on cancellation. It still opens what lies
beneath its root by name, so a link another process swaps in while it walks
is followed: what it reports is proven afterwards (`_settled.TreeProof`).

Output is read in blocks of up to 1 MiB and split here (one C-level `split`
per block, never one await per record), by one of two routes:

- `rg_output` (searches): stdout goes into an unnamed temporary file, read
  back once rg has exited. rg writes each searched file's results as it
  finishes it, and a reader woken for each of thousands of small writes takes
  CPU from rg itself (measured: ~10% of a search on two cores); the caller
  needs all of it before emitting anything in order anyway, and a file holds
  any amount without holding it in memory;
- `rg_blocks` (listings): a pipe read while rg walks, so the names are
  split and sorted block by block in the meantime, off the critical path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import anyio
from anyio.lowlevel import checkpoint

from ..environments.procgroup import Child, output_pipe, read_fd
from ..errors import ToolFailure
from ..paths import PathRefused, open_nofollow

BLOCK = 1 << 20
MAX_RECORD = 1 << 24  # a single result line longer than this is refused, not buffered
_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
_STDERR_KEEP = 4096


Cwd = str | int  # a canonical directory, or a descriptor of one from `open_root`


def _spawn(argv: Sequence[str], cwd: Cwd, stdout: int, stderr: int, stdin: int = subprocess.DEVNULL) -> Child:
    """Start rg in the directory `cwd` names now, reached without following a symlink (or in the one it holds).

    `cwd` is a canonical path proven in scope, but rg runs on the host, outside
    any sandbox: a chdir by name would follow a component that another process
    swapped for a symlink since the check, and search wherever it points.
    """
    dir_fd = cwd if isinstance(cwd, int) else open_root(cwd)
    try:
        return Child(
            subprocess.Popen(
                list(argv),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cwd=_fd_path(dir_fd),
                start_new_session=True,
                close_fds=True,
                env=_ENV,
            )
        )
    finally:
        if not isinstance(cwd, int):
            os.close(dir_fd)  # Popen returns once rg is exec'd: its chdir is done


def open_root(cwd: str) -> int:
    """The directory `cwd` names now, opened without following a symlink on the way."""
    try:
        return open_nofollow(Path(cwd), os.O_RDONLY | os.O_DIRECTORY)
    except PathRefused as exc:
        raise ToolFailure(exc.code, exc.message) from None
    except FileNotFoundError:
        raise ToolFailure("not_found", "the search root no longer exists") from None
    except NotADirectoryError:
        raise ToolFailure("not_a_directory", "the search root is no longer a directory") from None


def _fd_path(fd: int) -> str:
    """A name for exactly the directory `fd` holds: its /proc magic link, which the kernel follows to
    that directory itself whatever was renamed or swapped since (the parent's table: open until rg runs)."""
    path = f"/proc/{os.getpid()}/fd/{fd}"
    if not os.path.isdir(path):  # no /proc: nothing safe to name it by
        raise ToolFailure("unavailable", "/proc is not mounted: rg cannot be started in a proven directory")
    return path


async def _reap(child: Child, *, kill: bool) -> None:
    """Wait for rg's exit (killing its group first when `kill`), even under cancellation."""
    if kill:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    with anyio.CancelScope(shield=True):
        await child.wait()
    child.close()


def _check(code: int, err: IO[bytes]) -> None:
    if code in (0, 1):  # matches, no match
        return
    message = os.pread(err.fileno(), _STDERR_KEEP, 0)
    if code == 2 and b"regex" in message.lower():
        raise ToolFailure("invalid_pattern", "the regular expression is not valid Rust regex syntax")
    # rg's own errors, and a signal or a wrapper failure: never a silently partial result.
    raise ToolFailure("search_failed", "ripgrep reported an error while searching")


# The kernel bounds rg's output file (RLIMIT_FSIZE, in 512-byte blocks); with SIGXFSZ
# ignored, the write past it fails (EFBIG) and rg stops instead of dumping core.
_FSIZE_WRAPPER = 'trap "" XFSZ; ulimit -c 0; ulimit -f "$1" || exit 125; shift; exec "$@"'


def _bounded(argv: Sequence[str], limit: int) -> tuple[list[str], int]:
    blocks = max(limit, 0) // 512
    return ["/bin/sh", "-c", _FSIZE_WRAPPER, "rg", str(blocks), *argv], blocks * 512


async def rg_output(argv: Sequence[str], cwd: Cwd, *, limit: int | None = None, stdin: int = subprocess.DEVNULL) -> tuple[IO[bytes], bool]:
    """Run rg to completion; (its stdout, in an unnamed temporary file the caller closes, whether it was capped).

    With `limit` the file never grows past it (a multiple of 512 bytes at or
    below it): rg stops there, the last incomplete record is cut off, and the
    result says capped (TRUNC-9). Raises ToolFailure on rg errors. On
    cancellation rg's group is killed and reaped first, and the file closed.
    """
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()  # stderr in a file too: rg can never block on it
    cap: int | None = None
    if limit is not None:
        argv, cap = _bounded(argv, limit)
    try:
        child = _spawn(argv, cwd, out.fileno(), err.fileno(), stdin)
        try:
            code = await child.wait()
        finally:
            await _reap(child, kill=child.returncode is None)
        capped = cap is not None and code not in (0, 1) and os.fstat(out.fileno()).st_size >= cap
        if capped:
            _cut_partial_record(out)
        elif code not in (0, 1):
            _check(code, err)
    except BaseException:
        out.close()
        raise
    finally:
        err.close()
    return out, capped


def _cut_partial_record(f: IO[bytes]) -> None:
    """Drop the bytes after the last newline: the record rg was writing when the cap stopped it."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    tail = os.pread(fd, min(size, MAX_RECORD + 1), max(size - MAX_RECORD - 1, 0))
    keep = size - len(tail) + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
    os.ftruncate(fd, keep)


async def rg_blocks(argv: Sequence[str], cwd: Cwd, on_block: Callable[[bytes], None]) -> None:
    """Run rg with its stdout on a pipe; call `on_block` with each block as read (up to 1 MiB).

    For output worth working on while rg still runs (a listing: split and
    sorted block by block). Returns once rg has exited and all output was
    delivered; raises ToolFailure on rg errors (exit 2). If `on_block` raises,
    or the caller is cancelled, rg's group is killed and reaped first.
    """
    err = tempfile.TemporaryFile()  # stderr in a file: rg can never block on it
    out_r, out_w = output_pipe()
    try:
        try:
            child = _spawn(argv, cwd, out_w, err.fileno())
        finally:
            os.close(out_w)  # only rg holds the write end: EOF when it is done
        try:

            async def deliver(block: bytes) -> None:
                on_block(block)

            await read_fd(out_r, deliver, BLOCK)
            code = await child.wait()
        finally:
            await _reap(child, kill=child.returncode is None)
        _check(code, err)
    finally:
        os.close(out_r)
        err.close()


async def read_records(f: IO[bytes], on_records: Callable[[int, list[bytes]], None], *, delimiter: bytes = b"\n") -> None:
    """Call `on_records(offset, records)` for each block of complete records in `f` (delimiter removed).

    `offset` is where the first of them starts in the file. Yields to the event
    loop between blocks, so a huge output neither starves other tasks nor
    escapes cancellation. Raises ToolFailure on a record over 16 MiB.
    """
    fd = f.fileno()
    pos = 0  # file offset of `pending`
    pending = b""
    while True:
        block = os.pread(fd, BLOCK, pos + len(pending))
        if not block:
            break
        if pending:
            block = pending + block
        records = block.split(delimiter)
        pending = records.pop()  # b"" when the block ended on a delimiter
        if len(pending) > MAX_RECORD:
            raise ToolFailure("line_too_long", "a result line exceeded 16 MiB")
        if records:
            on_records(pos, records)
            pos += len(block) - len(pending)
        await checkpoint()
    if pending:
        on_records(pos, [pending])  # rg ends its output with a delimiter; be lenient anyway


async def rg_run(argv: Sequence[str], cwd: Cwd, on_records: Callable[[list[bytes]], None], *, delimiter: bytes = b"\n") -> None:
    """Run rg and hand its stdout records to `on_records`, a block at a time."""
    f, _capped = await rg_output(argv, cwd)
    try:
        await read_records(f, lambda _pos, records: on_records(records), delimiter=delimiter)
    finally:
        f.close()


def path_key(path: str) -> bytes:
    """Results are sorted by the byte order of the UTF-8 path (FILE-16); rg's own
    sort compares component by component, which puts `a/b` before `a-c`."""
    return path.encode("utf-8", "surrogateescape")


def part_glob(part: str) -> str:
    """`*part*` as an rg `--iglob` that matches every name whose `str.lower()` contains `part` (glob-free, lower case).

    rg ignores case for ASCII only; the one other character that Python
    lower-cases into a letter a part can hold is the Kelvin sign (to `k`).
    """
    return "*" + part.replace("k", "{k,\u212a}") + "*"


def files_argv(rg: str, *, prefilter: str | None = None, parts: Sequence[str] = ()) -> list[str]:
    """`rg --files` as the search tools list; `parts`: only paths with a component containing one of
    these glob-free strings, ignoring case (and everything beneath such a directory)."""
    argv = [rg, "--files", "--null", "--hidden", "--no-ignore", "--no-messages", "--no-config"]
    if prefilter is not None:
        argv += ["--glob", prefilter]
    for part in parts:
        argv += ["--iglob", part_glob(part), "--iglob", f"**/{part_glob(part)}/**"]
    # Later globs take precedence in rg: the exclusion must come last, or a
    # prefilter such as `*` would bring `.git` back.
    return argv + ["--glob", "!.git", "--", "."]


def _has_git_component(listing: bytes) -> bool:
    """Whether some NUL-separated relative path in `listing` has a component `.git` (substring tests only: fast)."""
    if b".git" not in listing:  # one scan settles the usual case
        return False
    framed = b"\0" + listing + b"\0"
    return any(marker in framed for marker in (b"/.git/", b"/.git\0", b"\0.git/", b"\0.git\0"))


async def list_files_raw(rg: str, root: Cwd, *, prefilter: str | None = None, parts: Sequence[str] = (), dirs: set[bytes] | None = None) -> list[bytes]:
    """Paths (bytes, as the file system has them), relative to the directory `root`, of the regular files beneath it.

    Hidden files included, no ignore files, `.git` skipped, symlinks neither
    followed nor listed. NUL-separated, so any file name is read back intact.
    Returned as consecutive sorted runs (sorted block by block while rg still
    walks the tree), so the caller's `sort()` — byte order is FILE-16's, the
    names sharing one prefix — only merges them. `dirs`, when given, gets the
    directory part of every name, also while rg walks (for `TreeProof.listed`).
    """
    out: list[bytes] = []
    tail = b""

    def on_block(block: bytes) -> None:
        nonlocal tail
        data = tail + block
        cut = data.rfind(b"\0") + 1
        tail = data[cut:]
        if cut:
            names = _names(data[: cut - 1])
            names.sort()
            out.extend(names)
            if dirs is not None:
                dirs.update({name.rpartition(b"/")[0] for name in names})

    await rg_blocks(files_argv(rg, prefilter=prefilter, parts=parts), root, on_block)
    if tail:
        out.extend(_names(tail))  # rg ends every name with a NUL; be lenient anyway
        if dirs is not None:
            dirs.update({name.rpartition(b"/")[0] for name in _names(tail)})
    return out


def _names(chunk: bytes) -> list[bytes]:
    """`./a\0./b` -> [a, b]: whole-chunk operations only (split, count), no Python work per name."""
    if chunk.startswith(b"./"):
        chunk = chunk[2:]
    # Splitting on `\0./` separates the names and drops the `./` of every name after the first.
    out = chunk.split(b"\0./")
    if chunk.count(b"\0") != len(out) - 1:  # a NUL not followed by `./` (not seen from rg): split plainly
        out = [r[2:] if r.startswith(b"./") else r for r in chunk.split(b"\0")]
    if _has_git_component(chunk):  # never in practice: rg's own `!.git` skipped them
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


async def list_files(rg: str, root: Cwd, *, prefilter: str | None = None) -> list[str]:
    """`list_files_raw`, decoded (surrogateescape: every name survives the round trip)."""
    return decode_all(await list_files_raw(rg, root, prefilter=prefilter))
