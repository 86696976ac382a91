"""`agentcore batch` on small task files: bad lines, a terminal, limits, resume, dying workers, templates, usage errors.

Each test runs the real command (real worker processes, the scripted model
server, the engine). The 200-task batch and the Ray comparison are in
test_batch.py.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import anyio
import pytest
import yaml

from agentcore.batch.results import is_finished, read_results
from agentcore.batch.tasks import parse_line
from agentcore.recorder.store import Recorder
from batch_support import AGENTCORE, Lab, batch, make_lab, put, results

pytestmark = pytest.mark.slow


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return make_lab(tmp_path / "lab")


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Poll an observable condition (not a fixed sleep); fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


# -- the tasks file -------------------------------------------------------------------------------------


def test_malformed_lines_are_reported_by_number_and_the_other_tasks_run(lab: Lab) -> None:
    tasks = lab.tasks([
        lab.task("a", "refused"),                                                                       # 1
        "{not json",                                                                                    # 2
        {"id": "b", "workspace": "shared"},                                                             # 3
        {"id": "c", "prompt": "x", "workspace": "shared", "workspace_template": "template"},             # 4
        {"id": "../evil", "prompt": "x", "workspace_template": "template"},                             # 5
        {"id": "d", "prompt": "x", "workspace": "shared", "colour": "red"},                             # 6
        "",                                                                                             # 7 (blank: ignored)
        lab.task("a", "refused"),                                                                       # 8
        {"id": "e", "prompt": "x", "workspace": "shared", "limits": {"timeout_s": -1}},                 # 9
        "[1, 2]",                                                                                       # 10
        lab.task("w", "weird"),                                                                         # 11
        {"id": "m", "prompt": "x", "workspace": "shared", "model": "gpt-4"},                            # 12
    ])
    out = lab.root / "out"
    proc = batch(lab, tasks, out, "--concurrency", "2")
    assert proc.returncode == 1, proc.stderr  # the tasks that ran succeeded, but malformed lines make the batch unclean
    expected = {2: "not valid JSON", 3: "prompt: Field required", 4: "give exactly one of workspace and workspace_template",
                5: "id: must be", 6: "colour: Extra inputs are not permitted", 8: "duplicate id 'a' (first on line 1)",
                9: "limits.timeout_s: Input should be greater than 0", 10: "a task must be a JSON object", 12: "model: must be PROVIDER:NAME"}
    for line, message in expected.items():
        assert f"malformed task line: {tasks}:{line}: {message}" in proc.stderr, (line, proc.stderr)
    assert ":7:" not in proc.stderr and ":1:" not in proc.stderr and ":11:" not in proc.stderr
    got = results(out)
    assert set(got) == {"a", "w"} and got["a"]["status"] == got["w"]["status"] == "end_turn"
    # The id that tried to leave OUT/workspaces never became a path.
    assert not (lab.root / "evil").exists() and not (out / "evil").exists() and not (out / "workspaces").exists()
    cases = ET.parse(out / "junit.xml").getroot().iter("testcase")
    malformed = {c.get("name"): c.find("error") for c in cases if (c.get("name") or "").startswith("line ")}
    assert set(malformed) == {f"line {n}" for n in expected}
    assert all(e is not None and e.get("type") == "malformed" for e in malformed.values())
    summary = (out / "summary.md").read_text()
    assert "malformed lines: 9" in summary and "| line 8 | malformed | - | duplicate id 'a' (first on line 1) |" in summary


def test_answers_with_control_characters_stay_well_formed_in_the_reports(lab: Lab) -> None:
    out = lab.root / "out"
    proc = batch(lab, lab.tasks([lab.task("w", "weird")]), out)
    assert proc.returncode == 0, proc.stderr
    text = results(out)["w"]["text"]
    assert "\x00" in text and "\x1b[31m" in text  # the result keeps the model's text exactly (JSON escapes it)
    system_out = ET.parse(out / "junit.xml").getroot().find(".//system-out")  # parses: nothing XML 1.0 forbids is in it
    assert system_out is not None and system_out.text == "bell\ufffd nul\ufffd esc\ufffd[31m red | pipe\nsecond line"
    row = next(line for line in (out / "summary.md").read_text().splitlines() if line.startswith("| w |"))
    assert "\x1b" not in row and "red \\| pipe second line" in row  # one line, the pipe escaped: the table holds


@pytest.mark.parametrize("raw, message", [
    ('{"id": "x", "prompt": "p", "workspace": "w", "limits": {"token_budget": true}}', "limits.token_budget: Input should be a valid integer"),
    ('{"id": "x", "prompt": "p", "workspace": "w", "limits": {"timeout_s": 1e9}}', "limits.timeout_s: Input should be less than or equal to"),
    ('{"id": "x", "prompt": "", "workspace": "w"}', "prompt: String should have at least 1 character"),
    ('{"id": ".hidden", "prompt": "p", "workspace": "w"}', "id: must be"),
    ('{"id": "a/b", "prompt": "p", "workspace": "w"}', "id: must be"),
    ('{"id": "x", "prompt": 3, "workspace": "w"}', "prompt: Input should be a valid string"),
])
def test_task_lines_that_are_refused(raw: str, message: str) -> None:
    error = parse_line(raw, 7, Path("/base"))
    assert getattr(error, "line", None) == 7 and message in getattr(error, "message", ""), error


def test_task_paths_and_scripts_are_relative_to_the_tasks_file() -> None:
    task = parse_line('{"id": "x", "prompt": "p", "workspace_template": "t", "model": "script:s.yaml", "limits": {"timeout_s": 5}}', 1, Path("/base"))
    assert getattr(task, "workspace_template", None) == Path("/base/t") and getattr(task, "model", None) == "script:/base/s.yaml"
    assert getattr(task, "limits").timeout_s == 5.0


# -- progress on a terminal ------------------------------------------------------------------------------


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other end of the terminal is closed
            return out
        if not chunk:
            return out
        out += chunk


def test_progress_on_a_terminal_is_one_live_line_and_failures_stay(lab: Lab) -> None:
    tasks = lab.tasks([lab.task(f"r{i}", "refused") for i in range(4)] + [lab.task("bad", "expect-fail")])
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(lab.manifest),
                                 "--out", os.fspath(lab.root / "out"), "--concurrency", "2"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, cwd=lab.root)
    finally:
        os.close(slave)
    try:
        err = _read_all(master).decode("utf-8", "replace")
    finally:
        os.close(master)
    proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "\r\x1b[2K" in err  # rewritten in place
    live = re.findall(r"batch: (\d)/5 finished, (\d) failed, (\d) running, ETA (--|\d+:\d\d)", err)
    assert live and max(int(r) for _f, _x, r, _e in live) >= 1  # it showed tasks running
    assert ("5", "1", "0") in {(f, x, r) for f, x, r, _e in live}  # ...and the last count
    assert re.search(r"\r\x1b\[2KFAIL bad  failed \(exit 1\) .*\r?\n", err)  # a failure gets a line that stays
    assert "r0  end_turn" not in err  # a success only moves the counter
    assert err.rstrip().endswith("batch: 5/5 finished, 4 with end_turn; reports in " + os.fspath(lab.root / "out"))


# -- limits ------------------------------------------------------------------------------------------------


def test_command_line_limits_apply_to_tasks_without_their_own(lab: Lab) -> None:
    tasks = lab.tasks([
        lab.task("hang", "hang"),                                                           # --timeout 1
        lab.task("budget", "loop"),                                                         # --token-budget 300 stops it first
        lab.task("own-cap", "loop", limits={"max_turn_requests": 2, "token_budget": 10**6}),  # its own limits win
        lab.task("flag-cap", "loop", limits={"token_budget": 10**6}),                       # --max-turn-requests 4
    ])
    out = lab.root / "out"
    proc = batch(lab, tasks, out, "--timeout", "1", "--token-budget", "300", "--max-turn-requests", "4")
    assert proc.returncode == 1, proc.stderr
    got = results(out)
    assert (got["hang"]["status"], got["hang"]["exit_code"], got["hang"]["stop_reason"]) == ("timeout", 4, "cancelled")
    assert (got["budget"]["status"], got["budget"]["exit_code"]) == ("token_budget", 7)
    assert (got["own-cap"]["status"], got["own-cap"]["usage"]["requests"]) == ("max_turn_requests", 2)
    assert (got["flag-cap"]["status"], got["flag-cap"]["exit_code"], got["flag-cap"]["usage"]["requests"]) == ("max_turn_requests", 3, 4)


# -- resume ------------------------------------------------------------------------------------------------


def test_resume_runs_only_what_a_killed_batch_had_not_finished(lab: Lab) -> None:
    tasks = lab.tasks([lab.task("slow", "hang")] + [lab.task(f"f{i}", "refused") for i in range(3)])
    out = lab.root / "out"
    argv = [os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(lab.manifest), "--out", os.fspath(out), "--concurrency", "2"]
    scratch_before = _scratch_dirs()
    first = subprocess.Popen([*argv, "--timeout", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=lab.root)
    try:
        wait_until(lambda: len(results(out)) == 3, "the three fast tasks to finish")
    finally:
        first.kill()  # SIGKILL: no cleanup of any kind in the driver
        first.wait()
    before = results(out)
    assert set(before) == {"f0", "f1", "f2"}
    workers = {int(r["worker"].rsplit(":", 1)[1]) for r in before.values()}
    wait_until(lambda: not any(_pid_alive(p) for p in workers), "the workers to exit once the driver is gone", 30)
    assert _scratch_dirs() <= scratch_before  # the workers removed what the dead driver left in the scratch directory
    with open(out / "results.jsonl", "a") as f:
        f.write('{"id": "slow", "sta')  # as if killed in the middle of writing a line
    proc = subprocess.run([*argv, "--timeout", "1", "--resume"], capture_output=True, text=True, timeout=120, cwd=lab.root)
    assert proc.returncode == 1, proc.stderr
    assert "3 task(s) already finished (--resume), 1 to run" in proc.stderr
    after = results(out)
    assert after["slow"]["status"] == "timeout"
    assert {k: after[k] for k in before} == before  # the finished tasks were not run again
    lines = (out / "results.jsonl").read_text().splitlines()
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line)["id"])
        except json.JSONDecodeError:
            parsed.append(None)
    # The partial line stayed alone: the next result started on a line of its own.
    assert sorted(parsed[:3]) == ["f0", "f1", "f2"] and parsed[3:] == [None, "slow"]
    assert len(ET.parse(out / "junit.xml").getroot().findall(".//testcase")) == 4
    listed = subprocess.run([os.fspath(AGENTCORE), "sessions", "list", "--json", "--db", os.fspath(out / "sessions.db")],
                            capture_output=True, text=True, check=True)
    assert {s["id"] for s in json.loads(listed.stdout)} == {r["session_id"] for r in after.values()}


def _scratch_dirs() -> set[str]:
    from agentcore.batch.runner import _fast_tmp

    where = Path(_fast_tmp() or tempfile.gettempdir())
    return {p.name for p in where.glob("agentcore-batch-*")}


def test_a_terminated_batch_stops_its_workers_writes_its_reports_and_leaves_no_scratch(lab: Lab) -> None:
    tasks = lab.tasks([lab.task("quick", "refused"), lab.task("stuck", "hang")])
    out = lab.root / "out"
    scratch_before = _scratch_dirs()
    proc = subprocess.Popen([os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(lab.manifest), "--out", os.fspath(out),
                             "--concurrency", "2", "--timeout", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=lab.root)
    try:
        wait_until(lambda: "quick" in results(out), "the quick task")
        proc.terminate()  # SIGTERM, as a scheduler stops a job
        err = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in err, err
    workers = {int(results(out)["quick"]["worker"].rsplit(":", 1)[1])}
    wait_until(lambda: not any(_pid_alive(p) for p in workers), "the workers to exit", 30)
    assert set(results(out)) == {"quick"}  # the interrupted task has no line: --resume runs it again
    assert "(the batch was interrupted)" in (out / "summary.md").read_text()
    stuck = next(c for c in ET.parse(out / "junit.xml").getroot().iter("testcase") if c.get("name") == "stuck").find("skipped")
    assert stuck is not None and stuck.get("message") == "not run: the batch was interrupted"
    assert _scratch_dirs() <= scratch_before  # the per-task databases went with it


def test_results_of_interrupted_or_cancelled_tasks_are_not_finished(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a", "status": "end_turn"}\n{"id": "b", "status": "cancelled"}\n{"id": "c", "status": "failed"}\n'
                    '{"id": "c", "status": "cancelled"}\n{"id": "d", "sta')
    got = read_results(path)
    assert {k: is_finished(v) for k, v in got.items()} == {"a": True, "b": False, "c": False}  # the last line of c counts


def test_an_output_directory_with_results_needs_resume_and_usage_errors_run_nothing(lab: Lab) -> None:
    tasks = lab.tasks([lab.task("a", "refused")])
    out = lab.root / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"id": "a", "status": "failed"}\n')
    proc = batch(lab, tasks, out)
    assert proc.returncode == 2 and "pass --resume" in proc.stderr
    assert (out / "results.jsonl").read_text() == '{"id": "a", "status": "failed"}\n' and not (out / "junit.xml").exists()

    broken = lab.root / "broken.yaml"
    broken.write_text("name: x\ntools: [read]\nrules: nope\n")
    proc = subprocess.run([os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(broken), "--out", os.fspath(lab.root / "o2")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "broken.yaml:3" in proc.stderr and not (lab.root / "o2").exists()

    no_model = lab.tasks([{"id": "a", "prompt": "p", "workspace": "shared"}], "no-model.jsonl")
    proc = batch(lab, no_model, lab.root / "o3")
    assert proc.returncode == 2 and "no model is configured" in proc.stderr and not (lab.root / "o3").exists()

    proc = batch(lab, lab.root / "missing.jsonl", lab.root / "o4")
    assert proc.returncode == 2 and "cannot read the tasks file" in proc.stderr

    for flags, message in ((["--timeout", "0"], "--timeout must be"), (["--timeout", "nan"], "--timeout must be"),
                           (["--concurrency", "0"], "--concurrency must be"), (["--token-budget", "0"], "--token-budget")):
        proc = batch(lab, tasks, lab.root / "o5", *flags)
        assert proc.returncode == 2 and message in proc.stderr and not (lab.root / "o5").exists(), (flags, proc.stderr)


# -- workers and workspaces ----------------------------------------------------------------------------------


def test_a_worker_killed_mid_task_fails_that_task_and_the_batch_goes_on(lab: Lab) -> None:
    tasks = lab.tasks([lab.task("f0", "refused"), lab.task("stuck", "hang"), lab.task("f1", "refused")])
    out = lab.root / "out"
    proc = subprocess.Popen([os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(lab.manifest), "--out", os.fspath(out),
                             "--concurrency", "1", "--timeout", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=lab.root)
    try:
        wait_until(lambda: "f0" in results(out), "the first task")
        worker = int(results(out)["f0"]["worker"].rsplit(":", 1)[1])
        os.kill(worker, signal.SIGKILL)  # the worker now runs (or is about to run) "stuck"
        _err = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
    got = results(out)
    assert proc.returncode == 1
    assert got["stuck"]["status"] == "failed" and "killed by signal 9" in got["stuck"]["error"]
    assert got["f1"]["status"] == "end_turn" and int(got["f1"]["worker"].rsplit(":", 1)[1]) != worker  # a new worker took over


def _worker_of(driver: int) -> tuple[int, Path] | None:
    """The driver's worker process and its TMPDIR, once it has one."""
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) != driver:
                continue
            if b"agentcore.batch.worker" in (entry / "cmdline").read_bytes():
                env = dict(v.split(b"=", 1) for v in (entry / "environ").read_bytes().split(b"\0") if b"=" in v)
                return int(entry.name), Path(os.fsdecode(env[b"TMPDIR"]))
        except (FileNotFoundError, ProcessLookupError, IndexError, KeyError):
            continue
    return None


