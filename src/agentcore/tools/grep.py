"""`grep`: regex search via ripgrep (FILE, TRUNC).

Same visibility rules as glob: no symlinks followed, and a file outside the
fs.read scope, denied by a rule or behind an ask rule is never searched. Results come out sorted
by the UTF-8 byte order of the path (FILE-16), then by line; matches beyond
the limit go to the sidecar. Two ways to get there:

- the whole tree: when visibility is proven for everything under the root
  at once (`ScopedFS.tree_filter`) and there is no `glob` filter, ONE
  parallel rg searches the root. Its output comes grouped per file (rg
  prints each file's matches in one piece) in no particular order: the
  groups are indexed in rg's output file and replayed sorted by path;
- file lists: otherwise the files are listed, filtered by `glob` and by
  visibility (a hidden file is never even opened), sorted, and searched in
  batches, a few rg processes at a time (each -j1, so in our order); each
  batch's output is replayed once the batches before it have been.

Either way each file's lines are kept only if the file is proven found in
the tree, and a file that changed while rg ran is searched again through a
descriptor (`_Output.settle`, `_settled.TreeProof`; FILE-11).

Either way the output waits in rg's unnamed output file (`_rg.rg_output`),
not in memory. Both pass `--no-mmap`: rg otherwise memory-maps when given at
most ten files, and a NUL byte after the first block then stops a file's
search or not depending on how many files shared its batch (FILE-14 only
fixes the first block).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import os
import re
import stat
from typing import IO, Any, Iterator

import anyio
from anyio.lowlevel import checkpoint

from ..access import Access, FsAccess
from ..errors import OutputCapped, ToolFailure
from ..runtime import SearchScope
from ..truncation import LineSpool
from . import _schemas
from ._rg import list_files_raw, part_glob, read_records, rg_output, rg_run
from ._settled import CHANGED, GONE, SETTLED, TreeProof
from .base import CallContext, Tool, ToolResult
from .glob import basename_prefilter, compile_relative_glob, filter_names

MAX_LINE_CHARS = 2000  # bytes of a line's text (FILE-14)
LONG_LINE_MARK = b" [... omitted end of long line]"
# rg's --max-columns counts the line terminator, so a 2000-byte line ending in a newline would be cut:
# rg gets one byte more, and the exact cut at MAX_LINE_CHARS is made here (`_line_text`).
_RG_COLUMNS = MAX_LINE_CHARS + 1
# A record this long may hold a text longer than the limit: it takes the careful path.
_LONG_RECORD = re.compile(rb"[^\n]{%d,}" % (MAX_LINE_CHARS + 1))
CONCURRENCY = 3  # rg processes at once for file lists
AGAIN_BATCH = 256  # files searched again per rg process (each holds a descriptor meanwhile)
_SETTLE_SLICE = 4096  # matched files looked at between two yields to the event loop
BATCH_FILES_MIN = 256  # below this, more batches cost more process starts than they save
BATCH_FILES_MAX = 8192
BATCH_BYTES_MAX = 512 * 1024  # argv bytes per batch, far below ARG_MAX (2 MiB on Linux)
IN_MEMORY_MAX = 8 << 20  # rg output up to this size is read back whole; larger, group by group
# Match records exactly as rg prints them (path without NUL or newline, then the line number).
_RECORDS = re.compile(rb"(?:[^\0\n]*\0[1-9][0-9]*:[^\n]*\n)*")
_DOTTED_RECORDS = re.compile(rb"(?:\./[^\0\n]*\0[1-9][0-9]*:[^\n]*\n)*")
_RUN_BYTES = 4 << 20  # match bytes rewritten at once past the head


class _Output:
    """One rg run's output file, indexed by file group: (path, arrival, start, end) byte ranges."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.index: list[tuple[bytes, int, int, int]] = []
        self._data: bytes | None = None
        self._again: dict[bytes, bytes] = {}  # path -> its records from a second search of the file as it is now
        self.capped = False  # that second search reached the output limit

    async def build_index(self) -> None:
        index = self.index
        cur: list[Any] = [None, 0, 0]  # path, start, end of the open group

        def on_records(pos: int, records: list[bytes]) -> None:
            for rec in records:
                path, sep, _rest = rec.partition(b"\0")
                end = pos + len(rec) + 1
                if sep:  # anything else (rg's "binary file matches" notice) is skipped
                    if path == cur[0] and cur[2] == pos:
                        cur[2] = end
                    else:
                        if cur[0] is not None:
                            index.append((cur[0], len(index), cur[1], cur[2]))
                        cur[0], cur[1], cur[2] = path, pos, end
                pos = end

        size = os.fstat(self._f.fileno()).st_size
        if size <= IN_MEMORY_MAX:
            # Small (the usual case): read once, kept for replaying the groups.
            self._data = data = os.pread(self._f.fileno(), size, 0)
            records = data.split(b"\n")
            tail = records.pop()
            on_records(0, records)
            if tail:
                on_records(len(data) - len(tail), [tail])
        else:
            await read_records(self._f, on_records)
        if cur[0] is not None:
            index.append((cur[0], len(index), cur[1], cur[2]))

    def groups(self, *, sort: bool) -> Iterator[tuple[bytes, bytes]]:
        """(path, raw records `path\0line:text\n`...) per group; by path bytes (then arrival) when `sort`."""
        for path, _n, start, end in sorted(self.index) if sort else self.index:
            if self._again and path in self._again:
                yield path, self._again[path]
            elif self._data is not None:
                yield path, self._data[start:end]
            else:
                yield path, os.pread(self._f.fileno(), end - start, start)

    async def settle(self, proof: TreeProof, search: list[str], limit: int) -> None:
        """Keep the groups of files proven found in the tree (FILE-11), with one link only (CAP-13).

        A file whose path or inode changed while rg ran is searched again as it
        is now, through a descriptor opened without following links, and its
        lines replaced by what that finds. One stat per file that matched.
        """
        paths = list(dict.fromkeys(entry[0] for entry in self.index))  # a path's groups are kept or dropped together
        rels = [path[2:] if path.startswith(b"./") else path for path in paths]
        states: list[int] = []
        for i in range(0, len(rels), _SETTLE_SLICE):
            states += proof.file_states(rels[i : i + _SETTLE_SLICE])
            await checkpoint()
        if not proof.dirs_settled({rel.rpartition(b"/")[0] for rel in rels}):
            states = [GONE if state == GONE else CHANGED for state in states]  # each walked to on its own
        verdict = dict(zip(paths, states))
        # Sorted: the walks share their directories. A walk made before this rg ended (for another output
        # of the call) proves nothing about what it read: walked afresh.
        changed = sorted((path, rel) for path, rel, state in zip(paths, rels, states) if state == CHANGED)
        proof.forget()
        first = b""
        room = limit  # for all the records searched again, as given back their paths
        for i in range(0, len(changed), AGAIN_BATCH):
            again: dict[bytes, int] = {}  # one rg's worth of descriptors at a time, however many files changed
            capped = False
            try:
                for path, rel in changed[i : i + AGAIN_BATCH]:
                    verdict[path], fd = proof.matched(rel)
                    if fd is not None:
                        again[path] = fd
                if again:
                    found, capped = await _search_again(search, proof.fd, again, room)
                    self._again.update(found)
                    room -= sum(map(len, found.values()))
            finally:
                for fd in again.values():
                    os.close(fd)
            if capped:
                self.capped, first = True, min(again)
                break
        self.index = [e for e in self.index if verdict[e[0]] == SETTLED or (verdict[e[0]] == CHANGED and e[0] in self._again)]
        self._again_once()
        if self.capped:  # the second search stopped at its limit: keep the sorted prefix it covered
            bound = max(self._again, default=b"")  # the last file it found lines in
            self.index = [e for e in self.index if e[0] < first or e[0] <= bound]

    def _again_once(self) -> None:
        """A file searched again is shown once, whole: its other groups would repeat its lines."""
        if self._again:
            seen: set[bytes] = set()
            self.index = [e for e in self.index if e[0] not in self._again or not (e[0] in seen or seen.add(e[0]))]

    def close(self) -> None:
        self._f.close()


