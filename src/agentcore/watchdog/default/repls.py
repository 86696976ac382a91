"""REPL-like programs: their argv (or standard input, fed by a pipe) carries script text.

Every call that is not information-only asks, because the script language
can reach the system in ways a word scan does not fully see; text that
plainly runs a command or loads code is denied. sqlite3 in `-safe` mode
(without `-nonce`, which lets a script switch it off) refuses all of that
itself and is allowed.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from .options import _info_only
from .paths import _Ctx

_Check = Callable[[_Ctx, Sequence[str]], None]
_SQLITE_INFO = frozenset({"-version", "--version", "-help", "--help"})



def _prefixes(words: str, shortest: int = 2) -> str:
    """A regex alternation of every spelling sqlite3 accepts for these dot-commands (a prefix)."""
    return "|".join(w[:k] for w in words.split() for k in range(len(w), shortest - 1, -1))


# Dot-commands that run a program or load code whatever their arguments; those that do it when given
# a `|cmd` target or -e/-x (open an editor or a spreadsheet program); SQL functions that load code or
# start an editor.
_SQLITE_DANGER = re.compile(
    rf"^\s*\.(?:{_prefixes('shell system load excel nonce')})\b"
    rf"|^\s*\.(?:o|{_prefixes('output once read import')})\b.*(?:\||\s-[ex]\b)"
    r"|load_extension|\bedit\s*\(",
    re.IGNORECASE | re.MULTILINE,
)


# sqlite3's options that take values (how many); `-A` hands every later word to `.archive`.
_SQLITE_VALUES = {"cmd": 1, "init": 1, "separator": 1, "newline": 1, "nullvalue": 1, "vfs": 1, "maxsize": 1,
                  "mmap": 1, "nonce": 1, "heap": 1, "threadsafe": 1, "sorterref": 1, "pagecache": 2,
                  "lookaside": 2}


def _sqlite_safe(args: Sequence[str]) -> bool:
    """Whether sqlite3 runs everything in safe mode, reading options as it does: case-sensitive, `--x` as `-x`,
    values skipped (a value spelled `-safe` is not the option). `-init` files and `-cmd` commands before `-safe`
    run before safe mode starts, and `-nonce` lets a script leave it."""
    safe = False
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-"):
            continue
        name = a[2:] if a.startswith("--") else a[1:]
        if name in ("A", "archive"):
            break
        if name in ("init", "nonce") or (name == "cmd" and not safe):
            return False
        safe = safe or name == "safe"
        i += _SQLITE_VALUES.get(name, 0)
    return safe


def _sqlite3(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args, _SQLITE_INFO):
        return
    if _sqlite_safe(args):
        return
    if any(_SQLITE_DANGER.search(a) for a in args):
        ctx.add("code_execution_wrapper", "deny", "sqlite3 running a command or loading code")
        return
    ctx.add("code_execution_wrapper", "ask", "sqlite3 running SQL and dot-commands")


# psql: `\!` runs a shell command; `\o |cmd`, `\g |cmd`, `\w |cmd`, `\copy … program` pipe through one;
# `-o |cmd` / `--output=|cmd` does the same for all output.
_PSQL_DANGER = re.compile(r"\\!|\\(?:o|out|g|gx|w|write|copy)\b[^\n]*(?:\||\bprogram\b)", re.IGNORECASE)


def _psql(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    for k, a in enumerate(args):
        piped = (a in ("-o", "--output") and k + 1 < len(args) and args[k + 1].lstrip().startswith("|")) or \
            (a.startswith(("-o|", "--output=|")))
        if piped or _PSQL_DANGER.search(a):
            ctx.add("code_execution_wrapper", "deny", "psql running a shell command")
            return
    ctx.add("code_execution_wrapper", "ask", "psql running SQL and backslash commands")


_MYSQL_DANGER = re.compile(r"\\!|(?:^|[\n;])\s*system\b", re.IGNORECASE)


def _mysql(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    if any(_MYSQL_DANGER.search(a) for a in args):
        ctx.add("code_execution_wrapper", "deny", "mysql client running a shell command")
        return
    ctx.add("code_execution_wrapper", "ask", "mysql client running SQL and client commands")


def _m4(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    if any("syscmd" in a for a in args):
        ctx.add("code_execution_wrapper", "deny", "m4 running a shell command")
        return
    ctx.add("code_execution_wrapper", "ask", "m4 expanding macros that can run commands")


def _dc(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    if any("!" in a for a in args):
        ctx.add("code_execution_wrapper", "deny", "dc running a shell command")
        return
    ctx.add("code_execution_wrapper", "ask", "dc running a script that can run commands")


def _repl(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args):
        ctx.add("code_execution_wrapper", "ask", "an interpreter or REPL running script text")
