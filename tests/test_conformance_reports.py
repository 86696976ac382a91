"""Reports, expectations, the CLI entry points, and the building blocks (templates, pointers, predicates)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.checks import MISSING, check_file, predicate_failures, resolve
from conformance.expectations import Expectations, judge, load_expectations
from conformance.generators import TemplateError, generate, render, rng_for
from conformance.report import badge, footer, header, jsonl, junit, markdown, read_jsonl
from conformance.runner import CaseResult

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]


def _result(cid: str, status: str, level: str = "MUST", area: str = "PERM") -> CaseResult:
    return CaseResult(cid, area, level, ("PERM-9",), status, message=f"{status} happened" if status != "pass" else "")


RESULTS = [
    _result("a", "pass"),
    _result("b", "fail"),
    _result("c", "error"),
    _result("d", "skipped", area="FILE"),
    _result("e", "not_applicable", area="FILE"),
    _result("f", "fail", level="SHOULD", area="FILE"),
    _result("g", "timeout"),
]


# -- expectations ------------------------------------------------------------------------------


def test_expectations_rules() -> None:
    exp = Expectations(failures={"b": "known", "a": "was broken", "zzz": "gone"})
    v = judge(RESULTS, exp, all_ids=[r.id for r in RESULTS])
    assert v.expected == ["b"]
    assert sorted(v.unexpected) == ["c", "g"]
    assert v.stale == ["a", "zzz"]
    assert v.informational == ["f"]
    assert not v.ok
    strict = judge(RESULTS, Expectations(failures={"b": "", "c": "", "g": ""}), strict=True)
    assert strict.unexpected == ["f"]
    clean = judge(RESULTS, Expectations(failures={"b": "", "c": "", "g": ""}))
    assert clean.ok


def test_expectations_file_formats(tmp_path: Path) -> None:
    p = tmp_path / "e.yaml"
    p.write_text("implementation: x\nfailures:\n  a.b: reason\n")
    assert load_expectations(p).failures == {"a.b": "reason"}
    p.write_text("- a.b\n- c.d\n")
    assert set(load_expectations(p).failures) == {"a.b", "c.d"}
    p.write_text("failures: 3\n")
    with pytest.raises(ValueError):
        load_expectations(p)
    p.write_text("typo: {}\n")
    with pytest.raises(ValueError):
        load_expectations(p)


# -- reports -----------------------------------------------------------------------------------


def _head() -> dict:
    return header(digest="d" * 64, seed=42, implementation={"name": "impl", "version": "1"}, features=["tool.read"], connector="inprocess", case_count=len(RESULTS))


def test_jsonl_round_trip_and_truncation_detection() -> None:
    verdict = judge(RESULTS).to_json()
    text = jsonl(_head(), RESULTS, footer(RESULTS, duration_s=1.5, restarts=1, verdict=verdict))
    head, cases, foot = read_jsonl(text)
    assert head["seed"] == 42 and head["suite"]["digest"] == "d" * 64 and head["protocol"] == 1
    assert [c["id"] for c in cases] == [r.id for r in RESULTS]
    assert foot is not None and foot["counts"]["fail"] == 2 and foot["exit_code"] == 1
    cut = "\n".join(text.splitlines()[:-1])
    assert read_jsonl(cut)[2] is None  # a report without footer was cut short


def test_junit_markdown_badge() -> None:
    xml = junit(_head(), RESULTS)
    root = ET.fromstring(xml.split("?>", 1)[1])
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"PERM", "FILE"}
    assert suites["PERM"].get("failures") == "1" and suites["PERM"].get("errors") == "2"
    assert suites["FILE"].get("skipped") == "2"
    md = markdown(_head(), RESULTS)
    assert "| PERM | 4 | 1 | 1 | 1 | 1 | 0 | 0 | 0 | 1/4 |" in md
    assert "## Profiles" in md and "**rfc**" in md
    reqs = {"PERM-9": type("R", (), {"level": "MUST"})(), "TOOL-3": type("R", (), {"level": "MUST"})()}
    with_reasons = markdown(_head(), RESULTS, requirements=reqs, exclusions={"TOOL-3": "registration is not a protocol operation"})
    assert "| TOOL-3 | MUST | 0 | excluded: registration is not a protocol operation |" in with_reasons
    assert "`b`" in md and "`a`" not in md.split("## Not passing")[1]
    b = badge(_head(), RESULTS)
    assert b == {"schemaVersion": 1, "label": "toolspec conformance", "message": "1/4 MUST", "color": "red"}


# -- CLI -----------------------------------------------------------------------------------------


def test_cli_run_writes_every_report_and_sets_the_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [PY, "-m", "conformance", "run", "--seed", "9", "--case", "perm.*", "--output", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "seed 9" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["badge.json", "junit.xml", "report.jsonl", "summary.md"]
    head, cases, foot = read_jsonl((out / "report.jsonl").read_text())
    assert head["seed"] == 9 and foot is not None and all(c["id"].startswith("perm.") for c in cases)
    # A broken implementation fails the run (exit 1) and names the failures.
    proc = subprocess.run(
        [PY, "-m", "conformance", "run", "--seed", "9", "--case", "perm.most-*", "--impl", "broken:first-match-wins", "--format", "badge"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1
    assert "unexpected failure: perm.most-specific-rule-wins" in proc.stderr
    assert json.loads(proc.stdout)["message"] == "0/1 MUST"
    # Listing the failure in an expectations file makes the run clean.
    exp = tmp_path / "exp.yaml"
    exp.write_text("failures:\n  perm.most-specific-rule-wins: first match wins\n")
    proc = subprocess.run(
        [PY, "-m", "conformance", "run", "--seed", "9", "--case", "perm.most-*", "--impl", "broken:first-match-wins", "--expectations", str(exp), "--quiet"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_cli_usage_errors_and_other_subcommands(tmp_path: Path) -> None:
    bad = subprocess.run([PY, "-m", "conformance", "run", "--impl", "telepathy:x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown implementation" in bad.stderr
    listing = subprocess.run([PY, "-m", "conformance", "list", "--case", "cap.*"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and all(line.startswith("cap.") for line in listing.stdout.splitlines())
    tr = subprocess.run([PY, "-m", "conformance", "trace", "--json"], capture_output=True, text=True, timeout=60)
    assert tr.returncode == 0 and json.loads(tr.stdout)["problems"] == []


def test_agentcore_console_script_has_the_subcommand() -> None:
    from agentcore.cli.main import build_parser

    args = build_parser().parse_args(["conformance", "run", "--seed", "3", "--case", "x"])
    assert args.conformance_command == "run" and args.seed == 3 and callable(args.func)


# -- templates, pointers, predicates ---------------------------------------------------------------


@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), st.one_of(st.integers(), st.text(), st.booleans(), st.none()), min_size=1))
def test_render_keeps_types_of_whole_templates(values: dict) -> None:
    for name, value in values.items():
        assert render("${" + name + "}", values) == value
        assert render({"k": ["${" + name + "}"]}, values) == {"k": [value]}
        assert render("x${" + name + "}y", values) == f"x{value if isinstance(value, str) else str(value)}y"


def test_render_rejects_unknown_and_malformed_templates() -> None:
    with pytest.raises(TemplateError):
        render("${nope}", {})
    with pytest.raises(TemplateError):
        render("${n + 1}", {"n": 1})
    assert render("$${literal} {workspace}/**", {}) == "${literal} {workspace}/**"
    assert render("${v.1.k}", {"v": [{}, {"k": 5}]}) == 5


@given(st.integers(min_value=0, max_value=2**32))
def test_generation_is_reproducible_and_per_case(seed: int) -> None:
    spec = {"n": {"name": {}}, "t": {"text": {"min": 5, "max": 50}}, "i": {"int": {"min": 1, "max": 9}}, "s": {"sum": ["${i}", 1]}}
    a = generate(spec, rng_for(seed, "case.a", 0), {})
    assert a == generate(spec, rng_for(seed, "case.a", 0), {})
    assert a["s"] == a["i"] + 1 and 5 <= len(a["t"]) <= 50 and a["t"].endswith("\n")
    assert a["n"][0].isalpha()


@given(st.recursive(st.one_of(st.integers(), st.text(max_size=5)), lambda c: st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=8))
def test_resolve_follows_escaped_pointers(doc: object) -> None:
    def walk(node: object, pointer: str) -> None:
        assert resolve(doc, pointer) == node
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, pointer + "/" + k.replace("~", "~0").replace("/", "~1"))

    walk(doc, "")
    assert resolve(doc, "/\x00missing\x00") is MISSING


def test_predicates() -> None:
    assert predicate_failures(1, {"equals": 1.0}) == []
    assert predicate_failures(True, {"equals": 1}) != []
    assert predicate_failures({"a": 1, "b": 2}, {"keys": ["b", "a"]}) == []
    assert predicate_failures(["b", "a"], {"sorted": True}) != []
    assert predicate_failures(["/x/é", "/x/a", "/x/B"], {"set_equals": ["/x/B", "/x/a", "/x/é"]}) == []
    assert predicate_failures([{"p": "/w/a"}, {"p": "/w/b"}], {"every": {"pointer": "/p", "startswith": "/w/"}}) == []
    assert predicate_failures([{"p": "/w/a"}], {"none": {"pointer": "/p", "equals": "/w/a"}}) != []
    assert predicate_failures({"t": "secret-token"}, {"not_contains": "token"}) != []
    assert predicate_failures(["/a/b\\-c/**"], {"pattern_set": ["/a/b-c/**"]}) == []
    assert predicate_failures(["/a/b\\*c"], {"pattern_set": ["/a/b*c"]}) != []
    assert predicate_failures(MISSING, {"exists": False}) == []
    assert predicate_failures(MISSING, {"equals": None}) != []


def test_file_checks(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("abc")
    f.chmod(0o640)
    link = tmp_path / "l"
    link.symlink_to("missing")
    snap = {str(f): b"abc"}
    assert check_file(f, {"path": "f", "content": "abc", "mode": "0640", "unchanged": True, "is_symlink": False}, snap) == []
    assert check_file(link, {"path": "l", "exists": True, "is_symlink": True}, snap) == []
    f.write_text("abd")
    assert check_file(f, {"path": "f", "unchanged": True}, snap) != []
    assert check_file(tmp_path / "none", {"path": "none", "content": "x"}, snap) != []