async def _search_again(search: list[str], cwd: int, files: dict[bytes, int], room: int) -> tuple[dict[bytes, bytes], bool]:
    """({path: records}, capped) for the opened `files` ({path: fd}, in path order) that match, searched by
    their magic links in /proc (exactly the inodes opened, whatever their names point to now) and given
    back their paths, in all at most `room` bytes. Capped: rg's output or the records given back their
    paths (which may be a hundred times as long as the links) reached `room`; those found form a prefix."""
    found: dict[bytes, bytes] = {}
    links = {os.fsencode(f"/proc/{os.getpid()}/fd/{fd}"): path for path, fd in files.items()}
    f, capped = await rg_output(search + [os.fsdecode(n) for n in links], cwd, limit=room)
    out = _Output(f)
    try:
        await out.build_index()
        for link, raw in out.groups(sort=False):  # -j1: in argument order, so a capped output holds a prefix
            path = links.get(link)
            if path is None:
                continue
            fits = _fitting(raw, len(path) - len(link), room)
            if fits:
                found[path] = _renamed(fits, link, path)
                room -= len(found[path])
            if len(fits) < len(raw):
                return found, True
    finally:
        out.close()
    return found, capped


def _fitting(raw: bytes, grow: int, room: int) -> bytes:
    """The leading records of `raw` that fit `room` once each is `grow` bytes longer."""
    if len(raw) + grow * raw.count(b"\n") <= room:
        return raw
    records = raw.split(b"\n")[:-1]
    sizes = list(itertools.accumulate(len(rec) + 1 + grow for rec in records))
    return b"".join(rec + b"\n" for rec in records[: bisect.bisect_right(sizes, room)])


