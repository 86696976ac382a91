"""`agentcore` console script: manifest, tools, call, explain, demo, run, sessions, replay, acp, mcp list, conformance.

Heavy imports (the engine, jsonschema, tree-sitter) happen inside the
subcommands so `agentcore --help` and usage errors stay fast; nothing here
imports the ACP SDK.

Exit codes common to every command: 0 success, 2 usage error, 70 internal
error (one line on stderr; `--debug` shows the traceback), 130 interrupted,
141 stdout closed early (piped into `head`). `agentcore run` adds its own
(see `agentcore run --help`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from ..textdata import StructureError, TooLarge, json_text, key_path_text, loads_json, printable, read_bounded


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, with its error escaped: "unrecognized arguments" quotes them raw (ASK-13)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


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


ARGS_MAX_BYTES = 256 << 20
"""ARGS_JSON read from a file or stdin is refused past this: far above any call the default limits let
through (a `write` of 8 MiB is at most 48 MiB of JSON), and /dev/zero cannot take the machine's memory."""


def _parse_args_json(text: str) -> Any:
    """ARGS_JSON itself, or the contents of `@FILE`, or standard input for `-` (UTF-8, up to ARGS_MAX_BYTES)."""
    if text == "-":
        if sys.stdin is None:  # started with fd 0 closed (`<&-`)
            _die("ARGS_JSON is -, but standard input is closed")
        try:
            # The bytes, not sys.stdin's locale decoding: under a C locale that turns invalid UTF-8 into
            # lone surrogates, which then fail deep inside a tool instead of here.
            text = read_bounded(sys.stdin.buffer, ARGS_MAX_BYTES)
        except (TooLarge, UnicodeDecodeError) as exc:
            _die(f"ARGS_JSON on standard input: {'not UTF-8' if isinstance(exc, UnicodeDecodeError) else exc}")
    elif text.startswith("@"):
        try:
            with open(text[1:], "rb") as fh:
                text = read_bounded(fh, ARGS_MAX_BYTES)
        except (OSError, UnicodeDecodeError, TooLarge) as exc:
            _die(f"ARGS_JSON file {text[1:]}: {getattr(exc, 'strerror', None) or exc}")
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        _die(f"ARGS_JSON is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except StructureError as exc:  # a duplicate key or deep nesting: never a value
        _die(f"ARGS_JSON is refused: {key_path_text(exc.path)}: {exc.message}")


def cmd_manifest_check(args: argparse.Namespace) -> int:
    from ..api import ManifestError, default_catalog, load_manifest, manifest_warnings

    workspace = Path(args.workspace) if args.workspace else Path.cwd()
    try:
        m = load_manifest(Path(args.file), workspace=workspace)
    except ManifestError as exc:
        _die(str(exc))
    reg = default_catalog()
    warnings = manifest_warnings(m, catalog=reg)
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
        "warnings": warnings,
    }
    status = 1 if args.strict and warnings else 0
    if args.json:
        print(json.dumps(report, indent=2))
        return status
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
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
    # Each requirement as the command line it allows: <one arg> is {wildcard: true}, exactly one argument.
    print("  shell:     " + ("; ".join(s.describe() for s in m.effective.shell) or "(none)"))
    print("  named:     " + (", ".join(eff["capabilities"]) or "(none)"))
    print("rules (manifest scope; every deny is pinned; default ask):")
    for r in report["rules"]:
        print(f"  #{r['index'] + 1} {r['permission']} {r['pattern']} -> {r['action']}")
    print(f"environment: {m.environment}")
    if warnings:
        print(f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''} (on stderr)")
    return status


def _known_tool(engine: Any, session: Any, tool_id: str) -> None:
    """A tool this agent cannot call is a usage error that lists what it can (and the closest name)."""
    if engine.tool(session, tool_id) is not None:
        return
    from ..textdata import did_you_mean

    enabled = [t.id for t in engine.tools(session)]
    session.close()
    why = "is not enabled by this manifest" if engine.catalog.has(tool_id) else "is not a tool"
    _die(f"{tool_id!r} {why}{did_you_mean(tool_id, enabled)}; the manifest enables: {', '.join(enabled) or '(nothing)'}")


