"""`agentcore batch` against hostile task lines and hostile model output: reported per line or per task, never a
crashed or hung batch."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentcore.batch.tasks import load_tasks
from batch_support import Lab, batch, make_lab, put, results

pytestmark = pytest.mark.slow


def test_lines_json_cannot_hold_or_paths_that_cannot_resolve_are_line_errors_not_a_crash(tmp_path: Path) -> None:
    ok = {"id": "ok", "prompt": "p", "workspace": "w"}
    lines = [
        "[" * 100_000,                                                                                  # 1: RecursionError
        '{"id": "big", "prompt": "p", "workspace": "w", "limits": {"token_budget": ' + "9" * 5000 + "}}",  # 2: int digit limit
        json.dumps({"id": "home", "prompt": "p", "workspace": "~no-such-user-zz/w"}),                    # 3: expanduser
        json.dumps({"id": "script", "prompt": "p", "workspace": "w", "model": "script:~no-such-user-zz/s.yaml"}),  # 4
        json.dumps(ok),                                                                                 # 5
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tasks = load_tasks(path)  # before the fix: RecursionError / ValueError / RuntimeError, and the whole batch died
    assert [t.id for t in tasks.tasks] == ["ok"] and tasks.tasks[0].line == 5
    assert [e.line for e in tasks.errors] == [1, 2, 3, 4]


def test_line_separators_inside_json_strings_do_not_split_a_task(tmp_path: Path) -> None:
    # JSON allows U+2028, U+2029 and NEL raw in strings (json.dumps(ensure_ascii=False) writes them so).
    path = tmp_path / "tasks.jsonl"
    lines = [{"id": "a", "prompt": "one\u2028two\u2029three\x85four", "workspace": "w"}, {"id": "b", "prompt": "p", "workspace": "w"}]
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    tasks = load_tasks(path)
    assert tasks.errors == []
    assert [(t.id, t.line) for t in tasks.tasks] == [("a", 1), ("b", 2)]
    assert tasks.tasks[0].prompt == lines[0]["prompt"]


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return make_lab(tmp_path / "lab")


def test_a_lone_surrogate_in_a_models_answer_neither_hangs_the_batch_nor_fails_other_tasks(lab: Lab) -> None:
    # A model's half of an emoji (a stream cut between the two halves of a surrogate pair) arrives as "\ud83d".
    put(lab.root, {"scripts/surrogate.yaml": '- text: "half \\ud83d an emoji"\n'})
    tasks = lab.tasks([{"id": "s", "prompt": "p", "workspace": "shared", "model": "script:scripts/surrogate.yaml"},
                       lab.task("after", "refused")])
    out = lab.root / "out"
    # Before the fix the worker died writing the reply, kept running (its stdin reader thread), and the
    # driver waited for it forever: this timed out.
    proc = batch(lab, tasks, out, "--concurrency", "1", timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = results(out)
    assert got["s"]["status"] == "end_turn" and got["s"]["text"] == "half \ufffd an emoji"
    assert got["after"]["status"] == "end_turn"


def test_a_finished_answer_with_line_separators_is_finished_on_resume(lab: Lab) -> None:
    # json.dumps(ensure_ascii=False) writes U+2028, U+2029 and NEL raw inside strings; str.splitlines cut the
    # result line there, so --resume saw no result for the task and ran it again (twice in its workspace).
    put(lab.root, {"scripts/separators.yaml": '- text: "one\\u2028two\\u2029three\\x85four"\n'})
    tasks = lab.tasks([{"id": "s", "prompt": "p", "workspace": "shared", "model": "script:scripts/separators.yaml"}])
    out = lab.root / "out"
    assert batch(lab, tasks, out).returncode == 0
    assert results(out)["s"]["text"] == "one\u2028two\u2029three\x85four"
    proc = batch(lab, tasks, out, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "1 task(s) already finished (--resume), 0 to run" in proc.stderr, proc.stderr
    assert len((out / "results.jsonl").read_bytes().split(b"\n")) == 2  # one line and the final newline: not run again


def test_a_template_holding_the_output_directory_is_copied_without_the_batchs_files(lab: Lab) -> None:
    # A common layout: each task gets a copy of the repository ("workspace_template": "."), and the batch writes
    # to runs/ inside it. Before the fix the copy recursed into its own destination (RecursionError killed the
    # worker, and every other task failed with "no worker process could run it"); a copy that got through would
    # have handed each agent the other tasks' workspaces, results and recordings.
    put(lab.root, {"scripts/look.yaml": yaml.safe_dump([
        {"text": "Looking.", "tool_calls": [{"tool": "glob", "args": {"pattern": "runs/**"}, "expect": {"type": "output"}}]},
        {"text": "Done."}])})
    tasks = lab.tasks([{"id": f"t{i}", "prompt": "p", "workspace_template": ".", "model": "script:scripts/look.yaml"} for i in range(3)])
    out = lab.root / "runs" / "today"
    proc = batch(lab, tasks, out, "--concurrency", "1")
    assert proc.returncode == 0, proc.stderr
    got = results(out)
    assert {k: v["status"] for k, v in got.items()} == {"t0": "end_turn", "t1": "end_turn", "t2": "end_turn"}, got
    for i in range(3):
        copy = out / "workspaces" / f"t{i}"
        assert (copy / "manifest.yaml").is_file() and (copy / "scripts" / "look.yaml").is_file()  # the rest of the template
        assert not (copy / "tasks.jsonl").exists()  # the batch's own tasks file: the other tasks' prompts are not this agent's
        assert not (copy / "runs" / "today" / "workspaces").exists()  # nobody else's copy
        assert not any((copy / "runs" / "today" / name).exists() for name in ("results.jsonl", "sessions.db", "logs"))


def test_a_task_working_in_place_cannot_change_what_later_tasks_start_from(lab: Lab) -> None:
    # A task working in place in a directory that holds another task's template, or a script another task's model
    # answers from, could plant files in every later copy or rewrite what that model does: the outcome of a
    # template task depended on which task ran first. Both are read by the batch, like the tasks file.
    planted = [{"tool": "write", "args": {"path": rel, "content": "planted\n"}, "expect": {"type": "error", "error_code": "protected"}}
               for rel in ("template/README.md", "template/planted.txt", "scripts/ok.yaml")]
    put(lab.root, {"scripts/plant.yaml": yaml.safe_dump([{"text": "Planting.", "tool_calls": planted}, {"text": "Done."}])})
    tasks = lab.tasks([{"id": "planter", "prompt": "p", "workspace": ".", "model": "script:scripts/plant.yaml"}, lab.task("copied", "ok")])
    ok_script = (lab.root / "scripts" / "ok.yaml").read_text()
    out = lab.root / "out"
    proc = batch(lab, tasks, out, "--concurrency", "1")
    assert proc.returncode == 0, proc.stderr
    got = results(out)
    assert {k: v["status"] for k, v in got.items()} == {"planter": "end_turn", "copied": "end_turn"}, got
    copy = out / "workspaces" / "copied"
    assert (copy / "README.md").read_text() == "# inventory\n" and not (copy / "planted.txt").exists()
    assert (lab.root / "scripts" / "ok.yaml").read_text() == ok_script


def test_clearing_an_earlier_copy_never_follows_a_directory_an_agent_swaps_for_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--resume` clears the copy an interrupted attempt left before copying the template again. An agent still
    writing there (a concurrent task with fs.write on the batch's directory) swaps a directory for a link to
    elsewhere at the moment the removal meets trouble; the removal must neither chmod nor delete through it."""
    from agentcore.batch.execute import TaskSpec, prepare_workspace

    template = tmp_path / "template"
    template.mkdir()
    (template / "README.md").write_text("inventory\n", encoding="utf-8")
    copy = tmp_path / "out" / "workspaces" / "t1"
    (copy / "sub" / "deep").mkdir(parents=True)
    (copy / "sub" / "deep" / "f.txt").write_text("x", encoding="utf-8")
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)  # empty: an rmdir through the link would delete it
    outside.chmod(0o751)
    (outside / "deep").chmod(0o751)

    real_rmdir = os.rmdir
    swapped: list[bool] = []

    def rmdir_meeting_the_attacker(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.fspath(path) == "deep" and not swapped:  # the agent acts now, while `sub` is being emptied
            swapped.append(True)
            os.rename(copy / "sub", copy / "sub.moved")
            os.symlink(outside, copy / "sub")
            (copy / "sub.moved" / "deep" / "late.txt").write_text("y", encoding="utf-8")  # this rmdir now fails
        real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir_meeting_the_attacker)
    spec = TaskSpec(id="t1", line=1, prompt="p", manifest=str(tmp_path / "m.yaml"), template=str(template), copy_to=str(copy))
    try:
        prepare_workspace(spec)
    except Exception:
        pass  # failing closed is fine; acting outside is not
    monkeypatch.undo()
    assert swapped
    assert (outside / "deep").is_dir()  # before the fix: removed through the link
    assert stat.S_IMODE(outside.stat().st_mode) == 0o751  # before the fix: chmodded 0o700 through the link
    assert stat.S_IMODE((outside / "deep").stat().st_mode) == 0o751


