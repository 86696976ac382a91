"""Build tools, test runners and package managers: they run code that lives in the workspace.

A Makefile, build.rs, a proc macro, conftest.py, setup.py, a Gradle or Maven
build, a Rakefile or a justfile is code, and whoever could write the
workspace wrote it. These programs ask, like `make` and `npm run` do.

Some read project files before they even look at their arguments (mvn reads
`.mvn/jvm.config`, rustup proxies read `rust-toolchain.toml`, pytest imports
`conftest.py` for `--help`): those ask even for `--version`. The others
answer `--version`/`--help` without asking. pip, go and docker have
read-only subcommands that are allowed.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .options import _info_only
from .paths import _Ctx

_Check = Callable[[_Ctx, Sequence[str]], None]
_PROJECT = "a build tool or test runner running project code"


def _ask_always(detail: str) -> _Check:
    def check(ctx: _Ctx, args: Sequence[str]) -> None:
        ctx.add("code_execution_wrapper", "ask", detail)
    return check


def _ask_unless_info(detail: str) -> _Check:
    def check(ctx: _Ctx, args: Sequence[str]) -> None:
        if not _info_only(args) and not (args and args[0] == "help"):
            ctx.add("code_execution_wrapper", "ask", detail)
    return check


def _first_word(args: Sequence[str], valued: frozenset[str]) -> tuple[str | None, bool]:
    """(first non-option word, whether every option before it was one we know)."""
    i, n = 0, len(args)
    known = True
    while i < n:
        a = args[i]
        i += 1
        if not a.startswith("-") or a == "-":
            return a, known
        name = a.split("=", 1)[0]
        if name in valued and "=" not in a:
            i += 1
        elif name not in valued and a not in ("-v", "-q", "--verbose", "--quiet", "--no-color", "--isolated"):
            known = False
    return None, known


# --- pip ------------------------------------------------------------------------------------------------

_PIP_READS = frozenset({"list", "show", "freeze", "check", "help", "index", "inspect", "debug", "hash", "search",
                        "completion", "cache"})
_PIP_VALUED = frozenset({"--log", "--proxy", "--retries", "--timeout", "--exists-action", "--trusted-host",
                         "--cert", "--client-cert", "--cache-dir", "--use-feature", "--use-deprecated",
                         "--keyring-provider", "--root-user-action", "--python"})


def _pip(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    if any(a.split("=", 1)[0] == "--python" for a in args):
        ctx.add("code_execution_wrapper", "deny", "pip running an interpreter named in an argument")
        return
    sub, known = _first_word(args, _PIP_VALUED)
    if sub not in _PIP_READS or not known:
        ctx.add("code_execution_wrapper", "ask", "a package manager that builds and installs packages "
                "(setup.py and build backends run)")


# --- go -------------------------------------------------------------------------------------------------

_GO_READS = frozenset({"build", "clean", "doc", "env", "fix", "fmt", "get", "install", "list", "mod", "work",
                       "version", "vet", "help", "telemetry"})
# Flags whose value is a program go runs (`-toolexec`, `go test -exec`, `go vet -vettool`).
_GO_PROGRAM_FLAGS = frozenset({"toolexec", "exec", "vettool"})


def _go_flag(a: str) -> tuple[str, str | None]:
    body = a.lstrip("-")
    name, eq, val = body.partition("=")
    return name, (val if eq else None)


def _go(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    sub, _ = _first_word(args, frozenset({"-C"}))
    for k, a in enumerate(args):
        if not a.startswith("-"):
            continue
        name, val = _go_flag(a)
        value = val if val is not None else (args[k + 1] if k + 1 < len(args) else "")
        if name in _GO_PROGRAM_FLAGS or (name == "ldflags" and "extld" in value):
            ctx.add("code_execution_wrapper", "deny", "go running a program named in a flag")
            return
        if name in ("gccgoflags", "compiler") or (sub == "env" and name in ("w", "u")):
            ctx.add("code_execution_wrapper", "ask", "go toolchain settings that can run programs")
            return
    if sub not in _GO_READS:
        ctx.add("code_execution_wrapper", "ask", "go running project code (run, test, generate, tool)")


# --- docker and compatible clients ------------------------------------------------------------------------

_DOCKER_READS = frozenset({"version", "info", "ps", "images", "inspect", "logs", "help", "search", "history",
                           "port", "top", "stats", "diff", "events"})


def _docker(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    if not args or args[0].startswith("-") or args[0] not in _DOCKER_READS:
        ctx.add("code_execution_wrapper", "ask", "a container engine running images, builds or commands")


# --- package managers other than npm/yarn/pnpm (interpreters.py) --------------------------------------------

_CONDA_READS = frozenset({"list", "info", "search", "help", "config"})


def _conda(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    sub = next((a for a in args if not a.startswith("-")), None)
    if sub not in _CONDA_READS or (sub == "config" and not any(a in ("--show", "--get", "--describe") for a in args)):
        ctx.add("code_execution_wrapper", "ask", "a package manager that may run package scripts")


_GEM_READS = frozenset({"list", "search", "query", "info", "contents", "env", "help", "which", "specification",
                        "dependency", "outdated"})


def _gem(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    sub = next((a for a in args if not a.startswith("-")), None)
    if sub not in _GEM_READS:
        ctx.add("code_execution_wrapper", "ask", "a package manager that builds native extensions")
