"""Resolving argv words against the workspace, and the per-call state that carries the findings.

Words are made absolute lexically (`~`, `$HOME`, the current directory) and,
where the OS would follow links, resolved with realpath; a word that cannot be
resolved yields None so every caller can fail closed.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable

_Finding = tuple[str, str, str, int]  # (action, category, detail, command index)


def _within(p: str, root: str) -> bool:
    if root == "/":
        return p.startswith("/")
    return p == root or p.startswith(root + "/")


def _norm(p: str) -> str:
    p = posixpath.normpath(p)
    return "/" + p.lstrip("/") if p.startswith("//") else p


class _Ctx:
    """Per-call state: workspace, home, current directory and the findings so far."""

    __slots__ = ("ws", "home", "cwd", "enabled", "findings", "index", "can_write")

    def __init__(self, ws: str | None, home: str, enabled: frozenset[str], can_write: Callable[[str], bool] | None = None) -> None:
        self.ws = ws
        self.can_write = can_write
        self.home = home
        self.cwd = ws  # None once a directory change makes relative words unresolvable
        self.enabled = enabled
        self.findings: list[_Finding] = []
        self.index = 0

    def add(self, category: str, action: str, detail: str) -> None:
        if category in self.enabled:
            self.findings.append((action, category, detail, self.index))

    def abs(self, word: str) -> str | None:
        """Lexical absolute form of `word`, or None when it cannot be resolved."""
        if not word or "\x00" in word:
            return None
        if word[0] == "~":
            if word != "~" and not word.startswith("~/"):
                return None  # ~user
            p = self.home + word[1:]
        elif word[0] == "$":
            for var in ("$HOME", "${HOME}"):
                if word == var or word.startswith(var + "/"):
                    p = self.home + word[len(var):]
                    break
            else:
                return None
        elif word[0] == "/":
            p = word
        else:
            if self.cwd is None:
                return None
            p = self.cwd + "/" + word
        return _norm(p)

    def real(self, word: str) -> str | None:
        """Symlink-resolved absolute form (what the OS would act on), or None."""
        p = self.abs(word)
        if p is None:
            return None
        try:
            return os.path.realpath(p)
        except (OSError, ValueError):
            return None

    def writable(self, p: str) -> bool:
        """Whether the manifest's fs.write covers canonical path `p` (False when the manifest does not say)."""
        return self.can_write is not None and bool(self.can_write(p))

    def inside(self, p: str) -> bool:
        return self.ws is not None and _within(p, self.ws)
