"""`run_batch`: the driver. Tasks in, results, recordings and reports out.

1. Read the tasks file (malformed lines are reported and skipped), check the
   manifest once, and settle the model the tasks run (the driver resolves
   `$AGENTCORE_MODEL` and relative `script:` paths, so a worker elsewhere
   runs exactly that).
2. With `--resume`, drop the tasks `OUT/results.jsonl` records as finished;
   without it, refuse an `OUT` that already holds results.
3. Hand the rest to an executor (`local.py`, `ray_exec.py`). As each task
   finishes: merge its recording into the session database, append its
   result to results.jsonl, update the display.
4. Write `OUT/junit.xml` and `OUT/summary.md`, also when interrupted.

The session database defaults to `OUT/sessions.db`, so a batch's sessions
stay with its results instead of piling up in the user's own database;
`--db PATH` chooses another (the user's: `agentcore sessions list` without
`--db` then shows them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import anyio

from ..agent.config import ModelConfigError, resolve_model_config
from ..agent.headless import ModelFlags
from ..api import ManifestError, load_manifest
from .execute import TaskSpec
from .local import LocalExecutor
from .progress import Display
from .reports import BatchView, junit_xml, summary_markdown
from .results import ResultsLog, is_finished, read_results
from .tasks import Task, TaskFile, TasksFileError, absolute_model, load_tasks

DEFAULT_TIMEOUT_S = 600.0
EXECUTORS = ("local", "ray")


# What a batch writes in OUT besides the tasks' workspaces (`own_files` keeps them from the agents).
RESULTS, JUNIT, SUMMARY, LOGS, DEFAULT_DB = "results.jsonl", "junit.xml", "summary.md", "logs", "sessions.db"


def _db_path(config: "BatchConfig", out: Path) -> Path:
    return config.db or out / DEFAULT_DB


class BatchUsageError(Exception):
    """The batch cannot start: its arguments, tasks file, manifest or output directory are wrong."""


@dataclass(frozen=True)
class BatchConfig:
    """How `agentcore batch` was invoked: tasks file, manifest, output directory, executor, and every task's limits."""

    tasks: Path
    manifest: Path
    out: Path
    concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    executor: str = "local"
    ray_address: str | None = None
    resume: bool = False
    model: ModelFlags = ModelFlags()
    db: Path | None = None  # None: OUT/sessions.db
    record: bool = True
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    token_budget: int | None = None


class Executor(Protocol):
    async def run(self, specs: Any, on_start: Any, on_done: Any) -> None: ...


@dataclass
class BatchOutcome:
    """How a batch ended: every task's result (`view`), and how many this invocation ran or skipped as finished."""

    view: BatchView
    out: Path
    ran: int  # tasks run by this invocation
    skipped: int  # already finished (--resume)
    executor_start_s: float | None = None  # Ray: connecting or starting the local instance

    @property
    def exit_code(self) -> int:
        return 0 if self.view.clean() else 1


async def run_batch(config: BatchConfig, display: Display) -> BatchOutcome:
    """Run the batch; raises BatchUsageError before anything runs when it cannot start."""
    _check(config)
    tasks, manifest = _load(config)
    flags, default_script = _model_flags(config, tasks, manifest)
    out = config.out.absolute()
    previous = _previous_results(config, out / RESULTS)
    done = {t.id for t in tasks.tasks if t.id in previous and is_finished(previous[t.id])}
    protect = own_files(config, out)
    inputs = task_inputs(tasks, default_script)
    specs = [spec_for(task, config, flags, out, protect, inputs) for task in tasks.tasks if task.id not in done]
    view = BatchView(tasks.path.name, tasks.tasks, {i: previous[i] for i in done}, tasks.errors)
    sink = _Sink(*_open_outputs(config, out), view, display)
    display.begin(total=len(specs), skipped=len(done), line_errors=[e.describe(tasks.path) for e in tasks.errors])
    outcome = BatchOutcome(view, out, ran=len(specs), skipped=len(done))
    try:
        await _execute(config, out, specs, sink, outcome)
    except BaseException:
        view.interrupted = True
        raise
    finally:
        write_reports(view, out)
    return outcome