def _renamed(raw: bytes, old: bytes, new: bytes) -> bytes:
    """Records `old\0line:text\n`... with their path `new` instead."""
    cut = len(old)
    return b"\n".join(new + rec[cut:] if rec else rec for rec in raw.split(b"\n"))


async def _emit(groups: Iterator[tuple[bytes, bytes]], prefix: str, spool: LineSpool, *, dotted: bool) -> None:
    """Add the groups' matches to `spool`, in order.

    Until the spool's in-memory head is full, record by record (it needs the
    parsed items). After that only sidecar lines are needed, and for valid
    UTF-8 `<path>:<line>:<text>` is rg's own `<path>\0<line>:<text>` with the
    root put in front and the NUL made a colon: whole runs of groups are
    checked and rewritten at once. `dotted`: rg printed each path as `./rel`.
    """
    grow = len(prefix.encode("utf-8", "surrogateescape"))  # what each record gains: the root in front
    run: list[tuple[bytes, bytes]] = []
    size = 0
    for raw_path, raw in groups:
        for piece in _pieces(raw, grow):
            if not run and not spool.head_full:
                _emit_group(raw_path, piece, prefix, spool)
                continue
            run.append((raw_path, piece))
            size += len(piece) + grow * piece.count(b"\n")
            if size >= _RUN_BYTES:
                _emit_run(run, prefix, spool, dotted=dotted)
                run, size = [], 0
                await checkpoint()
    if run:
        _emit_run(run, prefix, spool, dotted=dotted)


def _pieces(raw: bytes, grow: int, size: int = _RUN_BYTES) -> Iterator[bytes]:
    """`raw` (whole records) in consecutive runs of whole records, each about `size` bytes at most once every
    record is `grow` bytes longer: one file's matches may fill the whole output limit, and a record as short
    as a few bytes grows by the length of a path when it is rewritten (held in memory a piece at a time)."""
    start, end_all = 0, len(raw)
    while start < end_all:
        end = min(end_all, start + size)
        while True:
            cut = end_all if end == end_all else raw.rfind(b"\n", start, end) + 1
            if cut <= start:  # one record longer than the window: it goes whole
                cut = raw.find(b"\n", start) + 1 or end_all
                break
            if cut - start + grow * raw.count(b"\n", start, cut) <= size:
                break
            end = start + (end - start) // 2
        yield raw[start:cut]
        start = cut


def _emit_group(raw_path: bytes, raw: bytes, prefix: str, spool: LineSpool) -> None:
    rel = raw_path[2:] if raw_path.startswith(b"./") else raw_path
    if b".git" in rel and b".git" in rel.split(b"/"):
        return  # never: rg skipped `.git`; kept in step with list_files_raw
    full = prefix + rel.decode("utf-8", "surrogateescape")
    for record in raw.split(b"\n")[:-1]:
        num, _, text = record.partition(b"\0")[2].partition(b":")
        if not num.isdigit():
            continue
        line = int(num)
        line_text = _line_text(text)
        spool.add({"path": full, "line": line, "text": line_text}, f"{full}:{line}:{line_text}")


def _line_text(text: bytes) -> str:
    """A match's text: cut at MAX_LINE_CHARS bytes and marked when the line is longer (FILE-14)."""
    cut = text.endswith(LONG_LINE_MARK)
    if cut:
        text = text[: -len(LONG_LINE_MARK)]
    if cut or len(text) > MAX_LINE_CHARS:
        return text[:MAX_LINE_CHARS].decode("utf-8", "replace") + LONG_LINE_MARK.decode()
    return text.decode("utf-8", "replace")


