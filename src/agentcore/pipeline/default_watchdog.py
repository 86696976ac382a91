"""Compatibility path for the default watchdog, which lives in `watchdog_default/`.

Existing imports (`from agentcore.pipeline.default_watchdog import DefaultWatchdog, ...`)
keep working; new code may import from either place.
"""

from __future__ import annotations

from .watchdog_default import CATEGORIES, INTERNAL_CATEGORY, DefaultWatchdog, default_watchdog_for, unknown_categories
from .watchdog_default.dispatch import _DISPATCH  # the program -> check table, enumerated by the tests

__all__ = ["CATEGORIES", "INTERNAL_CATEGORY", "DefaultWatchdog", "default_watchdog_for", "unknown_categories"]
