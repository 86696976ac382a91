"""What one sandboxed call must keep read-only or hide beyond its policy: found by one bounded walk per call.

Two kinds of path exist only when a call is made, not when the manifest
was compiled:

- protected names below the top of a writable root: a nested repository's
  hooks and config, a sub-project's `.vscode` (ENV-7);
- files a wildcard deny rule on reading names (`**/.env`, `**/*.pem`): a
  literal denied path is masked from the policy itself (`policy.py`), a
  pattern only once we know which files it matches (ENV-6).

One walk finds both. It never follows symlinks, stops after `max_entries`
entries and `max_depth` levels, and does not enter `.git` or the protected
directories (nothing below them is worth either). Past those bounds nothing
is found: the capability check and the rules still refuse what they see,
and the limit is stated in SPEC.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..patterns.globtext import has_wildcard
from ..protected import PROTECTED_DIRS, PROTECTED_NAMES
from ..rules.model import glob_literal_suffix

MAX_ENTRIES = 20_000
MAX_DEPTH = 8
# Rules whose deny keeps bash from reading a path (as for the literal ones in policy.py).
READ_DENY_PERMISSIONS = frozenset({"*", "read", "fs.read", "bash", "grep", "glob"})


@dataclass(frozen=True)
class ReadDeny:
    """One wildcard deny rule on reading, ready for the walk."""

    matches: Callable[[str], bool]
    suffix: str  # every path the walk can find it matching ends with this: a cheap reject first
    tree: bool  # the pattern ends in `/**`: a matching directory is hidden whole


def wildcard_read_denies(rules: Iterable[object]) -> list[ReadDeny]:
    """The manifest's deny rules on reading whose patterns have wildcards (compiled rules in, walk matchers out)."""
    out: list[ReadDeny] = []
    for cr in rules:
        rule = cr.rule  # type: ignore[attr-defined]
        if rule.action != "deny" or rule.permission not in READ_DENY_PERMISSIONS:
            continue
        text: str = cr.expanded  # type: ignore[attr-defined]
        if text == "*" or not has_wildcard(text[:-3] if text.endswith("/**") else text):
            continue  # `*` denies everything (nothing runs); literal paths are masked by the policy
        fn, _literal, _exact, _prefix = cr.matcher("path")  # type: ignore[attr-defined]
        if fn is None:
            continue
        tree = text.endswith("/**")
        # The walk tests a path itself, never one below a match (it does not descend
        # into one): for `…/name/**` every such path ends with `/name`, a cheap reject.
        suffix = glob_literal_suffix(text[:-3]) if tree else cr.literal_suffix("path")  # type: ignore[attr-defined]
        out.append(ReadDeny(fn, suffix, tree))
    return out


@dataclass(frozen=True)
class CallTree:
    protected: tuple[Path, ...]  # below the top of a writable root (the top is the policy's)
    denied: tuple[Path, ...]  # files (and `/**` directories) wildcard read denies match


def _outermost_roots(roots: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for r in sorted({Path(os.path.normpath(r)) for r in roots}, key=lambda p: len(p.parts)):
        if not any(r == o or o in r.parents for o in out):
            out.append(r)
    return out


def scan(
    write_roots: Sequence[Path],
    read_roots: Sequence[Path] = (),
    denies: Sequence[ReadDeny] = (),
    *,
    max_entries: int = MAX_ENTRIES,
    max_depth: int = MAX_DEPTH,
) -> CallTree:
    """Walk the writable roots (protected names and denied files) and the read roots (denied files only)."""
    writable = [Path(os.path.normpath(r)) for r in write_roots]
    roots = _outermost_roots([*write_roots, *(read_roots if denies else ())])
    protected: list[Path] = []
    denied: list[Path] = []
    seen = 0

    def in_write_root(p: str) -> bool:
        return any(p == str(w) or p.startswith(str(w).rstrip("/") + "/") for w in writable)

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
            if denies and (is_file or is_dir) and _denied(denies, full, is_file):
                denied.append(Path(full))
                continue  # a hidden directory is hidden whole (nothing below it needs protecting either)
            if top_writable:
                if depth > 0 and (name in PROTECTED_NAMES or name in PROTECTED_DIRS):
                    protected.append(Path(full))
                if name == ".git" and is_dir:
                    protected.extend([Path(full) / "hooks", Path(full) / "config", Path(full) / "info" / "attributes"])
            if name == ".git" and is_dir:
                continue  # a repository's internals hold nothing else to protect
            if is_dir and depth < max_depth and name not in PROTECTED_DIRS:
                # A read root above a write root: writability starts where the write root does.
                here_writable = top_writable or in_write_root(full)
                stack.append((full, depth + 1, here_writable))
    return CallTree(tuple(protected), tuple(denied))


def _denied(denies: Sequence[ReadDeny], path: str, is_file: bool) -> bool:
    """A file any wildcard read deny matches, or a directory a `/**` one matches."""
    for d in denies:
        if (is_file or d.tree) and path.endswith(d.suffix) and d.matches(path):
            return True
    return False
