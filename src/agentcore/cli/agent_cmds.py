"""`agentcore run`, `agentcore sessions …` and `agentcore replay`: the agent host on the command line.

Model flags are the same on `run`, `batch` and `acp` (`add_model_args`).
Provider libraries load only when a model is opened, so `sessions` and
`--help` stay fast.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from ..textdata import json_text, printable

RUN_EXIT_HELP = (
    "exit codes: 0 finished, 1 failed (provider error, failed script expectations), 2 usage error, "
    "3 turn cap (max_turn_requests), 4 timeout, 5 max_tokens, 6 refusal, 7 token budget, 130 cancelled"
)


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above zero (`nan`, `inf` and `-1` are usage errors)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number of seconds") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError("must be a finite number of seconds above 0")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def add_model_args(p: argparse.ArgumentParser) -> None:
    """--model / --base-url / --api-key-env, as `run`, `batch` and `acp` all take them."""
    p.add_argument("--model", metavar="PROVIDER:NAME",
                   help="openai:NAME, anthropic:NAME, openai-compatible:NAME (with --base-url) or script:FILE "
                        "(default: $AGENTCORE_MODEL, then the manifest's model.id)")
    p.add_argument("--base-url", metavar="URL", help="the provider's base URL (Ollama, vLLM, llama.cpp, OpenRouter, a proxy)")
    p.add_argument("--api-key-env", metavar="VAR",
                   help="the environment variable that holds the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY; "
                        "openai-compatible needs none)")


def add_db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH", help="session database (default: $XDG_DATA_HOME/agentcore/sessions.db)")


def _db_path(args: argparse.Namespace) -> Path:
    from ..recorder.store import default_db_path

    return Path(args.db) if getattr(args, "db", None) else default_db_path()


def model_flags(args: argparse.Namespace) -> Any:
    from ..agent.headless import ModelFlags

    return ModelFlags(model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                      max_turn_requests=getattr(args, "max_turn_requests", None))


# -- progress on a terminal ------------------------------------------------------------------------


class Progress:
    """Tool calls and their outcome, one line each, on stderr (stdout carries the answer)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._titles: dict[str, str] = {}

    def __call__(self, event: Any) -> None:
        kind = event.type
        # Titles come from the model's arguments, reasons from a provider: printable, never escape sequences.
        if kind == "call_started":
            self._titles[event.call_id] = printable(f"{event.tool}: {event.title}" if event.title != event.tool else event.tool)
        elif kind == "call_finished":
            self._out.write(f"  {self._titles.pop(event.call_id, printable(event.tool))} -> {_outcome(event.envelope)}\n")
        elif kind == "model_retried":
            self._out.write(f"  (model request failed: {printable(event.reason)}; retrying in {event.delay_s:g} s)\n")
        elif kind == "run_started" and event.parent_session_id:
            self._out.write(f"  [subagent] {printable(event.prompt[:80])}\n")
        self._out.flush()


def _outcome(envelope: Any) -> str:
    if envelope.type == "output":
        return "ok" + (" (truncated)" if envelope.truncated else "")
    refusal = envelope.refusal
    if refusal:
        by = f", asked by {refusal['asked_by']}" if refusal.get("asked_by") else ""
        return f"refused by {refusal['layer']} ({refusal['code']}{by})"
    return f"failed ({envelope.error_code})"


