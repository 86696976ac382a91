"""`grep`: regex search via ripgrep (FILE, TRUNC).

Same visibility rules as glob: no symlinks followed, and a file outside the
fs.read scope or denied by a rule is never searched. Results come out sorted
by the UTF-8 byte order of the path (FILE-16), then by line; matches beyond
the limit go to the sidecar. Two ways to get there:

- the whole tree: when visibility is proven for everything under the root
  at once (`ScopedFS.tree_filter`) and there is no `glob` filter, ONE
  parallel rg searches the root; its output comes grouped per file (rg
  prints each file's matches in one piece) in no particular order, so the
  groups are kept — in memory up to a budget, then in an unnamed temporary
  file — and replayed sorted by path;
- file lists: otherwise the files are listed, filtered by `glob` and by
  visibility (a hidden file is never even opened), sorted, and searched in
  batches, a few rg processes at a time; each batch's output is kept the same
  way until the batches before it have been emitted.

Both pass `--no-mmap`: rg otherwise memory-maps when given at most ten
files, and a NUL byte after the first block then stops a file's search or
not depending on how many files shared its batch (FILE-14 only fixes the
first block).
"""

from __future__ import annotations

import math
import os
import stat
import tempfile
from typing import IO, Any, Callable, Iterator

import anyio

from ..access import Access, FsAccess
from ..errors import ToolFailure
from . import _schemas
from ._rg import list_files_raw, rg_run
from .glob import basename_prefilter, compile_relative_glob
from .base import CallContext, Tool, ToolResult

MAX_LINE_CHARS = 2000
CONCURRENCY = 3  # rg processes at once for file lists (each -j1, so the order within a batch is ours)
BATCH_FILES_MIN = 256  # below this, more batches cost more process starts than they save
BATCH_FILES_MAX = 8192
BATCH_BYTES_MAX = 512 * 1024  # argv bytes per batch, far below ARG_MAX (2 MiB on Linux)
SPILL_BUDGET = 8 << 20  # bytes of pending output held in memory per buffer before spilling to disk


class _Pending:
    """rg result records (the part after the path) kept until they can be emitted in order.

    Appended in arrival order as regions (one per file group); held in memory
    up to SPILL_BUDGET, then in an unnamed temporary file, so a search whose
    output is huge costs disk, not RAM.
    """

    def __init__(self) -> None:
        self._mem = bytearray()
        self._file: IO[bytes] | None = None
        self._size = 0

    def append(self, data: bytes) -> None:
        self._mem += data
        self._size += len(data)
        if len(self._mem) > SPILL_BUDGET:
            if self._file is None:
                self._file = tempfile.TemporaryFile()
            self._file.write(self._mem)
            self._mem = bytearray()

    @property
    def size(self) -> int:
        return self._size

    def region(self, start: int, end: int) -> bytes:
        if self._file is None:
            return bytes(self._mem[start:end])
        on_disk = self._size - len(self._mem)
        if start >= on_disk:
            return bytes(self._mem[start - on_disk : end - on_disk])
        self._file.flush()
        head = os.pread(self._file.fileno(), min(end, on_disk) - start, start)
        return head + bytes(self._mem[: max(0, end - on_disk)])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._mem = bytearray()


class _Groups:
    """Per-file groups of rg records: (path bytes, arrival number, start, end) into one `_Pending`."""

    def __init__(self) -> None:
        self.pending = _Pending()
        self.index: list[tuple[bytes, int, int, int]] = []
        self._path: bytes | None = None
        self._start = 0

    def add_records(self, records: list[bytes]) -> None:
        pending = self.pending
        for rec in records:
            path, sep, rest = rec.partition(b"\0")
            if not sep:
                continue  # e.g. rg's "binary file matches" notice: such files are skipped
            if path != self._path:
                self._close_group()
                self._path = path
                self._start = pending.size
            pending.append(rest + b"\n")

    def _close_group(self) -> None:
        if self._path is not None and self.pending.size > self._start:
            self.index.append((self._path, len(self.index), self._start, self.pending.size))
        self._path = None

    def finish(self) -> None:
        self._close_group()

    def groups(self, *, sort: bool) -> Iterator[tuple[bytes, bytes]]:
        """(path, records) per group; sorted by path bytes (then arrival) when `sort`."""
        index = sorted(self.index) if sort else self.index
        for path, _n, start, end in index:
            yield path, self.pending.region(start, end)

    def close(self) -> None:
        self.pending.close()


