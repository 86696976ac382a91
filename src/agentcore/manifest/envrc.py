"""The project directories a direnv `.envrc` puts on `PATH` (for `agentcore manifest check`).

Outside ENV-7 by Table 5's own test (SPEC, after the table): an `.envrc` the
user allowed is protected, but the directories it puts first on `PATH` hold
project content, and a program the agent writes there runs when the user
types its name. This reader finds the common forms so that `manifest check`
can name the directories and the write deny that keeps them out of reach.
It is advice, never enforcement: `.envrc` is bash, and a line it cannot read
(variables other than `PWD`, substitutions other than `$(pwd)`, functions
of the user's own) is skipped, not guessed at.
"""

from __future__ import annotations

import os
import shlex

MAX_ENVRC_BYTES = 256 * 1024  # larger files are not read (advice only)
_PWD_FORMS = ("${PWD}", "$PWD", "$(pwd)")
_PWD_MARK = "\x01PWD\x01"  # stands for the directory while a line is split into words
# `layout` functions of direnv's standard library that put a project directory on PATH.
_LAYOUT_DIRS = {"node": "node_modules/.bin", "go": "bin", "php": "vendor/bin"}
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;"})


def path_dirs(envrc: str) -> list[str]:
    """Absolute directories the `.envrc` file at `envrc` adds to `PATH`, in order, without duplicates."""
    try:
        with open(envrc, "rb") as fh:
            raw = fh.read(MAX_ENVRC_BYTES + 1)
    except OSError:
        return []
    if len(raw) > MAX_ENVRC_BYTES:
        return []
    base = os.path.dirname(os.path.abspath(envrc))
    found: dict[str, None] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        for command in _commands(line):
            for d in _named(command):
                found[os.path.normpath(os.path.join(base, d.replace(_PWD_MARK, base)))] = None
    return list(found)


def _commands(line: str) -> list[list[str]]:
    """The simple commands of one line, as words (a line shlex cannot split is skipped)."""
    for form in _PWD_FORMS:
        line = line.replace(form, _PWD_MARK)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return []
    out: list[list[str]] = [[]]
    for w in words:
        if w in _SEPARATORS:
            out.append([])
        elif w not in ("then", "do", "else", "{", "}") or out[-1]:
            out[-1].append(w)
    return [c for c in out if c]


def _named(words: list[str]) -> list[str]:
    """The directories one command puts on PATH (relative ones as written)."""
    name, args = words[0], words[1:]
    if name == "PATH_add":
        dirs = args
    elif name == "path_add" and args[:1] == ["PATH"]:
        dirs = args[1:]
    elif name == "layout" and args[:1] and args[0] in _LAYOUT_DIRS:
        dirs = [_LAYOUT_DIRS[args[0]]]
    elif name == "export" or name.startswith("PATH="):
        assigned = [w for w in (args if name == "export" else words) if w.startswith("PATH=")]
        dirs = [e for w in assigned for e in w[len("PATH="):].split(":")]
    else:
        return []
    return [d for d in dirs if _literal(d)]


def _literal(d: str) -> bool:
    """A directory written out (the directory of the `.envrc` allowed), not `$PATH` or another variable."""
    rest = d.replace(_PWD_MARK, "")
    return bool(d) and "$" not in rest and "`" not in rest and not d.startswith("~")
