"""Reports: the canonical JSON Lines stream and what is derived from it.

The JSON Lines report is the record of a run: a header (suite version and
digest, seed, implementation), one line per case, and a footer; a report
without a footer was cut short. JUnit XML, the Markdown summary and the
badge are computed from the same results.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping

from . import PROTOCOL_VERSION, SPEC_REVISION, SUITE_VERSION
from .runner import FAILING, STATUSES, CaseResult


def header(*, digest: str, seed: int, implementation: Mapping[str, Any], features: Iterable[str], connector: str, case_count: int) -> dict[str, Any]:
    return {
        "kind": "header",
        "suite": {"version": SUITE_VERSION, "digest": digest, "spec_revision": SPEC_REVISION, "cases": case_count},
        "protocol": PROTOCOL_VERSION,
        "seed": seed,
        "implementation": dict(implementation),
        "features": sorted(features),
        "connector": connector,
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "runner": {"python": platform.python_version(), "platform": platform.platform(terse=True)},
    }


def counts(results: Iterable[CaseResult]) -> dict[str, int]:
    c = Counter(r.status for r in results)
    return {s: c.get(s, 0) for s in STATUSES}


def footer(results: list[CaseResult], *, duration_s: float, restarts: int, verdict: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "footer",
        "counts": counts(results),
        "duration_s": round(duration_s, 3),
        "harness_restarts": restarts,
        "expectations": dict(verdict),
        "exit_code": 0 if verdict.get("ok", False) else 1,
    }


def jsonl(head: Mapping[str, Any], results: Iterable[CaseResult], foot: Mapping[str, Any] | None) -> str:
    lines = [json.dumps(head, sort_keys=True)]
    lines += [json.dumps(r.to_json(), sort_keys=True, default=str) for r in results]
    if foot is not None:
        lines.append(json.dumps(foot, sort_keys=True))
    return "\n".join(lines) + "\n"


def read_jsonl(text: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """(header, case lines, footer or None when the run was cut short)."""
    head: dict[str, Any] | None = None
    cases: list[dict[str, Any]] = []
    foot: dict[str, Any] | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        obj = json.loads(raw)
        kind = obj.get("kind")
        if kind == "header":
            head = obj
        elif kind == "case":
            cases.append(obj)
        elif kind == "footer":
            foot = obj
    if head is None:
        raise ValueError("report has no header")
    return head, cases, foot


def junit(head: Mapping[str, Any], results: list[CaseResult]) -> str:
    impl = head.get("implementation", {}).get("name", "implementation")
    suites = ET.Element("testsuites", name=f"conformance ({impl})")
    by_area: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_area[r.area].append(r)
    for area in sorted(by_area):
        rs = by_area[area]
        c = counts(rs)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=area,
            tests=str(len(rs)),
            failures=str(c["fail"]),
            errors=str(c["error"] + c["timeout"] + c["crash"]),
            skipped=str(c["skipped"] + c["not_applicable"]),
            time=f"{sum(r.duration_ms for r in rs) / 1000:.3f}",
        )
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="seed", value=str(head.get("seed")))
        for r in rs:
            tc = ET.SubElement(suite, "testcase", classname=f"conformance.{area.lower()}", name=r.id, time=f"{r.duration_ms / 1000:.3f}")
            label = f"[{r.level}] {' '.join(r.requirements)}"
            if r.status == "fail":
                el = ET.SubElement(tc, "failure", message=r.message[:500], type="fail")
                el.text = label + "\n" + r.message
            elif r.status in ("error", "timeout", "crash"):
                el = ET.SubElement(tc, "error", message=r.message[:500], type=r.status)
                el.text = f"{label}\ncaught by {r.caught_by or 'runner'}\n{r.message}"
            elif r.status in ("skipped", "not_applicable"):
                ET.SubElement(tc, "skipped", message=f"{r.status}: {r.message}"[:500])
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def markdown(head: Mapping[str, Any], results: list[CaseResult], foot: Mapping[str, Any] | None = None, requirements: Mapping[str, Any] | None = None) -> str:
    impl = head.get("implementation", {})
    lines = [
        f"# Conformance: {impl.get('name', '?')} {impl.get('version', '')}".rstrip(),
        "",
        f"Suite {head['suite']['version']} (digest `{head['suite']['digest'][:12]}`), SPEC revision {head['suite'].get('spec_revision')}, "
        f"seed {head.get('seed')}, connector `{head.get('connector')}`.",
        "",
        "| area | cases | pass | fail | error | timeout | crash | skipped | n/a | MUST pass |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by_area: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_area[r.area].append(r)
    for area in sorted(by_area):
        rs = by_area[area]
        c = counts(rs)
        must = [r for r in rs if r.level == "MUST" and r.status not in ("skipped", "not_applicable")]
        must_pass = sum(1 for r in must if r.status == "pass")
        lines.append(
            f"| {area} | {len(rs)} | {c['pass']} | {c['fail']} | {c['error']} | {c['timeout']} | {c['crash']} | {c['skipped']} | {c['not_applicable']} | {must_pass}/{len(must)} |"
        )
    total = counts(results)
    lines.append(
        f"| **all** | {len(results)} | {total['pass']} | {total['fail']} | {total['error']} | {total['timeout']} | {total['crash']} | {total['skipped']} | {total['not_applicable']} | |"
    )
    bad = [r for r in results if r.status in FAILING]
    if bad:
        lines += ["", "## Not passing", "", "| case | level | requirements | status | message |", "|---|---|---|---|---|"]
        for r in bad:
            msg = r.message.replace("|", "\\|").replace("\n", " ")[:240]
            lines.append(f"| `{r.id}` | {r.level} | {', '.join(r.requirements)} | {r.status} | {msg} |")
    if requirements:
        per_req: dict[str, list[str]] = defaultdict(list)
        for r in results:
            for req in r.requirements:
                per_req[req].append(r.status)
        lines += ["", "## Requirements", "", "| requirement | level | cases | result |", "|---|---|---:|---|"]
        for rid, req in requirements.items():
            st = per_req.get(rid, [])
            if not st:
                result = "not tested"
            elif any(s in FAILING for s in st):
                result = "**failing**"
            elif all(s in ("skipped", "not_applicable") for s in st):
                result = "not applicable"
            else:
                result = "pass"
            lines.append(f"| {rid} | {getattr(req, 'level', '')} | {len(st)} | {result} |")
    if foot is not None:
        ex = foot.get("expectations", {})
        lines += [
            "",
            f"Run took {foot.get('duration_s')} s with {foot.get('harness_restarts', 0)} harness restart(s). "
            f"Expected failures: {len(ex.get('expected', []))}; unexpected: {len(ex.get('unexpected', []))}; stale: {len(ex.get('stale', []))}.",
        ]
    return "\n".join(lines) + "\n"


def badge(head: Mapping[str, Any], results: list[CaseResult]) -> dict[str, Any]:
    """A shields.io endpoint document: MUST cases passed out of those that apply."""
    must = [r for r in results if r.level == "MUST" and r.status not in ("skipped", "not_applicable")]
    passed = sum(1 for r in must if r.status == "pass")
    ratio = passed / len(must) if must else 0.0
    color = "brightgreen" if must and passed == len(must) else ("yellow" if ratio >= 0.8 else "red")
    return {"schemaVersion": 1, "label": "toolspec conformance", "message": f"{passed}/{len(must)} MUST", "color": color}