def _emit(groups: Iterator[tuple[bytes, bytes]], prefix: str, add: Callable[[object, str], None]) -> None:
    for raw_path, block in groups:
        rel = raw_path[2:] if raw_path.startswith(b"./") else raw_path
        if b".git" in rel and b".git" in rel.split(b"/"):
            continue  # never: rg skipped `.git`; kept in step with list_files_raw
        full = prefix + rel.decode("utf-8", "surrogateescape")
        for rest in block.split(b"\n")[:-1]:
            num, _, text = rest.partition(b":")
            if not num.isdigit():
                continue
            line = int(num)
            line_text = text.decode("utf-8", "replace")
            add({"path": full, "line": line, "text": line_text}, f"{full}:{line}:{line_text}")


class GrepTool(Tool):
    id = "grep"
    description = (
        "Search file contents with a Rust-syntax regular expression `pattern` under `path` (default: the "
        "workspace), optionally only in files matching `glob`. Returns path, line number and line text."
    )
    parameters = _schemas.GREP
    kind = "search"
    uses = ("fs.read",)

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        return [FsAccess("path", args.get("path") or ctx.workspace or ".", "read", tree=True)]

    def title(self, args: dict[str, Any]) -> str:
        return "Grep"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        root = os.fspath(runtime.resolved["path"])
        if not os.path.lexists(root):
            raise ToolFailure("not_found", "path does not exist")
        rg = runtime.proc.rg_binary()
        glob_arg = args.get("glob")
        filt = compile_relative_glob(glob_arg) if glob_arg else None
        only_name = bool(glob_arg) and "/" not in glob_arg
        base = [
            rg, "--no-heading", "--with-filename", "--line-number", "--null", "--color", "never",
            "--no-messages", "--no-config", "--no-mmap", "--max-columns", str(MAX_LINE_CHARS), "--max-columns-preview",
        ]
        if args.get("case_insensitive"):
            base.append("--ignore-case")
        pattern = ["-e", args["pattern"], "--"]
        is_dir = os.path.isdir(root)
        if not is_dir and not stat.S_ISREG(os.lstat(root).st_mode):
            raise ToolFailure("not_regular", "path is neither a directory nor a regular file")  # a FIFO would block
        visible = runtime.fs.tree_filter(root)
        spool = runtime.line_spool(runtime.limits.grep_matches)
        try:
            if is_dir and visible is None and filt is None:
                await _search_tree(base, pattern, root, spool.add)
            else:
                await self._search_listed(rg, base + ["-j1"] + pattern, root, is_dir, filt, only_name, glob_arg, visible, spool.add)
        finally:
            spool.close()
        data: dict[str, Any] = {"matches": list(spool.head), "total": spool.total}
        if spool.truncated:
            data["head"] = spool.head_text()
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None)

    async def _search_listed(
        self,
        rg: str,
        argv: list[str],
        root: str,
        is_dir: bool,
        filt: Any,
        only_name: bool,
        glob_arg: str | None,
        visible: Callable[[str], bool] | None,
        add: Callable[[object, str], None],
    ) -> None:
        # 1. The files to search: listed, filtered by `glob` (FILE-15) and by
        # visibility, then sorted (FILE-16). A hidden file is never even opened.
        if is_dir:
            cwd = root
            raws = await list_files_raw(rg, root, prefilter=basename_prefilter(glob_arg) if only_name and glob_arg else None)
        else:
            cwd, raws = os.path.dirname(root), [os.fsencode(os.path.basename(root))]
        raws.sort()  # one common prefix: the byte order of the full paths
        prefix = cwd.rstrip("/") + "/"
        files: list[str] = []
        for raw in raws:
            if b"\n" in raw:
                continue  # rg's line-oriented output could not attribute its matches safely
            rel = raw.decode("utf-8", "surrogateescape")
            if filt is not None and not filt.match(rel.rsplit("/", 1)[-1] if only_name else rel):
                continue
            if visible is None or visible(prefix + rel):
                files.append(rel)
        if not files:  # still report an invalid pattern
            await rg_run(argv + ["/dev/null"], cwd, lambda _records: None)
            return
        await _search_batches(argv, cwd, _batches(files), prefix, add)


