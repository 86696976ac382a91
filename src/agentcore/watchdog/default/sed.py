"""sed: scripts that run commands (e, s///e) or write files (w, W, s///w), script files, in-place edits.

The script reader is deliberately strict: anything it does not recognise
counts as running or writing, so the call is refused.
"""

from __future__ import annotations

from typing import Sequence

from .options import _lm
from .paths import _Ctx


def _sed(ctx: _Ctx, args: Sequence[str]) -> None:
    scripts: list[str] = []
    script_file = in_place = sandbox = False
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
            if _lm(name, "--expression"):
                scripts.append(val if eq else (args[i] if i < n else ""))
                i += 0 if eq else 1
            elif name == "--file" or (_lm(name, "--file") and len(name) > 3):
                script_file = True
                i += 0 if eq else 1
            elif _lm(name, "--in-place"):
                in_place = True
            elif name == "--sandbox":
                sandbox = True
            elif _lm(name, "--line-length") and not eq:
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                ch = a[j]
                if ch == "i" or ch == "I":
                    in_place = True
                    break  # the rest is the backup suffix
                if ch in "efl":
                    value = a[j + 1:]
                    if not value:
                        value = args[i] if i < n else ""
                        i += 1
                    if ch == "e":
                        scripts.append(value)
                    elif ch == "f":
                        script_file = True
                    break
            continue
        ops.append(a)
    if not scripts and not script_file and ops:
        scripts.append(ops[0])
    if not sandbox:
        if any(_sed_runs_or_writes(s) for s in scripts):
            ctx.add("code_execution_wrapper", "deny", "sed script that runs commands or writes files")
            return
        if script_file:
            ctx.add("code_execution_wrapper", "ask", "sed script read from a file")
    if in_place:
        ctx.add("code_execution_wrapper", "ask", "sed editing files in place")


def _sed_runs_or_writes(s: str) -> bool:
    """True if the sed script has an e/w/W command or s///e, s///w flags, or cannot be read."""
    n = len(s)
    i = 0

    def delimited(i: int, d: str) -> int:
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == d:
                return i + 1
            if c == "\n" and d != "\n":
                return -1
            i += 1
        return -1

    def address(i: int) -> int:
        if i < n and s[i].isdigit():
            while i < n and s[i].isdigit():
                i += 1
            if i < n and s[i] == "~":
                i += 1
                while i < n and s[i].isdigit():
                    i += 1
            return i
        if i < n and s[i] == "$":
            return i + 1
        if i < n and (s[i] == "/" or s[i] == "\\"):
            if s[i] == "\\":
                if i + 1 >= n:
                    return -1
                i += 1
            i = delimited(i + 1, s[i])
            while 0 <= i < n and s[i] in "IM":
                i += 1
        return i

    def to_line_end(i: int) -> int:
        while i < n and s[i] != "\n":
            i += 2 if s[i] == "\\" else 1
        return i

    while i < n:
        c = s[i]
        if c in " \t\n;":
            i += 1
            continue
        i = address(i)
        if i < 0:
            return True
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == ",":
            i += 1
            while i < n and s[i] in " \t":
                i += 1
            if i < n and s[i] in "+~":
                i += 1
            i = address(i)
            if i < 0:
                return True
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            return True
        cmd = s[i]
        i += 1
        if cmd in "{}=dDgGhHnNpPxzF":
            continue
        if cmd in "ewW":
            return True
        if cmd == "#" or cmd in "aicrR":
            i = to_line_end(i)
            continue
        if cmd in ":btTv":
            while i < n and s[i] not in ";\n":
                i += 1
            continue
        if cmd in "qQlL":
            while i < n and (s[i].isdigit() or s[i] in " \t"):
                i += 1
            continue
        if cmd in "sy":
            if i >= n or s[i] in "\n\\":
                return True
            d = s[i]
            i = delimited(i + 1, d)
            if i < 0:
                return True
            i = delimited(i, d)
            if i < 0:
                return True
            if cmd == "s":
                while i < n and s[i] not in ";\n}#":
                    if s[i] in "ewW":
                        return True
                    if s[i] not in "gpiImM0123456789 \t":
                        return True
                    i += 1
            continue
        return True
    return False
