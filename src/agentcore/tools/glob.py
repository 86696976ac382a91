"""`glob`: list files matching a pattern, via ripgrep (FILE, TRUNC).

Hidden files are listed, `.git` is not, ignore files are not consulted
(results must not depend on a user's global gitignore), symlinks
are never followed, and a result is shown only if it is inside the fs.read
scope, no rule denies reading it or asks first, and the watchdog would not
ask about reading it (`runtime.SearchScope`); how many matching files were
withheld is reported, never which. Sorted by path; entries beyond the
limit go to the sidecar.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

from anyio.lowlevel import checkpoint
from wcmatch import glob as wcglob

from ..access import Access, FsAccess
from ..errors import OutputCapped, ToolFailure
from ..patterns.globtext import globstar_runs
from . import _schemas
from ._rg import decode_all, list_files_raw
from ._settled import TreeProof
from .base import CallContext, Tool, ToolResult

_FLAGS = wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.FORCEUNIX | wcglob.CASE


# Each `**` component adds a lazy span the translated regex backtracks over: matching one path costs
# O(depth^n) for n of them, synchronously on the event loop (no deadline or abort can interrupt it).
# Two keep the worst case near 0.3 s for a 4 KiB path (this translation backtracks more than the rule
# engine's path patterns, which allow three: `globtext.MAX_GLOBSTAR_RUNS`).
MAX_GLOBSTARS = 2
MATCH_YIELD_EVERY = 256  # names matched between two yields to the event loop


def compile_relative_glob(pattern: str) -> re.Pattern[str]:
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolFailure("invalid_arguments", "pattern must be relative to path and must not contain '..'")
    if globstar_runs(pattern) > MAX_GLOBSTARS:
        raise ToolFailure("invalid_arguments", f"pattern may contain '**' at most {MAX_GLOBSTARS} times")
    return _compile(pattern)


async def filter_names(names: list[str], keep: Any) -> list[str]:
    """`[n for n in names if keep(n)]`, yielding to the event loop every MATCH_YIELD_EVERY names: a slow
    pattern over many deep paths then delays other tasks by one slice at most, and the call's deadline
    and aborts still reach it."""
    out: list[str] = []
    for i in range(0, len(names), MATCH_YIELD_EVERY):
        out += [n for n in names[i : i + MATCH_YIELD_EVERY] if keep(n)]
        await checkpoint()
    return out


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    # Cached: every call translates its pattern twice (accesses, then execute).
    return re.compile("|".join(f"(?:{r})" for r in wcglob.translate(pattern, flags=_FLAGS)[0]))


def basename_prefilter(pattern: str) -> str | None:
    """A basename glob rg can apply first; always at least as wide as the full pattern."""
    last = pattern.rsplit("/", 1)[-1]
    if last in ("", "**"):
        return None
    # rg's `?` is one byte, ours one character: `*` in its place is safely wider
    # (and one `*` for a run of them, which rg would read the same).
    last = re.sub(r"[*?]+", "*", last)
    # rg's glob syntax differs from ours on classes, escapes, `{a,b}` and a
    # leading `!` (an exclusion): any of those and rg could drop a real match.
    # rg reads globs as gitignore lines: a leading `#` is a comment and
    # trailing spaces are dropped, which would narrow the glob. And rg 14's
    # glob matcher never matches a glob ending in `.` (`a.` misses the file `a.`).
    if last in ("", "**") or any(c in last for c in "[\\{}!") or last.startswith("#") or last != last.rstrip() or last.endswith("."):
        return None
    return last


# Literal characters whose meaning is the same in rg's globs and ours, plus single `*`s.
_PLAIN_BASENAME = re.compile(r"(?:[A-Za-z0-9._+,@%=~-]|\*(?!\*))+")


def prefilter_is_exact(pattern: str, prefilter: str | None) -> bool:
    """Whether rg's basename prefilter alone selects exactly what `pattern` matches.

    True for `**/<name>` where <name> has only plain characters and single
    `*`: rg matches a slash-free glob against the last component at any
    depth, as `**/` does here (hidden directories and files included on both
    sides), and `*` means any run of characters without `/` in both. `?` is
    left out on purpose (rg's `?` is not defined the same way on non-ASCII).
    """
    return prefilter is not None and pattern == "**/" + prefilter and _PLAIN_BASENAME.fullmatch(prefilter) is not None


class GlobTool(Tool):
    id = "glob"
    description = (
        "List files whose path relative to `path` (default: the workspace) matches a glob `pattern` "
        "(`*` within a directory, `**` across directories). Sorted by path."
    )
    parameters = _schemas.GLOB
    kind = "search"
    own_truncation = True
    concurrency_safe = True
    uses = ("fs.read",)

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        compile_relative_glob(args["pattern"])
        return [FsAccess("path", args.get("path") or ctx.workspace or ".", "read", tree=True)]

    def title(self, args: dict[str, Any]) -> str:
        return f"Glob {args.get('pattern', '')}"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        root = os.fspath(runtime.resolved["path"])
        if not os.path.isdir(root):
            raise ToolFailure("not_a_directory", "path is not a directory")
        pattern = args["pattern"]
        regex = compile_relative_glob(pattern)
        prefilter = basename_prefilter(pattern)
        prefix = root.rstrip("/") + "/"
        with TreeProof(root) as proof:
            dirs: set[bytes] = set()  # gathered while rg walks: off the critical path
            raws = await list_files_raw(runtime.proc.rg_binary(), proof.fd, prefilter=prefilter, dirs=dirs)
            scope = runtime.fs.search_scope(root)  # rules None: proven visible for the whole tree at once
            spool = runtime.line_spool(runtime.limits.glob_entries)
            try:
                await self._select(raws, pattern, prefilter, regex, prefix, scope, proof.listed, dirs, spool)
            except OutputCapped:
                pass  # the sidecar is full (TRUNC-9): the paths kept are a sorted prefix, the envelope says output_capped
            finally:
                spool.close()
        data: dict[str, Any] = {"paths": list(spool.head), "total": spool.total}
        if spool.truncated:
            data["head"] = spool.head_text()
        # How many matching files the rules or the watchdog kept out (PERM-14), never which.
        extra = {"withheld": scope.withheld} if scope.withheld else {}
        return ToolResult(data=data, truncated=spool.truncated, output_path=os.fspath(spool.path) if spool.path else None, extra=extra)

    @staticmethod
    async def _select(raws: list[bytes], pattern: str, prefilter: str | None, regex: re.Pattern[str], prefix: str, scope: Any, proven: Any, dirs: set[bytes], spool: Any) -> None:
        """Add to `spool`, sorted, the listed names the pattern matches that may be shown and are proven found
        in the tree (`proven`: `TreeProof.listed`; `dirs`: the directories of all names listed)."""
        # Sorting needs the whole (filtered) list of names; contents are never held.
        # The raw names share one prefix, so their byte order is FILE-16's.
        raws.sort()
        if scope.rules is None and prefilter_is_exact(pattern, prefilter):
            # Nothing left to decide per name but the watchdog's screen: decode only the head.
            spool.extend_raw(scope.screen_out(proven(raws, dirs), prefix), prefix)
            return
        rels = decode_all(raws)
        if not prefilter_is_exact(pattern, prefilter):
            rels = await filter_names(rels, regex.match)
        rels = scope.screen_out(proven(rels, dirs), prefix)
        if scope.rules is None:
            spool.extend(rels, prefix)
            return
        for r in rels:
            full = prefix + r
            if scope.shows(full):
                spool.add(full, full)