async def _search_tree(base: list[str], pattern: list[str], root: str, add: Callable[[object, str], None]) -> None:
    # The walk's own rules match list_files_raw: hidden files, no ignore files,
    # no `.git`, no symlinks followed; names with a newline are skipped as
    # there (rg's line-oriented output could not attribute their matches).
    argv = base + ["--hidden", "--no-ignore", "--glob", "!*\n*", "--glob", "!.git"] + pattern + ["."]
    groups = _Groups()
    try:
        await rg_run(argv, root, groups.add_records)
        groups.finish()
        _emit(groups.groups(sort=True), root.rstrip("/") + "/", add)
    finally:
        groups.close()


async def _search_batches(argv: list[str], cwd: str, batches: list[list[str]], prefix: str, add: Callable[[object, str], None]) -> None:
    """Search the batches, up to CONCURRENCY at once, emitting their results in batch order.

    At most CONCURRENCY batches are outstanding (running, or finished and
    waiting for an earlier one), which bounds what is held at once.
    """
    outs: list[_Groups | None] = [None] * len(batches)
    errors: list[BaseException | None] = [None] * len(batches)
    done = [anyio.Event() for _ in batches]
    window = anyio.Semaphore(CONCURRENCY)
    failure: BaseException | None = None

    async def run(i: int) -> None:
        groups = _Groups()
        outs[i] = groups
        try:
            await rg_run(argv + batches[i], cwd, groups.add_records)
            groups.finish()
        except ToolFailure as exc:
            errors[i] = exc
        finally:
            done[i].set()

    try:
        async with anyio.create_task_group() as tg:

            async def launch() -> None:
                for i in range(len(batches)):
                    await window.acquire()
                    tg.start_soon(run, i)

            tg.start_soon(launch)
            for i in range(len(batches)):
                await done[i].wait()
                if errors[i] is not None:
                    failure = errors[i]
                    tg.cancel_scope.cancel()
                    break
                groups = outs[i]
                assert groups is not None
                # Within a batch rg (-j1) keeps the order of its arguments: already sorted.
                _emit(groups.groups(sort=False), prefix, add)
                groups.close()
                outs[i] = None
                window.release()
    finally:
        for g in outs:
            if g is not None:
                g.close()
    if failure is not None:
        raise failure


def _batches(files: list[str]) -> list[list[str]]:
    """Consecutive slices of `files`: about CONCURRENCY x 2 of them for balance, within the argv bounds."""
    per = min(BATCH_FILES_MAX, max(BATCH_FILES_MIN, math.ceil(len(files) / (CONCURRENCY * 2))))
    out: list[list[str]] = []
    batch: list[str] = []
    size = 0
    for f in files:
        n = len(f.encode("utf-8", "surrogateescape")) + 1
        if batch and (len(batch) >= per or size + n > BATCH_BYTES_MAX):
            out.append(batch)
            batch, size = [], 0
        batch.append(f)
        size += n
    if batch:
        out.append(batch)
    return out