def _emit_run(run: list[tuple[bytes, bytes]], prefix: str, spool: LineSpool, *, dotted: bool) -> None:
    data = b"".join(raw for _path, raw in run)
    if _bulk_ready(data, dotted=dotted):
        pre = b"\n" + prefix.encode("utf-8", "surrogateescape")
        # Every record (data ends with a newline) gets the root in front of its path.
        lines = (b"\n" + data[:-1]).replace(b"\n./" if dotted else b"\n", pre)[1:].replace(b"\0", b":") + b"\n"
        spool.add_lines_raw(data.count(b"\n"), lines)
        return
    for raw_path, raw in run:  # something unusual in this run: the careful way
        _emit_group(raw_path, raw, prefix, spool)


def _bulk_ready(data: bytes, *, dotted: bool) -> bool:
    """Whether every record in `data` is a plain match line whose sidecar form is a byte rewrite."""
    if b".git" in data:
        return False  # possibly a `.git` component to drop (never from rg): leave it to _emit_group
    if _LONG_RECORD.search(data):
        return False  # a text that may need cutting here
    if not dotted and (data.startswith(b"./") or b"\n./" in data):
        return False  # the file named `-`, handed to rg as `./-` (`_as_argument`): its `./` is dropped there
    try:
        data.decode("utf-8")  # text that would need replacement characters cannot be copied
    except UnicodeDecodeError:
        return False
    return (_DOTTED_RECORDS if dotted else _RECORDS).fullmatch(data) is not None


class GrepTool(Tool):
    id = "grep"
    description = (
        "Search file contents with a Rust-syntax regular expression `pattern` under `path` (default: the "
        "workspace), optionally only in files matching `glob`. Returns path, line number and line text."
    )
    parameters = _schemas.GREP
    kind = "search"
    own_truncation = True
    concurrency_safe = True
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
            "--no-messages", "--no-config", "--no-mmap", "--max-columns", str(_RG_COLUMNS), "--max-columns-preview",
        ]
        if args.get("case_insensitive"):
            base.append("--ignore-case")
        pattern = ["-e", args["pattern"], "--"]
        is_dir = os.path.isdir(root)
        if not is_dir and not stat.S_ISREG(os.lstat(root).st_mode):
            raise ToolFailure("not_regular", "path is neither a directory nor a regular file")  # a FIFO would block
        scope = runtime.fs.search_scope(root if is_dir else os.path.dirname(root))
        # A file root is searched through the fd the runtime opened, never by name (`_search_file`); a
        # directory root is opened by the proof, rg runs in it, and what rg finds beneath it is proven (FILE-11).
        within: int | TreeProof = TreeProof(root) if is_dir else _open_file(runtime, runtime.resolved["path"])
        try:
            spool = runtime.line_spool(runtime.limits.grep_matches)
            # rg's own output file is bounded too (TRUNC-9): by what the call may still write.
            limit = runtime.sidecars.room()
            try:
                if isinstance(within, TreeProof) and scope.rules is None and scope.markers is not None and filt is None:
                    capped = await _search_tree(rg, base, pattern, root, within, spool, limit, scope)
                else:
                    capped = await self._search_listed(rg, base + ["-j1"], pattern, root, within, filt, only_name, glob_arg, scope, spool, limit)
            except OutputCapped:
                capped = True  # the sidecar is full: the matches kept are a sorted prefix
            finally:
                spool.close()
        finally:
            if isinstance(within, TreeProof):
                within.close()
            else:
                os.close(within)
        if capped:
            runtime.sidecars.capped = True
        data: dict[str, Any] = {"matches": list(spool.head), "total": spool.total}
        if spool.truncated:
            data["head"] = spool.head_text()
        # How many files the rules or the watchdog kept out of the search (PERM-14): never which,
        # and counted among the files searched for, whatever they contain.
        extra = {"withheld": scope.withheld} if scope.withheld else {}
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None, extra=extra)

    async def _search_listed(
        self,
        rg: str,
        options: list[str],
        pattern: list[str],
        root: str,
        within: int | TreeProof,
        filt: Any,
        only_name: bool,
        glob_arg: str | None,
        scope: SearchScope,
        spool: LineSpool,
        limit: int,
    ) -> bool:
        # 1. The files to search: listed, filtered by `glob` (FILE-15), by the
        # watchdog's read screen and by the rules, then sorted (FILE-16). A hidden
        # or withheld file is never even opened.
        # `within`: the proof of a directory root, or the descriptor of a file root.
        argv = options + pattern
        if isinstance(within, TreeProof):
            cwd: str | int = within.fd
            dirs: set[bytes] = set()
            raws = await list_files_raw(rg, within.fd, prefilter=basename_prefilter(glob_arg) if only_name and glob_arg else None, dirs=dirs)
            raws.sort()  # one common prefix: the byte order of the full paths
            # Proven before they are screened: a name listed through a link lies outside, and is not counted (PERM-14).
            raws = within.listed(raws, dirs)
            prefix = root.rstrip("/") + "/"
        else:
            cwd, raws = os.path.dirname(root), [os.fsencode(os.path.basename(root))]
            prefix = cwd.rstrip("/") + "/"
        # A name with a newline is skipped: rg's line-oriented output could not attribute its matches safely.
        rels = [raw.decode("utf-8", "surrogateescape") for raw in raws if b"\n" not in raw]
        if filt is not None:
            rels = await filter_names(rels, lambda rel: filt.match(rel.rsplit("/", 1)[-1] if only_name else rel))
        rels = scope.screen_out(rels, prefix)
        files = [rel for rel in rels if scope.shows(prefix + rel)]
        if not files:  # still report an invalid pattern
            await rg_run(argv + ["/dev/null"], cwd, lambda _records: None)
            return False
        if not isinstance(within, TreeProof):
            return await _search_file(options + pattern + [os.fsdecode(_STDIN)], cwd, within, files[0], prefix, spool, limit)
        return await _search_batches(argv, within, _batches([_as_argument(f) for f in files]), prefix, spool, limit)


