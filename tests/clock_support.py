"""Helpers for tests about filesystem timestamps (no tests here)."""

from __future__ import annotations

import time


def early_in_a_second() -> None:
    """Wait for the first part of a wall-clock second, so that the next few steps of a test fit in that
    second: on a filesystem that keeps whole seconds, they then leave equal change times."""
    while not 0.05 < time.time() % 1 < 0.4:
        time.sleep(0.01)
