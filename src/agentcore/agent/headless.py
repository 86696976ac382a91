"""One unattended run: `ask` is deny, `question` gets the fixed refusal, nothing is invented.

`run_headless` is what `agentcore run` does and what every batch task does,
locally or on a Ray worker: load the manifest, open a headless session,
open the model, run the prompt (continuing a recorded session if asked),
record it, and say how it ended with a distinct exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import anyio

from ..api import Engine, HeadlessBroker, ManifestError, load_manifest
from .config import ModelConfig, ModelConfigError, open_model, resolve_model_config, with_limits
from .loop import AgentLoop, RetryPolicy, RunResult
from .messages import Message
from .model import RequestSettings

# Exit codes of `agentcore run` (and a batch task's `exit_code`), documented in the README.
EXIT_CODES: dict[str, int] = {
    "end_turn": 0,
    "failed": 1,
    "usage": 2,
    "max_turn_requests": 3,
    "timeout": 4,
    "max_tokens": 5,
    "refusal": 6,
    "token_budget": 7,
    "cancelled": 130,
}


@dataclass
class HeadlessOutcome:
    """How one unattended run ended."""

    status: str  # a stop reason, or "usage" / "timeout"
    exit_code: int
    session_id: str | None = None
    result: RunResult | None = None
    error: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.result.text if self.result else ""


@dataclass(frozen=True)
class ModelFlags:
    """What the command line (or a batch task) says about the model; the manifest fills in the rest."""

    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_turn_requests: int | None = None


@dataclass(frozen=True)
class HeadlessRequest:
    """One unattended run to make (`agentcore run`, a batch task): what it runs on, the prompt, the model, its limits and where it is recorded."""

    manifest: Path
    workspace: Path
    prompt: str
    model: ModelFlags = ModelFlags()
    db: Path | None = None  # None: not recorded
    protect: tuple[Path, ...] = ()  # the host's own files the agent must not write (a batch's results, its tasks file)
    timeout_s: float | None = None
    token_budget: int | None = None
    continue_session: str | None = None
    retry: RetryPolicy = RetryPolicy()
    session_id: str | None = None


def _outcome(status: str, **kw: Any) -> HeadlessOutcome:
    return HeadlessOutcome(status, EXIT_CODES[status], **kw)


async def run_headless(request: HeadlessRequest, observers: Sequence[Callable[[Any], Any]] = ()) -> HeadlessOutcome:
    """Run `request.prompt` unattended; never raises for anything the run itself did."""
    try:
        manifest = load_manifest(request.manifest, workspace=request.workspace, extra_protected=_host_files(request))
    except ManifestError as exc:
        return _outcome("usage", error=str(exc))
    try:
        config = _model_config(manifest, request.model)
    except ModelConfigError as exc:
        return _outcome("usage", error=str(exc))
    engine = Engine(manifest, broker=HeadlessBroker())
    try:
        recorder = _recorder(request.db)
    except _UsageError as exc:  # a database that cannot be used (not one, newer, not agentcore's): exit 2
        return _outcome("usage", error=str(exc))
    try:
        # Continuing a recorded session keeps its id: the new run is recorded as part of it.
        with engine.open_session(headless=True, session_id=request.continue_session or request.session_id) as session:
            history = _continue(recorder, request.continue_session, session, str(manifest.workspace)) if request.continue_session else []
            if recorder is not None:
                recorder.attach(session, manifest=str(manifest.source), workspace=str(manifest.workspace), model=config.id,
                                title=request.prompt)
            try:
                async with open_model(config) as client:
                    with _loop(engine, client, config, request, observers, recorder) as loop:
                        return await _run(loop, session, request, history)
            except ModelConfigError as exc:
                return _outcome("usage", session_id=session.id, error=str(exc))
    except _UsageError as exc:
        return _outcome("usage", error=str(exc))
    finally:
        if recorder is not None:
            recorder.close()


def _host_files(request: HeadlessRequest) -> list[Path]:
    if request.db is None:
        return list(request.protect)
    from ..recorder.store import database_files

    return [*request.protect, *database_files(request.db)]


class _UsageError(Exception):
    pass


def _recorder(path: Path | None) -> Any:
    if path is None:
        return None
    from ..recorder.store import Recorder, RecorderError

    try:
        return Recorder(path)
    except RecorderError as exc:
        raise _UsageError(str(exc)) from None


def _continue(recorder: Any, session_id: str, session: Any, workspace: str) -> list[Any]:
    """The recorded history of `session_id`, with its remembered answers restored into `session` when it
    continues in the workspace they were given for (a command allowed there is not allowed here)."""
    from ..recorder.store import RecorderError

    if recorder is None:
        raise _UsageError("continuing a session needs a session database (--db)")
    try:
        info = recorder.session(session_id)
        history = [Message.from_dict(m) for m in recorder.history(session_id)]
        if info.get("remembered") and info.get("workspace") == workspace:
            session.restore(info["remembered"])
    except RecorderError as exc:
        raise _UsageError(str(exc)) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # Rows that are JSON objects but not the messages or remembered answers this code wrote (an edited
        # database): the session is not continued from them, as replay refuses them (exit 2, not a crash).
        raise _UsageError(f"the session database is damaged: session {session_id} does not load ({exc!r})") from None
    return history


def _model_config(manifest: Any, flags: ModelFlags) -> ModelConfig:
    config = resolve_model_config(manifest.spec.model, model=flags.model, base_url=flags.base_url, api_key_env=flags.api_key_env,
                                  manifest_dir=manifest.source.parent if manifest.source else None)
    return with_limits(config, max_turn_requests=flags.max_turn_requests)


def _loop(engine: Engine, client: Any, config: ModelConfig, request: HeadlessRequest, observers: Sequence[Any], recorder: Any) -> AgentLoop:
    settings = RequestSettings(max_tokens=config.max_tokens, temperature=config.temperature, timeout_s=config.request_timeout_s)
    loop = AgentLoop(engine, client, max_turn_requests=config.max_turn_requests, token_budget=request.token_budget,
                     settings=settings, retry=request.retry)
    if recorder is not None:
        loop.add_observer(recorder.observe)
    for observer in observers:
        loop.add_observer(observer)
    return loop


async def _run(loop: AgentLoop, session: Any, request: HeadlessRequest, history: list[Any]) -> HeadlessOutcome:
    result: RunResult | None = None
    timed_out = False
    done = anyio.Event()

    async def run() -> None:
        nonlocal result
        try:
            result = await loop.run(session, request.prompt, history)
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        if request.timeout_s is not None:
            with anyio.move_on_after(request.timeout_s):
                await done.wait()
            if not done.is_set():
                timed_out = True
                loop.cancel(session)  # tools end in `aborted` envelopes; the run returns `cancelled`
    assert result is not None
    if timed_out:
        return _outcome("timeout", session_id=session.id, result=result, error="the run did not finish within its time limit",
                        problems=result.problems)
    return _outcome(result.stop_reason, session_id=session.id, result=result, error=result.error, problems=result.problems)