def _as_argument(rel: str) -> str:
    """A listed name as rg's argument: `-` alone would be rg's standard input, not the file of that name."""
    return "./-" if rel == "-" else rel


def _open_file(runtime: Any, path: Any) -> int:
    """The file root, opened by the runtime (re-checked, no symlink followed, one link only) and still a regular file."""
    fd = runtime.fs.open_read(path)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolFailure("not_regular", "path is neither a directory nor a regular file")
    return fd


async def _search_file(argv: list[str], cwd: str | int, fd: int, name: str, prefix: str, spool: LineSpool, limit: int) -> bool:
    """Search one opened file, `name` in `cwd`, handed to rg as its standard input (`argv` ends in `_STDIN`).

    rg given a name would open it itself and follow a symlink swapped in since
    the check; the fd is the file proven in scope, its link count included.
    """
    f, capped = await rg_output(argv, cwd, limit=limit, stdin=fd)
    out = _Output(f)
    try:
        await out.build_index()
        await _emit(_relabel(out.groups(sort=False), os.fsencode(name)), prefix, spool, dotted=False)
    except OutputCapped:
        capped = True
    finally:
        out.close()
    return capped


# The file as a path, not `-`: rg reads a path as it reads any file (its binary detection looks at a
# different first block on a stream). The magic link reopens exactly the inode on rg's stdin.
_STDIN = b"/proc/self/fd/0"


def _relabel(groups: Iterator[tuple[bytes, bytes]], name: bytes) -> Iterator[tuple[bytes, bytes]]:
    """rg's records for its standard input (`/proc/self/fd/0\0line:text\n`...) under the file's own name,
    a piece at a time (a name of 255 bytes makes a short record 17 times as long)."""
    for path, raw in groups:
        if path == _STDIN:
            for piece in _pieces(raw, len(name) - len(_STDIN)):
                yield name, _renamed(piece, _STDIN, name)


