"""Interpreters and project runners: inline code is refused, workspace scripts and project tasks ask."""

from __future__ import annotations

from typing import Sequence

from .options import _INTERP_INFO, _info_only
from .paths import _Ctx


class _Interp:
    """How an interpreter takes inline code, modules and script files."""

    __slots__ = ("evals", "eval_longs", "mods", "mod_longs", "values", "attached", "repl", "mod_stops",
                 "script_flag", "info")

    def __init__(self, evals: str, eval_longs: Sequence[str] = (), mods: str = "", mod_longs: Sequence[str] = (),
                 values: str = "", attached: str = "", repl: str = "", mod_stops: bool = False,
                 script_flag: str = "", version_v: bool = False) -> None:
        self.evals, self.eval_longs, self.mods, self.mod_longs = evals, tuple(eval_longs), mods, tuple(mod_longs)
        self.values, self.attached, self.repl, self.mod_stops = values, attached, repl, mod_stops
        self.script_flag = script_flag  # php -f FILE
        self.info = _INTERP_INFO | {"-v"} if version_v else _INTERP_INFO


_PY = _Interp("c", (), "m", (), "WXQ", "", "i", mod_stops=True)
_INTERPRETERS: dict[str, _Interp] = {
    "python": _PY, "pypy": _PY,
    "node": _Interp("ep", ("--eval", "--print"), "r", ("--require", "--import", "--loader", "--experimental-loader"),
                    "", "", "i", version_v=True),
    "perl": _Interp("eE", (), "Mmd", (), "", "iIx0C", "", version_v=True),
    "ruby": _Interp("e", (), "r", ("--require",), "IEC", "xKWT", ""),
    "php": _Interp("rBRE", (), "", (), "cdzt", "", "a", script_flag="f"),
    "lua": _Interp("e", (), "l", (), "", "", "i"),
    "luajit": _Interp("e", (), "lj", (), "", "", "i"),
    "Rscript": _Interp("e", ("--eval",), "", (), "", "", ""),
    "julia": _Interp("eE", ("--eval", "--print"), "L", ("--load",), "JCOpt", "", "i"),
    "tclsh": _Interp("", (), "", (), "", "", ""),
}
_INTERPRETERS["nodejs"] = _INTERPRETERS["node"]


_INLINE = ("deny", "inline code passed to an interpreter")
_REPL = ("deny", "an interactive interpreter reading standard input")
_MODULE = ("ask", "an interpreter running a module or library")


def _interp_cluster(a: str, args: Sequence[str], i: int, spec: _Interp) -> tuple[int, tuple[str, str] | None,
                                                                              bool, str | None]:
    """One short-option cluster: (next index, finding that ends the scan, module option seen, script)."""
    module = False
    for j in range(1, len(a)):
        ch = a[j]
        if ch in spec.evals:
            return i, _INLINE, module, None
        if ch in spec.repl:
            return i, _REPL, module, None
        if ch in spec.mods or ch in spec.values:
            module = ch in spec.mods
            return (i + 1 if j == len(a) - 1 else i), None, module, None
        if ch in spec.attached:
            break
        if ch == spec.script_flag:
            return len(args), None, module, a[j + 1:] or (args[i] if i < len(args) else None)
    return i, None, module, None


def _interp_scan(args: Sequence[str], spec: _Interp) -> tuple[tuple[str, str] | None, str | None]:
    """(a finding that decides the call, else None; the script operand, None when code comes from stdin)."""
    module = False
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            return None, (args[i] if i < n else None)
        if a == "-":
            return None, None
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            if name in spec.eval_longs:
                return _INLINE, None
            if name in spec.mod_longs:
                module = True
                i += 0 if eq else 1
            continue
        if len(a) > 1 and a[0] == "-":
            i, finding, mod, script = _interp_cluster(a, args, i, spec)
            module = module or mod
            if finding is not None or script is not None:
                return finding, script
            if module and spec.mod_stops:
                return _MODULE, None
            continue
        return None, a
    return None, None


def _interpreter(ctx: _Ctx, args: Sequence[str], spec: _Interp) -> None:
    if _info_only(args, spec.info):
        return
    finding, script = _interp_scan(args, spec)
    if finding is not None:
        ctx.add("code_execution_wrapper", *finding)
        return
    if script is None:  # preloaded modules or not, the program text itself comes from stdin
        ctx.add("code_execution_wrapper", "deny", "an interpreter reading code from standard input")
        return
    p = ctx.abs(script)
    if p is not None and ctx.inside(p):
        ctx.add("code_execution_wrapper", "ask", "an interpreter running a script file from the workspace")
    else:
        ctx.add("code_execution_wrapper", "deny", "an interpreter running a script from outside the workspace")


def _deno_bun(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    if not args or args[0] in ("eval", "repl", "-e", "--eval", "-p", "--print"):
        ctx.add("code_execution_wrapper", "deny", "inline code passed to an interpreter")
        return
    ctx.add("code_execution_wrapper", "ask", "a JavaScript runtime running project code")


def _make(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args):
        ctx.add("code_execution_wrapper", "ask", "a build tool running project-defined commands")


_PKG_SAFE = {
    "npm": frozenset({"view", "v", "info", "show", "ls", "list", "ll", "la", "outdated", "help", "search", "s",
                      "se", "find", "whoami", "root", "prefix", "explain", "why", "fund", "ping", "query"}),
    "yarn": frozenset({"info", "why", "list", "outdated", "help"}),
    "pnpm": frozenset({"view", "info", "ls", "list", "ll", "la", "outdated", "help", "why", "root"}),
}


def _pkg(ctx: _Ctx, args: Sequence[str], safe: frozenset[str]) -> None:
    if _info_only(args):
        return
    sub = next((a for a in args if not a.startswith("-")), None)
    if sub is None or sub not in safe:
        ctx.add("code_execution_wrapper", "ask", "a package manager command that may run project-defined scripts")


def _pkg_runner(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args):
        ctx.add("code_execution_wrapper", "ask", "a package runner executing downloaded or project code")