def _check(config: BatchConfig) -> None:
    if config.executor not in EXECUTORS:
        raise BatchUsageError(f"--executor must be one of {', '.join(EXECUTORS)}")
    if config.concurrency < 1:
        raise BatchUsageError("--concurrency must be at least 1")
    if config.timeout_s is not None and not 0 < config.timeout_s < float("inf"):
        raise BatchUsageError("--timeout must be a positive number of seconds")
    if (config.token_budget is not None and config.token_budget < 1) or (config.model.max_turn_requests is not None and config.model.max_turn_requests < 1):
        raise BatchUsageError("--token-budget and --max-turn-requests must be at least 1")
    if config.executor == "ray":
        from .ray_exec import RayUnavailable, require_ray

        try:
            require_ray()
        except RayUnavailable as exc:
            raise BatchUsageError(str(exc)) from None


def _open_outputs(config: BatchConfig, out: Path) -> tuple[ResultsLog, Any]:
    """results.jsonl, opened for appending, and the session database (None with --no-record)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        log = ResultsLog(out / RESULTS)
    except OSError as exc:
        raise BatchUsageError(f"cannot write the results to {out}: {exc.strerror or exc}") from None
    try:
        return log, _open_recorder(_db_path(config, out)) if config.record else None
    except BaseException:
        log.close()
        raise


def _load(config: BatchConfig) -> tuple[TaskFile, Any]:
    try:
        tasks = load_tasks(config.tasks)
    except TasksFileError as exc:
        raise BatchUsageError(str(exc)) from None
    if not config.manifest.is_file():
        raise BatchUsageError(f"--manifest {config.manifest}: not a file")
    try:  # once, here: a broken manifest would fail every task the same way
        manifest = load_manifest(config.manifest, workspace=tasks.path.parent)
    except ManifestError as exc:
        raise BatchUsageError(str(exc)) from None
    return tasks, manifest


def _model_flags(config: BatchConfig, tasks: TaskFile, manifest: Any) -> tuple[ModelFlags, str | None]:
    """The batch's model settings with the environment's folded in, and `script:` paths made absolute; and the
    script the tasks without a model of their own answer from, if their model is one."""
    env = os.environ
    flags = replace(
        config.model,
        model=absolute_model(config.model.model or env.get("AGENTCORE_MODEL") or None, Path.cwd()),
        base_url=config.model.base_url or env.get("AGENTCORE_BASE_URL") or None,
        api_key_env=config.model.api_key_env or env.get("AGENTCORE_API_KEY_ENV") or None,
    )
    if not any(t.model is None for t in tasks.tasks):
        return flags, None
    try:
        default = resolve_model_config(manifest.spec.model, model=flags.model, base_url=flags.base_url, api_key_env=flags.api_key_env,
                                       manifest_dir=config.manifest.absolute().parent, env={})
    except ModelConfigError as exc:
        raise BatchUsageError(f"{exc} (or give each task a model)") from None
    return flags, default.name if default.provider == "script" else None


def _previous_results(config: BatchConfig, results_path: Path) -> dict[str, dict[str, Any]]:
    if config.resume:
        return read_results(results_path)
    if results_path.exists() and results_path.stat().st_size > 0:
        raise BatchUsageError(f"{config.out} already holds the results of a batch: pass --resume to continue it, or choose another --out")
    return {}


def spec_for(task: Task, config: BatchConfig, flags: ModelFlags, out: Path, protect: tuple[str, ...] = (),
             inputs: tuple[str, ...] = ()) -> TaskSpec:
    """`protect`: the batch's own files (`own_files`), the same for every task; `inputs`: what the tasks start from
    (`task_inputs`), protected from the tasks working in place."""
    limits = task.limits
    return TaskSpec(
        id=task.id,
        line=task.line,
        prompt=task.prompt,
        manifest=str(config.manifest.absolute()),
        workspace=str(task.workspace) if task.workspace is not None else None,
        template=str(task.workspace_template) if task.workspace_template is not None else None,
        copy_to=str(out / "workspaces" / task.id) if task.workspace_template is not None else None,
        model=task.model or flags.model,
        base_url=flags.base_url,
        api_key_env=flags.api_key_env,
        max_turn_requests=limits.max_turn_requests or flags.max_turn_requests,
        timeout_s=limits.timeout_s if limits.timeout_s is not None else config.timeout_s,
        token_budget=limits.token_budget if limits.token_budget is not None else config.token_budget,
        # A task working in place may hold OUT itself: the template copies of the other tasks are not its to write
        # (nor to replace with a link that would send later copies, and their removal, elsewhere); nor the templates
        # and scripts later tasks start from. A template task works in a copy, which may lie inside its template.
        protect=protect if task.workspace_template is not None else (*protect, os.fspath((out / "workspaces").absolute()), *inputs),
    )


def task_inputs(tasks: TaskFile, default_script: str | None) -> tuple[str, ...]:
    """What the tasks start from besides the manifest: their templates and the `script:` files their models answer
    from. A task working in place where they lie could otherwise plant files in every later task's copy, or rewrite
    what a later task's model does, and a task's outcome would depend on which ran first."""
    templates = [os.fspath(t.workspace_template) for t in tasks.tasks if t.workspace_template is not None]
    scripts = [t.model.removeprefix("script:") for t in tasks.tasks if t.model and t.model.startswith("script:")]
    return tuple(dict.fromkeys([*templates, *scripts, *([default_script] if default_script else [])]))


def own_files(config: BatchConfig, out: Path) -> tuple[str, ...]:
    """What the batch reads or writes besides the tasks' workspaces. A task's agent could otherwise forge
    another task's result, add tasks to the file `--resume` reads again, or edit the recordings."""
    from ..recorder.store import database_files

    files = [config.tasks.absolute(), *(out / name for name in (RESULTS, JUNIT, SUMMARY, LOGS))]
    if config.record:
        files += database_files(_db_path(config, out).absolute())
    return tuple(os.fspath(f) for f in files)


