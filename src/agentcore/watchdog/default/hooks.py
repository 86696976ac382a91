"""Programs with an option that names a program to run or a library to load.

sort, split, sdiff and diff3 are GNU programs whose long options may be
abbreviated: every spelling GNU getopt_long would read as the hook counts,
computed from the program's own option table. cmake's `-E` runs a command
for `chdir`, `env` and `time`. The compiler drivers and linkers load
plugins, run wrappers and look for their helper programs where an option
says; ldd may run the program it inspects.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from .options import _info_only, _long_matches
from .paths import _Ctx

_Check = Callable[[_Ctx, Sequence[str]], None]

# The long options of GNU coreutils/diffutils 9.x (`PROGRAM --help`); tests compare them with the real ones.
_SORT_LONGS = frozenset(
    """--batch-size --buffer-size --check --compress-program --debug --dictionary-order --field-separator
    --files0-from --general-numeric-sort --help --human-numeric-sort --ignore-case --ignore-leading-blanks
    --ignore-nonprinting --key --merge --month-sort --numeric-sort --output --parallel --random-sort
    --random-source --reverse --sort --stable --temporary-directory --unique --version --version-sort
    --zero-terminated""".split()
)
_SPLIT_LONGS = frozenset(
    """--additional-suffix --bytes --elide-empty-files --filter --help --hex-suffixes --line-bytes --lines
    --number --numeric-suffixes --separator --suffix-length --unbuffered --verbose --version""".split()
)
_SDIFF_LONGS = frozenset(
    """--diff-program --expand-tabs --help --ignore-all-space --ignore-blank-lines --ignore-case
    --ignore-matching-lines --ignore-space-change --ignore-tab-expansion --ignore-trailing-space --left-column
    --minimal --output --speed-large-files --strip-trailing-cr --suppress-common-lines --tabsize --text
    --version --width""".split()
)
_DIFF3_LONGS = frozenset(
    """--diff-program --easy-only --ed --help --initial-tab --label --merge --overlap-only --show-all
    --show-overlap --strip-trailing-cr --text --version""".split()
)
_INSTALL_LONGS = frozenset(
    """--backup --compare --context --directory --group --help --mode --no-target-directory --owner
    --preserve-context --preserve-timestamps --strip --strip-program --suffix --target-directory --verbose
    --version""".split()
)


def _long_hook(table: frozenset[str], hook: str, detail: str) -> _Check:
    """Deny when a word selects `hook` under GNU getopt_long: written in full or abbreviated, alone or as
    one of several matches (getopt refuses an ambiguous word, so it cannot run anything else)."""

    def check(ctx: _Ctx, args: Sequence[str]) -> None:
        for a in args:
            if a == "--":
                return
            if a.startswith("--") and hook in _long_matches(a.split("=", 1)[0], table):
                ctx.add("code_execution_wrapper", "deny", detail)
                return

    return check


_sort = _long_hook(_SORT_LONGS, "--compress-program", "sort running a compression program")
_split = _long_hook(_SPLIT_LONGS, "--filter", "split running a filter command")
_sdiff = _long_hook(_SDIFF_LONGS, "--diff-program", "sdiff running a diff program")
_diff3 = _long_hook(_DIFF3_LONGS, "--diff-program", "diff3 running a diff program")
_install = _long_hook(_INSTALL_LONGS, "--strip-program", "install running a strip program")


# cmake -E commands that run another command, and those that remove files.
_CMAKE_E_RUN = frozenset({"chdir", "env", "time"})
_CMAKE_E_REMOVE = frozenset({"rm", "remove", "remove_directory"})


def _cmake(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args) or (args and args[0].startswith("--help")):
        return
    if "-E" in args:
        k = args.index("-E")
        sub = args[k + 1] if k + 1 < len(args) else ""
        if sub in _CMAKE_E_RUN:
            ctx.add("code_execution_wrapper", "deny", "cmake -E running another command")
        elif sub in _CMAKE_E_REMOVE:
            ctx.add("destructive", "ask", "cmake -E removing files")
        return
    ctx.add("code_execution_wrapper", "ask", "a build tool running project-defined commands")


def _ldd(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args):
        ctx.add("code_execution_wrapper", "ask", "ldd may run the program it inspects")


# --- compiler drivers (gcc, clang and their versioned or cross names) -------------------------------------

# Options whose value is a program the driver runs, a plugin it loads, or a place it takes its helper
# programs (cc1, as, ld) from.
_CC_DENY_PREFIXES = ("-wrapper", "-fplugin", "-fpass-plugin", "-specs", "--specs", "-B", "--prefix",
                     "--gcc-toolchain", "--gcc-install-dir", "--ld-path", "-ccc-", "-load")
_CC_PLUGIN = re.compile(r"-{1,2}(?:plugin|load|add-plugin|fplugin|fpass-plugin|load-pass-plugin)\b")


def _compiler(ctx: _Ctx, args: Sequence[str]) -> None:
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a.startswith("@"):
            ctx.add("code_execution_wrapper", "ask", "a compiler reading options from a file")
        elif a.startswith(_CC_DENY_PREFIXES) or (a.startswith("-fuse-ld=") and "/" in a):
            ctx.add("code_execution_wrapper", "deny", "a compiler option that runs or loads a program")
            return
        elif a in ("-Xclang", "-Xlinker", "-Xassembler", "-Xpreprocessor") and i < n:
            if _CC_PLUGIN.match(args[i]) or args[i].startswith("@"):
                ctx.add("code_execution_wrapper", "deny", "a compiler option that runs or loads a program")
                return
            i += 1
        elif a.startswith(("-Wl,", "-Wp,", "-Wa,")) and _passed_items_load(a[4:].split(",")):
            ctx.add("code_execution_wrapper", "deny", "an option passed to the linker, preprocessor or assembler "
                    "that loads a plugin")
            return


def _passed_items_load(items: Sequence[str]) -> bool:
    """Items of -Wl,/-Wp,/-Wa, (handed to ld, cc1 or as) that load a plugin or read options from a file."""
    return any(_CC_PLUGIN.match(x) or x.startswith(("@", "-fplugin", "-fpass-plugin")) for x in items)


def _linker(ctx: _Ctx, args: Sequence[str]) -> None:
    for a in args:
        if a.startswith("@"):
            ctx.add("code_execution_wrapper", "ask", "a linker reading options from a file")
        elif _CC_PLUGIN.match(a) or a in ("-run", "--run"):
            ctx.add("code_execution_wrapper", "deny", "a linker option that loads a plugin or runs a command")
            return


# `x86_64-linux-gnu-gcc-12`, `clang++-16`, `ld.lld`: the name without target prefix and version suffix.
_COMPILER_NAME = re.compile(r"(?:[A-Za-z0-9_]+-)*(gcc|g\+\+|cc|c\+\+|clang|clang\+\+)(?:-[0-9][0-9.]*)?")
_LINKER_NAME = re.compile(r"(?:[A-Za-z0-9_]+-)*(ld|ld\.bfd|ld\.gold|ld\.lld|lld|gold|mold)(?:-[0-9][0-9.]*)?")


def _toolchain_name(name: str) -> str | None:
    """The plain compiler or linker name behind a prefixed or versioned spelling, else None."""
    m = _COMPILER_NAME.fullmatch(name) or _LINKER_NAME.fullmatch(name)
    return m.group(1) if m else None
