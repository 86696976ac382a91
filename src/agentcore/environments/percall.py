"""One sandboxed command with every per-call protection: what `runtime.proc.run_sandboxed` and `bash` share.

The policy a manifest derives (`policy.py`) is fixed when the engine starts;
what exists only at the moment of a call is added here, before the command:
files that wildcard denies name and hard-linked files (`calltree`), protected
entries at any depth, paths that repositories name and git's overrides
(`callguard`). After the command, whatever it left that is protected is
removed (the sweep). Any tool that runs a command in the sandbox gets all of
it, whatever the tool is called: a weaker path for some tools would be the
one an agent uses.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio

from ..errors import ToolFailure
from . import callguard, calltree, guard
from .denies import manifest_denies, read_deny_permissions, write_deny_permissions

# A tree walk that took less than this last time runs on the event loop: handing it to a
# worker thread and back costs 0.1-0.2 ms, more than the walk of a small workspace. That walk
# takes 0.3 ms at rest but up to 1.7 ms right after a sandbox exits (the kernel is still
# tearing its mounts down): at 1 ms, one call in ten went to a thread, and then the next one.
# A loop blocked for 4 ms delays nothing a person or a protocol peer would notice.
INLINE_WALK_S = 0.004
# A command that ran longer than this may have made a tree too big to sweep quickly: its sweep goes to a thread.
INLINE_SWEEP_AFTER_S = 0.05
_WALK_COSTS_MAX = 64
_walk_costs: dict[tuple[object, ...], float] = {}  # (what, write roots) -> seconds the last walk took
T = TypeVar("T")

Run = Callable[[Any], Awaitable[Any]]  # policy -> ProcessOutcome


async def walk(what: str, roots: tuple[object, ...], fn: Callable[..., T], *args: Any, inline: bool = True) -> T:
    """`fn(*args)`, a walk of the trees under `roots`: on the loop when the last one there was quick, else in a thread.

    The first walk of a tree always goes to a thread, and a walk that turns slow
    blocks the loop once at most before its successors move off it again.
    `inline=False` sends this one to a thread whatever the last one cost.
    """
    key = (what, roots)

    def timed() -> T:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            if len(_walk_costs) >= _WALK_COSTS_MAX:
                _walk_costs.clear()
            _walk_costs[key] = time.perf_counter() - start

    if inline and _walk_costs.get(key, INLINE_WALK_S) < INLINE_WALK_S:
        return timed()
    return await anyio.to_thread.run_sync(timed)


def call_policy(policy: Any, manifest: Any, *, guarded: bool = True) -> Any:
    """The policy plus what exists only now: files that wildcard denies name and hard-linked files
    (calltree) and, with `guarded`, the protected entries, named git paths and git settings (callguard).

    Also what `explain` shows, so its command line is the one a call made now would run.
    """
    policy, _bounded = _walked(policy, manifest)
    if guarded:
        policy = callguard.prepare(policy, manifest.workspace_roots).policy
    return policy


def prepare(policy: Any, manifest: Any) -> callguard.Prepared:
    """The call's policy and the state the sweep compares with (see `call_policy`)."""
    policy, bounded = _walked(policy, manifest)
    prepared = callguard.prepare(policy, manifest.workspace_roots)
    return dataclasses.replace(prepared, walk_bounded=bounded) if bounded else prepared


def _walked(policy: Any, manifest: Any) -> tuple[Any, int]:
    """The policy with the walk's findings, and how many writable directories its bounds left unlisted."""
    read_denies = manifest_denies(manifest.rules, read_deny_permissions(manifest)).wildcard
    write_denies = manifest_denies(manifest.rules, write_deny_permissions(manifest)).wildcard
    if policy.write_roots or read_denies or calltree.linked_inodes(policy.read_denied):
        return _with_tree(policy, manifest, read_denies, write_denies)
    return policy, 0


async def sweep(prepared: callguard.Prepared, *, quick: bool) -> int:
    """Remove what the command left that is protected; on the loop only after a `quick` command (see `walk`)."""
    try:
        report = await walk("sweep", prepared.policy.write_roots, callguard.finish, prepared, inline=quick)
    except guard.GuardError:
        raise ToolFailure("unavailable", "the sandbox could not remove protected files the command created; check the workspace") from None
    return report.removed


async def run_guarded(environment: Any, policy: Any, manifest: Any, run: Run) -> Any:
    """`run(policy)` with the call's protections in place, then the sweep; its ProcessOutcome says how many
    protected entries the sweep removed (`protected_removed`) and how many writable directories the walk's
    bounds kept read-only (`walk_bounded`).

    The sweep runs whatever ended the command (its exit, the timeout, an abort),
    so nothing protected that it made stays.
    """
    prepared = await walk("prepare", policy.write_roots, prepare, policy, manifest)
    if getattr(environment, "name", None) != "bwrap":
        prepared = callguard.unmounted(prepared)
    prepared, pins = callguard.pin(prepared)
    started = time.perf_counter()
    try:
        try:
            outcome = await run(prepared.policy)
        finally:
            with anyio.CancelScope(shield=True):
                swept = await sweep(prepared, quick=time.perf_counter() - started < INLINE_SWEEP_AFTER_S)
    finally:
        pins.close()  # after the sweep: until then no other file may get a held inode's number
    if swept or prepared.walk_bounded:
        outcome = dataclasses.replace(outcome, protected_removed=swept, walk_bounded=prepared.walk_bounded)
    return outcome


def _with_tree(policy: Any, manifest: Any, read_denies: Sequence[Any], write_denies: Sequence[Any]) -> tuple[Any, int]:
    """The per-call walk's findings folded into the policy: write-denied and nested protected entries and
    hard-linked files read-only, read-denied files hidden, roots too full of links (or never listed) read-only
    whole; with the count of writable directories left unlisted, which are read-only too."""
    found = calltree.bounded_scan(
        manifest.limits, policy.write_roots, manifest.workspace_roots, read_denies, write_denies,
        denied_paths=policy.read_denied, protected_paths=policy.protected,
    )
    # Read-only whole: a write root that is itself a hard-linked file, or one holding too many of them.
    frozen = [*found.frozen, *(r for r in policy.write_roots if calltree.linked_inodes([r]))]
    if frozen:
        writable = tuple(r for r in policy.write_roots if r not in frozen)
        policy = dataclasses.replace(policy, write_roots=writable, read_roots=(*policy.read_roots, *frozen))
    if found.protected or found.linked:
        # A hard-linked file is kept read-only like a protected one, and pinned where it is.
        kept = [*policy.protected, *found.protected, *found.linked]
        policy = dataclasses.replace(policy, protected=tuple(dict.fromkeys(kept)))
    if found.denied:
        policy = dataclasses.replace(policy, read_denied=tuple(dict.fromkeys([*policy.read_denied, *found.denied])))
    return policy, found.bounded