def test_a_worker_killed_in_its_first_task_is_replaced_and_the_other_tasks_run(lab: Lab) -> None:
    """The out-of-memory killer taking a worker during its first task (one worker on a one-CPU runner, or
    --concurrency 1) failed that task and every task after it ("no worker process could run it")."""
    tasks = lab.tasks([lab.task("stuck", "hang"), lab.task("f0", "refused"), lab.task("f1", "refused")])
    out = lab.root / "out"
    proc = subprocess.Popen([os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(lab.manifest), "--out", os.fspath(out),
                             "--concurrency", "1", "--timeout", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=lab.root)
    try:
        wait_until(lambda: _worker_of(proc.pid) is not None, "the worker")
        worker, tmp = _worker_of(proc.pid) or (0, Path())
        wait_until(lambda: tmp.is_dir() and any(tmp.iterdir()), "the first task's session in the worker")  # it runs "stuck"
        os.kill(worker, signal.SIGKILL)
        err = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
    got = results(out)
    assert proc.returncode == 1, err
    assert got["stuck"]["status"] == "failed" and "killed by signal 9" in got["stuck"]["error"]
    assert {got["f0"]["status"], got["f1"]["status"]} == {"end_turn"}, err  # a new worker took over
    assert int(got["f0"]["worker"].rsplit(":", 1)[1]) != worker


def test_template_copies_keep_symlinks_as_links_and_refuse_special_files(lab: Lab) -> None:
    secret = lab.root / "outside-secret.txt"
    secret.write_text("top secret\n")
    linked = put(lab.root / "linked", {"README.md": "# inventory\n"})
    (linked / "link").symlink_to(secret)
    assert (linked / "link").read_text() == "top secret\n"  # control: following the link would copy the secret
    fifo = put(lab.root / "with-fifo", {"README.md": "# inventory\n"})
    os.mkfifo(fifo / "pipe")
    tasks = lab.tasks([
        {"id": "linked", "prompt": "p", "workspace_template": "linked", "model": lab.script("refused")},
        {"id": "fifo", "prompt": "p", "workspace_template": "with-fifo", "model": lab.script("refused")},
    ])
    out = lab.root / "out"
    proc = batch(lab, tasks, out)
    assert proc.returncode == 1, proc.stderr
    copy = out / "workspaces" / "linked" / "link"
    assert copy.is_symlink() and os.readlink(copy) == os.fspath(secret)  # a link, never the secret's bytes
    got = results(out)
    assert got["linked"]["status"] == "end_turn"
    assert got["fifo"]["status"] == "usage" and "cannot copy the workspace template" in got["fifo"]["error"]  # no hang on the fifo


# -- the recorder ------------------------------------------------------------------------------------------


def test_absorbing_a_workers_database_keeps_its_order_and_refuses_duplicates(lab: Lab, tmp_path: Path) -> None:
    from agentcore.agent.headless import HeadlessRequest, ModelFlags, run_headless
    from agentcore.recorder.store import Recorder, RecorderError

    def run(db: Path, kind: str) -> str:
        request = HeadlessRequest(manifest=lab.manifest, workspace=lab.shared, prompt=kind, model=ModelFlags(model=f"script:{lab.root}/scripts/{kind}.yaml"), db=db)
        outcome = anyio.run(run_headless, request)
        assert outcome.session_id is not None
        return outcome.session_id

    main_db, worker_db = tmp_path / "main.db", tmp_path / "worker.db"
    first = run(main_db, "refused")
    second = run(worker_db, "expect-fail")
    with Recorder(main_db) as rec:
        history_before = rec.history(first)
        assert rec.absorb(worker_db) == [second]
        assert rec.history(first) == history_before
        assert [m["role"] for m in rec.history(second)] == ["user", "assistant", "tool", "assistant"]
        assert [e["type"] for e in rec.events(second)][:2] == ["run_started", "message_added"]
        counts = [rec._db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "messages", "parts", "events")]
        with pytest.raises(RecorderError, match="recorded already"):
            rec.absorb(worker_db)
        assert [rec._db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "messages", "parts", "events")] == counts


