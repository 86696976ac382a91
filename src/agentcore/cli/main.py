"""`agentcore` console script: manifest check, call, explain, demo, mcp list, conformance.

Heavy imports (the engine, jsonschema, tree-sitter) happen inside the
subcommands so `agentcore --help` and usage errors stay fast; nothing here
imports the ACP SDK.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence


class UsageError(Exception):
    pass


def _die(message: str) -> NoReturn:
    raise UsageError(message)


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    """(engine, session) from --manifest/--workspace/--project-rules/--headless/--env."""
    from ..api import Engine, HeadlessBroker, ManifestError, TerminalBroker, load_manifest, load_project_rules

    workspace = Path(args.workspace)
    if not workspace.is_dir():
        _die(f"--workspace {workspace}: not a directory")
    extra = [Path(args.project_rules)] if getattr(args, "project_rules", None) else []
    try:
        manifest = load_manifest(Path(args.manifest), workspace=workspace, extra_protected=extra)
        project = load_project_rules(extra[0], manifest) if extra else ()
    except ManifestError as exc:
        _die(str(exc))
    # Without --headless an ask is put to the human on the terminal; answers are
    # read from stdin, so a closed or empty stdin means "reject" (fail closed).
    headless = bool(getattr(args, "headless", False))
    broker = HeadlessBroker() if headless else TerminalBroker()
    engine = Engine(manifest, broker=broker, project_rules=project, environment=getattr(args, "env", None))
    session = engine.open_session(headless=headless)
    return engine, session


def _parse_args_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _die(f"ARGS_JSON is not valid JSON: {exc.msg} at column {exc.colno}")


def cmd_manifest_check(args: argparse.Namespace) -> int:
    from ..api import ManifestError, default_catalog, load_manifest

    workspace = Path(args.workspace) if args.workspace else Path.cwd()
    try:
        m = load_manifest(Path(args.file), workspace=workspace)
    except ManifestError as exc:
        _die(str(exc))
    reg = default_catalog()
    report = {
        "name": m.name,
        "source": str(m.source),
        "workspace_roots": [str(p) for p in m.workspace_roots],
        "tools": {t: {"kind": reg.get(t).kind, "uses": list(reg.get(t).uses)} for t in m.tools},
        "effective": m.effective.to_json(),
        "rules": [
            {"scope": r.rule.scope, "index": r.rule.index, "permission": r.rule.permission, "pattern": r.expanded, "action": r.rule.action}
            for r in m.rules
        ],
        "environment": m.environment,
        "limits": m.limits.to_json(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    eff = report["effective"]
    print(f"manifest {m.name}: OK ({m.source})")
    print(f"workspace: {', '.join(report['workspace_roots']) or '(none)'}")
    print("tools:")
    for t, info in report["tools"].items():
        print(f"  {t:<12} kind={info['kind']}")
    print("effective capabilities (variables expanded):")
    print("  fs.read:   " + (", ".join(eff["fs"]["read"]) or "(none: reads fail closed)"))
    print("  fs.write:  " + (", ".join(eff["fs"]["write"]) or "(none: writes fail closed)"))
    print("  net.hosts: " + (", ".join(eff["net"]["hosts"]) or "(none: no network)"))
    print("  shell:     " + ("; ".join(" ".join([s["cmd"], *[a if isinstance(a, str) else ("<any>" if "wildcard" in a else a["prefix"] + "…") for a in s["args"]]]) for s in eff["shell"]) or "(none)"))
    print("  named:     " + (", ".join(eff["capabilities"]) or "(none)"))
    print("rules (manifest scope; every deny is pinned; default ask):")
    for r in report["rules"]:
        print(f"  #{r['index'] + 1} {r['permission']} {r['pattern']} -> {r['action']}")
    print(f"environment: {m.environment}")
    return 0


def cmd_call(args: argparse.Namespace) -> int:
    import anyio

    call_args = _parse_args_json(args.args_json)
    engine, session = _load(args)
    try:
        envelope = anyio.run(engine.call, session, args.tool, call_args)
        print(json.dumps(envelope.to_dict(), ensure_ascii=False))
    finally:
        if not args.keep_session:
            session.close()
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    import anyio

    call_args = _parse_args_json(args.args_json)
    engine, session = _load(args)
    try:
        report = anyio.run(engine.explain, session, args.tool, call_args)
    finally:
        session.close()
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(f"explain {args.tool} (nothing is executed)")
    for layer in report["layers"]:
        name, decision = layer["layer"], layer["decision"]
        print(f"- {name}: {decision}")
        for k, v in layer.items():
            if k in ("layer", "decision") or v is None:
                continue
            if k == "checks":
                for c in v:
                    print(f"    {c['access']}: {c['canonical']}  in scope: {c['in_scope']}")
                    print(f"      compared with: {', '.join(c['scope']) or '(empty scope)'}")
            elif k == "subjects":
                for s in v:
                    rule = s.get("rule")
                    why = f"{rule['scope']} rule #{rule['index'] + 1} ({rule['permission']} {rule['pattern']} -> {rule['action']})" if rule else "no rule matched (default ask)"
                    pin = " [pinned manifest deny]" if s.get("pinned") else ""
                    print(f"    {s['subject']}: {s['action']} by {why}{pin}")
            elif k == "command_line":
                # Shell-quoted, so it can be read (and pasted) exactly; `fd:...` stand for per-run descriptor numbers.
                print("    command line: " + shlex.join(v))
            else:
                print(f"    {k}: {v}")
    res = report["result"]
    print("result: " + ("refused — " + str(res.get("error_text")) if res["refused"] else "would run"))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(json_output=args.json)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentcore", description="Reference engine for the locked agent tool set.")
    sub = p.add_subparsers(dest="command", required=True)

    man = sub.add_parser("manifest", help="manifest commands")
    msub = man.add_subparsers(dest="manifest_command", required=True)
    chk = msub.add_parser("check", help="validate a manifest and print its effective capability set")
    chk.add_argument("file")
    chk.add_argument("--workspace", help="workspace root (default: the current directory)")
    chk.add_argument("--json", action="store_true")
    chk.set_defaults(func=cmd_manifest_check)

    def call_like(name: str, help_text: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_text)
        c.add_argument("--manifest", required=True)
        c.add_argument("--workspace", required=True)
        c.add_argument("--project-rules")
        c.add_argument("--headless", action="store_true", help="no human: every ask is denied")
        c.add_argument("--env", choices=["bwrap", "none"], help="execution environment (default: the manifest's, bwrap)")
        c.add_argument("tool")
        c.add_argument("args_json", metavar="ARGS_JSON")
        return c

    call = call_like("call", "run one tool call through the whole pipeline; prints the envelope")
    call.add_argument("--keep-session", action="store_true", help="keep the session directory (sidecars) after the call")
    call.set_defaults(func=cmd_call)
    exp = call_like("explain", "show each layer's decision for a call without executing it")
    exp.add_argument("--json", action="store_true")
    exp.set_defaults(func=cmd_explain)

    demo = sub.add_parser("demo", help="run a tour of the pipeline on an embedded manifest in a temporary workspace")
    demo.add_argument("--json", action="store_true")
    demo.set_defaults(func=cmd_demo)

    from .acp_cmd import add_subcommand as add_acp_command
    from .agent_cmds import add_subcommands as add_agent_commands
    from .mcp_cmd import add_subcommand as add_mcp_command

    add_agent_commands(sub)
    add_acp_command(sub)
    add_mcp_command(sub)

    try:
        from conformance.cli import add_subcommand
    except ImportError:
        pass
    else:
        add_subcommand(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"agentcore: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
