"""`grep`: regex search via ripgrep (FILE, TRUNC).

Same visibility rules as glob: no symlinks followed, nothing outside the
fs.read scope or denied by a rule is searched into the results. Matches
beyond the limit go to the sidecar, streamed, never held whole.
"""

from __future__ import annotations

import os
from typing import Any

from ..access import Access, FsAccess
from ..errors import ToolFailure
from . import _schemas
from ._rg import rg_lines
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
        is_dir = os.path.isdir(root)
        argv = [
            runtime.proc.rg_binary(), "--no-heading", "--with-filename", "--line-number", "--null",
            "--color", "never", "--no-messages", "--no-config", "--hidden", "--no-ignore", "--glob", "!.git",
            "--sort", "path", "--max-columns", str(MAX_LINE_CHARS), "--max-columns-preview",
        ]
        if args.get("case_insensitive"):
            argv.append("--ignore-case")
        if args.get("glob"):
            g = args["glob"]
            if g.startswith("!"):
                raise ToolFailure("invalid_arguments", "glob must select files, not exclude them")
            argv += ["--glob", g]
        argv += ["-e", args["pattern"], "--", "." if is_dir else os.path.basename(root)]
        cwd = root if is_dir else os.path.dirname(root)
        prefix = cwd.rstrip("/") + "/"
        spool = runtime.line_spool(runtime.limits.grep_matches)
        fs = runtime.fs
        last_path: str | None = None
        last_visible = False
        try:
            async for raw in rg_lines(argv, cwd):
                name, sep, rest = raw.partition(b"\0")
                if not sep:
                    continue
                rel = name.decode("utf-8", "surrogateescape")
                if rel.startswith("./"):
                    rel = rel[2:]
                full = prefix + rel
                if full != last_path:  # rules are evaluated once per file, not per match
                    last_path = full
                    last_visible = fs.visible(full)
                if not last_visible:
                    continue
                num, _, text = rest.partition(b":")
                line_text = text.decode("utf-8", "replace")
                spool.add({"path": full, "line": int(num), "text": line_text}, f"{full}:{int(num)}:{line_text}")
        finally:
            spool.close()
        data: dict[str, Any] = {"matches": list(spool.head), "total": spool.total}
        if spool.truncated:
            data["head"] = spool.head_text()
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None)
