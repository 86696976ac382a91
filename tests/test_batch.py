"""`agentcore batch`: tasks, results, reports, recordings, progress, resume, limits, workers, Ray.

Real things throughout: the real command, real worker processes, the real
scripted model server, the real engine and real bubblewrap for `bash`. The
200-task batch runs once per module (local executor, concurrency 4) and most
tests read its outputs; the Ray test runs the same tasks on a local Ray
instance the test starts and compares the results task by task.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from batch_support import AGENTCORE, Lab, batch, comparable, make_lab, require_bwrap, results

pytestmark = pytest.mark.slow

KINDS: list[tuple[str, dict[str, Any]]] = [
    ("ok", {}),
    ("refused", {}),
    ("loop", {"limits": {"max_turn_requests": 3}}),
    ("loop", {"limits": {"token_budget": 300}}),
    ("expect-fail", {}),
]
EXPECTED = {  # kind index -> (status, exit code, tool calls, refusals)
    0: ("end_turn", 0, 4, {}),
    1: ("end_turn", 0, 2, {"capability": 1, "permission": 1}),
    2: ("max_turn_requests", 3, 3, {}),
    3: ("token_budget", 7, None, {}),
    4: ("failed", 1, 1, {}),
}


def two_hundred(lab: Lab) -> Path:
    tasks = [lab.task(f"t{i:03d}", KINDS[i % 5][0], **KINDS[i % 5][1]) for i in range(198)]
    tasks += [lab.task(f"h{i}", "hang", limits={"timeout_s": 1}) for i in range(2)]
    return lab.tasks(tasks, "two-hundred.jsonl")


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lab, Path, subprocess.CompletedProcess[str]]:
    require_bwrap()
    lab = make_lab(tmp_path_factory.mktemp("batch-lab"))
    out = lab.root / "out-local"
    proc = batch(lab, two_hundred(lab), out, "--concurrency", "4")
    return lab, out, proc


# -- the 200-task batch ------------------------------------------------------------------------------


def test_two_hundred_tasks_each_end_as_their_script_and_limits_say(big: tuple[Lab, Path, Any]) -> None:
    lab, out, proc = big
    assert proc.returncode == 1, proc.stderr[-3000:]  # some tasks end otherwise than end_turn, on purpose
    got = results(out)
    assert len(got) == 200
    for i in range(198):
        status, code, calls, refusals = EXPECTED[i % 5]
        r = got[f"t{i:03d}"]
        assert (r["status"], r["exit_code"], r["refusals"]) == (status, code, refusals), r
        if calls is not None:
            assert r["tool_calls"] == calls, r
        assert r["session_id"] and r["duration_s"] > 0
    assert got["t000"]["text"] == "All done | ok." and got["t000"]["problems"] == []
    assert got["t003"]["usage"]["requests"] >= 1 and got["t003"]["usage"]["input_tokens"] + got["t003"]["usage"]["output_tokens"] >= 300
    assert got["t002"]["usage"]["requests"] == 3
    assert any("no such words" in p or "expected text" in p for p in got["t004"]["problems"]), got["t004"]
    for h in ("h0", "h1"):
        assert (got[h]["status"], got[h]["exit_code"]) == ("timeout", 4), got[h]
    # One line per task in the file itself, each valid JSON.
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 200 and all(json.loads(line)["id"] for line in lines)


def test_templates_are_copied_per_task_and_the_template_is_untouched(big: tuple[Lab, Path, Any]) -> None:
    lab, out, _ = big
    copies = sorted(p.name for p in (out / "workspaces").iterdir())
    assert copies == [f"t{i:03d}" for i in range(0, 198, 5)]  # the "ok" tasks, which write
    for name in copies:
        assert (out / "workspaces" / name / "notes" / "out.md").read_text() == "done\n"  # the task's write landed in its copy
    assert not (lab.template / "notes" / "out.md").exists()  # ...and never in the template
    assert not (lab.shared / "notes" / "out.md").exists() and not (lab.root / "outside.txt").exists()
    assert results(out)["t000"]["workspace"] == str(out / "workspaces" / "t000")


def test_every_task_is_recorded_in_the_batch_database(big: tuple[Lab, Path, Any]) -> None:
    _lab, out, _ = big
    listed = subprocess.run([os.fspath(AGENTCORE), "sessions", "list", "--json", "--db", os.fspath(out / "sessions.db")],
                            capture_output=True, text=True, check=True)
    sessions = {s["id"]: s for s in json.loads(listed.stdout)}
    got = results(out)
    assert {r["session_id"] for r in got.values()} == set(sessions)
    shown = subprocess.run([os.fspath(AGENTCORE), "sessions", "show", "--json", got["t000"]["session_id"], "--db", os.fspath(out / "sessions.db")],
                           capture_output=True, text=True, check=True)
    record = json.loads(shown.stdout)
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert record["runs"][0]["stop_reason"] == "end_turn"
    assert sessions[got["h0"]["session_id"]]["last_stop_reason"] == "cancelled"  # a timed-out run is recorded as it ended


def test_junit_xml_is_well_formed_and_counts_every_task(big: tuple[Lab, Path, Any]) -> None:
    _lab, out, _ = big
    root = ET.parse(out / "junit.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 200 and suite.get("tests") == "200"
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert len(failed) == int(suite.get("failures") or -1) == 200 - 80  # 40 ok + 40 refused end with end_turn
    t001 = next(c for c in cases if c.get("name") == "t001")
    props = {p.get("name"): p.get("value") for p in t001.iter("property")}
    assert props["refusals.permission"] == "1" and props["refusals.capability"] == "1" and props["tool_calls"] == "2"
    h0 = next(c for c in cases if c.get("name") == "h0").find("failure")
    assert h0 is not None and h0.get("type") == "timeout"


def test_summary_markdown_totals_and_what_needs_attention(big: tuple[Lab, Path, Any]) -> None:
    _lab, out, _ = big
    text = (out / "summary.md").read_text()
    assert "**80 of 200 tasks ended with end_turn**" in text
    assert "finished: 200 (80 end_turn, 39 failed, 40 max_turn_requests, 2 timeout, 39 token_budget)" in text
    assert "refusals by layer: capability 40, permission 40" in text
    attention = text.split("## Needs attention")[1].split("## Tasks")[0]
    assert "| h0 | timeout | 4 |" in attention and "| t002 | max_turn_requests | 3 |" in attention
    assert "| t000 |" not in attention  # successes are not in it
    assert "| t000 | end_turn | 0 | 4 | - |" in text and "All done \\| ok." in text  # a pipe in an answer is escaped


def test_progress_on_a_pipe_is_one_plain_line_per_finished_task(big: tuple[Lab, Path, Any]) -> None:
    _lab, _out, proc = big
    lines = [ln for ln in proc.stderr.splitlines() if re.match(r"\[\s*\d+/200\] ", ln)]
    assert len(lines) == 200 and "\x1b" not in proc.stderr and "\r" not in proc.stderr
    assert [int(re.match(r"\[\s*(\d+)/", ln).group(1)) for ln in lines] == list(range(1, 201))  # type: ignore[union-attr]
    assert any(re.match(r"\[\s*\d+/200\] FAIL h0  timeout \(exit 4\)", ln) for ln in lines)
    assert any(re.match(r"\[\s*\d+/200\] ok   t001  end_turn .* refusals: capability 1, permission 1", ln) for ln in lines)
    assert proc.stderr.rstrip().splitlines()[-1].startswith("batch: 200/200 finished, 80 with end_turn")


# -- Ray -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_address() -> Any:
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.importorskip("ray", reason="the [ray] extra is not installed")
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    print(f"local Ray instance started in {time.perf_counter() - t0:.1f} s")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_ray_executor_gives_the_local_executors_results(big: tuple[Lab, Path, Any], ray_address: str) -> None:
    lab, local_out, _ = big
    out = lab.root / "out-ray"
    proc = batch(lab, lab.root / "two-hundred.jsonl", out, "--executor", "ray", "--ray-address", ray_address, "--concurrency", "4")
    assert proc.returncode == 1, proc.stderr[-3000:]
    local, remote = results(local_out), results(out)
    assert set(remote) == set(local)
    differ = {tid: (comparable(local[tid]), comparable(remote[tid])) for tid in local if comparable(local[tid]) != comparable(remote[tid])}
    assert not differ, list(differ.items())[:3]
    assert all(r["worker"].startswith("ray:") for r in remote.values())
    # The workers' recordings came back: every task's session is in the driver's database.
    from agentcore.recorder.store import Recorder

    with Recorder(out / "sessions.db") as rec:
        assert {s["id"] for s in rec.sessions()} == {r["session_id"] for r in remote.values()}
        assert [m["role"] for m in rec.history(remote["t000"]["session_id"])] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert (out / "workspaces" / "t000" / "notes" / "out.md").read_text() == "done\n"  # copied on the worker
