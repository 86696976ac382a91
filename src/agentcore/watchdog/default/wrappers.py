"""`code_execution_wrapper` checks for shells, builtins and wrappers that run other commands.

Also find/fd actions and the hooks of tar, rg/grep and zip. git, sed, awk and
the interpreters have modules of their own.
"""

from __future__ import annotations

from typing import Sequence

from .options import _ASSIGNMENT, _SHELL_INFO, _info_only, _lm, _remote_spec, _scan
from .paths import _Ctx


def _shell(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args, _SHELL_INFO):
        ctx.add("code_execution_wrapper", "deny", "a shell running code from arguments or standard input")


def _wrapper(ctx: _Ctx, args: Sequence[str]) -> None:
    if args and not _info_only(args):
        ctx.add("code_execution_wrapper", "deny", "a wrapper that runs another command")


def _eval_builtin(ctx: _Ctx, args: Sequence[str]) -> None:
    if args:
        ctx.add("code_execution_wrapper", "deny", "a builtin that runs code from its arguments or a file")


def _trap(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(a not in ("-l", "-p", "--") for a in args):
        ctx.add("code_execution_wrapper", "deny", "a trap that runs code later")


def _alias(ctx: _Ctx, args: Sequence[str]) -> None:
    if any("=" in a for a in args):
        ctx.add("code_execution_wrapper", "deny", "an alias definition")


def _hash(ctx: _Ctx, args: Sequence[str]) -> None:
    if "p" in _scan(args, "p")[0]:
        ctx.add("code_execution_wrapper", "deny", "a hashed command path from an argument")


def _command(ctx: _Ctx, args: Sequence[str]) -> None:
    letters: set[str] = set()
    for a in args:
        if a == "--" or not (len(a) > 1 and a[0] == "-"):
            break
        letters.update(a[1:])
    if letters and letters <= {"p", "v", "V"} and letters & {"v", "V"}:
        return  # `command -v name`: a lookup, runs nothing
    if args:
        ctx.add("code_execution_wrapper", "deny", "a wrapper that runs another command")


_ENV_VALUE_LONGS = ("--unset", "--chdir")


def _env(ctx: _Ctx, args: Sequence[str]) -> None:
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            break
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            if _lm(name, "--split-string"):
                ctx.add("code_execution_wrapper", "deny", "env running a command")
                return
            if not eq and any(_lm(name, c) for c in _ENV_VALUE_LONGS):
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                if a[j] == "S":
                    ctx.add("code_execution_wrapper", "deny", "env running a command")
                    return
                if a[j] in "uC":
                    if j == len(a) - 1:
                        i += 1
                    break
            continue
        if a == "-" or _ASSIGNMENT.match(a):
            continue
        ctx.add("code_execution_wrapper", "deny", "env running a command")
        return
    if i < n:  # words after `--`
        rest = [a for a in args[i:] if not _ASSIGNMENT.match(a)]
        if rest:
            ctx.add("code_execution_wrapper", "deny", "env running a command")


_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})


def _find(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(a in _FIND_ACTIONS for a in args):
        ctx.add("code_execution_wrapper", "deny", "find running commands, deleting or writing files")


def _fd(ctx: _Ctx, args: Sequence[str]) -> None:
    for a in args:
        if a.startswith("--exec") or (len(a) > 1 and a[0] == "-" and a[1] != "-" and ("x" in a or "X" in a)):
            ctx.add("code_execution_wrapper", "deny", "fd running commands")
            return


_TAR_HOOKS = ("--checkpoint-action", "--to-command", "--use-compress-program", "--rsh-command",
              "--info-script", "--new-volume-script", "--rmt-command")


def _tar_archive(a: str) -> str | None:
    """The archive name written into the word itself: `--file=NAME`, or `-cfNAME` (after `f` in a cluster)."""
    if a.startswith("--file="):
        return a[len("--file="):]
    if len(a) > 2 and a[0] == "-" and a[1] != "-" and "f" in a:
        return a[a.index("f") + 1:] or None
    return None


def _tar(ctx: _Ctx, args: Sequence[str]) -> None:
    force_local = False
    remote = False
    for k, a in enumerate(args):
        # An attached archive name reaches a remote host (and its --rsh-command) as a separate one does.
        named = _tar_archive(a)
        remote = remote or (named is not None and _remote_spec(named))
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            # Every prefix counts (tar takes `--rs` for --rsh-command); `--checkpoint` is an option of its own.
            if name != "--checkpoint" and any(_lm(name, h) for h in _TAR_HOOKS):
                ctx.add("code_execution_wrapper", "deny", "tar running a program")
                return
            force_local = force_local or _lm(name, "--force-local")
        elif (len(a) > 1 and a[0] == "-") or k == 0:  # the first word is an option cluster in old style
            if "I" in a or "F" in a:
                ctx.add("code_execution_wrapper", "deny", "tar running a program")
                return
    remote = remote or any(_remote_spec(a) for a in args[1:] if not a.startswith("-"))
    if not force_local and remote:
        ctx.add("exfiltration", "deny", "tar archive on a remote host")


# ripgrep's options that name a program it runs (rg accepts no abbreviations of long options).
_RG_PROGRAMS = ("--pre", "--hostname-bin")


def _rg(ctx: _Ctx, args: Sequence[str]) -> None:
    for a in args:
        if a == "--":
            return
        if a.split("=", 1)[0] in _RG_PROGRAMS:
            ctx.add("code_execution_wrapper", "deny", "search running a preprocessor or helper program")
            return


def _zip(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(a.startswith("-TT") or a.startswith("--unzip-command") for a in args):
        ctx.add("code_execution_wrapper", "deny", "zip running a test program")


def _short_letters(args: Sequence[str], values: str) -> list[tuple[str, str]]:
    """The (letter, value) pairs of bash builtin option clusters up to the first operand or `--`."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--" or not (len(a) > 1 and a[0] == "-"):
            break
        for j in range(1, len(a)):
            if a[j] in values:
                value = a[j + 1:] if j + 1 < len(a) else (args[i] if i < n else "")
                i += 0 if j + 1 < len(a) else 1
                out.append((a[j], value))
                break
            out.append((a[j], ""))
    return out


def _jobs(ctx: _Ctx, args: Sequence[str]) -> None:
    # `jobs -x CMD ARGS` runs CMD, hidden from the program table like `command CMD`.
    if any(ch == "x" for ch, _ in _short_letters(args, "")):
        ctx.add("code_execution_wrapper", "deny", "a builtin that runs the command in its arguments")


def _compgen(ctx: _Ctx, args: Sequence[str]) -> None:
    # -C runs a command, -F a function; -W's word list is expanded by the shell: `$(…)` in it runs.
    for ch, value in _short_letters(args, "oAGWPSXFCV"):
        if ch in "CF" or (ch == "W" and ("$" in value or "`" in value)):
            ctx.add("code_execution_wrapper", "deny", "a completion builtin that runs a command")
            return


def _fc(ctx: _Ctx, args: Sequence[str]) -> None:
    # Without -l, fc runs an editor on history entries (which `history -s`/`-r` can plant) and runs the result.
    if not any(ch == "l" for ch, _ in _short_letters(args, "e")):
        ctx.add("code_execution_wrapper", "deny", "a history builtin that runs commands")


def _groff(ctx: _Ctx, args: Sequence[str]) -> None:
    # Unsafe mode (-U) lets the document run shell commands; without it groff refuses them.
    if "U" in _scan(args, "dDfFIKLmMnoPrTwW")[0]:
        ctx.add("code_execution_wrapper", "deny", "groff in unsafe mode, whose input can run commands")