class JsonEvents:
    """Every event as one JSON line on stdout (`--events jsonl`)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def __call__(self, event: Any) -> None:
        self._out.write(json_text(event.to_dict(), default=str) + "\n")
        self._out.flush()


# -- run -------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    import anyio

    from ..agent.headless import EXIT_CODES, HeadlessRequest, run_headless

    workspace = Path(args.workspace)
    if not workspace.is_dir():
        print(f"agentcore: --workspace {printable(str(workspace))}: not a directory", file=sys.stderr)
        return EXIT_CODES["usage"]
    request = HeadlessRequest(manifest=Path(args.manifest), workspace=workspace, prompt=args.prompt, model=model_flags(args),
                              db=None if args.no_record else _db_path(args), timeout_s=args.timeout,
                              token_budget=args.token_budget, continue_session=args.session)
    observer = JsonEvents(sys.stdout) if args.events == "jsonl" else Progress(sys.stderr)
    outcome = anyio.run(run_headless, request, [observer])
    return _report(outcome, jsonl=args.events == "jsonl")


def _report(outcome: Any, *, jsonl: bool) -> int:
    if outcome.status == "usage":
        print(f"agentcore: {printable(str(outcome.error), lines=True)}", file=sys.stderr)
        return outcome.exit_code
    if not jsonl and outcome.text:
        # The answer exactly, for a pipe or a file; on a terminal, without the escape sequences a model could
        # write to set the clipboard or have the terminal type back.
        print(printable(outcome.text, lines=True) if sys.stdout.isatty() else outcome.text)
    for problem in outcome.problems:
        print(f"agentcore: {printable(problem)}", file=sys.stderr)
    if outcome.status != "end_turn":
        detail = f": {printable(outcome.error)}" if outcome.error else ""
        print(f"agentcore: the run stopped ({outcome.status}){detail}", file=sys.stderr)
    if outcome.session_id and not jsonl:
        print(f"agentcore: session {outcome.session_id}", file=sys.stderr)
    return outcome.exit_code


# -- sessions --------------------------------------------------------------------------------------


def _recorded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A sessions command whose database cannot be used, or has no such session, says so in one line (exit 2)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        import sqlite3

        from ..recorder.store import RecorderError

        try:
            return command(args)
        except RecorderError as exc:
            print(f"agentcore: {printable(str(exc), lines=True)}", file=sys.stderr)
            return 2
        except sqlite3.DatabaseError as exc:  # a page that does not read back (a damaged or truncated file)
            print(f"agentcore: the session database is damaged ({printable(str(exc))})", file=sys.stderr)
            return 2

    return run


def _open_recorder(args: argparse.Namespace) -> Any:
    from ..recorder.store import Recorder

    return Recorder(_db_path(args))


@_recorded
def cmd_sessions_list(args: argparse.Namespace) -> int:
    import datetime

    with _open_recorder(args) as rec:
        rows = rec.sessions(include_children=args.all)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))  # a BLOB column reads back as bytes
        return 0
    for r in rows:
        when = datetime.datetime.fromtimestamp(r["updated_at"]).strftime("%Y-%m-%d %H:%M") if _is_time(r["updated_at"]) else "-"
        print(f"{_field(r['id'])}  {when}  {r['runs']} run(s)  {_field(r['last_stop_reason']):<17} {_field(r['model']):<24} "
              f"{_field(r['title'] or '')[:60]}")
    if not rows:
        print("(no recorded sessions)", file=sys.stderr)
    return 0


def _field(value: Any) -> str:
    """A recorded value for a line of text: a database handed to the user can hold any value of any type in
    any column, and the escape sequences in one would reach the terminal (ASK-13)."""
    return "-" if value is None else printable(value if isinstance(value, str) else str(value))


def _is_time(value: Any) -> bool:
    """A timestamp `datetime` can show (seconds since the epoch, as this code records them)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 253402300800  # year 10000


@_recorded
def cmd_sessions_show(args: argparse.Namespace) -> int:
    with _open_recorder(args) as rec:
        info = rec.session(args.session)
        history = rec.history(args.session)
    if args.json:
        print(json_text({**info, "messages": history}, indent=2, default=str))  # a BLOB column reads back as bytes
        return 0
    _check_messages(args.session, history)
    print(f"session {_field(info['id'])}  model {_field(info['model'])}  workspace {_field(info['workspace'])}")
    for run in info["runs"]:
        usage = run["usage"] or {}
        print(f"run {_field(run['id'])}: {_field(run['stop_reason'] or 'unfinished')}  "
              f"tokens in/out {_field(usage.get('input_tokens', 0))}/{_field(usage.get('output_tokens', 0))}")
    for m in history:
        for p in m["parts"]:
            print(printable(_part_line(m["role"], p), lines=True))
    for d in info["decisions"]:
        print(f"decision: {_field(d['tool'])} ({_field(d['layer'])}): {_field(d['choice'])} by {_field(d['answered_by'])}")
    return 0


def _check_messages(session_id: str, history: list[dict[str, Any]]) -> None:
    """Messages that read back as messages, or a RecorderError: the lines below name their parts' fields."""
    from ..agent.messages import Message
    from ..recorder.store import RecorderError

    try:
        for m in history:
            Message.from_dict(m)
    except (KeyError, TypeError, ValueError) as exc:
        raise RecorderError(f"the session database is damaged: a message of session {session_id} ({exc!r})") from None


def _part_line(role: str, part: dict[str, Any]) -> str:
    kind = part["kind"]
    if kind in ("text", "reasoning"):
        return f"{role} {kind}: {part['text']}"
    if kind == "tool_call":
        return f"{role} tool call {part['call_id']}: {part['tool']} {part['arguments']}"
    if kind == "tool_result":
        # An envelope as recorded: a damaged one (not an object, its metadata not one) shows what it lacks as empty.
        env = part["envelope"] if isinstance(part["envelope"], dict) else {}
        meta = env.get("metadata") if isinstance(env.get("metadata"), dict) else {}
        return f"{role} tool result {part['call_id']}: {part['tool']} -> {env.get('type')} {meta.get('error_code') or ''}".rstrip()
    return f"{role} {kind}"


