"""Pinned npm packages the tests run for real (the ACP schema and acpx, the reference MCP server).

Each group installs into a directory of its own under ~/.cache/agentcore-tests
(or $AGENTCORE_TEST_NPM_DIR), once per package list. On CI a missing node or
npm fails the test; elsewhere it skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
NPM_BASE = Path(os.environ.get("AGENTCORE_TEST_NPM_DIR") or Path.home() / ".cache" / "agentcore-tests")


def missing(reason: str) -> None:
    import pytest  # here: the benchmarks import the support modules without pytest

    if ON_CI:
        pytest.fail(f"{reason} (CI must have it)")
    pytest.skip(reason)


@lru_cache(maxsize=None)
def install(group: str, packages: tuple[str, ...]) -> Path | None:
    """The directory holding `packages` (installed now unless already there), or None without node and npm."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return None
    where = NPM_BASE / group
    marker = where / ".installed"
    want = "\n".join(packages)
    if not (marker.exists() and marker.read_text() == want):
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run([npm, "install", "--prefix", str(where), "--no-audit", "--no-fund", "--silent", *packages],
                       check=True, timeout=600)
        marker.write_text(want)
    return where
