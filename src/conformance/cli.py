"""`agentcore conformance ...` and `python -m conformance ...`.

Subcommands: `run` (run the suite against an implementation), `smoke`
(tell a broken harness from a non-conforming implementation), `trace`
(requirement coverage: cases, exclusions, problems), `selftest` (the suite
checks itself: against the broken implementations and, with `--mutants`,
against the protocol-level mutants) and `list` (the cases, the mutants,
what a harness needs per area).
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


SUBCOMMANDS = "run, smoke, trace, selftest, list"


def _configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="conformance_command", required=True, metavar="{run,smoke,trace,selftest,list}")
    r = sub.add_parser("run", help="run the conformance suite against an implementation")
    r.add_argument("--impl", help="command:<command line> | broken:<name> | inprocess (default: our engine, in-process)")
    r.add_argument("--seed", type=int, help="seed for generated values (default: random; printed)")
    r.add_argument("--expectations", type=Path, help="YAML file of known failures of this implementation")
    r.add_argument("--format", action="append", choices=FORMATS, help="report format(s); repeatable (default jsonl, or all with --output)")
    r.add_argument("--output", type=Path, help="directory for report files")
    r.add_argument("--case", action="append", default=[], metavar="GLOB", help="only cases whose id (or area/id) matches; repeatable")
    r.add_argument("--timeout", type=float, default=15.0, help="seconds allowed per request (default 15)")
    r.add_argument("--strict", action="store_true", help="SHOULD and MAY failures fail the run too")
    r.add_argument("--profile", choices=PROFILE_CHOICES, default="spec", help="judge the run by every check (spec, default) or only by checks that restate the Grida RFC (rfc); reports show both")
    r.add_argument("--all-checks", action="store_true", help="report every failing check of a case, not only the first")
    r.add_argument("--mutant", metavar="NAME", help="run through the mutating proxy with this mutant (see `list --mutants`)")
    r.add_argument("--spec", type=Path, help="SPEC.md for the requirement table of the Markdown summary")
    r.add_argument("--quiet", action="store_true", help="no progress display")
    r.set_defaults(func=run)
    sm = sub.add_parser("smoke", help="tell a broken harness from a non-conforming implementation (a few fixed operations)")
    sm.add_argument("--impl", help="the implementation: command:<command line> | broken:<name> | inprocess")
    sm.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for each reply")
    sm.add_argument("--json", action="store_true", help="print the result as JSON")
    sm.set_defaults(func=run)
    t = sub.add_parser("trace", help="requirement coverage: which cases check each MUST and SHOULD, and why the rest are excluded")
    t.add_argument("--spec", type=Path, help="the SPEC.md to trace (default: the packaged one)")
    t.add_argument("--report", type=Path, help="a JSON Lines report: show what a real run emitted per requirement")
    t.add_argument("--json", action="store_true", help="print the trace as JSON")
    t.set_defaults(func=run)
    st = sub.add_parser("selftest", help="check the suite itself: traceability, the broken implementations, and (--mutants) the protocol-level mutants")
    st.add_argument("--seed", type=int, action="append", help="seed(s); repeatable (default 1)")
    st.add_argument("--seeds", type=int, help="use this many seeds (1..N) instead")
    st.add_argument("--mutants", action="store_true", help="also run every mutant through the proxy: each must fire and be caught on every seed")
    st.add_argument("--only-mutants", action="store_true", help="run the mutants only (skip the broken-implementation matrix)")
    st.add_argument("--mutant", action="append", metavar="NAME", help="only these mutants (implies --mutants)")
    st.add_argument("--impl", help="the harness the proxy sits in front of (default: our engine, in-process)")
    st.add_argument("--json", action="store_true", help="print the result as JSON")
    st.set_defaults(func=run)
    ls = sub.add_parser("list", help="list the cases (with their profile and needed features), the mutants, or what a harness needs per area")
    ls.add_argument("--case", action="append", default=[], metavar="GLOB", help="only cases whose id matches; repeatable")
    ls.add_argument("--mutants", action="store_true", help="list the protocol-level mutants")
    ls.add_argument("--needs", action="store_true", help="per area: the features every case needs and those that unlock more")
    ls.set_defaults(func=run)


PROFILE_CHOICES = ("spec", "rfc")


def add_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "conformance",
        help=f"the conformance suite ({SUBCOMMANDS})",
        description=f"The agent tool-spec conformance suite. Subcommands: {SUBCOMMANDS}.",
    )
    _configure(p)
    p.set_defaults(func=run)
    return p


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance", description=f"The agent tool-spec conformance suite. Subcommands: {SUBCOMMANDS}.")
    _configure(p)
    return p


def run(args: argparse.Namespace) -> int:
    commands = {"run": _cmd_run, "smoke": _cmd_smoke, "trace": _cmd_trace, "list": _cmd_list, "selftest": _cmd_selftest}
    handler = commands.get(getattr(args, "conformance_command", None) or "")
    if handler is None:
        sys.stderr.write("usage: conformance {run,smoke,trace,selftest,list} ...\n")
        return 2
    return handler(args)


# -- run ---------------------------------------------------------------------------------------


class Progress:
    """One updating line on a TTY, plain lines otherwise."""

    def __init__(self, stream: TextIO, *, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self.bad = 0

    def __call__(self, result: Any, n: int, total: int) -> None:
        from .report import printable
        from .runner import FAILING

        if result.status in FAILING:
            self.bad += 1
        if self.quiet:
            return
        width = len(str(total))
        line = f"[{n:>{width}}/{total}] {result.status.upper():<14} {result.id} ({result.duration_ms} ms)"
        if self.tty:
            if result.status in FAILING:
                self.stream.write("\r\x1b[2K" + line + f"\n    {printable(result.message[:200])}\n")
            else:
                self.stream.write("\r\x1b[2K" + line[:110] + f"  [{self.bad} not passing]")
            if n == total:
                self.stream.write("\r\x1b[2K")
        else:
            self.stream.write(line + (f" — {printable(result.message[:300])}" if result.status in FAILING else "") + "\n")
        self.stream.flush()


async def execute(
    impl: str | None,
    *,
    seed: int,
    patterns: Sequence[str] = (),
    timeout: float = 15.0,
    on_result: Any = None,
    cases_root: Path | None = None,
    profile: str = "spec",
    all_checks: bool = False,
    mutant: str | None = None,
) -> tuple[dict[str, Any], list[Any], float, int]:
    """Run the suite: (header, results, seconds, harness restarts). Used by the CLI and the tests."""
    from .cases import load_cases, suite_digest
    from .connectors import HarnessClient, transport_for
    from .report import header
    from .runner import RunOptions, run_suite

    cases = load_cases(cases_root, patterns)
    transport = transport_for(impl, mutant=mutant)
    started = time.perf_counter()
    async with HarnessClient(transport, timeout=timeout) as client:
        head = header(
            digest=suite_digest(cases_root),
            seed=seed,
            implementation=client.implementation,
            features=client.features,
            connector=transport.description,
            case_count=len(cases),
            profile=profile,
        )
        results = await run_suite(client, cases, seed, on_result, RunOptions(all_checks=all_checks))
        restarts = client.restarts
    return head, results, time.perf_counter() - started, restarts


def _cmd_run(args: argparse.Namespace) -> int:
    import anyio

    from .cases import CaseError, load_cases
    from .connectors import HarnessFault
    from .expectations import judge, load_expectations
    from .report import badge, footer, jsonl, junit

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
            lambda: execute(
                args.impl, seed=seed, patterns=args.case, timeout=args.timeout, on_result=progress,
                profile=args.profile, all_checks=args.all_checks, mutant=args.mutant,
            )
        )
    except HarnessFault as exc:
        from .report import printable  # the message may quote the harness: never raw on a terminal

        err.write(f"conformance: the implementation could not be started: {printable(exc.message[:2000])}\n")
        return 2
    except (ValueError, CaseError, OSError) as exc:
        err.write(f"conformance: {exc}\n")
        return 2
    verdict = judge(results, expectations, strict=args.strict, all_ids=all_ids if not args.case else None, profile=args.profile)
    foot = footer(results, duration_s=seconds, restarts=restarts, verdict=verdict.to_json())
    rendered = {
        "jsonl": lambda: jsonl(head, results, foot),
        "junit": lambda: junit(head, results),
        "markdown": lambda: _markdown(args, head, results, foot),
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
    c, rc = foot["counts"], foot["rfc_counts"]
    err.write(
        f"conformance: {len(results)} cases in {seconds:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in c.items() if v)
        + " (rfc profile: " + ", ".join(f"{k} {v}" for k, v in rc.items() if v) + ")"
        + f"; judged by {args.profile}: unexpected {len(verdict.unexpected)}, stale {len(verdict.stale)}, expected {len(verdict.expected)}\n"
    )
    for cid in verdict.unexpected:
        err.write(f"  unexpected failure: {cid}\n")
    for cid in verdict.stale:
        err.write(f"  stale expectation (passes now, or no such case): {cid}\n")
    if not verdict.judged:
        err.write("  no case was judged: every one was skipped or not applicable, so the run proves nothing\n")
    return 0 if verdict.ok else 1


def _markdown(args: argparse.Namespace, head: dict[str, Any], results: list[Any], foot: dict[str, Any]) -> str:
    from .cases import load_cases
    from .needs import needs_markdown
    from .profiles import load_profiles
    from .report import markdown
    from .traceability import load_exclusions

    try:
        from .spec_ids import load_requirements

        requirements = load_requirements(args.spec)
    except Exception:
        requirements = None
    cases = load_cases(None, args.case)
    return markdown(
        head, results, foot, requirements,
        exclusions=load_exclusions(),
        needs=needs_markdown(cases, head.get("features", [])),
        choice_titles=load_profiles().titles,
    )


def _cmd_smoke(args: argparse.Namespace) -> int:
    import anyio

    from .smoke import smoke

    try:
        report = anyio.run(lambda: smoke(args.impl, timeout=args.timeout))
    except ValueError as exc:
        sys.stderr.write(f"conformance: {exc}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
        return report.exit_code
    from .report import printable  # names and messages come from the harness

    impl = report.implementation
    features = printable(", ".join(report.features) or "none")
    sys.stdout.write(printable(f"implementation: {impl.get('name', '?')} {impl.get('version', '')} ({impl.get('language', '?')}); ") + f"features: {features}\n")
    for step in report.steps:
        line = f"  {step.name:<28} protocol {step.protocol:<15} conformance {step.conformance}"
        sys.stdout.write(line + (f"  — {printable(step.message)}" if step.message else "") + "\n")
    sys.stdout.write(report.verdict() + "\n")
    return report.exit_code


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


def _seeds(args: argparse.Namespace) -> list[int]:
    if args.seeds:
        return list(range(1, args.seeds + 1))
    return list(args.seed or [1])


def _cmd_selftest(args: argparse.Namespace) -> int:
    import anyio

    from .cases import load_cases
    from .profiles import load_profiles
    from .selftest import reference_results, summary, verify_catches, verify_mutants
    from .spec_ids import load_requirements
    from .traceability import load_exclusions, trace

    cases = load_cases()
    reqs = load_requirements()
    t = trace(reqs, cases, load_exclusions())
    seeds = _seeds(args)
    mutants = bool(args.mutants or args.mutant or args.only_mutants)
    out: dict[str, Any] = {"traceability": t.problems + load_profiles().problems(reqs)}
    problems = list(out["traceability"])
    started = time.perf_counter()

    async def matrix() -> Any:
        ref = await reference_results(cases, seeds[0], args.impl)
        return await verify_catches(cases, ref, seeds[0])

    if not args.only_mutants:
        report = anyio.run(matrix)
        problems += report.problems
        out.update(summary(report))
        if not args.json:
            sys.stdout.write(f"{len(cases)} cases, {report.runs} broken-implementation runs\n")
            for cid, status in report.inconclusive:
                sys.stdout.write(f"inconclusive (reference {status}): {cid}\n")
    if mutants:
        mreport = anyio.run(lambda: verify_mutants(cases, seeds, impl=args.impl, names=args.mutant))
        problems += mreport.problems
        out["mutants"] = mreport.to_json()
        if not args.json:
            _print_mutants(mreport)
    out["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        out["problems"] = problems
        sys.stdout.write(json.dumps(out, indent=2, default=sorted) + "\n")
    else:
        for p in problems:
            sys.stdout.write(f"PROBLEM: {p}\n")
        sys.stdout.write(f"selftest: {len(problems)} problem(s) in {out['seconds']} s\n")
    return 1 if problems else 0


def _print_mutants(report: Any) -> None:
    rows = report.per_mutant()
    seeds = set(report.seeds)
    caught = sum(1 for row in rows.values() if row["caught_on_seeds"] == seeds and not row["missed"])
    sys.stdout.write(f"mutants: {len(rows)} run on seeds {', '.join(map(str, report.seeds))}; caught on every seed: {caught}\n")
    for name, row in sorted(rows.items()):
        state = "caught" if row["caught_on_seeds"] == seeds and not row["missed"] else "NOT CAUGHT"
        sys.stdout.write(f"  {name:<40} {state:<10} fired {row['fired']:>4}x in {', '.join(sorted(row['cases']))}\n")
    idle = sorted(set(report.planned) - set(rows))
    if idle:
        sys.stdout.write(f"not exercised here ({len(idle)}: every case listing them is not applicable to this harness): {', '.join(idle)}\n")


def _cmd_list(args: argparse.Namespace) -> int:
    from .cases import load_cases
    from .profiles import explicit_tag, load_profiles

    if args.mutants:
        from .mutants import MUTANTS

        for name, cls in sorted(MUTANTS.items()):
            sys.stdout.write(f"{name:<42} {cls.group:<10} {cls.summary}\n")
        return 0
    cases = load_cases(None, args.case)
    if args.needs:
        from .needs import needs_markdown

        sys.stdout.write("\n".join(needs_markdown(cases)) + "\n")
        return 0
    profiles = load_profiles()
    for c in cases:
        tag = explicit_tag({"profile": c.profile, "choice": c.choice}, profiles.case_tag(c.requirements))
        sys.stdout.write(f"{c.id:<52} {c.level:<6} {tag.label():<28} {','.join(c.requirements):<28} {' '.join(sorted(c.needed_features()))}\n")
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
