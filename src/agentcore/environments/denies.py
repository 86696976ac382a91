"""Manifest deny rules on paths, as the sandbox enforces them (ENV-6).

A deny on reading hides a path; a deny on writing keeps it read-only. A
literal pattern (`{workspace}/.env`, `secrets/**`, relative ones anchored at
the workspace) names its path at compile time and becomes part of the
policy (`policy.py`); a wildcard pattern (`**/*.pem`, `**/private/**`)
names files only once a call looks at the tree, so the per-call walk
(`calltree.py`) matches it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompileError
from ..patterns.globtext import glob_unescape, has_wildcard
from ..patterns.path import compile_path_pattern
from ..rules.model import glob_literal_suffix

# Permissions whose deny keeps the sandboxed command from reading / from writing a path. Every tool that
# declares `shell.run` joins both (`read_deny_permissions`): its commands run in the same sandbox.
READ_DENY_PERMISSIONS = frozenset({"*", "read", "fs.read", "bash", "grep", "glob"})
WRITE_DENY_PERMISSIONS = frozenset({"fs.write", "write", "edit", "bash"})


def read_deny_permissions(manifest: object) -> frozenset[str]:
    """The permissions whose denies hide a path in this manifest's sandbox (ENV-6)."""
    return READ_DENY_PERMISSIONS | frozenset(getattr(manifest, "shell_tools", ()))


def write_deny_permissions(manifest: object) -> frozenset[str]:
    """The permissions whose denies keep a path read-only in this manifest's sandbox (ENV-6)."""
    return WRITE_DENY_PERMISSIONS | frozenset(getattr(manifest, "shell_tools", ()))


@dataclass(frozen=True)
class WildcardDeny:
    """One wildcard deny, ready for the walk."""

    matches: Callable[[str], bool]
    suffix: str  # every path the walk can find it matching ends with this: a cheap reject first
    tree: bool  # the pattern ends in `/**`: a matching directory is covered whole


@dataclass(frozen=True)
class Denies:
    """Path denies for one set of permissions, split for the sandbox: literal paths for the policy, wildcards for the walk."""

    literal: tuple[Path, ...]  # absolute, whether or not they exist now
    wildcard: tuple[WildcardDeny, ...]


def manifest_denies(rules: Iterable[object], permissions: frozenset[str]) -> Denies:
    """The deny rules among compiled `rules` whose permission is in `permissions`, split for the sandbox.

    `*` as a pattern (everything) is left to the rules: no mount can hide the
    whole tree, and nothing would run. Patterns that do not compile as paths
    cannot match a path and are skipped, as the rule engine skips them.
    """
    key = tuple(
        (cr.rule.pattern, cr.expanded, cr.anchor)  # type: ignore[attr-defined]
        for cr in rules
        if cr.rule.action == "deny" and cr.rule.permission in permissions  # type: ignore[attr-defined]
    )
    return _split(key)


@functools.lru_cache(maxsize=64)
def _split(denies: tuple[tuple[str, str, Path | None], ...]) -> Denies:
    # Cached: every bash call asks, and compiling the patterns again costs more than the rest of its planning.
    literal: list[Path] = []
    wildcard: list[WildcardDeny] = []
    for raw, expanded, anchor in denies:
        if expanded == "*":
            continue
        try:
            pattern = compile_path_pattern(raw, expanded, anchor=anchor)
        except CompileError:
            continue
        text = pattern.expanded
        tree = text.endswith("/**")
        stem = text[:-3] if tree else text
        if not stem:
            continue  # `/**`: everything, as `*`
        if not has_wildcard(stem):
            literal.append(Path(glob_unescape(stem)))
            continue
        # The walk tests a path itself, never one below a match (it does not descend
        # into one): for `…/name/**` every such path ends with `/name`.
        wildcard.append(WildcardDeny(pattern.matches, glob_literal_suffix(stem), tree))
    return Denies(tuple(literal), tuple(wildcard))
