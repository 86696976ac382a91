"""git: repositories outside the workspace, config/helpers from arguments, aliases, destructive subcommands.

Findings fall in `code_execution_wrapper` (things git would run) and
`destructive` (forced pushes, reset --hard, clean, checkout/restore of everything).
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from .options import _lm, _scan
from .paths import _Ctx, _norm

_GIT_BUILTINS = frozenset(
    """add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore
    check-mailmap check-ref-format checkout checkout-index cherry cherry-pick clean clone column commit
    commit-graph commit-tree config count-objects describe diagnose diff diff-files diff-index diff-tree
    fast-export fast-import fetch for-each-ref format-patch fsck gc get-tar-commit-id grep hash-object help
    index-pack init init-db interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit maintenance
    merge merge-base merge-file merge-tree mktag mktree multi-pack-index mv name-rev notes pack-objects
    pack-refs prune prune-packed pull push range-diff read-tree rebase reflog remote repack replace rerere
    reset restore rev-list rev-parse revert rm shortlog show show-branch show-ref sparse-checkout stash
    status stripspace submodule switch symbolic-ref tag unpack-objects update-index update-ref var
    verify-commit verify-pack verify-tag version whatchanged worktree write-tree""".split()
)
_GIT_GLOBAL_VALUES = ("--namespace", "--super-prefix", "--list-cmds", "--attr-source")
_ALL_PATHS = frozenset({".", "./", ":/", ":/.", "*", ":(top)", ":(top)."})


_REPO_OPTIONS = ("--git-dir", "--work-tree")  # global options naming where the repository is
_SUB_REPO_OPTIONS = ("--git-dir", "--work-tree", "--separate-git-dir")  # the same, after a subcommand


def _resolve_dir(ctx: _Ctx, base: str | None, value: str) -> str | None:
    """A -C/--git-dir/--work-tree value as the OS would reach it (symlinks followed); None: unresolvable."""
    if value == "":
        return base
    if value[0] in ("/", "~", "$"):
        p = ctx.abs(value)
    else:
        p = None if base is None else _norm(base + "/" + value)
    if p is None:
        return None
    try:
        return os.path.realpath(p)
    except (OSError, ValueError):
        return None


def _judge_dir(ctx: _Ctx, p: str | None) -> bool:
    """Add the finding for a repository location; True when the call is denied (stop looking)."""
    if p is None or not ctx.inside(p):
        ctx.add("code_execution_wrapper", "deny", "git pointed at a repository outside the workspace")
        return True
    if p != ctx.ws and ctx.writable(p):
        # A repository the agent can write to may have been planted there (in this very command):
        # git would read its configuration. The workspace root itself is where git looks anyway.
        ctx.add("code_execution_wrapper", "ask", "git pointed at a repository in a directory the agent can write")
    return False


def _repo_option(a: str, names: Sequence[str]) -> bool:
    """`a` is `--name`, `--name=value` or an abbreviation of one of `names` (at least `--x`)."""
    name = a.split("=", 1)[0]
    return a.startswith("--") and any(_lm(name, n) and len(name) >= 4 for n in names)


def _option_value(args: Sequence[str], i: int, a: str) -> tuple[str, int]:
    """(value, next index) of an option written `--opt=value`, or `--opt value` / `-C value`."""
    if a.startswith("--") and "=" in a:
        return a.split("=", 1)[1], i
    return (args[i] if i < len(args) else ""), i + 1


def _git(ctx: _Ctx, args: Sequence[str]) -> None:
    base = ctx.cwd
    i, n = 0, len(args)
    sub: str | None = None
    while i < n:
        a = args[i]
        i += 1
        if a == "-C" or _repo_option(a, _REPO_OPTIONS):
            value, i = _option_value(args, i, a)
            new = _resolve_dir(ctx, base, value)
            if a == "-C":
                base = new
            if _judge_dir(ctx, new):
                return
            continue
        if a.startswith("-c") or a.startswith(("--config-env", "--exec-path")):
            ctx.add("code_execution_wrapper", "deny", "git configuration or helper path from an argument")
            return
        if a.startswith("-"):
            if a in _GIT_GLOBAL_VALUES:
                i += 1
            continue
        sub = a
        break
    if sub is None:
        return
    rest = args[i:]
    if _sub_repo_options(ctx, base, rest):
        return
    for a in rest:
        name = a.split("=", 1)[0]
        if "ext::" in a.lower() or (name.startswith("--") and (
                _lm(name, "--upload-pack") or _lm(name, "--receive-pack") or (len(name) >= 4 and _lm(name, "--exec")))):
            ctx.add("code_execution_wrapper", "deny", "git transport or helper command from an argument")
            return
    if sub not in _GIT_BUILTINS:
        ctx.add("code_execution_wrapper", "ask", "git subcommand that may be an alias or an external program")
        return
    check = _GIT_SUB.get(sub)
    if check is not None:
        check(ctx, rest)


def _sub_repo_options(ctx: _Ctx, base: str | None, rest: Sequence[str]) -> bool:
    """`--git-dir`, `--work-tree` and `--separate-git-dir` given to a subcommand: judged like the global ones."""
    i = 0
    while i < len(rest):
        a = rest[i]
        i += 1
        if a == "--":
            return False
        if _repo_option(a, _SUB_REPO_OPTIONS):
            value, i = _option_value(rest, i, a)
            if _judge_dir(ctx, _resolve_dir(ctx, base, value)):
                return True
    return False


def _git_push(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "o", ("--receive-pack", "--exec", "--repo", "--push-option"))
    if "f" in shorts or any(_lm(l, "--force") for l in longs) or any(o.startswith("+") for o in ops):
        ctx.add("destructive", "deny", "forced git push")
    elif any(l.startswith("--force-") for l in longs):
        ctx.add("destructive", "ask", "forced git push with a lease")
    elif ("d" in shorts or any(_lm(l, "--delete") or _lm(l, "--mirror") or _lm(l, "--prune") for l in longs)
          or any(o.startswith(":") for o in ops[1:])):
        ctx.add("destructive", "ask", "git push that deletes remote refs")


def _git_reset(ctx: _Ctx, rest: Sequence[str]) -> None:
    if any(_lm(a.split("=", 1)[0], "--hard") for a in rest if a.startswith("--")):
        ctx.add("destructive", "ask", "git reset --hard discards local changes")


def _git_clean(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, _ = _scan(rest, "e", ("--exclude",))
    force = "f" in shorts or any(_lm(l, "--force") for l in longs)
    dry = "n" in shorts or any(_lm(l, "--dry-run") for l in longs)
    if force and not dry and ("d" in shorts or "x" in shorts or "X" in shorts):
        ctx.add("destructive", "ask", "git clean removes untracked files")


def _git_checkout(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "bB", ("--conflict", "--orphan", "--pathspec-from-file"))
    if any(o in _ALL_PATHS for o in ops) or "f" in shorts or any(_lm(l, "--force") for l in longs):
        ctx.add("destructive", "ask", "git checkout discards local changes")


def _git_restore(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "s", ("--source", "--pathspec-from-file", "--conflict"))
    staged = "S" in shorts or any(_lm(l, "--staged") for l in longs)
    worktree = "W" in shorts or any(_lm(l, "--worktree") for l in longs)
    if any(o in _ALL_PATHS for o in ops) and (worktree or not staged):
        ctx.add("destructive", "ask", "git restore discards local changes")


def _git_stash(ctx: _Ctx, rest: Sequence[str]) -> None:
    if rest and rest[0] in ("clear", "drop"):
        ctx.add("destructive", "ask", "git stash drops saved changes")


def _git_clone(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, _ = _scan(rest, "obucj", ("--origin", "--branch", "--upload-pack", "--config", "--template"))
    if "u" in shorts or "c" in shorts or any(_lm(l, "--config") or _lm(l, "--template") for l in longs):
        ctx.add("code_execution_wrapper", "deny", "git clone with configuration or templates from an argument")


def _git_init(ctx: _Ctx, rest: Sequence[str]) -> None:
    if any(a.startswith("--") and _lm(a.split("=", 1)[0], "--template") for a in rest):
        ctx.add("code_execution_wrapper", "deny", "git init with templates from an argument")


def _git_ls_remote(ctx: _Ctx, rest: Sequence[str]) -> None:
    if "u" in _scan(rest)[0]:
        ctx.add("code_execution_wrapper", "deny", "git transport or helper command from an argument")


def _git_rebase(ctx: _Ctx, rest: Sequence[str]) -> None:
    if "x" in _scan(rest, "sXxC", ("--strategy", "--strategy-option", "--onto", "--exec"))[0]:
        ctx.add("code_execution_wrapper", "deny", "git rebase running commands")


def _git_bisect(ctx: _Ctx, rest: Sequence[str]) -> None:
    if rest and rest[0] == "run":
        ctx.add("code_execution_wrapper", "deny", "git bisect running commands")


def _git_submodule(ctx: _Ctx, rest: Sequence[str]) -> None:
    if "foreach" in rest:
        ctx.add("code_execution_wrapper", "deny", "git submodule running commands")


def _git_grep(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, _ = _scan(rest, "efABCm", ("--max-depth", "--threads", "--and", "--or", "--not"))
    if "O" in shorts or any(_lm(l, "--open-files-in-pager") for l in longs):
        ctx.add("code_execution_wrapper", "deny", "git grep opening a pager program")


_GIT_CONFIG_WRITES = ("--add", "--replace-all", "--unset", "--unset-all", "--rename-section",
                      "--remove-section", "--edit")
_GIT_CONFIG_READS = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list")


def _git_config(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "f", ("--file", "--blob", "--type", "--default", "--comment"))
    write = "e" in shorts or any(any(_lm(l, w) for w in _GIT_CONFIG_WRITES) for l in longs)
    if ops and ops[0] in ("set", "unset", "rename-section", "remove-section", "edit"):
        write = True
    reads = "l" in shorts or any(any(_lm(l, r) for r in _GIT_CONFIG_READS) for l in longs)
    if ops and ops[0] in ("get", "list"):
        reads = True
    if write or (not reads and len(ops) >= 2):
        ctx.add("code_execution_wrapper", "ask", "git configuration change (can define commands git runs)")


_GIT_SUB: dict[str, Callable[[_Ctx, Sequence[str]], None]] = {
    "push": _git_push, "reset": _git_reset, "clean": _git_clean, "checkout": _git_checkout,
    "restore": _git_restore, "stash": _git_stash, "clone": _git_clone, "init": _git_init,
    "init-db": _git_init, "ls-remote": _git_ls_remote, "rebase": _git_rebase, "bisect": _git_bisect,
    "submodule": _git_submodule, "grep": _git_grep, "config": _git_config,
}
