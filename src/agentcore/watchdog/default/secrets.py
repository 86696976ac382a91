"""The `secrets` category: well-known secret files, by name and through symlinks."""

from __future__ import annotations

import os
import stat
from typing import Iterable

from .paths import _Ctx, _within

_SECRET_NAMES = frozenset(
    {".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass", ".ssh", ".gnupg", ".aws"}
)
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx")
_SECRET_PREFIXES = ("id_rsa", "id_ed25519", "id_ecdsa", "id_dsa")
_SECRET_DIRS = (".ssh", ".gnupg")  # everything below them
_SECRET_TAILS2 = frozenset({(".aws", "credentials"), (".kube", "config"), (".docker", "config.json")})
_SECRET_TAILS3 = frozenset({(".config", "gh", "hosts.yml")})
_ENV_TEMPLATES = frozenset({"example", "sample", "template", "dist"})
# Markers of `_is_secret` for read screens (runtime.ReadScreen): every secret path contains one of
# these, lower-cased, in a component that names it (the names, `.env`, the suffixes and prefixes,
# the directories `.ssh`/`.gnupg`/`.aws`/`.kube`/`.docker`, and `hosts.yml` of the gh tail).
SECRET_MARKERS: tuple[str, ...] = (
    *sorted(_SECRET_NAMES), ".env", *_SECRET_SUFFIXES, *_SECRET_PREFIXES, ".kube", ".docker", "hosts.yml",
)


def _is_secret(path: str) -> bool:
    """Lexical test: does `path` name a well-known secret file or directory?"""
    low = path.lower()
    parts = [p for p in low.split("/") if p and p != "."]
    if not parts:
        return False
    base = parts[-1]
    if base in _SECRET_NAMES:
        return True
    if base == ".env" or (base.startswith(".env.") and base.rsplit(".", 1)[-1] not in _ENV_TEMPLATES):
        return True
    if base.endswith(_SECRET_SUFFIXES) or base.startswith(_SECRET_PREFIXES):
        return True
    n = len(parts)
    if n >= 2:
        for d in _SECRET_DIRS:
            if d in parts[:-1]:
                return True
        if (parts[-2], base) in _SECRET_TAILS2:
            return True
        if n >= 3 and (parts[-3], parts[-2], base) in _SECRET_TAILS3:
            return True
    return False


def secret_markers(root: str) -> tuple[str, ...] | None:
    """The read-screen markers beneath the canonical directory `root`.

    A root inside `.ssh` or `.gnupg` makes everything beneath it secret: None
    (ask about every path). A root that is itself `.aws`, `.kube` or
    `.docker` lends the first half of a two-part tail: its child's name joins
    the markers.
    """
    parts = [p for p in root.lower().split("/") if p and p != "."]
    if any(p in _SECRET_DIRS for p in parts):
        return None
    for first, last in _SECRET_TAILS2:
        if parts and parts[-1] == first:
            return SECRET_MARKERS + (last,)
    return SECRET_MARKERS


def _links_below_workspace(ctx: _Ctx, p: str) -> bool:
    """True if some component of `p` below the (canonical) workspace is a symlink.

    Cheaper than realpath for the common case: only the components under the
    workspace are lstat'ed. Paths outside the workspace answer True so the
    caller resolves them fully.
    """
    ws = ctx.ws
    if ws is None or not _within(p, ws):
        return True
    if p == ws:
        return False
    cur = ws if ws != "/" else ""
    for comp in p[len(cur) + 1:].split("/"):
        cur = cur + "/" + comp
        try:
            mode = os.lstat(cur).st_mode
        except (OSError, ValueError):
            return False  # the rest does not exist: nothing to read through a link
        if stat.S_ISLNK(mode):
            return True
    return False


def _secret_word(ctx: _Ctx, word: str) -> bool:
    if _is_secret(word):
        return True
    if "://" in word or len(word) > 4096:
        return False
    p = ctx.abs(word)
    if p is None:
        return False
    # A `..` after a symlink is resolved by the OS, not lexically: resolve fully.
    if ".." not in word.split("/") and not _links_below_workspace(ctx, p):
        return False
    try:
        real = os.path.realpath(p)
    except (OSError, ValueError):
        return False
    return real != p and _is_secret(real)


def _word_candidates(word: str) -> Iterable[str]:
    """The parts of an argv word that may name a file: `x`, `--opt=x`, `if=x`, `@x`, `name=@x`."""
    if not word:
        return ()
    if word[0] == "-":
        eq = word.find("=")
        return () if eq < 0 else (word[eq + 1:].lstrip("@<"),)
    w = word.lstrip("@<")
    eq = w.find("=")
    if eq > 0:
        return (w, w[eq + 1:].lstrip("@<"))
    return (w,)
