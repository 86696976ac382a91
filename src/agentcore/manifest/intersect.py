"""Subagent capability inheritance (SUB): a child never gets more than its parent.

`intersect(parent, child)` turns a child manifest compiled on its own into
the manifest the child actually runs with:

- every child scope entry survives only where the parent's effective set
  also grants it. Pattern languages are not closed under intersection, so we
  use a *sound, conservative* rule: for a child entry `c` and a parent entry
  `p`, keep `c` when `p` provably covers everything `c` matches, else keep `p`
  when `c` provably covers everything `p` matches (then `c ∩ p = p`), else
  drop the pair. "Provably covers" is decided by `path_covers`,
  `host_covers` and `shell_covers`; anything they cannot prove is dropped,
  so an unusual pattern can only lose access, never gain it;
- the parent's manifest `deny` rules are appended to the child's rules as
  manifest rules, so they stay pinned: a parent's deny never becomes a
  child's allow;
- protected files are the union of both lists; the sandbox is the stricter
  environment; the depth and web-search budgets are the smaller of the two.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TypeVar

from ..paths import is_within
from ..patterns.globtext import has_wildcard
from ..patterns.path import PathPattern
from ..patterns.shell import ArgPattern, ShellRequirement
from ..rules.model import CompiledRule
from .compiled import CompiledManifest, EffectiveCapabilities

if TYPE_CHECKING:
    from ..net.hosts import HostPattern
    from ..variables import Bindings

__all__ = ["host_covers", "intersect", "path_covers", "shell_covers", "stricter_environment"]

T = TypeVar("T")

# Environments from weakest to strongest confinement; an unknown name ranks
# above all of them so it is never silently replaced by a weaker one.
_ENV_STRENGTH = {"none": 0, "bwrap": 1}
_DEFAULT_WEB_PORTS = frozenset({80, 443})


# -- paths -------------------------------------------------------------------


def _tree_root(p: PathPattern) -> str | None:
    """`D` when the pattern is exactly `D/**` with a literal D (it matches D and all below), else None."""
    text = p.expanded
    if not text.endswith("/**"):
        return None
    head = text[: -len("/**")]
    if has_wildcard(head):
        return None
    return os.fspath(p.base)


def path_covers(outer: PathPattern, inner: PathPattern) -> bool:
    """True only if every canonical path `inner` matches is matched by `outer`."""
    if inner.exact:
        # An exact pattern matches one path only: its base.
        return outer.matches(os.fspath(inner.base))
    root = _tree_root(outer)
    # Everything a wildcard pattern matches lies at or beneath its base.
    return root is not None and is_within(os.fspath(inner.base), root)


# -- hosts -------------------------------------------------------------------


def _ports(p: "HostPattern") -> frozenset[int]:
    return _DEFAULT_WEB_PORTS if p.port is None else frozenset({p.port})


def host_covers(outer: "HostPattern", inner: "HostPattern") -> bool:
    """True only if every (host, port) `inner` admits is admitted by `outer`."""
    if not _ports(inner) <= _ports(outer):
        return False
    if not outer.wildcard:
        return not inner.wildcard and inner.host == outer.host
    if inner.is_ip:
        return False
    # `*.example.com` covers `a.example.com`, `*.a.example.com` and itself.
    return (inner.wildcard and inner.host == outer.host) or inner.host.endswith("." + outer.host)


# -- shell -------------------------------------------------------------------


def _arg_covers(outer: ArgPattern, inner: ArgPattern) -> bool:
    if outer.kind == "wildcard":
        return True
    if outer.kind == "exact":
        return inner.kind == "exact" and inner.value == outer.value
    # prefix
    return inner.kind in ("exact", "prefix") and inner.value.startswith(outer.value)


def shell_covers(outer: ShellRequirement, inner: ShellRequirement) -> bool:
    """True only if every argv `inner` admits is admitted by `outer`."""
    return (
        outer.cmd == inner.cmd
        and len(outer.args) == len(inner.args)
        and all(_arg_covers(o, i) for o, i in zip(outer.args, inner.args))
    )


# -- the intersection ----------------------------------------------------------


def _meet(
    parent: Sequence[T], child: Sequence[T], covers: Callable[[T, T], bool], key: Callable[[T], object]
) -> tuple[T, ...]:
    out: list[T] = []
    seen: set[object] = set()

    def add(item: T) -> None:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)

    for c in child:
        for p in parent:
            if covers(p, c):
                add(c)
            elif covers(c, p):
                add(p)
    return tuple(out)


def _inherited_denies(parent: CompiledManifest, start: int) -> list[CompiledRule]:
    """The parent's manifest denies, renumbered after the child's own rules."""
    out: list[CompiledRule] = []
    numbering: dict[int, int] = {}
    for cr in parent.rules:
        rule = cr.rule
        if rule.scope != "manifest" or rule.action != "deny":
            continue
        index = numbering.setdefault(id(rule), start + len(numbering))
        origin = f"inherited from parent {parent.name!r}" + (f" ({rule.origin})" if rule.origin else "")
        out.append(
            CompiledRule(
                rule=replace(rule, index=index, origin=origin),
                expanded=cr.expanded,
                perm_rank=cr.perm_rank,
                anchor=cr.anchor,
                paths_only=cr.paths_only,
            )
        )
    return out


def stricter_environment(parent: str, child: str) -> str:
    if parent == child:
        return child
    rank = lambda name: _ENV_STRENGTH.get(name, len(_ENV_STRENGTH))  # noqa: E731
    return child if rank(child) > rank(parent) else parent


def _origins(fs_read: Iterable[PathPattern], fs_write: Iterable[PathPattern]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for key, pats in (("fs_read", fs_read), ("fs_write", fs_write)):
        for pat in pats:
            out[f"{key}:{pat.expanded}"] = ("parent ∩ child",)
    return out


def _shown_roots(parent: CompiledManifest, child: CompiledManifest) -> "Bindings":
    """The child's bindings with only the workspace roots the parent's sandbox shows too.

    A sandbox shows its manifest's workspace roots whatever fs.read says (ENV-5), so a root of the
    child's own `roots` outside the parent's roots and fs.read bases would be a view the parent lacks.
    The first root is the parent's workspace, always kept; the child's rules are compiled already.
    """
    shown = [*map(os.fspath, parent.workspace_roots), *(os.fspath(p.base) for p in parent.effective.fs_read)]
    roots = tuple(r for r in child.bindings.values.get("workspace", ()) if any(is_within(r, s) for s in shown))
    return replace(child.bindings, values={**child.bindings.values, "workspace": roots})


def intersect(parent: CompiledManifest, child: CompiledManifest) -> CompiledManifest:
    """The child manifest restricted to what the parent's effective set allows."""
    pe, ce = parent.effective, child.effective
    fs_read = _meet(pe.fs_read, ce.fs_read, path_covers, lambda p: p.expanded)
    fs_write = _meet(pe.fs_write, ce.fs_write, path_covers, lambda p: p.expanded)
    effective = EffectiveCapabilities(
        fs_read=fs_read,
        fs_write=fs_write,
        net_hosts=_meet(pe.net_hosts, ce.net_hosts, host_covers, lambda h: h.canonical),
        shell=_meet(pe.shell, ce.shell, shell_covers, lambda s: s),
        capabilities=pe.capabilities & ce.capabilities,
        origins=_origins(fs_read, fs_write),
    )
    own = {id(cr.rule) for cr in child.rules}
    rules = tuple(child.rules) + tuple(_inherited_denies(parent, len(own)))
    limits = replace(
        child.limits,
        task_depth=min(parent.limits.task_depth, child.limits.task_depth),
        web_search_calls=min(parent.limits.web_search_calls, child.limits.web_search_calls),
        sidecar_bytes=min(parent.limits.sidecar_bytes, child.limits.sidecar_bytes),
        session_sidecar_bytes=min(parent.limits.session_sidecar_bytes, child.limits.session_sidecar_bytes),
    )
    protected = tuple(dict.fromkeys(tuple(child.protected_files) + tuple(parent.protected_files)))
    return replace(
        child,
        effective=effective,
        rules=rules,
        limits=limits,
        environment=stricter_environment(parent.environment, child.environment),
        protected_files=protected,
        bindings=_shown_roots(parent, child),
        # A child sees the whole root only when both do (SUB-2: never wider than the parent).
        sandbox_view="full" if parent.sandbox_view == child.sandbox_view == "full" else "minimal",
    )