async def _search_tree(rg: str, base: list[str], pattern: list[str], root: str, proof: TreeProof, spool: LineSpool, limit: int, scope: SearchScope) -> bool:
    """One parallel rg over the whole tree; whether its output reached `limit` (the matches kept are then those found first).

    No rule hides anything here, and the watchdog's markers say which names it
    may withhold: the walk leaves out every path with a component that
    carries one (so a withheld file is never opened), and the same paths are
    listed alongside it; of those, the ones withheld are counted (whatever
    they contain) and the others searched on their own and merged in.
    """
    markers = scope.markers or ()
    # The walk's own rules match list_files_raw: hidden files, no ignore files,
    # no `.git`, no symlinks followed; names with a newline are skipped as
    # there (rg's line-oriented output could not attribute their matches).
    exclude = [arg for m in markers for arg in ("--iglob", "!" + part_glob(m))]
    argv = base + ["--hidden", "--no-ignore", "--glob", "!*\n*", "--glob", "!.git", *exclude] + pattern + ["."]
    prefix = root.rstrip("/") + "/"
    again = base + ["-j1"] + pattern  # how a file that changed during the search is searched again
    f, capped, marked = await _search_and_list(argv, proof.fd, rg, markers, limit)
    outs = [_Output(f)]
    try:
        await outs[0].build_index()
        _drop_withheld(outs[0], scope, prefix)  # a safety net: the walk left these out already
        await outs[0].settle(proof, again, limit)
        capped = capped or outs[0].capped
        # Marked but not withheld (`.env.example`, `.aws/config`): searched by name, as `./rel` like the walk prints them.
        # Proven first: a name listed through a link lies outside, and is not counted as withheld (PERM-14).
        marked = proof.listed(sorted(marked))
        shown = scope.screen_out([m.decode("utf-8", "surrogateescape") for m in marked if b"\n" not in m], prefix)
        for batch in _batches(sorted(shown)) if not capped else ():
            extra, batch_capped = await rg_output(again + ["./" + rel for rel in batch], proof.fd, limit=limit)
            outs.append(_Output(extra))
            await outs[-1].build_index()
            await outs[-1].settle(proof, again, limit)
            capped = capped or batch_capped or outs[-1].capped
        groups = heapq.merge(*(o.groups(sort=True) for o in outs), key=lambda group: group[0])
        await _emit(groups, prefix, spool, dotted=True)
    finally:
        for o in outs:
            o.close()
    return capped


def _drop_withheld(out: _Output, scope: SearchScope, prefix: str) -> None:
    rels = [path[2:] if path.startswith(b"./") else path for path, _n, _s, _e in out.index]
    drop = scope.withheld_among(rels, prefix)
    if drop:
        out.index = [entry for i, entry in enumerate(out.index) if i not in drop]


async def _search_and_list(argv: list[str], root: int, rg: str, markers: tuple[str, ...], limit: int) -> tuple[IO[bytes], bool, list[bytes]]:
    """The tree search (its output file, capped) and, at the same time, the names that carry a marker."""
    marked: list[bytes] = []
    failures: list[BaseException] = []
    found: list[tuple[IO[bytes], bool]] = []

    async def listing() -> None:
        try:
            marked.extend(await list_files_raw(rg, root, parts=markers))
        except ToolFailure as exc:  # unknown count: the search fails rather than report too few
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        if markers:
            tg.start_soon(listing)
        try:
            found.append(await rg_output(argv, root, limit=limit))
        except ToolFailure as exc:
            failures.append(exc)
            tg.cancel_scope.cancel()
    if failures:
        for f, _capped in found:
            f.close()
        raise failures[0]
    f, capped = found[0]
    return f, capped, marked


async def _search_batches(argv: list[str], proof: TreeProof, batches: list[list[str]], prefix: str, spool: LineSpool, limit: int) -> bool:
    """Search the batches, up to CONCURRENCY at once, emitting their results in batch order; whether one was capped.

    At most CONCURRENCY batches are outstanding (running, or finished and
    waiting for an earlier one to be emitted), each rg output file bounded by
    `limit`. A batch whose output reached it holds a prefix of its results (rg
    -j1 keeps argument order): it is emitted and the search stops there, so
    the matches kept are a sorted prefix.
    """
    outs: list[_Output | None] = [None] * len(batches)
    errors: list[BaseException | None] = [None] * len(batches)
    capped = [False] * len(batches)
    done = [anyio.Event() for _ in batches]
    window = anyio.Semaphore(CONCURRENCY)
    failure: BaseException | None = None
    stopped = False

    async def run(i: int) -> None:
        try:
            f, capped[i] = await rg_output(argv + batches[i], proof.fd, limit=limit)
            out = _Output(f)
            outs[i] = out
            await out.build_index()
            await out.settle(proof, argv, limit)
            capped[i] = capped[i] or out.capped
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
                out = outs[i]
                assert out is not None
                # Within a batch rg (-j1) keeps the order of its arguments: already sorted.
                try:
                    await _emit(out.groups(sort=False), prefix, spool, dotted=False)
                except OutputCapped:
                    capped[i] = True
                out.close()
                outs[i] = None
                if capped[i]:
                    stopped = True
                    tg.cancel_scope.cancel()
                    break
                window.release()
    finally:
        for o in outs:
            if o is not None:
                o.close()
    if failure is not None:
        raise failure
    return stopped


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