async def _execute(config: BatchConfig, out: Path, specs: list[TaskSpec], sink: "_Sink", outcome: BatchOutcome) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="agentcore-batch-", dir=_fast_tmp()))
    executor = _executor(config, out, scratch)
    display = sink.display
    try:
        async with anyio.create_task_group() as tg:
            if display.live:
                tg.start_soon(_ticker, display)
            await executor.run(specs, lambda spec: display.started(spec.id), sink.done)
            tg.cancel_scope.cancel()
    finally:
        outcome.executor_start_s = getattr(executor, "started_s", None)
        sink.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _executor(config: BatchConfig, out: Path, scratch: Path) -> Executor:
    if config.executor == "ray":
        from .ray_exec import RayExecutor

        return RayExecutor(config.concurrency, address=config.ray_address, scratch=scratch, record=config.record)
    return LocalExecutor(config.concurrency, log_dir=out / LOGS, db_dir=scratch if config.record else None)


def _open_recorder(path: Path) -> Any:
    from ..recorder.store import Recorder, RecorderError

    try:
        return Recorder(path)
    except (RecorderError, OSError) as exc:
        raise BatchUsageError(f"cannot use the session database {path}: {exc}") from None


def _fast_tmp() -> str | None:
    """Where per-task databases live until merged: /dev/shm when it has room (no disk syncs), else the temp dir."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    room = st.f_bavail * st.f_frsize
    return "/dev/shm" if room >= 256 * 1024 * 1024 and os.access("/dev/shm", os.W_OK | os.X_OK) else None


async def _ticker(display: Display) -> None:
    while True:  # the ETA moves even when no task finishes
        await anyio.sleep(1.0)
        display.tick()


class _Sink:
    """What happens when a task finishes, in order: its recording merged, its result line written, the display told."""

    def __init__(self, log: ResultsLog, recorder: Any, view: BatchView, display: Display) -> None:
        self.log = log
        self.recorder = recorder
        self.view = view
        self.display = display

    async def done(self, result: dict[str, Any], recording: Path | None) -> None:
        if recording is not None:
            self._absorb(result, recording)
        self.log.append(result)
        self.view.results[result["id"]] = result
        self.display.finished_task(result)

    def _absorb(self, result: dict[str, Any], recording: Path) -> None:
        try:
            if self.recorder is not None:
                self.recorder.absorb(recording)
        except Exception as exc:  # the result still counts; say what was not recorded (RecorderError, sqlite3.Error, OSError)
            result.setdefault("problems", []).append(f"the session could not be recorded: {type(exc).__name__}: {exc}")
        finally:
            from ..recorder.store import database_files

            for f in database_files(recording):
                f.unlink(missing_ok=True)

    def close(self) -> None:
        self.log.close()
        if self.recorder is not None:
            self.recorder.close()


def write_reports(view: BatchView, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / JUNIT).write_bytes(junit_xml(view))
    (out / SUMMARY).write_text(summary_markdown(view, out=out), encoding="utf-8")
