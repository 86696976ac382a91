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

from agentcore.textdata import printable as _printable

from . import PROTOCOL_VERSION, SPEC_REVISION, SUITE_VERSION
from .runner import FAILING, STATUSES, CaseResult


def printable(text: Any, *, multiline: bool = False) -> str:
    """Text a harness chose, shown so that it cannot act on a terminal or break an XML or Markdown report:
    the engine's own `printable` (controls, what XML 1.0 forbids, bidirectional overrides, surrogates and
    non-characters as escapes; newlines and tabs kept only where the text may span lines)."""
    return _printable(str(text), lines=multiline)


def _md(text: Any) -> str:
    """One Markdown table cell or heading: one line, no table pipes, no HTML (`<!--` would hide the rest)."""
    return printable(text).replace("|", "\\|").replace("<", "&lt;")


def header(*, digest: str, seed: int, implementation: Mapping[str, Any], features: Iterable[str], connector: str, case_count: int, profile: str = "spec") -> dict[str, Any]:
    return {
        "profile": profile,
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


def counts(results: Iterable[CaseResult], profile: str = "spec") -> dict[str, int]:
    c = Counter(r.status_for(profile) for r in results)
    return {s: c.get(s, 0) for s in STATUSES}


def footer(results: list[CaseResult], *, duration_s: float, restarts: int, verdict: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "footer",
        "counts": counts(results),
        "rfc_counts": counts(results, "rfc"),
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
    impl = printable(head.get("implementation", {}).get("name", "implementation"))[:200]
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
                el = ET.SubElement(tc, "failure", message=printable(r.message)[:500], type="fail")
                text = "\n".join([r.message] + [f"[{f.tag.label()}] {f.message}" for f in r.failures[1:]])
                el.text = label + "\n" + printable(text, multiline=True)
            elif r.status in ("error", "timeout", "crash"):
                el = ET.SubElement(tc, "error", message=printable(r.message)[:500], type=r.status)
                el.text = f"{label}\ncaught by {r.caught_by or 'runner'}\n{printable(r.message, multiline=True)}"
            elif r.status in ("skipped", "not_applicable"):
                ET.SubElement(tc, "skipped", message=printable(f"{r.status}: {r.message}")[:500])
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _area_table(results: list[CaseResult]) -> list[str]:
    lines = [
        "| area | cases | pass | fail | error | timeout | crash | skipped | n/a | MUST pass | rfc pass |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by_area: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_area[r.area].append(r)
    for area in sorted(by_area):
        rs = by_area[area]
        c = counts(rs)
        must = [r for r in rs if r.level == "MUST" and r.status not in ("skipped", "not_applicable")]
        must_pass = sum(1 for r in must if r.status == "pass")
        rfc = [r for r in rs if r.rfc_status not in ("skipped", "not_applicable")]
        rfc_pass = sum(1 for r in rfc if r.rfc_status == "pass")
        lines.append(
            f"| {area} | {len(rs)} | {c['pass']} | {c['fail']} | {c['error']} | {c['timeout']} | {c['crash']} | {c['skipped']} | {c['not_applicable']} | {must_pass}/{len(must)} | {rfc_pass}/{len(rfc)} |"
        )
    total = counts(results)
    lines.append(
        f"| **all** | {len(results)} | {total['pass']} | {total['fail']} | {total['error']} | {total['timeout']} | {total['crash']} | {total['skipped']} | {total['not_applicable']} | | |"
    )
    return lines


def _profiles_section(results: list[CaseResult], titles: Mapping[str, str]) -> list[str]:
    """Both scores, and which SPEC choice (section 24) each spec-only failure comes from."""
    lines = ["", "## Profiles", ""]
    for profile, what in (("spec", "every check (SPEC.md)"), ("rfc", "only checks that restate the Grida RFC")):
        c = counts(results, profile)
        judged = sum(v for k, v in c.items() if k not in ("skipped", "not_applicable"))
        lines.append(f"- **{profile}** ({what}): {c['pass']} of {judged} judged cases pass; {c['not_applicable']} not applicable.")
    by_choice: Counter[str] = Counter()
    for r in results:
        first = r.first_failure()
        if r.status == "fail" and r.rfc_status != "fail" and first is not None and first.tag.profile == "spec":
            by_choice[first.tag.choice or "detail"] += 1
    if by_choice:
        lines += ["", "Cases that fail only on SPEC's own choices (they pass the rfc profile):", "", "| SPEC choice (section 24) | cases |", "|---|---:|"]
        for choice, n in by_choice.most_common():
            lines.append(f"| {titles.get(choice, choice)} (`{choice}`) | {n} |")
    return lines


def _failing_section(results: list[CaseResult]) -> list[str]:
    bad = [r for r in results if r.status in FAILING]
    if not bad:
        return []
    lines = ["", "## Not passing", "", "| case | level | requirements | status | rfc | from | message |", "|---|---|---|---|---|---|---|"]
    for r in bad:
        first = r.first_failure()
        origin = first.tag.label() if first is not None else (r.caught_by or "")
        msg = _md(r.message.replace("\n", " ")[:240])
        lines.append(f"| `{r.id}` | {r.level} | {', '.join(r.requirements)} | {r.status} | {r.rfc_status} | {origin} | {msg} |")
    return lines


def _requirements_section(results: list[CaseResult], requirements: Mapping[str, Any], exclusions: Mapping[str, str]) -> list[str]:
    per_req: dict[str, list[str]] = defaultdict(list)
    for r in results:
        for req in r.requirements:
            per_req[req].append(r.status)
    lines = ["", "## Requirements", "", "| requirement | level | cases | result |", "|---|---|---:|---|"]
    for rid, req in requirements.items():
        st = per_req.get(rid, [])
        if not st:
            result = f"excluded: {exclusions[rid]}" if rid in exclusions else "not tested"
        elif any(s in FAILING for s in st):
            result = "**failing**"
        elif all(s in ("skipped", "not_applicable") for s in st):
            result = "not applicable"
        else:
            result = "pass"
        lines.append(f"| {rid} | {getattr(req, 'level', '')} | {len(st)} | {result.replace('|', '/')} |")
    return lines


def markdown(
    head: Mapping[str, Any],
    results: list[CaseResult],
    foot: Mapping[str, Any] | None = None,
    requirements: Mapping[str, Any] | None = None,
    *,
    exclusions: Mapping[str, str] | None = None,
    needs: list[str] | None = None,
    choice_titles: Mapping[str, str] | None = None,
) -> str:
    impl = head.get("implementation", {})
    connector = _md(head.get("connector")).replace("`", "'")
    lines = [
        f"# Conformance: {_md(impl.get('name', '?'))[:200]} {_md(impl.get('version', ''))[:100]}".rstrip(),
        "",
        f"Suite {head['suite']['version']} (digest `{head['suite']['digest'][:12]}`), SPEC revision {head['suite'].get('spec_revision')}, "
        f"seed {head.get('seed')}, connector `{connector}`, judged by the `{head.get('profile', 'spec')}` profile.",
        "",
    ]
    lines += _area_table(results)
    lines += _profiles_section(results, choice_titles or {})
    lines += _failing_section(results)
    if needs:
        lines += [""] + needs
    if requirements:
        lines += _requirements_section(results, requirements, exclusions or {})
    if foot is not None:
        ex = foot.get("expectations", {})
        lines += [
            "",
            f"Run took {foot.get('duration_s')} s with {foot.get('harness_restarts', 0)} harness restart(s). "
            f"Expected failures: {len(ex.get('expected', []))}; unexpected: {len(ex.get('unexpected', []))}; stale: {len(ex.get('stale', []))}.",
        ]
    return "\n".join(lines) + "\n"


def badge(head: Mapping[str, Any], results: list[CaseResult]) -> dict[str, Any]:
    """A shields.io endpoint document: MUST cases passed out of those that apply (under the run's profile)."""
    profile = str(head.get("profile", "spec"))
    must = [r for r in results if r.level == "MUST" and r.status_for(profile) not in ("skipped", "not_applicable")]
    passed = sum(1 for r in must if r.status_for(profile) == "pass")
    ratio = passed / len(must) if must else 0.0
    color = "brightgreen" if must and passed == len(must) else ("yellow" if ratio >= 0.8 else "red")
    label = "toolspec conformance" if profile == "spec" else "toolspec conformance (rfc)"
    return {"schemaVersion": 1, "label": label, "message": f"{passed}/{len(must)} MUST", "color": color}
