"""Real things the tests need from outside Python: a working bwrap, and pinned npm packages.

npm packages (the ACP schema and acpx, the reference MCP server) install, per
group, into a directory of their own under ~/.cache/agentcore-tests (or
$AGENTCORE_TEST_NPM_DIR), once per package list. On CI anything missing fails
the test; elsewhere it skips with the reason (a bwrap skip says so loudly, and
`.ci/run` fails on any such skip too).
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


def require_bwrap(area: str) -> None:
    """Fail on CI, or skip loudly elsewhere, when bwrap cannot start here; `area` names the tests that need it."""
    import pytest

    from agentcore.environments import EnvironmentUnavailable
    from agentcore.environments.bwrap import bwrap_binary, self_test

    try:
        self_test(bwrap_binary())
    except EnvironmentUnavailable as exc:
        if ON_CI:
            pytest.fail(f"bwrap cannot start on CI: {exc.reason}")
        pytest.skip(f"!!! bwrap CANNOT START on this machine, {area} skipped: {exc.reason}")
