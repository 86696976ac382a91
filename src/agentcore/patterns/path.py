"""Path patterns: globs over canonical absolute paths (REQ).

`*` and `?` stay inside one component, `**` spans any number of components,
`[...]` is a character class, a backslash escapes. `dir/**` covers `dir`
itself and everything beneath it. Patterns are compiled to one regular
expression at manifest compile time; matching is a single regex call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from wcmatch import glob as wcglob

from ..errors import CompileError
from .globtext import MAX_GLOBSTAR_RUNS, dangling_escape, glob_escape, glob_literal_count, glob_literal_prefix, glob_unescape, globstar_runs, has_wildcard

_SLASH_RUN = re.compile(r"/{2,}")
_FLAGS = wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.FORCEUNIX | wcglob.CASE


@dataclass(frozen=True)
class PathPattern:
    """An fs capability pattern, compiled: the text as written, its expansion, and the regex that matches paths."""

    raw: str                      # as written, before variable expansion
    expanded: str                 # absolute, variables expanded and escaped
    exact: bool
    literal_count: int
    base: Path                    # deepest literal directory: everything matched lies beneath it
    _regex: re.Pattern[str] = field(repr=False, compare=False, hash=False)
    _literal: str | None = field(repr=False, compare=False, hash=False, default=None)

    def matches(self, path: str) -> bool:
        if "//" in path:
            # One meaning for a run of slashes whatever the pattern: the glob regexes read it
            # as one slash, so a literal pattern must too (canonical paths never have one).
            path = _SLASH_RUN.sub("/", path)
        if self._literal is not None:
            return path == self._literal
        # fullmatch: the translated regex ends in `$`, which also matches before a final newline, so
        # `match` let `/ws/**` cover `/ws\n`, a sibling of the workspace outside every grant.
        return self._regex.fullmatch(path) is not None

    def could_contain(self, directory: str) -> bool:
        """True when something under `directory` might match (used for search roots)."""
        base = os.fspath(self.base)
        return directory == base or directory.startswith(base.rstrip("/") + "/") or base.startswith(directory.rstrip("/") + "/")


def compile_path_pattern(raw: str, expanded: str, *, anchor: Path | None) -> PathPattern:
    """Compile an already-expanded pattern; relative patterns are anchored at `anchor`."""
    return _compile_path_pattern(raw, expanded, anchor)


@lru_cache(maxsize=4096)
def _compile_path_pattern(raw: str, expanded: str, anchor: Path | None) -> PathPattern:
    # Patterns are immutable and a batch worker compiles the same manifest for every task: translating
    # a glob to a regex is the costly part of compiling one (about 1 ms each), so it is done once.
    text = expanded
    if not text.startswith("/"):
        if anchor is None:
            raise CompileError(f"relative path pattern {raw!r} but there is no workspace to anchor it")
        text = glob_escape(os.fspath(anchor)).rstrip("/") + "/" + text
    # Lexical normalisation only of separators; `..` in a pattern is refused
    # because canonical paths never contain it, so such a pattern is a typo
    # that would silently match nothing.
    while "//" in text:
        text = text.replace("//", "/")
    parts = text.split("/")
    if any(p in (".", "..") for p in parts):
        raise CompileError(f"path pattern {raw!r} contains '.' or '..' components")
    if len(text) > 1:
        text = text.rstrip("/")
    if dangling_escape(text):
        raise CompileError(f"path pattern {raw!r} ends in a backslash that escapes nothing")
    if globstar_runs(text) > MAX_GLOBSTAR_RUNS:
        raise CompileError(f"path pattern {raw!r} has more than {MAX_GLOBSTAR_RUNS} '**' runs")
    exact = not has_wildcard(text)
    prefix = glob_literal_prefix(text)
    head = prefix if exact else prefix.rsplit("/", 1)[0]
    if any(p in (".", "..") for p in head.split("/")):
        # Escaped (`\..`, `..\/x`) they pass the check above and the regex matches no canonical path, but the
        # base stays `ws/../x`: the sandbox binds it, and intersect's `is_within` admits it, as the kernel resolves it.
        raise CompileError(f"path pattern {raw!r} contains '.' or '..' components")
    base = Path(head if exact else (head or "/"))
    body = text
    # `dir/**` also covers `dir` itself.
    if body.endswith("/**"):
        alt = body[: -len("/**")] or "/"
        regexes = wcglob.translate([body, alt], flags=_FLAGS)[0]
    else:
        regexes = wcglob.translate(body, flags=_FLAGS)[0]
    regex = re.compile("|".join(f"(?:{r})" for r in regexes))
    literal = glob_unescape(text) if exact else None
    return PathPattern(
        raw=raw,
        expanded=text,
        exact=exact,
        literal_count=glob_literal_count(text),
        base=base,
        _regex=regex,
        _literal=literal,
    )
