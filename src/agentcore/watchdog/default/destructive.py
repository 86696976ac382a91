"""The `destructive` category: recursive removal and permission changes, dd to devices, truncation."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Sequence

from .options import _lm, _scan
from .paths import _Ctx


def _removal_danger(ctx: _Ctx, word: str) -> tuple[str, str] | None:
    if not word:
        return None
    if "$" in word or word[0] == "~":
        return "deny", "recursive removal of a home or variable path"
    comps = word.split("/")
    for k, comp in enumerate(comps):
        if "*" in comp or "?" in comp or "[" in comp:
            # bash only matches a leading dot explicitly, so only `.*`-like patterns reach `..`
            if comp[0] in ".[" and (fnmatchcase("..", comp) or fnmatchcase(".", comp)):
                return "deny", "recursive removal with a pattern that can match a parent directory"
            word = "/".join(comps[:k]) or ("/" if word.startswith("/") else ".")
            break
    p = ctx.real(word)
    if p is None:
        return "deny", "recursive removal of a path that cannot be resolved"
    if p == "/":
        return "deny", "recursive removal of the root directory"
    if not ctx.inside(p):
        return "deny", "recursive removal outside the workspace"
    if p == ctx.ws:
        return "deny", "recursive removal of the whole workspace"
    if p.rsplit("/", 1)[-1] == ".git":
        return "ask", "recursive removal of the git repository data"
    return None


def _rm(ctx: _Ctx, args: Sequence[str]) -> None:
    shorts, longs, ops = _scan(args)
    if any(_lm(l, "--no-preserve-root") for l in longs):
        ctx.add("destructive", "deny", "rm without root protection")
    if not ("r" in shorts or "R" in shorts or any(_lm(l, "--recursive") for l in longs)):
        return
    for t in ops:
        hit = _removal_danger(ctx, t)
        if hit is not None:
            ctx.add("destructive", hit[0], hit[1])
            if hit[0] == "deny":
                return


_OCTAL = re.compile(r"0*[0-7]{1,4}")
_SYMBOLIC = re.compile(r"([ugoa]*)([-+=])([rwxXst]*)")


def _world_writable(mode: str) -> bool:
    if _OCTAL.fullmatch(mode):
        return bool(int(mode, 8) & 0o002)
    for clause in mode.split(","):
        m = _SYMBOLIC.fullmatch(clause)
        if m and m.group(2) in "+=" and "w" in m.group(3) and ("a" in m.group(1) or "o" in m.group(1)):
            return True
    return False


def _perm(ctx: _Ctx, args: Sequence[str], chmod: bool) -> None:
    shorts, longs, ops = _scan(args)
    if not ("R" in shorts or any(_lm(l, "--recursive") for l in longs)):
        return
    if chmod and any(_world_writable(o) for o in ops):
        ctx.add("destructive", "deny", "recursive world-writable permission change")
        return
    for o in ops:
        p = ctx.real(o)
        if p is None or p == "/" or not ctx.inside(p):
            ctx.add("destructive", "deny", "recursive permission or owner change outside the workspace")
            return


_DEV_OK = frozenset({"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/tty"})


def _dd(ctx: _Ctx, args: Sequence[str]) -> None:
    for a in args:
        if a.startswith("of="):
            target = a[3:]
            lexical, real = ctx.abs(target), ctx.real(target)
            if lexical is None or real is None:
                ctx.add("destructive", "deny", "dd writing to a path that cannot be resolved")
                return
            for p in (lexical, real):
                if p.startswith("/dev/") and p not in _DEV_OK and not p.startswith("/dev/fd/"):
                    ctx.add("destructive", "deny", "dd writing to a device")
                    return


def _truncate(ctx: _Ctx, args: Sequence[str]) -> None:
    for o in _scan(args, "sr", ("--size", "--reference"))[2]:
        p = ctx.real(o)
        if p is None or not ctx.inside(p):
            ctx.add("destructive", "deny", "truncating a file outside the workspace")
            return
