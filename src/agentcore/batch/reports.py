"""`OUT/junit.xml` and `OUT/summary.md`, from the results of every task in the tasks file.

Both cover the whole tasks file: each valid task with its last result (from
this run or, with `--resume`, an earlier one), tasks without a result as not
run, and malformed lines as errors. Texts come from models and providers,
so they are made safe for their format: characters XML 1.0 cannot hold are
replaced, and Markdown cells are escaped and kept to one line.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent.headless import EXIT_CODES
from .results import is_success
from .tasks import LineError, Task

_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}<>|#!~])")


@dataclass
class BatchView:
    """What the reports show."""

    name: str  # the tasks file's name
    tasks: list[Task]
    results: dict[str, dict[str, Any]]  # task id -> its result, for tasks that finished
    line_errors: list[LineError] = field(default_factory=list)
    interrupted: bool = False

    def not_run(self) -> list[Task]:
        return [t for t in self.tasks if t.id not in self.results]

    def statuses(self) -> Counter[str]:
        return Counter(r["status"] for r in self.ordered())

    def ordered(self) -> list[dict[str, Any]]:
        return [self.results[t.id] for t in self.tasks if t.id in self.results]

    def clean(self) -> bool:
        """Every task ran and ended with end_turn, and no line was malformed."""
        return not self.line_errors and not self.not_run() and all(is_success(r) for r in self.ordered())


def xml_text(text: Any) -> str:
    return _XML_INVALID.sub("\ufffd", str(text))


# -- JUnit XML -------------------------------------------------------------------------------------


def junit_xml(view: BatchView) -> bytes:
    results = view.ordered()
    failures = sum(1 for r in results if not is_success(r) and r["status"] != "usage")
    errors = sum(1 for r in results if r["status"] == "usage") + len(view.line_errors)
    skipped = len(view.not_run())
    total = len(view.tasks) + len(view.line_errors)
    duration = sum(float(r.get("duration_s") or 0) for r in results)
    counts = {"tests": str(total), "failures": str(failures), "errors": str(errors), "skipped": str(skipped), "time": f"{duration:.3f}"}
    root = ET.Element("testsuites", {"name": "agentcore batch", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": xml_text(view.name), **counts})
    classname = "agentcore.batch." + re.sub(r"[^A-Za-z0-9_]", "_", Path(view.name).stem)
    for task in view.tasks:
        _testcase(suite, classname, task, view.results.get(task.id), view.interrupted)
    for error in view.line_errors:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": f"line {error.line}", "time": "0"})
        ET.SubElement(case, "error", {"type": "malformed", "message": xml_text(error.message)})
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _testcase(suite: ET.Element, classname: str, task: Task, result: dict[str, Any] | None, interrupted: bool) -> None:
    time_s = f"{float(result.get('duration_s') or 0):.3f}" if result else "0"
    case = ET.SubElement(suite, "testcase", {"classname": classname, "name": task.id, "time": time_s})
    if result is None:
        why = "not run: the batch was interrupted" if interrupted else "not run"
        ET.SubElement(case, "skipped", {"message": why})
        return
    props = ET.SubElement(case, "properties")
    for name, value in _properties(result):
        ET.SubElement(props, "property", {"name": name, "value": xml_text(value)})
    if not is_success(result):
        kind = "error" if result["status"] == "usage" else "failure"
        message = f"{result['status']} (exit {result['exit_code']})" + (f": {result['error']}" if result.get("error") else "")
        detail = "\n".join(result.get("problems") or [])
        node = ET.SubElement(case, kind, {"type": str(result["status"]), "message": xml_text(message)})
        node.text = xml_text(detail) if detail else None
    if result.get("text"):
        ET.SubElement(case, "system-out").text = xml_text(result["text"])


def _properties(result: dict[str, Any]) -> list[tuple[str, Any]]:
    usage = result.get("usage") or {}
    props: list[tuple[str, Any]] = [
        ("status", result["status"]), ("exit_code", result["exit_code"]), ("stop_reason", result.get("stop_reason") or ""),
        ("tool_calls", result.get("tool_calls", 0)), ("input_tokens", usage.get("input_tokens", 0)),
        ("output_tokens", usage.get("output_tokens", 0)), ("model_requests", usage.get("requests", 0)),
        ("session_id", result.get("session_id") or ""),
    ]
    props += [(f"refusals.{layer}", n) for layer, n in sorted((result.get("refusals") or {}).items())]
    return props


# -- Markdown ----------------------------------------------------------------------------------------


def md(text: Any, limit: int = 80) -> str:
    """One Markdown table cell: a single line, at most `limit` characters, markup escaped."""
    flat = " ".join(xml_text(text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return _MD_SPECIAL.sub(r"\\\1", flat)


def summary_markdown(view: BatchView, *, out: Path | None = None) -> str:
    results = view.ordered()
    lines = [f"# Batch: {md(view.name, 200)}", ""]
    lines += _totals(view, results)
    attention = [r for r in results if not is_success(r)]
    if attention or view.line_errors or view.not_run():
        lines += ["", "## Needs attention", "", "| task | status | exit | why |", "|---|---|---|---|"]
        lines += [f"| {md(r['id'])} | {r['status']} | {r['exit_code']} | {md(_why(r), 160)} |" for r in attention]
        lines += [f"| line {e.line} | malformed | - | {md(e.message, 160)} |" for e in view.line_errors]
        lines += [f"| {md(t.id)} | not run | - | {'the batch was interrupted' if view.interrupted else ''} |" for t in view.not_run()]
    lines += ["", "## Tasks", "", "| task | status | exit | tool calls | refusals | tokens in/out | duration | answer |",
              "|---|---|---:|---:|---|---|---:|---|"]
    for r in results:
        usage = r.get("usage") or {}
        refusals = ", ".join(f"{k} {v}" for k, v in sorted((r.get("refusals") or {}).items())) or "-"
        lines.append(f"| {md(r['id'])} | {r['status']} | {r['exit_code']} | {r.get('tool_calls', 0)} | {refusals} | "
                     f"{usage.get('input_tokens', 0)}/{usage.get('output_tokens', 0)} | {float(r.get('duration_s') or 0):.1f} s | "
                     f"{md(r.get('text') or '')} |")
    if out is not None:
        lines += ["", f"Results: `{out / 'results.jsonl'}` (one JSON line per task), `{out / 'junit.xml'}`."]
    return "\n".join(lines) + "\n"


def _totals(view: BatchView, results: list[dict[str, Any]]) -> list[str]:
    statuses = view.statuses()
    order = [s for s in EXIT_CODES if s in statuses] + sorted(s for s in statuses if s not in EXIT_CODES)
    by_status = ", ".join(f"{statuses[s]} {s}" for s in order) or "none"
    refusals: Counter[str] = Counter()
    for r in results:
        refusals.update(r.get("refusals") or {})
    tokens_in = sum((r.get("usage") or {}).get("input_tokens", 0) for r in results)
    tokens_out = sum((r.get("usage") or {}).get("output_tokens", 0) for r in results)
    ok = sum(1 for r in results if is_success(r))
    out = [
        f"- **{ok} of {len(view.tasks)} tasks ended with end_turn**" + (" (the batch was interrupted)" if view.interrupted else ""),
        f"- finished: {len(results)} ({by_status}); not run: {len(view.not_run())}; malformed lines: {len(view.line_errors)}",
        f"- tool calls: {sum(r.get('tool_calls', 0) for r in results)}; refusals by layer: "
        + (", ".join(f"{k} {v}" for k, v in sorted(refusals.items())) or "none"),
        f"- tokens: {tokens_in} in, {tokens_out} out; task time: {sum(float(r.get('duration_s') or 0) for r in results):.1f} s in all",
    ]
    return out


def _why(result: dict[str, Any]) -> str:
    problems = result.get("problems") or []
    return result.get("error") or (problems[0] if problems else "")
