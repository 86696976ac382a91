"""The tasks file: JSON Lines, one task per line.

A task::

    {"id": "fix-1", "prompt": "Fix the failing test", "workspace_template": "repos/app",
     "model": "script:scripts/fix.yaml", "limits": {"timeout_s": 300, "token_budget": 200000, "max_turn_requests": 30}}

- `id`: 1 to 128 characters of `A-Z a-z 0-9 . _ -`, not starting with `.` or
  `-`; unique in the file. It names the task's copy of a template
  (`OUT/workspaces/<id>`), so nothing else is allowed.
- `prompt`: a non-empty string.
- exactly one of `workspace` (a directory the task works in, in place) and
  `workspace_template` (a directory copied for the task).
- `model` (optional): `PROVIDER:NAME`, as `--model` takes it.
- `limits` (optional): `timeout_s`, `token_budget`, `max_turn_requests`.

Relative paths (workspaces, templates, `script:FILE`) are relative to the
tasks file's directory. Unknown keys are errors, so a misspelt key cannot be
silently ignored. A line that is not a valid task is reported with its line
number and skipped; the other tasks still run. Blank lines are ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..agent.config import ModelConfigError, parse_model_id

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


class TasksFileError(Exception):
    """The tasks file as a whole cannot be used (unreadable, not UTF-8)."""


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    timeout_s: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)
    token_budget: int | None = Field(default=None, ge=1)
    max_turn_requests: int | None = Field(default=None, ge=1)

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        # strict mode refuses an int for a float; a whole number of seconds is fine (a bool is not).
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


class _TaskLine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: str
    prompt: str = Field(min_length=1)
    workspace: str | None = Field(default=None, min_length=1)
    workspace_template: str | None = Field(default=None, min_length=1)
    model: str | None = None
    limits: Limits = Limits()

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.fullmatch(v):
            raise ValueError("must be 1-128 characters of A-Z a-z 0-9 . _ - and not start with . or -")
        return v

    @field_validator("model")
    @classmethod
    def _model(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_model_id(v)
            except ModelConfigError as exc:
                raise ValueError(str(exc).replace("--model ", "")) from None
        return v

    @model_validator(mode="after")
    def _one_workspace(self) -> "_TaskLine":
        if (self.workspace is None) == (self.workspace_template is None):
            raise ValueError("give exactly one of workspace and workspace_template")
        return self


@dataclass(frozen=True)
class Task:
    """One valid task, its paths made absolute."""

    id: str
    line: int
    prompt: str
    workspace: Path | None
    workspace_template: Path | None
    model: str | None = None
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class LineError:
    """A line of the tasks file that is not a valid task (reported and skipped), with its id when it has one."""

    line: int
    message: str
    task_id: str | None = None

    def describe(self, path: Path) -> str:
        return f"{path}:{self.line}: {self.message}"


@dataclass
class TaskFile:
    """A loaded tasks file: its valid tasks and an error for each line that is not one."""

    path: Path
    tasks: list[Task]
    errors: list[LineError]


TASKS_FILE_MAX_BYTES = 256 << 20  # a quarter of a million tasks of a kilobyte each; past it, no tasks file


def load_tasks(path: Path) -> TaskFile:
    """Every valid task of the file, and an error for each line that is not one."""
    from ..textdata import TooLarge, read_bounded

    path = Path(path).absolute()
    try:
        with open(path, "rb") as fh:  # bounded: a tasks file that never ends (/dev/zero) must not take the memory
            text = read_bounded(fh, TASKS_FILE_MAX_BYTES)
    except (OSError, UnicodeDecodeError, TooLarge) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc) if isinstance(exc, TooLarge) else "not UTF-8"
        raise TasksFileError(f"cannot read the tasks file {path}: {reason}") from None
    tasks: list[Task] = []
    errors: list[LineError] = []
    first_line: dict[str, int] = {}
    # Lines end at "\n" only: str.splitlines would also split at U+2028, U+2029 and NEL, which JSON allows
    # raw inside strings, cutting a valid task in pieces and shifting every later line number.
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        task = parse_line(raw, number, path.parent)
        if isinstance(task, LineError):
            errors.append(task)
        elif task.id in first_line:
            errors.append(LineError(number, f"duplicate id {task.id!r} (first on line {first_line[task.id]})", task.id))
        else:
            first_line[task.id] = number
            tasks.append(task)
    return TaskFile(path, tasks, errors)


def parse_line(raw: str, number: int, base: Path) -> Task | LineError:
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        return LineError(number, f"not valid JSON: {exc.msg} at column {exc.colno}")
    except (ValueError, RecursionError) as exc:  # an integer of too many digits, arrays or objects nested too deep
        return LineError(number, f"not valid JSON: {type(exc).__name__}: {str(exc).split(':')[0]}")
    if not isinstance(doc, dict):
        return LineError(number, "a task must be a JSON object")
    try:
        line = _TaskLine.model_validate(doc)
    except ValidationError as exc:
        return LineError(number, _first_error(exc), doc.get("id") if isinstance(doc.get("id"), str) else None)
    try:
        return Task(
            id=line.id,
            line=number,
            prompt=line.prompt,
            workspace=_path(base, line.workspace),
            workspace_template=_path(base, line.workspace_template),
            model=absolute_model(line.model, base),
            limits=line.limits,
        )
    except RuntimeError as exc:  # expanduser: `~user` with no such user
        return LineError(number, f"a path cannot be resolved: {exc}", line.id)


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"


def _path(base: Path, value: str | None) -> Path | None:
    return None if value is None else base / Path(value).expanduser()


def absolute_model(model: str | None, base: Path) -> str | None:
    """`script:FILE` with FILE made absolute against `base` (workers may run elsewhere); other models unchanged."""
    if model is None or not model.startswith("script:"):
        return model
    name = Path(model.removeprefix("script:")).expanduser()
    return f"script:{name if name.is_absolute() else base / name}"