def test_copying_a_template_never_writes_through_a_directory_an_agent_swaps_for_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A concurrent task with fs.write on the batch's directory swaps a directory of another task's copy for a
    link just after the copy created it: the template's files (a repository's, untrusted) must not be written,
    nor modes set, where the link points."""
    from agentcore.batch.execute import TaskSpec, prepare_workspace

    template = tmp_path / "template"
    (template / "sub").mkdir(parents=True)
    (template / "sub" / "authorized_keys").write_text("ssh-ed25519 AAAA attacker\n", encoding="utf-8")
    (template / "sub").chmod(0o700)
    copy = tmp_path / "out" / "workspaces" / "t1"
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o751)

    real_mkdir = os.mkdir
    swapped: list[bool] = []

    def mkdir_meeting_the_attacker(path: Any, *args: Any, **kwargs: Any) -> None:
        real_mkdir(path, *args, **kwargs)
        if os.path.basename(os.fspath(path)) == "sub" and not swapped:  # the agent acts as soon as it appears
            swapped.append(True)
            os.rename(copy / "sub", copy / "sub.moved")
            os.symlink(outside, copy / "sub")

    monkeypatch.setattr(os, "mkdir", mkdir_meeting_the_attacker)
    spec = TaskSpec(id="t1", line=1, prompt="p", manifest=str(tmp_path / "m.yaml"), template=str(template), copy_to=str(copy))
    try:
        prepare_workspace(spec)
    except Exception:
        pass  # failing closed is fine; writing outside is not
    monkeypatch.undo()
    assert swapped
    assert not (outside / "authorized_keys").exists()  # before the fix: the template's file written through the link
    assert stat.S_IMODE(outside.stat().st_mode) == 0o751  # before the fix: chmodded like template/sub


def test_copying_a_template_refuses_a_device_instead_of_reading_it_forever(lab: Lab) -> None:
    template = put(lab.root / "with-device", {"README.md": "# inventory\n"})
    # /dev/null's numbers: read, it ends at once (the test stays safe before the fix), where /dev/zero's or
    # /dev/urandom's never would and the copy would fill the disk. Root (the tests' user) may make one.
    os.mknod(template / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    tasks = lab.tasks([{"id": "dev", "prompt": "p", "workspace_template": "with-device", "model": lab.script("refused")}])
    out = lab.root / "out"
    proc = batch(lab, tasks, out)
    got = results(out)
    assert proc.returncode == 1, proc.stderr
    assert got["dev"]["status"] == "usage" and "cannot copy the workspace template" in got["dev"]["error"]  # before: read and copied
    assert not (out / "workspaces" / "dev" / "dev").exists()


def test_a_workspaces_directory_swapped_for_a_link_gets_no_copy_through_it(tmp_path: Path) -> None:
    """A template task with fs.write on the batch's directory replaces `OUT/workspaces` with a link: the next
    task's copy (and the removal of an earlier one) must not land where it points."""
    from agentcore.batch.execute import TaskSpec, prepare_workspace

    template = put(tmp_path / "template", {"README.md": "# inventory\n"})
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "t2").mkdir(parents=True)  # an "earlier copy" there: a removal through the link would delete it
    (elsewhere / "t2" / "keep.txt").write_text("keep\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "workspaces").symlink_to(elsewhere)
    spec = TaskSpec(id="t2", line=1, prompt="p", manifest=str(tmp_path / "m.yaml"), template=str(template),
                    copy_to=str(tmp_path / "out" / "workspaces" / "t2"))
    with pytest.raises(Exception):
        prepare_workspace(spec)
    assert (elsewhere / "t2" / "keep.txt").read_text(encoding="utf-8") == "keep\n"
    assert not (elsewhere / "t2" / "README.md").exists()
