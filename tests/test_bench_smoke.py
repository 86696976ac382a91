"""Smoke test for the benchmarks: `bench/run_all.py --quick` runs end to end.

It checks only that every benchmark ran and reported well-formed JSON; it
never looks at the timings (benchmarks report, they do not assert). A
benchmark the engine refused ("blocked", e.g. no working bwrap here) still
counts as having run: its JSON carries the refusal instead of figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
RUN_ALL = ROOT / "bench" / "run_all.py"
EXPECTED = ("pipeline", "search", "bash", "guard", "truncation", "cli", "agent", "acp", "mcp", "batch")
FIGURE_KEYS = {"figure", "value", "unit", "anchor", "anchor_value", "ratio", "target", "met"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("bench-results")
    proc = subprocess.run(
        [sys.executable, str(RUN_ALL), "--quick", "--results-dir", str(out)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    return proc, out


def test_run_all_quick_exits_zero(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The summary table names every benchmark.
    for name in EXPECTED:
        assert name in proc.stdout


def test_summary_json_lists_every_benchmark(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick_run
    summary = json.loads((out / "summary.json").read_text())
    assert summary["quick"] is True
    assert set(summary["benchmarks"]) == set(EXPECTED)
    for name, doc in summary["benchmarks"].items():
        assert doc["benchmark"] == name
        assert doc["status"] in ("ok", "blocked"), (name, doc.get("error"), doc.get("details", {}).get("blocked"))
        if doc["status"] == "ok":
            assert doc["figures"], name
        else:
            assert doc["details"]["blocked"], name
        for fig in doc["figures"]:
            assert FIGURE_KEYS <= set(fig), (name, fig)
            assert isinstance(fig["value"], (int, float))
    assert len(summary["figures"]) == sum(len(d["figures"]) for d in summary["benchmarks"].values())


def test_each_benchmark_writes_its_own_json(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick_run
    for name in EXPECTED:
        doc = json.loads((out / f"{name}.json").read_text())
        assert doc["benchmark"] == name and doc["quick"] is True


def test_only_selects_one_benchmark(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(RUN_ALL), "--quick", "--only", "pipeline", "--results-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["benchmarks"]) == ["pipeline"]
    assert not (tmp_path / "search.json").exists()


def test_unknown_benchmark_name_is_refused(tmp_path: Path) -> None:
    # Rejected by the option parser before anything runs: no partial summary.
    proc = subprocess.run(
        [sys.executable, str(RUN_ALL), "--quick", "--only", "nonexistent", "--results-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.returncode != 0
    assert not (tmp_path / "summary.json").exists()
