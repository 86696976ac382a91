"""awk: programs that run commands or write files, program files, shared-library loading."""

from __future__ import annotations

import re
from typing import Sequence

from .options import _lm
from .paths import _Ctx


_AWK_EXEC = re.compile(r"system\s*\(|\|\s*&?\s*getline|\|&|@|\bprintf?\b[^;{}\n]*[>|]")
_AWK_STD = re.compile(r">\s*\"/dev/(?:stderr|stdout)\"")


def _awk(ctx: _Ctx, args: Sequence[str]) -> None:
    programs: list[str] = []
    from_file = sandbox = False
    ops: list[str] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            ops.extend(args[i:])
            break
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if _lm(name, "--source"):
                programs.append(val if eq else (args[i] if i < n else ""))
                i += 0 if eq else 1
            elif any(_lm(name, c) for c in ("--file", "--exec", "--include")):
                from_file = True
                i += 0 if eq else 1
            elif _lm(name, "--load"):
                ctx.add("code_execution_wrapper", "deny", "awk loading a shared library")
                return
            elif _lm(name, "--sandbox"):
                sandbox = True
            elif not eq and any(_lm(name, c) for c in ("--field-separator", "--assign")):
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            ch = a[1]
            value = a[2:]
            if ch in "FvfeEilW" and not value:
                value = args[i] if i < n else ""
                i += 1
            if ch == "W" and value.startswith("e"):  # mawk -W exec FILE
                from_file = True
            if ch == "e":
                programs.append(value)
            elif ch in "fEi":
                from_file = True
            elif ch == "l":
                ctx.add("code_execution_wrapper", "deny", "awk loading a shared library")
                return
            elif ch == "S":
                sandbox = True
            continue
        ops.append(a)
    if not programs and not from_file and ops:
        programs.append(ops[0])
    if sandbox:
        return
    if any(_AWK_EXEC.search(_AWK_STD.sub("", p)) for p in programs):
        ctx.add("code_execution_wrapper", "deny", "awk program that runs commands or writes files")
    elif from_file:
        ctx.add("code_execution_wrapper", "ask", "awk program read from a file")
