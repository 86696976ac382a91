"""When a change time proves that nothing changed since (agentcore/timestamps.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentcore.timestamps import COARSE_NS, FINE_NS, recent, settling_ns

SECOND = 1_000_000_000
NOW = 1_800_000_000 * SECOND + 123_456_789


def test_a_whole_second_stamp_is_taken_for_a_clock_that_keeps_seconds() -> None:
    assert settling_ns(1_800_000_000 * SECOND) == COARSE_NS
    assert settling_ns(1_800_000_000 * SECOND + 4_000_000) == FINE_NS  # a coarse-clock tick


def test_a_whole_second_stamp_stays_recent_for_seconds() -> None:
    # On a filesystem that keeps seconds, a change at 12.9 s is stamped 12 s: 900 ms later another change
    # in the same second would get the same stamp, so the first one must not be trusted yet.
    stamp = (NOW // SECOND) * SECOND
    assert recent(stamp, stamp + 900_000_000)
    assert recent(stamp, stamp + 2 * SECOND)  # FAT steps by two seconds
    assert not recent(stamp, stamp + COARSE_NS + 1)


def test_a_fine_stamp_is_recent_for_50_ms() -> None:
    assert recent(NOW, NOW + FINE_NS - 1)
    assert not recent(NOW, NOW + FINE_NS + 1)


@given(stamp=st.integers(min_value=0, max_value=2**62), ahead=st.integers(min_value=0, max_value=2**40))
def test_a_stamp_at_or_after_now_is_always_recent(stamp: int, ahead: int) -> None:
    assert recent(stamp + ahead, stamp)


@given(stamp=st.integers(min_value=0, max_value=2**62), later=st.integers(min_value=0, max_value=10 * SECOND))
def test_recent_is_exactly_the_settling_window(stamp: int, later: int) -> None:
    assert recent(stamp, stamp + later) == (later <= settling_ns(stamp))