def test_absorbing_what_a_worker_of_this_version_did_not_write(tmp_path: Path) -> None:
    """Only a database at this schema is attached as it is; anything else goes through `connect`, which migrates an
    older one and refuses a newer one or a file that is not a database, with a RecorderError. The batch database
    stays usable after each refusal (nothing is left attached)."""
    import sqlite3

    from agentcore.recorder.store import SCHEMA_VERSION, Recorder, RecorderError

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    older = tmp_path / "older.db"  # schema version 0: nothing in it yet
    sqlite3.connect(older).close()
    with Recorder(tmp_path / "main.db") as rec:
        with pytest.raises(RecorderError, match="not a usable session database"):
            rec.absorb(garbage)
        with pytest.raises(RecorderError, match=f"schema version {SCHEMA_VERSION + 1}"):
            rec.absorb(newer)
        assert rec.absorb(older) == []  # migrated to this schema, then attached: no sessions to copy
        with sqlite3.connect(older) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert "src" not in {row[1] for row in rec._db.execute("PRAGMA database_list")}  # nothing left attached


# -- Ray without an address --------------------------------------------------------------------------------


def test_ray_without_an_address_starts_a_local_instance_and_sigterm_stops_it_in_order(lab: Lab) -> None:
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.importorskip("ray", reason="the [ray] extra is not installed")
    out = lab.root / "out"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    tasks = lab.tasks([lab.task("a", "refused"), lab.task("w", "weird"), lab.task("stuck", "hang")])
    proc = subprocess.Popen([os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(lab.manifest), "--out", os.fspath(out),
                             "--executor", "ray", "--timeout", "120"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=lab.root, env=env)
    try:
        wait_until(lambda: {"a", "w"} <= set(results(out)), "the two quick tasks", 120)
        proc.terminate()  # Ray installs a SIGTERM handler of its own; the batch's must still be the one that runs
        err = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in err, err
    got = results(out)
    assert set(got) == {"a", "w"} and {r["status"] for r in got.values()} == {"end_turn"}
    assert all(r["worker"].startswith("ray:") for r in got.values()) and got["a"]["refusals"] == {"capability": 1, "permission": 1}
    assert "(the batch was interrupted)" in (out / "summary.md").read_text()


def test_the_readme_batch_example_runs(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "today"
    shipped = root / "examples" / "workspace" / "notes" / "todo-summary.md"
    before = shipped.read_bytes() if shipped.exists() else None  # the README's `agentcore run` writes it in place
    proc = subprocess.run([os.fspath(AGENTCORE), "batch", "examples/tasks.jsonl", "--manifest", "examples/manifest.yaml", "--out", os.fspath(out),
                           "--concurrency", "4"], capture_output=True, text=True, timeout=120, cwd=root)
    assert proc.returncode == 0, proc.stderr
    got = results(out)
    assert set(got) == {"todo-summary", "todo-summary-limited"} and {r["status"] for r in got.values()} == {"end_turn"}
    assert got["todo-summary"]["refusals"] == {"ask": 1, "capability": 1, "permission": 1, "watchdog": 1}
    assert (out / "workspaces" / "todo-summary" / "notes" / "todo-summary.md").is_file()
    assert (shipped.read_bytes() if shipped.exists() else None) == before  # the tasks wrote into their copies only


def test_a_task_cannot_forge_the_batchs_own_files(lab: Lab) -> None:
    """With the tasks file and OUT inside the workspace a task writes to, its agent could forge another
    task's result, add tasks for `--resume` to run, or plant a journal SQLite would apply to the
    recordings: every one of the batch's own files is refused to it, and the batch's results are its own."""
    out = lab.shared / "out"
    forged = [{"tool": "write", "args": {"path": rel, "content": '{"id": "other", "status": "end_turn"}\n'},
               "expect": {"type": "error", "error_code": "protected"}}
              for rel in ("out/results.jsonl", "tasks.jsonl", "out/sessions.db", "out/sessions.db-journal", "out/junit.xml",
                          "out/summary.md", "out/logs/worker-0.log", "out/workspaces/other/notes.md")]
    put(lab.root, {"scripts/forge.yaml": yaml.safe_dump([{"text": "Forging.", "tool_calls": forged}, {"text": "Done."}])})
    tasks = lab.tasks([{"id": "forger", "prompt": "p", "workspace": ".", "model": "script:../scripts/forge.yaml"},
                       {"id": "honest", "prompt": "p", "workspace": ".", "model": "script:../scripts/refused.yaml"}],
                      name="shared/tasks.jsonl")
    before = tasks.read_text()
    proc = batch(lab, tasks, out, "--concurrency", "1")
    assert proc.returncode == 0, proc.stderr
    got = results(out)
    assert {k: v["status"] for k, v in got.items()} == {"forger": "end_turn", "honest": "end_turn"}, got
    assert tasks.read_text() == before
    assert not (out / "sessions.db-journal").exists()
    with Recorder(out / "sessions.db") as rec:
        assert len(rec.sessions()) == 2


def test_workers_that_cannot_start_are_given_up_after_a_few(tmp_path: Path) -> None:
    """The other side of replacing dead workers: a worker that dies at once every time is not started for every task."""
    from agentcore.batch.execute import TaskSpec
    from agentcore.batch.local import MAX_FRESH_DEATHS, LocalExecutor

    class Broken(LocalExecutor):
        def argv(self) -> list[str]:
            return [sys.executable, "-c", "import sys; sys.exit(3)"]  # a real process that cannot serve

    specs = [TaskSpec(id=f"t{i}", line=i + 1, prompt="p", manifest="m", workspace=os.fspath(tmp_path)) for i in range(10)]
    got: dict[str, dict[str, object]] = {}

    async def done(result: dict[str, object], _recording: object) -> None:
        got[str(result["id"])] = result

    anyio.run(Broken(1, log_dir=tmp_path / "logs", db_dir=None).run, specs, lambda _spec: None, done)
    errors = [str(got[s.id]["error"]) for s in specs]
    assert sum("exit code 3" in e for e in errors) == MAX_FRESH_DEATHS
    assert sum(e.startswith("no worker process could run it") for e in errors) == len(specs) - MAX_FRESH_DEATHS
