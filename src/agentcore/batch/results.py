"""Per-task results and `OUT/results.jsonl`.

One JSON object per finished task, appended (and flushed) the moment the task
finishes, so a batch that is killed keeps every result it had. Keys:

- `id`, `line` (in the tasks file);
- `status`: how the task ended. `end_turn` is success; the others are
  `failed`, `usage`, `max_turn_requests`, `timeout`, `max_tokens`,
  `refusal`, `token_budget` (the run's statuses, as `agentcore run` has them);
- `exit_code`: what `agentcore run` would have exited with (0 only for
  `end_turn`);
- `stop_reason`: the loop's stop reason (`null` when no run started);
- `text`: the final answer; `error`: why the task did not finish, if it did not;
- `tool_calls`, `refusals` (by layer: `{"permission": 2, ...}`), `usage`
  (`input_tokens`, `output_tokens`, `requests`), `problems` (failed
  script expectations), `session_id` (in the session database);
- `duration_s`, `started_at`, `finished_at` (Unix seconds), `workspace`
  (the directory the task ran in), `worker` (host and process).

A task is *finished* when results.jsonl has a line for it whose status is not
`cancelled`; `--resume` runs every task that is not. Tasks in flight when a
batch is interrupted get no line at all, so they run again. When a task has
several lines (a resumed batch, a hand-edited file), the last one counts; a
line that is not valid JSON (a kill in the middle of a write) is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO

SUCCESS = "end_turn"
UNFINISHED = frozenset({"cancelled"})


def is_finished(result: dict[str, Any]) -> bool:
    return isinstance(result.get("status"), str) and result["status"] not in UNFINISHED


def is_success(result: dict[str, Any]) -> bool:
    return result.get("status") == SUCCESS


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """Task id -> its last result line (unreadable lines skipped)."""
    out: dict[str, dict[str, Any]] = {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return out
    # Lines end at "\n" only: json.dumps(ensure_ascii=False) writes U+2028, U+2029 and NEL raw inside strings (a
    # model's answer may hold them), and str.splitlines would cut a finished task's line there, so --resume ran it again.
    for raw in text.split("\n"):
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("id"), str):
            out[doc["id"]] = doc
    return out


class ResultsLog:
    """Appends one line per finished task to results.jsonl, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file: TextIO = open(self.path, "a+", encoding="utf-8")
        self._start_on_new_line()

    def _start_on_new_line(self) -> None:
        # A batch killed in the middle of a write leaves a partial last line: never glue the next result onto it.
        size = self._file.seek(0, os.SEEK_END)
        if size:
            with open(self.path, "rb") as raw:
                raw.seek(size - 1)
                if raw.read(1) != b"\n":
                    self._file.write("\n")
                    self._file.flush()

    def append(self, result: dict[str, Any]) -> None:
        self._file.write(json.dumps(result, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "ResultsLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
