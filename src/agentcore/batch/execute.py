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

import errno
import os
import shutil
import socket
import stat
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import anyio

from ..agent.headless import EXIT_CODES, HeadlessOutcome, HeadlessRequest, ModelFlags, run_headless
from ..api import remove_tree

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
        _remove_tree(dest)  # an interrupted attempt's copy: start again from the template
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Symbolic links stay links (never followed out of the template); fifos, sockets and devices are errors.
        _copy_tree(template, dest, _batch_files(spec))
    except OSError as exc:
        raise WorkspaceError(f"cannot copy the workspace template {template} to {dest}: {_first(exc)}") from None
    return dest


def _batch_files(spec: TaskSpec) -> frozenset[str]:
    """The batch's own files and the directory of the tasks' copies, resolved. A template may hold them (a
    repository copied per task, with `--out` inside it): copied, they would hand the agent the other tasks'
    workspaces, results and recordings, and the copy would recurse into its own destination."""
    return frozenset(os.path.realpath(p) for p in (os.fspath(Path(spec.copy_to or "").parent), *spec.protect))


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _copy_tree(template: Path, dest: Path, skip: frozenset[str]) -> None:
    """Copy `template` to the new directory `dest` (modes and times kept) through descriptors only, on both sides.
    By name, a concurrent agent (another task with fs.write on the batch's directory) could swap a directory of the
    copy for a link between its creation and the files written into it, and have the template's (a repository's)
    files written, or chmodded, wherever the link points. Links are copied as links; a fifo, socket or device is
    an error (reading one could hang or never end); the entries at the paths of `skip` (resolved) are left out."""
    real = os.path.realpath(template)
    src = os.open(real, _DIR)
    try:
        # The operator's `--out` resolved once; `workspaces` below it never through a link (a concurrent agent's swap).
        parent = _open_below(os.path.realpath(dest.parent.parent), dest.parent.name)
    except BaseException:
        os.close(src)
        raise
    top = os.fstat(src)
    try:
        os.mkdir(dest.name, 0o700, dir_fd=parent)
        dst = os.open(dest.name, _DIR, dir_fd=parent)  # O_NOFOLLOW: a link planted in its place is refused
    except BaseException:
        os.close(src)
        raise
    finally:
        os.close(parent)
    # (source fd, copy fd, real path of the source, its stat, names still to copy): a deep tree costs descriptors, not stack
    frames: list[tuple[int, int, str, os.stat_result, list[str]]] = [(src, dst, real, top, sorted(os.listdir(src), reverse=True))]
    try:
        while frames:
            sfd, dfd, where, st, names = frames[-1]
            if not names:
                frames.pop()
                _keep_mode_and_times(dfd, st)
                os.close(sfd)
                os.close(dfd)
                continue
            name = names.pop()
            if os.path.join(where, name) in skip:
                continue
            est = os.stat(name, dir_fd=sfd, follow_symlinks=False)
            if stat.S_ISLNK(est.st_mode):
                os.symlink(os.readlink(name, dir_fd=sfd), name, dir_fd=dfd)
            elif stat.S_ISREG(est.st_mode):
                _copy_file(name, sfd, dfd, est)
            elif stat.S_ISDIR(est.st_mode):
                os.mkdir(name, 0o700, dir_fd=dfd)
                nsfd = _open_same(name, sfd, est, _DIR)
                try:
                    ndfd = os.open(name, _DIR, dir_fd=dfd)
                    frames.append((nsfd, ndfd, os.path.join(where, name), est, sorted(os.listdir(nsfd), reverse=True)))
                except BaseException:
                    os.close(nsfd)
                    raise
            else:
                raise OSError(errno.EINVAL, "not a regular file, directory or link", os.path.join(where, name))
    finally:
        for sfd, dfd, *_ in frames:
            os.close(sfd)
            os.close(dfd)


def _open_below(directory: str, name: str) -> int:
    top = os.open(directory, _DIR)
    try:
        return os.open(name, _DIR, dir_fd=top)
    finally:
        os.close(top)


def _open_same(name: str, dir_fd: int, expected: os.stat_result, flags: int) -> int:
    """`name` in `dir_fd`, opened without following a link or blocking (a fifo), and still the entry `expected` describes."""
    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    if not os.path.samestat(os.fstat(fd), expected):
        os.close(fd)
        raise OSError(errno.EAGAIN, "changed while being copied", name)
    return fd


def _copy_file(name: str, src_dir: int, dst_dir: int, st: os.stat_result) -> None:
    src = _open_same(name, src_dir, st, os.O_RDONLY)
    try:
        dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst_dir)
        try:
            with open(src, "rb", closefd=False) as fin, open(dst, "wb", closefd=False) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            _keep_mode_and_times(dst, st)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _keep_mode_and_times(fd: int, st: os.stat_result) -> None:
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def _remove_tree(path: Path) -> None:
    """Remove `path` if it is there. Through descriptors, never by name: an agent (this task's earlier attempt, or
    a concurrent task writing the batch's directory) may swap a directory in it for a link while it goes, and a
    by-name chmod or unlink would then act outside the copy. The operator's `--out` is resolved once (links the
    operator chose are theirs); from there down no link is followed, and one in the way fails the task."""
    remove_tree(Path(os.path.realpath(path.parent.parent)) / path.parent.name / path.name)


def _first(exc: BaseException) -> str:
    why = getattr(exc, "strerror", None) or str(exc)
    return f"{why} ({exc.filename})" if isinstance(exc, OSError) and exc.filename is not None else why
