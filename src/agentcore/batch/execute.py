"""One batch task on a worker: prepare its workspace, run it headless, describe how it ended.

This is the code every executor runs for a task, in a local worker process or
on a Ray worker: `execute_task(spec, db)` calls `run_headless` (the same path
as `agentcore run`) and returns the task's result line. It never raises for
anything a task does; a bug of ours becomes a `failed` result naming it.

A `TaskSpec` is plain JSON: every path in it is absolute (workers may run in
another directory or on another machine), and the model is named explicitly
(the driver resolved `$AGENTCORE_MODEL` and friends). API keys are not in it:
a worker reads the variable `api_key_env` names from its own environment.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable

import anyio

from ..agent.headless import EXIT_CODES, HeadlessOutcome, HeadlessRequest, ModelFlags, run_headless

# How long past its own timeout a run may take to stop before the worker gives up on it.
GRACE_S = 30.0


@dataclass(frozen=True)
class TaskSpec:
    """One task as a worker gets it: plain JSON, every path absolute, the model named explicitly, no API key."""

    id: str
    line: int
    prompt: str
    manifest: str
    workspace: str | None = None  # used in place
    template: str | None = None  # copied to `copy_to` first
    copy_to: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_turn_requests: int | None = None
    timeout_s: float | None = None
    token_budget: int | None = None
    protect: tuple[str, ...] = ()  # the batch's own files (tasks file, results, reports, logs): never the agent's to write

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "TaskSpec":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in doc.items() if k in names}
        if "protect" in kw:
            kw["protect"] = tuple(kw["protect"])  # a list once it has been through JSON
        return cls(**kw)


class WorkspaceError(Exception):
    pass


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def execute_task(spec: TaskSpec, db: Path | None = None) -> dict[str, Any]:
    """Run one task; `db` is the session database to record it in (None: not recorded)."""
    started, t0 = time.time(), time.perf_counter()
    try:
        workspace = await anyio.to_thread.run_sync(prepare_workspace, spec)
    except WorkspaceError as exc:
        return _result(spec, started, t0, status="usage", error=str(exc))
    except Exception as exc:  # a bug of ours: raised here, it would end the worker and every task it runs
        return _result(spec, started, t0, status="failed", error=f"the task crashed: {type(exc).__name__}: {exc}")
    request = HeadlessRequest(
        manifest=Path(spec.manifest),
        workspace=workspace,
        prompt=spec.prompt,
        model=ModelFlags(model=spec.model, base_url=spec.base_url, api_key_env=spec.api_key_env, max_turn_requests=spec.max_turn_requests),
        db=db,
        protect=tuple(Path(p) for p in spec.protect),
        timeout_s=spec.timeout_s,
        token_budget=spec.token_budget,
    )
    outcome: HeadlessOutcome | None = None
    try:
        with anyio.move_on_after(spec.timeout_s + GRACE_S if spec.timeout_s else float("inf")):
            outcome = await run_headless(request)
    except Exception as exc:  # a bug of ours: this task fails, the batch goes on
        return _result(spec, started, t0, workspace=workspace, status="failed", error=f"the task crashed: {type(exc).__name__}: {exc}")
    if outcome is None:
        return _result(spec, started, t0, workspace=workspace, status="timeout",
                       error=f"the run did not stop within {GRACE_S:g} s of its time limit")
    return _result(spec, started, t0, workspace=workspace, outcome=outcome)


def failure_result(spec: TaskSpec, error: str, *, started: float, duration_s: float, worker: str | None = None) -> dict[str, Any]:
    """The result of a task that ended without an outcome of its own (its worker died, the batch could not run it)."""
    result = _result(spec, started, time.perf_counter() - duration_s, status="failed", error=error)
    result["worker"] = worker
    return result


def _result(spec: TaskSpec, started: float, t0: float, *, workspace: Path | None = None, outcome: HeadlessOutcome | None = None,
            status: str | None = None, error: str | None = None) -> dict[str, Any]:
    run = outcome.result if outcome is not None else None
    status = outcome.status if outcome is not None else status or "failed"
    return _encodable({
        "id": spec.id,
        "line": spec.line,
        "status": status,
        "exit_code": EXIT_CODES[status],
        "stop_reason": run.stop_reason if run is not None else None,
        "text": outcome.text if outcome is not None else "",
        "error": outcome.error if outcome is not None else error,
        "tool_calls": run.tool_calls if run is not None else 0,
        "refusals": dict(sorted(run.refusals.items())) if run is not None else {},
        "usage": run.usage.to_dict() if run is not None else {"input_tokens": 0, "output_tokens": 0, "requests": 0},
        "problems": list(outcome.problems) if outcome is not None else [],
        "session_id": outcome.session_id if outcome is not None else None,
        "duration_s": round(time.perf_counter() - t0, 3),
        "started_at": round(started, 3),
        "finished_at": round(time.time(), 3),
        "workspace": str(workspace) if workspace is not None else None,
        "worker": worker_name(),
    })


def _encodable(value: Any) -> Any:
    """`value` with every lone surrogate (a model's half of an emoji, say) replaced by U+FFFD: the result must
    encode as UTF-8 for the worker protocol and results.jsonl, or writing it fails."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    return value


# -- workspaces ------------------------------------------------------------------------------------


def prepare_workspace(spec: TaskSpec) -> Path:
    """The directory the task runs in: its own workspace, or a fresh copy of its template."""
    if spec.template is None:
        workspace = Path(spec.workspace or "")
        if not spec.workspace or not workspace.is_dir():
            raise WorkspaceError(f"the workspace {workspace} is not a directory")
        return workspace
    template, dest = Path(spec.template), Path(spec.copy_to or "")
    if not template.is_dir():
        raise WorkspaceError(f"the workspace template {template} is not a directory")
    if not spec.copy_to:
        raise WorkspaceError("no directory was given for the template's copy")
    try:
        if dest.exists() or dest.is_symlink():
            _remove_tree(dest)  # an interrupted attempt's copy: start again from the template
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Symbolic links stay links (never followed out of the template); fifos, sockets and devices are errors.
        shutil.copytree(template, dest, symlinks=True, ignore=_leave_out(_batch_files(spec)))
    except (OSError, shutil.Error, RecursionError) as exc:  # RecursionError: a tree nested deeper than Python recurses
        raise WorkspaceError(f"cannot copy the workspace template {template} to {dest}: {_first(exc)}") from None
    return dest


def _batch_files(spec: TaskSpec) -> frozenset[str]:
    """The batch's own files and the directory of the tasks' copies, resolved. A template may hold them (a
    repository copied per task, with `--out` inside it): copied, they would hand the agent the other tasks'
    workspaces, results and recordings, and the copy would recurse into its own destination."""
    return frozenset(os.path.realpath(p) for p in (os.fspath(Path(spec.copy_to or "").parent), *spec.protect))


def _leave_out(skip: frozenset[str]) -> Callable[[str, list[str]], set[str]]:
    """A `copytree` ignore that leaves out the entries at the paths of `skip` (a link is compared as itself, not its target)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        real = os.path.realpath(directory)
        return {name for name in names if os.path.join(real, name) in skip}

    return ignore


def _remove_tree(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return

    def writable_and_retry(func: Any, name: str, _exc: Any) -> None:
        # A previous run may have left read-only directories behind.
        os.chmod(os.path.dirname(name), stat.S_IRWXU)
        if os.path.isdir(name) and not os.path.islink(name):
            os.chmod(name, stat.S_IRWXU)
        func(name)

    shutil.rmtree(path, onerror=writable_and_retry)


def _first(exc: BaseException) -> str:
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        src, _dst, why = exc.args[0][0]
        return f"{why} ({len(exc.args[0])} file(s) failed, the first {src})"
    return getattr(exc, "strerror", None) or str(exc)
