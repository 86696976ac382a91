"""The per-call tree walks of sandboxed commands after the performance work: on the event loop when quick, in a thread otherwise.

Handing a walk to a worker thread costs 0.1-0.2 ms, more than walking a small
workspace, so `percall.walk` runs a walk on the loop when the last one of the same
kind over the same roots took less than `INLINE_WALK_S`. These tests check
where each walk really runs (the thread it runs on) as the cost changes.
"""

from __future__ import annotations

import threading
import time

import pytest

from agentcore.environments import percall

pytestmark = pytest.mark.anyio


def _where(cost_s: float = 0.0) -> int:
    if cost_s:
        end = time.perf_counter() + cost_s
        while time.perf_counter() < end:  # work, not waiting: the cost is what the test is about
            pass
    return threading.get_ident()


async def test_a_quick_walk_moves_onto_the_loop_and_a_slow_one_moves_off_again() -> None:
    loop_thread = threading.get_ident()
    roots = (f"/nonexistent/{time.monotonic_ns()}",)  # a key no other test uses
    assert await percall.walk("t", roots, _where) != loop_thread  # first walk of a tree: a thread
    assert await percall.walk("t", roots, _where) == loop_thread  # it was quick: on the loop
    # A walk that turns slow blocks the loop this once...
    assert await percall.walk("t", roots, _where, percall.INLINE_WALK_S * 3) == loop_thread
    # ...and its successors run in a thread until one is quick again.
    assert await percall.walk("t", roots, _where) != loop_thread
    assert await percall.walk("t", roots, _where) == loop_thread


async def test_walk_costs_are_kept_per_kind_and_roots() -> None:
    loop_thread = threading.get_ident()
    roots = (f"/nonexistent/{time.monotonic_ns()}",)
    await percall.walk("prepare", roots, _where)
    assert await percall.walk("prepare", roots, _where) == loop_thread
    assert await percall.walk("sweep", roots, _where) != loop_thread  # another kind: not known yet
    assert await percall.walk("prepare", (*roots, "/other"), _where) != loop_thread  # other roots: neither


async def test_an_exception_in_an_inline_walk_propagates_and_is_still_timed() -> None:
    loop_thread = threading.get_ident()
    roots = (f"/nonexistent/{time.monotonic_ns()}",)
    await percall.walk("t", roots, _where)

    def boom() -> None:
        _where(percall.INLINE_WALK_S * 3)  # a slow walk that then fails
        raise ValueError("walk failed")

    with pytest.raises(ValueError, match="walk failed"):
        await percall.walk("t", roots, boom)
    assert percall._walk_costs[("t", roots)] >= percall.INLINE_WALK_S * 3  # its cost was recorded all the same
    assert await percall.walk("t", roots, _where) != loop_thread  # so the next walk goes to a thread


async def test_a_walk_told_not_to_run_inline_goes_to_a_thread_however_quick_the_last_was() -> None:
    loop_thread = threading.get_ident()
    roots = (f"/nonexistent/{time.monotonic_ns()}",)
    await percall.walk("sweep", roots, _where)
    assert await percall.walk("sweep", roots, _where) == loop_thread
    assert await percall.walk("sweep", roots, _where, inline=False) != loop_thread  # after a long command
    assert await percall.walk("sweep", roots, _where) == loop_thread