@_recorded
def cmd_sessions_export(args: argparse.Namespace) -> int:
    with _open_recorder(args) as rec:
        rec.session(args.session)  # an unknown id is an error before any output is made
        lines = (json_text(record) + "\n" for record in rec.export(args.session))
        if not args.output:
            sys.stdout.writelines(lines)
            return 0
        try:
            _export_to(Path(args.output), lines)
        except OSError as exc:
            print(f"agentcore: --output {printable(args.output)}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return 0


def _export_to(path: Path, lines: Iterable[str]) -> None:
    """Write an export to `path` whole, or leave what is there as it was.

    A regular file (or a new one) gets a private temporary file beside it, renamed over it once every line
    is written: a failed export (a damaged row) keeps the old file, and the export, which holds prompts and
    what tools read, is only its owner's, as the database is. A symbolic link is refused: one planted in a
    workspace the agent writes would send the recording, and the truncation, wherever it points. A FIFO or
    a device (`/dev/null`) is written as it is."""
    import os
    import stat
    import tempfile

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISLNK(mode):
        raise OSError(0, "is a symbolic link; name the file itself")
    if mode is not None and not stat.S_ISREG(mode):
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with open(fd, "w", encoding="utf-8") as out:
            out.writelines(lines)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # mode 0600
    try:
        with open(fd, "w", encoding="utf-8") as out:
            out.writelines(lines)
        os.replace(tmp, path)  # replaces whatever is at `path` now, a link planted since included, never its target
    except BaseException:
        os.unlink(tmp)
        raise


@_recorded
def cmd_sessions_rm(args: argparse.Namespace) -> int:
    with _open_recorder(args) as rec:
        removed = rec.remove(args.session)
    print(f"removed {removed} session(s)", file=sys.stderr)
    return 0


# -- replay ----------------------------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    import anyio

    from ..agent.replay import ReplayError, replay_session

    try:
        report = anyio.run(replay_session, _db_path(args), args.session, Path(args.manifest), Path(args.workspace))
    except ReplayError as exc:
        print(f"agentcore: {printable(str(exc), lines=True)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(printable(report.summary(), lines=True))  # call ids, tools and codes as the recording has them (ASK-13)
    return 0 if not report.changes else 1


# -- the parser ------------------------------------------------------------------------------------


def add_subcommands(sub: Any) -> None:
    run = sub.add_parser("run", help="run the agent unattended on one prompt (ask = deny)", epilog=RUN_EXIT_HELP)
    run.add_argument("--manifest", required=True, help="the agent's manifest (YAML or JSON)")
    run.add_argument("--workspace", required=True, help="the workspace directory")
    add_model_args(run)
    add_db_arg(run)
    run.add_argument("--no-record", action="store_true", help="do not record the session")
    run.add_argument("--session", metavar="ID", help="continue a recorded session (its history and remembered answers)")
    run.add_argument("--events", choices=["jsonl"], help="stream every event as JSON lines on stdout (the answer is in run_finished)")
    run.add_argument("--timeout", type=positive_seconds, metavar="SECONDS", help="stop the run after this long (exit code 4)")
    run.add_argument("--max-turn-requests", type=positive_int, metavar="N", help="model requests per prompt before the run stops (exit code 3)")
    run.add_argument("--token-budget", type=positive_int, metavar="N", help="stop once the run has used this many tokens (exit code 7)")
    run.add_argument("prompt", help="what the agent should do")
    run.set_defaults(func=cmd_run)

    ses = sub.add_parser("sessions", help="recorded sessions: list, show, export, rm")
    ssub = ses.add_subparsers(dest="sessions_command", required=True)
    ls = ssub.add_parser("list", help="recorded sessions, newest first")
    ls.add_argument("--all", action="store_true", help="include subagents' sessions")
    ls.add_argument("--json", action="store_true", help="print the sessions as JSON")
    ls.set_defaults(func=cmd_sessions_list)
    show = ssub.add_parser("show", help="one session: runs, messages, tool calls, decisions")
    show.add_argument("session", help="the session id (see `agentcore sessions list`)")
    show.add_argument("--json", action="store_true", help="print the session, its runs, messages and decisions as JSON")
    show.set_defaults(func=cmd_sessions_show)
    exp = ssub.add_parser("export", help="one session (and its subagents') as JSON Lines")
    exp.add_argument("session", help="the session id")
    exp.add_argument("--output", "-o", help="write to this file instead of stdout")
    exp.set_defaults(func=cmd_sessions_export)
    rm = ssub.add_parser("rm", help="delete a session and its subagents' sessions")
    rm.add_argument("session", help="the session id")
    rm.set_defaults(func=cmd_sessions_rm)
    for p in (ls, show, exp, rm):
        add_db_arg(p)

    rep = sub.add_parser("replay", help="re-run a recorded session's model turns against the current engine and manifest; "
                                        "report every tool call whose decision or envelope shape changed (exit 1 when any did)")
    rep.add_argument("session", help="the recorded session to replay")
    rep.add_argument("--manifest", required=True, help="the manifest to judge the calls by now")
    rep.add_argument("--workspace", required=True, help="the workspace to run the calls in")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    add_db_arg(rep)
    rep.set_defaults(func=cmd_replay)
