"""What one sandboxed call must keep read-only or hide beyond its policy: found by one bounded walk per call.

Some paths exist only when a call is made, not when the manifest was
compiled:

- protected names below the top of a writable root: a nested repository's
  hooks and config, a sub-project's `.vscode` (ENV-7);
- files a wildcard deny rule names (`**/.env`, `**/*.pem`): a deny on
  reading hides them, a deny on writing keeps them read-only (ENV-6).
  Literal denied paths are the policy's own (`denies.py`, `policy.py`).

One walk finds all of them. It never follows symlinks, stops after
`max_entries` entries and `max_depth` levels, and does not enter `.git` or
the protected directories. Past those bounds nothing is found: the
capability check and the rules still refuse what they see, and SPEC states
the limit.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..protected import PROTECTED_DIRS, PROTECTED_NAMES
from .denies import WildcardDeny

MAX_ENTRIES = 20_000
MAX_DEPTH = 8


@dataclass(frozen=True)
class CallTree:
    protected: tuple[Path, ...]  # read-only: protected names below a writable root's top, wildcard write denies
    denied: tuple[Path, ...]  # hidden: files (and `/**` directories) wildcard read denies match


def _outermost_roots(roots: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for r in sorted({Path(os.path.normpath(r)) for r in roots}, key=lambda p: len(p.parts)):
        if not any(r == o or o in r.parents for o in out):
            out.append(r)
    return out


def scan(
    write_roots: Sequence[Path],
    read_roots: Sequence[Path] = (),
    read_denies: Sequence[WildcardDeny] = (),
    write_denies: Sequence[WildcardDeny] = (),
    *,
    max_entries: int = MAX_ENTRIES,
    max_depth: int = MAX_DEPTH,
) -> CallTree:
    """Walk the writable roots (everything) and, when read denies exist, the read roots (for them)."""
    writable = [os.path.normpath(r) for r in write_roots]
    roots = _outermost_roots([*write_roots, *(read_roots if read_denies else ())])
    protected: list[Path] = []
    denied: list[Path] = []
    seen = 0

    def in_write_root(p: str) -> bool:
        return any(p == w or p.startswith(w + "/") for w in writable)

    stack: list[tuple[str, int, bool]] = [(os.fspath(r), 0, in_write_root(os.fspath(r))) for r in roots]
    while stack and seen < max_entries:
        top, depth, top_writable = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            full = entry.path
            if read_denies and (is_file or is_dir) and _matched(read_denies, full, is_file):
                denied.append(Path(full))
                continue  # a hidden directory is hidden whole (nothing below it needs protecting either)
            if top_writable:
                if write_denies and (is_file or is_dir) and _matched(write_denies, full, is_file):
                    protected.append(Path(full))
                    continue  # read-only as a whole
                if depth > 0 and (name in PROTECTED_NAMES or name in PROTECTED_DIRS):
                    protected.append(Path(full))
                if name == ".git" and is_dir:
                    protected.extend([Path(full) / "hooks", Path(full) / "config", Path(full) / "info" / "attributes"])
            if name == ".git" and is_dir:
                continue  # a repository's internals hold nothing else to protect
            if is_dir and depth < max_depth and name not in PROTECTED_DIRS:
                # A read root above a write root: writability starts where the write root does.
                stack.append((full, depth + 1, top_writable or in_write_root(full)))
    return CallTree(tuple(protected), tuple(denied))


def _matched(denies: Sequence[WildcardDeny], path: str, is_file: bool) -> bool:
    """A file any wildcard deny matches, or a directory a `/**` one matches."""
    for d in denies:
        if (is_file or d.tree) and path.endswith(d.suffix) and d.matches(path):
            return True
    return False
