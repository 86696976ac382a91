"""`grep`: regex search via ripgrep (FILE, TRUNC).

Same visibility rules as glob: no symlinks followed, and a file outside the
fs.read scope or denied by a rule is never searched. The file list is
sorted by UTF-8 byte order and searched in that order, so matches come out
sorted without being held; matches beyond the limit go to the sidecar.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Iterator

from ..access import Access, FsAccess
from ..errors import ToolFailure
from . import _schemas
from ._rg import list_files, path_key, rg_lines
from .glob import basename_prefilter, compile_relative_glob
from .base import CallContext, Tool, ToolResult

MAX_LINE_CHARS = 2000


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
        fs = runtime.fs
        filt = compile_relative_glob(args["glob"]) if args.get("glob") else None
        only_name = bool(args.get("glob")) and "/" not in args["glob"]
        # 1. The files to search: listed, filtered by `glob` (FILE-15) and by
        # visibility, then sorted (FILE-16). A hidden file is never even opened.
        if os.path.isdir(root):
            cwd = root
            rels = await list_files(rg, root, prefilter=basename_prefilter(args["glob"]) if only_name else None)
        elif stat.S_ISREG(os.lstat(root).st_mode):
            cwd, rels = os.path.dirname(root), [os.path.basename(root)]
        else:  # a FIFO or device would block or never end
            raise ToolFailure("not_regular", "path is neither a directory nor a regular file")
        prefix = cwd.rstrip("/") + "/"
        files: list[str] = []
        for rel in rels:
            if "\n" in rel:
                continue  # rg's line-oriented output could not attribute its matches safely
            if filt is not None and not filt.match(rel.rsplit("/", 1)[-1] if only_name else rel):
                continue
            if fs.visible(prefix + rel):
                files.append(rel)
        files.sort(key=lambda r: path_key(prefix + r))
        # 2. Search them in that order, in batches that keep argv small.
        base = [
            rg, "--no-heading", "--with-filename", "--line-number", "--null", "--color", "never",
            "--no-messages", "--no-config", "-j1", "--max-columns", str(MAX_LINE_CHARS), "--max-columns-preview",
        ]
        if args.get("case_insensitive"):
            base.append("--ignore-case")
        base += ["-e", args["pattern"], "--"]
        spool = runtime.line_spool(runtime.limits.grep_matches)
        try:
            if not files:  # still report an invalid pattern
                async for _ in rg_lines(base + ["/dev/null"], cwd):
                    pass
            for batch in _batches(files):
                async for raw in rg_lines(base + batch, cwd):
                    name, sep, rest = raw.partition(b"\0")
                    if not sep:
                        continue  # e.g. rg's "binary file matches" notice: such files are skipped
                    rel = name.decode("utf-8", "surrogateescape")
                    num, _, text = rest.partition(b":")
                    if not num.isdigit():
                        continue
                    full = prefix + rel
                    line_text = text.decode("utf-8", "replace")
                    spool.add({"path": full, "line": int(num), "text": line_text}, f"{full}:{int(num)}:{line_text}")
        finally:
            spool.close()
        data: dict[str, Any] = {"matches": list(spool.head), "total": spool.total}
        if spool.truncated:
            data["head"] = spool.head_text()
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None)


def _batches(files: list[str], *, max_files: int = 1000, max_bytes: int = 64 * 1024) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for f in files:
        n = len(f.encode("utf-8", "surrogateescape")) + 1
        if batch and (len(batch) >= max_files or size + n > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(f)
        size += n
    if batch:
        yield batch