def cmd_call(args: argparse.Namespace) -> int:
    import anyio

    call_args = _parse_args_json(args.args_json)
    engine, session = _load(args)
    _known_tool(engine, session, args.tool)
    try:
        envelope = anyio.run(engine.call, session, args.tool, call_args)
        print(json_text(envelope.to_dict()))
    finally:
        if not args.keep_session:
            session.close()
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    import anyio

    call_args = _parse_args_json(args.args_json)
    engine, session = _load(args)
    _known_tool(engine, session, args.tool)
    try:
        report = anyio.run(engine.explain, session, args.tool, call_args)
    finally:
        session.close()
    if args.json:
        print(json_text(report, indent=2))
        return 0
    _say(f"explain {args.tool} (nothing is executed)")
    for layer in report["layers"]:
        name, decision = layer["layer"], layer["decision"]
        _say(f"- {name}: {decision}")
        for k, v in layer.items():
            if k in ("layer", "decision") or v is None:
                continue
            if k == "checks":
                for c in v:
                    _say(f"    {c['access']}: {c['canonical']}  in scope: {c['in_scope']}")
                    _say(f"      compared with: {', '.join(c['scope']) or '(empty scope)'}")
            elif k == "subjects":
                for s in v:
                    rule = s.get("rule")
                    why = f"{rule['scope']} rule #{rule['index'] + 1} ({rule['permission']} {rule['pattern']} -> {rule['action']})" if rule else "no rule matched (default ask)"
                    pin = " [pinned manifest deny]" if s.get("pinned") else ""
                    _say(f"    {s['subject']}: {s['action']} by {why}{pin}")
            elif k == "command_line":
                # Shell-quoted, so it can be read (and pasted) exactly; `fd:...` stand for per-run descriptor numbers.
                _say("    command line: " + shlex.join(v))
            else:
                _say(f"    {k}: {v}")
    res = report["result"]
    _say("result: " + ("refused — " + str(res.get("error_text")) if res["refused"] else "would run"))
    return 0


def _say(line: str) -> None:
    """A line of explain's text: it quotes the call's paths and commands, which a model wrote (ASK-13)."""
    print(printable(line))


def cmd_tools(args: argparse.Namespace) -> int:
    from ..api import default_catalog

    catalog = default_catalog()
    tools = [{"id": t.id, "kind": t.kind, "description": t.description, "parameters": t.parameters,
              "locked": t.id in _locked_ids()} for t in catalog.tools()]
    if args.json:
        print(json.dumps(tools, indent=2))
        return 0
    for t in tools:
        params = ", ".join(_param_words(t["parameters"]))
        print(f"{t['id']:<12} kind={t['kind']:<8} {t['description']}")
        print(f"{'':<12} parameters: {params or '(none)'}")
    for name, error in sorted(catalog.plugin_errors.items()):
        print(f"{name:<12} failed to load: {error}")
    return 0


def _locked_ids() -> tuple[str, ...]:
    from ..api import LOCKED_IDS

    return LOCKED_IDS


