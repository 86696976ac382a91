"""Helpers for tests/test_batch*.py (no tests here): a lab with a manifest, scripts, a template and task files.

Every batch test runs the real `agentcore batch` command (or `run_batch`):
real worker processes, the real scripted model server, the real engine and,
for `bash`, real bubblewrap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

import external_support

AGENTCORE = Path(sys.executable).parent / "agentcore"

MANIFEST = {
    "name": "batch-test",
    "instructions": "Work on the project.",
    "tools": ["read", "write", "glob", "grep", "bash"],
    "requires": {
        "fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]},
        "shell": [{"cmd": "ls", "args": [{"wildcard": True}]}],
    },
    "rules": [
        {"permission": "read", "pattern": "{workspace}/secret.txt", "action": "deny"},
        {"permission": "*", "pattern": "*", "action": "allow"},
    ],
}

SCRIPTS: dict[str, list[dict[str, Any]]] = {
    # Reads, searches, runs `ls` in the sandbox, writes a note: end_turn with 4 tool calls.
    "ok": [
        {"text": "Reading.", "tool_calls": [
            {"tool": "read", "args": {"path": "README.md"}, "expect": {"type": "output", "contains": "inventory"}},
            {"tool": "grep", "args": {"pattern": "TODO"}, "expect": {"type": "output"}},
        ]},
        {"text": "Writing.", "tool_calls": [
            {"tool": "bash", "args": {"command": "ls src"}, "expect": {"type": "output", "contains": "app.py"}},
            {"tool": "write", "args": {"path": "notes/out.md", "content": "done\n"}, "expect": {"type": "output"}},
        ]},
        {"text": "All done | ok."},
    ],
    # Refused by a manifest deny and by the capability check: end_turn, refusals {permission: 1, capability: 1}.
    "refused": [
        {"text": "Trying.", "tool_calls": [
            {"tool": "read", "args": {"path": "secret.txt"}, "expect": {"type": "error", "refusal_layer": "permission"}},
            {"tool": "write", "args": {"path": "../outside.txt", "content": "x"}, "expect": {"type": "error", "refusal_layer": "capability"}},
        ]},
        {"text": "Both refused."},
    ],
    # A tool call every turn, forever: stopped by max_turn_requests or the token budget.
    "loop": [{"text": "Again.", "tool_calls": [{"tool": "glob", "args": {"pattern": "*.md"}}], "repeat": "forever"}],
    # The stream stalls: stopped by the timeout.
    "hang": [{"text": "Thinking", "hang": True}],
    # An expectation that does not hold: failed.
    "expect-fail": [
        {"text": "Reading.", "tool_calls": [{"tool": "read", "args": {"path": "README.md"}, "expect": {"contains": "no such words"}}]},
        {"text": "Done."},
    ],
    # A final answer with characters XML cannot hold, terminal escapes and Markdown table syntax.
    "weird": [{"text": "bell\x07 nul\x00 esc\x1b[31m red | pipe\nsecond line"}],
}

TEMPLATE_FILES = {
    "README.md": "# inventory\n",
    "src/app.py": "# TODO: count\nx = 1\n",
    "secret.txt": "s3cret\n",
    "notes/.keep": "",
}



def require_bwrap() -> None:
    external_support.require_bwrap("batch tests with bash")


def put(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


@dataclass
class Lab:
    root: Path
    manifest: Path
    template: Path
    shared: Path  # a workspace used in place by tasks that do not write

    def script(self, name: str) -> str:
        return f"script:scripts/{name}.yaml"

    def tasks(self, lines: Sequence[dict[str, Any] | str], name: str = "tasks.jsonl") -> Path:
        path = self.root / name
        path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8")
        return path

    def task(self, task_id: str, kind: str, **extra: Any) -> dict[str, Any]:
        """A task running script `kind`; tasks that write get a copy of the template, the others share a workspace."""
        where = {"workspace_template": "template"} if kind == "ok" else {"workspace": "shared"}
        return {"id": task_id, "prompt": f"do {kind}", **where, "model": self.script(kind), **extra}


def make_lab(root: Path) -> Lab:
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST, sort_keys=False), encoding="utf-8")
    (root / "scripts").mkdir(exist_ok=True)
    for name, turns in SCRIPTS.items():
        (root / "scripts" / f"{name}.yaml").write_text(yaml.safe_dump(turns, sort_keys=False, allow_unicode=False), encoding="utf-8")
    template = put(root / "template", TEMPLATE_FILES)
    shared = put(root / "shared", TEMPLATE_FILES)
    return Lab(root, manifest, template, shared)


def batch(lab: Lab, tasks: Path, out: Path, *extra: str, timeout: float = 240, **kw: Any) -> subprocess.CompletedProcess[str]:
    argv = [os.fspath(AGENTCORE), "batch", os.fspath(tasks), "--manifest", os.fspath(lab.manifest), "--out", os.fspath(out), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=lab.root, **kw)


def results(out: Path) -> dict[str, dict[str, Any]]:
    from agentcore.batch.results import read_results

    return read_results(out / "results.jsonl")


COMPARED = ("status", "exit_code", "stop_reason", "text", "error", "tool_calls", "refusals", "problems")


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the executor (durations, session ids, workers and token counts of paths may)."""
    return {**{k: result[k] for k in COMPARED}, "requests": result["usage"]["requests"]}
