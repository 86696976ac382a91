"""Argv scanning shared by the per-program checks: GNU-style options, info-only calls, remote specs."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

# `NAME=value` words: environment assignments in front of a command or after `env`.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _lm(name: str, canon: str) -> bool:
    """`name` selects long option `canon`, allowing getopt's abbreviations (ambiguity counts as a match)."""
    return len(name) >= 3 and canon.startswith(name)


def _long_matches(name: str, table: Iterable[str]) -> frozenset[str]:
    """The long options of `table` that `--name` (without `=value`) selects under GNU getopt_long.

    An exact match selects only itself; otherwise every option `name` abbreviates. More than one
    means getopt refuses the word as ambiguous, which callers may still treat as the worst match.
    """
    if not name.startswith("--") or len(name) < 3:
        return frozenset()
    if name in table:
        return frozenset((name,))
    return frozenset(o for o in table if o.startswith(name))


def _scan(args: Sequence[str], vshort: str = "", vlong: Sequence[str] = ()) -> tuple[list[str], list[str], list[str]]:
    """GNU-style scan: (short letters, long option names, operands); options may follow operands."""
    shorts: list[str] = []
    longs: list[str] = []
    ops: list[str] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            ops.extend(args[i:])
            break
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            longs.append(name)
            if not eq and any(_lm(name, c) for c in vlong):
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                ch = a[j]
                shorts.append(ch)
                if ch in vshort:
                    if j == len(a) - 1:
                        i += 1
                    break
            continue
        ops.append(a)
    return shorts, longs, ops


_INFO = frozenset({"--version", "--help", "-version", "-help", "-h", "-V", "-v", "-VV", "-?"})
# `bash -h` / `bash -v` are shell options that still read commands from stdin.
_SHELL_INFO = frozenset({"--version", "--help"})
# `python -v` / `lua -v` still run code from stdin; node and perl add -v themselves.
_INTERP_INFO = frozenset({"--version", "--help", "-version", "-help", "-h", "-V", "-VV", "-?"})


def _info_only(args: Sequence[str], info: frozenset[str] = _INFO) -> bool:
    return bool(args) and all(a in info for a in args)


def _remote_spec(word: str) -> bool:
    """scp/rsync/tar-style remote target: `host:path`, `user@host:path`, `host::mod`, or a URL."""
    if word.startswith(("scp://", "sftp://", "rsync://", "ssh://")):
        return True
    c = word.find(":")
    return c > 0 and "/" not in word[:c] and not word.startswith(("-", "."))