def _param_words(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required") or [])
    out = []
    for name, spec in (schema.get("properties") or {}).items():
        kind = spec.get("type") or ("enum" if "enum" in spec else "any")
        out.append(f"{name}{'' if name in required else '?'}: {kind}")
    return out


def cmd_manifest_schema(args: argparse.Namespace) -> int:
    from ..api import manifest_json_schema

    print(json.dumps(manifest_json_schema(), indent=2))
    return 0


def cmd_manifest_reference(args: argparse.Namespace) -> int:
    from ..api import manifest_reference

    print(manifest_reference(), end="")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(json_output=args.json)


def _add_manifest(sub: Any) -> None:
    man = sub.add_parser("manifest", help="check a manifest, or print the manifest JSON Schema")
    msub = man.add_subparsers(dest="manifest_command", required=True, metavar="SUBCOMMAND")
    chk = msub.add_parser("check", help="validate a manifest and print its effective capability set")
    chk.add_argument("file", help="the manifest (YAML or JSON)")
    chk.add_argument("--workspace", help="workspace root (default: the current directory)")
    chk.add_argument("--json", action="store_true", help="print the result as JSON (warnings included)")
    chk.add_argument("--strict", action="store_true", help="exit 1 when there are warnings (for CI)")
    chk.set_defaults(func=cmd_manifest_check)
    sch = msub.add_parser("schema", help="print the manifest's JSON Schema (for editors: validation and completion)")
    sch.set_defaults(func=cmd_manifest_schema)
    ref = msub.add_parser("reference", help="print the manifest reference (every key, its default and an example) as Markdown")
    ref.set_defaults(func=cmd_manifest_reference)


def _add_tools(sub: Any) -> None:
    tools = sub.add_parser("tools", help="every available tool with its kind, description and parameters")
    tools.add_argument("--json", action="store_true", help="print the full parameter schemas as JSON")
    tools.set_defaults(func=cmd_tools)


def _call_like(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    c = sub.add_parser(name, help=help_text)
    c.add_argument("--manifest", required=True, help="the agent's manifest (YAML or JSON)")
    c.add_argument("--workspace", required=True, help="the workspace directory")
    c.add_argument("--project-rules", help="a project rules file (`rules: [...]`; cannot override manifest denies)")
    c.add_argument("--headless", action="store_true", help="no human: every ask is denied")
    c.add_argument("--env", choices=["bwrap", "none"], help="execution environment (default: the manifest's, bwrap)")
    c.add_argument("tool", help="the tool id (see `agentcore tools`)")
    c.add_argument("args_json", metavar="ARGS_JSON", help="the arguments as JSON, @FILE to read them from a file, or - for stdin")
    return c


def _add_call(sub: Any) -> None:
    call = _call_like(sub, "call", "run one tool call through the whole pipeline; prints the envelope")
    call.add_argument("--keep-session", action="store_true", help="keep the session directory (sidecars) after the call")
    call.set_defaults(func=cmd_call)


def _add_explain(sub: Any) -> None:
    exp = _call_like(sub, "explain", "show each layer's decision for a call without executing it")
    exp.add_argument("--json", action="store_true", help="print each layer's decision as JSON")
    exp.set_defaults(func=cmd_explain)


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser("demo", help="run a tour of the pipeline on an embedded manifest in a temporary workspace")
    demo.add_argument("--json", action="store_true", help="print every step's envelope as JSON")
    demo.set_defaults(func=cmd_demo)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from .. import __version__

    p = _Parser(prog="agentcore", description="Reference engine for the locked agent tool set.",
                epilog="exit codes: 0 ok, 2 usage error, 70 internal error, 130 interrupted, 141 output closed")
    p.add_argument("--version", action="version", version=f"agentcore {__version__}")
    p.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    builders = {"manifest": _add_manifest, "tools": _add_tools, "call": _add_call, "explain": _add_explain, "demo": _add_demo}
    if only in builders:
        builders[only](sub)  # the one command parsed: a one-shot `call` builds no other parser (3 ms of its start)
        return p
    for add in builders.values():
        add(sub)

    # A host command builds only its own group's parser too: an editor starts `agentcore acp` for every
    # session and waits for `initialize`, and `run` is the start of every headless run (the other
    # groups' modules and parsers cost 10-25 ms).
    groups = _host_groups()
    if only in groups:
        groups[only](sub)
        return p
    for add in dict.fromkeys(groups.values()):
        add(sub)
    return p


def _host_groups() -> dict[str, Callable[[Any], None]]:
    """Each host command's name -> the function that adds its group of subcommands (imported when called)."""

    def acp(sub: Any) -> None:
        from .acp_cmd import add_subcommand

        add_subcommand(sub)

    def agent(sub: Any) -> None:
        from .agent_cmds import add_subcommands

        add_subcommands(sub)

    def mcp(sub: Any) -> None:
        from .mcp_cmd import add_subcommand

        add_subcommand(sub)

    def batch(sub: Any) -> None:
        from .batch_cmd import add_subcommand

        add_subcommand(sub)

    def conformance(sub: Any) -> None:
        try:
            from conformance.cli import add_subcommand
        except ImportError:
            return
        add_subcommand(sub)

    return {"run": agent, "sessions": agent, "replay": agent, "acp": acp, "mcp": mcp, "batch": batch, "conformance": conformance}


EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141  # 128 + SIGPIPE, as a shell reports a command whose reader went away


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(only=command)
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        # Escaped: the message may quote an argument (a path), and its escape sequences would reach the terminal.
        print(f"agentcore: {printable(str(exc), lines=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    except Exception as exc:  # one line, never a traceback, unless asked for
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
        else:
            print(f"agentcore: internal error ({type(exc).__name__}); rerun with --debug for the traceback", file=sys.stderr)
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    """The reader of stdout is gone: point stdout at /dev/null so the interpreter's final flush is quiet."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def entry() -> None:
    """The console script: `main`, then an exit that survives a closed stdout."""
    code = main()
    try:
        if sys.stdout is not None:  # None when started with fd 1 closed (`>&-`): print() wrote nothing
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_PIPE
    except ValueError:  # a transport (the ACP server's) already closed stdout: nothing is left to flush
        pass
    skip_final_collection()
    sys.exit(code)


def skip_final_collection() -> None:
    """Spare the interpreter's last garbage collection, at exit, the objects that exist now.

    That collection walks every object of every imported module: 20 ms of a
    150 ms `agentcore call`, and about 300 ms of a process that imported the
    model providers. It finds nothing to do: every file, database, socket and
    process of ours is closed explicitly, never by a collector, and the exit
    handlers (`atexit`) still run.
    """
    import gc

    gc.freeze()


if __name__ == "__main__":
    entry()
