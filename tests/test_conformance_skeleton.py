"""The TypeScript harness skeleton (harnesses/skeleton-ts): built with tsc, it reaches passing cases knowing only HARNESS.md.

It declares nothing but `tool.read`, so every case that needs a manifest
compiler, a capability check, rules or envelope extensions must come back
not applicable, never failed; and `smoke` must call the harness sound.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import anyio
import pytest

from conformance.cli import execute
from conformance.smoke import smoke

ROOT = Path(__file__).resolve().parents[1]
SKELETON = ROOT / "harnesses" / "skeleton-ts"


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is None and os.environ.get("CI") == "true":
        pytest.fail(f"{name} is required on CI (.ci/run installs it)")
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if _tool("node") is None or _tool("tsc") is None:
        pytest.skip("node and tsc are needed to build the TypeScript skeleton")
    out = tmp_path_factory.mktemp("skeleton-ts")
    proc = subprocess.run(["tsc", "-p", str(SKELETON), "--outDir", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # strict type checking passes
    shutil.copy(SKELETON / "package.json", out / "package.json")  # ES modules
    return out / "harness.js"


def test_skeleton_reaches_passing_cases_and_everything_else_is_not_applicable(built: Path) -> None:
    head, results, _s, restarts = anyio.run(lambda: execute(f"command:node {built}", seed=5))
    assert head["features"] == ["tool.read"]
    statuses = Counter(r.status for r in results)
    assert statuses["pass"] >= 3, statuses
    assert statuses["fail"] == statuses["error"] == statuses["crash"] == statuses["timeout"] == 0, {r.id: r.message for r in results if r.status != "pass"}
    assert statuses["not_applicable"] >= len(results) - 10
    assert restarts == 0
    passed = {r.id for r in results if r.status == "pass"}
    assert {"file.read-returns-text-verbatim", "file.read-windows-at-their-edges"} <= passed


def test_smoke_calls_the_skeleton_sound(built: Path) -> None:
    report = anyio.run(lambda: smoke(f"command:node {built}"))
    assert report.exit_code == 0, report.to_json()
    assert report.implementation["language"] == "typescript"
