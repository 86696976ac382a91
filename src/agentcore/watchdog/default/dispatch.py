"""One simple command at a time: environment prefixes, redirections, the program's check, secret words.

Which program gets which check is the program table in programs.py.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Sequence

from .hooks import _toolchain_name
from .options import _ASSIGNMENT
from .paths import _Ctx
from .programs import _DISPATCH
from .secrets import _secret_word, _word_candidates

_VERSIONED = re.compile(r"(python|pypy|perl|ruby|php|lua|luajit|node|tclsh|pip|pydoc|pdb|ipython|bpython|irb|wish)[0-9.]*")
_SYSTEM_BIN = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})
_CWD_CHANGING = frozenset({"cd", "pushd", "popd"})

# Variables that change which code a program loads or runs.
_DANGEROUS_ENV = frozenset(
    """PATH BASH_ENV ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND IFS HOME XDG_CONFIG_HOME PYTHONPATH PYTHONSTARTUP
    PYTHONHOME NODE_OPTIONS NODE_PATH PERL5OPT PERL5LIB PERLLIB RUBYOPT RUBYLIB PAGER EDITOR VISUAL MANPAGER
    LESSOPEN LESSCLOSE BROWSER TAR_OPTIONS WGETRC CURL_HOME SSH_ASKPASS JAVA_TOOL_OPTIONS _JAVA_OPTIONS
    GCONV_PATH""".split()
)
_DANGEROUS_ENV_PREFIXES = ("LD_", "DYLD_", "GIT_", "BASH_FUNC_")


def _program_name(argv0: str) -> str:
    name = argv0.rsplit("/", 1)[-1]
    if name in _DISPATCH:
        return name
    m = _VERSIONED.fullmatch(name)
    if m:
        return m.group(1)
    return _toolchain_name(name) or name


def _env_prefixes(ctx: _Ctx, argv: Sequence[str]) -> int:
    """Judge NAME=value prefixes (if the parser passed them); the index of the program word."""
    k = 0
    while k < len(argv) and _ASSIGNMENT.match(argv[k]):
        var = argv[k].split("=", 1)[0]
        if var in _DANGEROUS_ENV or var.startswith(_DANGEROUS_ENV_PREFIXES):
            ctx.add("code_execution_wrapper", "deny", "an environment variable that changes which code runs")
        k += 1
    return k


def _redirections(ctx: _Ctx, redirects: Sequence[Any], check_secrets: bool) -> None:
    for red in redirects:
        target = getattr(red, "target", None)
        if isinstance(target, str) and target:
            if target.startswith(("/dev/tcp/", "/dev/udp/")):
                ctx.add("exfiltration", "deny", "a redirection to a network socket")
            elif check_secrets and target != "/dev/null" and _secret_word(ctx, target):
                ctx.add("secrets", "ask", "a redirection touches a secret file")


def _program_path(ctx: _Ctx, argv0: str) -> None:
    if "/" not in argv0:
        return
    p = ctx.abs(argv0)
    if p is None or ctx.inside(p):
        ctx.add("code_execution_wrapper", "ask", "runs a program from inside the workspace")
    elif posixpath.dirname(p) not in _SYSTEM_BIN:
        ctx.add("code_execution_wrapper", "ask", "runs a program by a path outside the system directories")


def _argument_words(ctx: _Ctx, args: Sequence[str], check_secrets: bool) -> None:
    if any("/dev/tcp/" in a or "/dev/udp/" in a for a in args):
        ctx.add("exfiltration", "deny", "a network socket path")
    if check_secrets and any(_secret_word(ctx, c) for a in args for c in _word_candidates(a) if c):
        ctx.add("secrets", "ask", "an argument names a secret file")


def _review_command(ctx: _Ctx, argv: Sequence[str], redirects: Sequence[Any], check_secrets: bool) -> None:
    words = argv[_env_prefixes(ctx, argv):]
    _redirections(ctx, redirects, check_secrets)
    if not words:
        return
    argv0, args = words[0], words[1:]
    _program_path(ctx, argv0)
    name = _program_name(argv0)
    check = _DISPATCH.get(name)
    if check is not None:
        check(ctx, args)
    elif name.startswith("mkfs"):
        ctx.add("destructive", "deny", "a filesystem creation tool")
    _argument_words(ctx, args, check_secrets)
    if name in _CWD_CHANGING:
        ctx.cwd = None  # later relative words can no longer be resolved
