"""`agentcore batch` against hostile task lines and hostile model output: reported per line or per task, never a
crashed or hung batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
