"""`agentcore conformance ...` and `python -m conformance ...`.

Subcommands: `run` (run the suite against an implementation), `trace`
(requirement coverage: cases, exclusions, problems), `selftest` (the suite
checks itself against the broken implementations) and `list` (the cases).
`add_subcommand(subparsers)` plugs them into the `agentcore` parser; every
parser sets `func`, and `run(args)` dispatches.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence, TextIO

FORMATS = ("jsonl", "junit", "markdown", "badge")
FILE_NAMES = {"jsonl": "report.jsonl", "junit": "junit.xml", "markdown": "summary.md", "badge": "badge.json"}


def _configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="conformance_command", required=True)
    r = sub.add_parser("run", help="run the conformance suite against an implementation")
    r.add_argument("--impl", help="command:<command line> | broken:<name> | inprocess (default: our engine, in-process)")
    r.add_argument("--seed", type=int, help="seed for generated values (default: random; printed)")
    r.add_argument("--expectations", type=Path, help="YAML file of known failures of this implementation")
    r.add_argument("--format", action="append", choices=FORMATS, help="report format(s); repeatable (default jsonl, or all with --output)")
    r.add_argument("--output", type=Path, help="directory for report files")
    r.add_argument("--case", action="append", default=[], metavar="GLOB", help="only cases whose id (or area/id) matches; repeatable")
    r.add_argument("--timeout", type=float, default=15.0, help="seconds allowed per request (default 15)")
    r.add_argument("--strict", action="store_true", help="SHOULD and MAY failures fail the run too")
    r.add_argument("--spec", type=Path, help="SPEC.md for the requirement table of the Markdown summary")
    r.add_argument("--quiet", action="store_true", help="no progress display")
    r.set_defaults(func=run)
    t = sub.add_parser("trace", help="requirement coverage: which cases check each SPEC.md requirement")
    t.add_argument("--spec", type=Path, help="the SPEC.md to trace (default: the packaged one)")
    t.add_argument("--report", type=Path, help="a JSON Lines report: show what a real run emitted per requirement")
    t.add_argument("--json", action="store_true", help="print the trace as JSON")
    t.set_defaults(func=run)
    st = sub.add_parser("selftest", help="check the suite itself: traceability, and that every case fails against the broken implementations it names")
    st.add_argument("--seed", type=int, default=1, help="seed for generated values")
    st.add_argument("--json", action="store_true", help="print the result as JSON")
    st.set_defaults(func=run)
    ls = sub.add_parser("list", help="list the cases")
    ls.add_argument("--case", action="append", default=[], metavar="GLOB", help="only cases whose id matches; repeatable")
    ls.set_defaults(func=run)


def add_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("conformance", help="the conformance suite (run, trace, list)")
    _configure(p)
    p.set_defaults(func=run)
    return p


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance", description="The agent tool-spec conformance suite.")
    _configure(p)
    return p


def run(args: argparse.Namespace) -> int:
    cmd = getattr(args, "conformance_command", None)
    if cmd == "run":
        return _cmd_run(args)
    if cmd == "trace":
        return _cmd_trace(args)
    if cmd == "list":
        return _cmd_list(args)
    if cmd == "selftest":
        return _cmd_selftest(args)
    sys.stderr.write("usage: conformance {run,trace,list} ...\n")
    return 2


# -- run ---------------------------------------------------------------------------------------


class Progress:
    """One updating line on a TTY, plain lines otherwise."""

    def __init__(self, stream: TextIO, *, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self.bad = 0

    def __call__(self, result: Any, n: int, total: int) -> None:
        from .runner import FAILING

        if result.status in FAILING:
            self.bad += 1
        if self.quiet:
            return
        width = len(str(total))
        line = f"[{n:>{width}}/{total}] {result.status.upper():<14} {result.id} ({result.duration_ms} ms)"
        if self.tty:
            if result.status in FAILING:
                self.stream.write("\r\x1b[2K" + line + f"\n    {result.message[:200]}\n")
            else:
                self.stream.write("\r\x1b[2K" + line[:110] + f"  [{self.bad} not passing]")
            if n == total:
                self.stream.write("\r\x1b[2K")
        else:
            self.stream.write(line + (f" — {result.message[:300]}" if result.status in FAILING else "") + "\n")
        self.stream.flush()


async def execute(
    impl: str | None,
    *,
    seed: int,
    patterns: Sequence[str] = (),
    timeout: float = 15.0,
    on_result: Any = None,
    cases_root: Path | None = None,
) -> tuple[dict[str, Any], list[Any], float, int]:
    """Run the suite: (header, results, seconds, harness restarts). Used by the CLI and the tests."""
    from .cases import load_cases, suite_digest
    from .connectors import HarnessClient, transport_for
    from .report import header
    from .runner import run_suite

    cases = load_cases(cases_root, patterns)
    transport = transport_for(impl)
    started = time.perf_counter()
    async with HarnessClient(transport, timeout=timeout) as client:
        head = header(
            digest=suite_digest(cases_root),
            seed=seed,
            implementation=client.implementation,
            features=client.features,
            connector=transport.description,
            case_count=len(cases),
        )
        results = await run_suite(client, cases, seed, on_result)
        restarts = client.restarts
    return head, results, time.perf_counter() - started, restarts


def _cmd_run(args: argparse.Namespace) -> int:
    import anyio

    from .cases import CaseError, load_cases
    from .connectors import HarnessFault
    from .expectations import judge, load_expectations
    from .report import badge, footer, jsonl, junit, markdown

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    err = sys.stderr
    try:
        expectations = load_expectations(args.expectations) if args.expectations else None
        all_ids = [c.id for c in load_cases()]
    except (OSError, ValueError, CaseError) as exc:
        err.write(f"conformance: {exc}\n")
        return 2
    err.write(f"conformance: seed {seed} (rerun with --seed {seed})\n")
    progress = Progress(err, quiet=args.quiet)
    try:
        head, results, seconds, restarts = anyio.run(
            lambda: execute(args.impl, seed=seed, patterns=args.case, timeout=args.timeout, on_result=progress)
        )
    except HarnessFault as exc:
        err.write(f"conformance: the implementation could not be started: {exc.message}\n")
        return 2
    except (ValueError, CaseError, OSError) as exc:
        err.write(f"conformance: {exc}\n")
        return 2
    verdict = judge(results, expectations, strict=args.strict, all_ids=all_ids if not args.case else None)
    foot = footer(results, duration_s=seconds, restarts=restarts, verdict=verdict.to_json())
    requirements = None
    if args.spec or "markdown" in (args.format or FORMATS):
        try:
            from .spec_ids import load_requirements

            requirements = load_requirements(args.spec)
        except Exception:
            requirements = None
    rendered = {
        "jsonl": lambda: jsonl(head, results, foot),
        "junit": lambda: junit(head, results),
        "markdown": lambda: markdown(head, results, foot, requirements),
        "badge": lambda: json.dumps(badge(head, results), indent=2) + "\n",
    }
    if args.output:
        args.output.mkdir(parents=True, exist_ok=True)
        for fmt in args.format or FORMATS:
            (args.output / FILE_NAMES[fmt]).write_text(rendered[fmt](), encoding="utf-8")
        err.write(f"conformance: reports written to {args.output}\n")
    else:
        for fmt in args.format or ["jsonl"]:
            sys.stdout.write(rendered[fmt]())
    c = foot["counts"]
    err.write(
        f"conformance: {len(results)} cases in {seconds:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in c.items() if v)
        + f"; unexpected {len(verdict.unexpected)}, stale {len(verdict.stale)}, expected {len(verdict.expected)}\n"
    )
    for cid in verdict.unexpected:
        err.write(f"  unexpected failure: {cid}\n")
    for cid in verdict.stale:
        err.write(f"  stale expectation (passes now, or no such case): {cid}\n")
    return 0 if verdict.ok else 1


# -- trace / list --------------------------------------------------------------------------------


def _cmd_trace(args: argparse.Namespace) -> int:
    from .cases import load_cases
    from .report import read_jsonl
    from .spec_ids import load_requirements
    from .traceability import emitted, load_exclusions, trace

    reqs = load_requirements(args.spec)
    t = trace(reqs, load_cases(), load_exclusions())
    ran = None
    if args.report:
        _head, lines, foot = read_jsonl(args.report.read_text(encoding="utf-8"))
        ran = emitted(lines)
        if foot is None:
            sys.stderr.write("conformance: the report has no footer: the run was cut short\n")
    if args.json:
        out = t.to_json()
        if ran is not None:
            out["emitted"] = ran
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
    else:
        for rid, req in reqs.items():
            cases = t.cases_by_requirement.get(rid, [])
            if cases:
                what = ", ".join(cases)
            elif rid in t.excluded:
                what = "excluded: " + t.excluded[rid]
            else:
                what = "-"
            extra = ""
            if ran is not None:
                extra = "  [" + ", ".join(f"{k} {v}" for k, v in sorted(ran.get(rid, {}).items())) + "]"
            sys.stdout.write(f"{rid:<9} {req.level:<6} {what}{extra}\n")
        for p in t.problems:
            sys.stdout.write(f"PROBLEM: {p}\n")
    return 1 if t.problems else 0


def _cmd_selftest(args: argparse.Namespace) -> int:
    import anyio

    from .cases import load_cases
    from .selftest import reference_results, summary, verify_catches
    from .spec_ids import load_requirements
    from .traceability import load_exclusions, trace

    cases = load_cases()
    t = trace(load_requirements(), cases, load_exclusions())

    async def matrix() -> Any:
        ref = await reference_results(cases, args.seed)
        return await verify_catches(cases, ref, args.seed)

    report = anyio.run(matrix)
    problems = t.problems + report.problems
    if args.json:
        sys.stdout.write(json.dumps({"traceability": t.problems, **summary(report)}, indent=2) + "\n")
    else:
        sys.stdout.write(f"{len(cases)} cases, {report.runs} broken-implementation runs\n")
        for cid, status in report.inconclusive:
            sys.stdout.write(f"inconclusive (reference {status}): {cid}\n")
        for p in problems:
            sys.stdout.write(f"PROBLEM: {p}\n")
    return 1 if problems else 0


def _cmd_list(args: argparse.Namespace) -> int:
    from .cases import load_cases

    for c in load_cases(None, args.case):
        sys.stdout.write(f"{c.id:<48} {c.level:<6} {','.join(c.requirements):<28} {' '.join(sorted(c.needed_features()))}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
