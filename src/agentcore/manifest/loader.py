"""Loading manifest and rules files with errors that point at file:line: key.

A document in canonical form is read by `spec.py` alone; anything else goes
to the pydantic models in `schema.py`, which reject it with messages that
point, or coerce it (then their dump is read by `spec.py` as well).
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, get_args, get_origin

import yaml

from ..errors import ManifestError
from ..textdata import (
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    KeyPath,
    LineIndex,
    StructureError,
    TooLarge,
    did_you_mean,
    key_path_text,
    line_of,
    load_json,
    read_bounded,
    too_deep,
)
from .spec import ManifestSpec, RulesFileSpec, read_spec
from .strict_yaml import load_yaml

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from .spec import _Located

M = TypeVar("M", bound="_Located")


def _parse(text: str, path: Path) -> tuple[Any, LineIndex]:
    try:
        data, lines = _parse_text(text, path.suffix == ".json")
        return copy.deepcopy(data), dict(lines)  # the cached values stay as parsed, whatever a caller does with its copy
    except StructureError as exc:
        # A duplicate key, an alias or deep nesting: the key path and the line, never a value.
        where = f"{path}:{exc.line}" if exc.line else str(path)
        raise ManifestError(f"{key_path_text(exc.path)}: {exc.message}" if exc.path else exc.message, location=where) from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"invalid JSON: {exc.msg}", location=f"{path}:{exc.lineno}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ManifestError(f"invalid YAML: {getattr(exc, 'problem', None) or type(exc).__name__}", location=f"{path}{line}") from None


@lru_cache(maxsize=32)
def _parse_text(text: str, is_json: bool) -> tuple[Any, LineIndex]:
    # Keyed by the exact text: a batch worker reads the same manifest and script for every task, and
    # parsing YAML defensively costs milliseconds where a copy costs microseconds. Errors are not cached.
    return load_json(text) if is_json else load_yaml(text)


def parse_document(text: str, path: Path) -> Any:
    """A YAML or JSON document (by the file's suffix), parsed as defensively as manifests are."""
    return _parse(text, path)[0]


def _validate(cls: type[M], data: Any, path: Path, lines: LineIndex) -> M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ManifestError("the top level must be a mapping", location=f"{path}:1")
    if too_deep(data):  # an in-memory manifest: the text parsers have already checked theirs
        raise ManifestError(f"(top level): nested more than {MAX_DEPTH} levels deep", location=str(path))
    spec = read_spec(cls, data)
    if spec is None:
        spec = _by_model(cls, data, path, lines)
    spec.located(lines, str(path))  # so that compile errors can point at a line too
    return spec


def _by_model(cls: type[M], data: Any, path: Path, lines: LineIndex) -> M:
    """What pydantic makes of a document the plain reader declined: its errors, or its coerced values."""
    from pydantic import ValidationError

    from . import schema

    model: type[BaseModel] = getattr(schema, cls.__name__)
    try:
        valid = model.model_validate(data)
    except ValidationError as exc:
        _raise_problems(model, data, exc, path, lines)
    spec = read_spec(cls, valid.model_dump())
    if spec is None:  # the two readers disagree: a bug of ours, and never a reason to accept
        raise ManifestError(f"internal error: {cls.__name__} validated but cannot be read", location=str(path))
    return spec


def _raise_problems(model: type[BaseModel], data: Any, exc: ValidationError, path: Path, lines: LineIndex) -> NoReturn:
    problems = sorted(_problems(model, data, exc), key=lambda kv: line_of(lines, kv[0]))
    located = [(f"{path}:{line_of(lines, key)}: {key_path_text(key)}", msg) for key, msg in problems]
    shown = located[:MAX_SHOWN]
    also = tuple(f"{where}: {msg}" for where, msg in shown[1:])
    if len(located) > MAX_SHOWN:
        also += (f"{path}: ... and {len(located) - MAX_SHOWN} more",)
    raise ManifestError(shown[0][1], location=shown[0][0], also=also) from None


MAX_SHOWN = 10  # problems listed at once; the rest are counted


def _problems(model: type[BaseModel], data: Any, exc: ValidationError) -> list[tuple[KeyPath, str]]:
    """Each problem once, as (key path in the document, message): unknown keys with a suggestion, missing keys named."""
    out: dict[KeyPath, str] = {}
    for err in exc.errors():
        key = _document_path(data, tuple(err["loc"]), err["type"] == "missing")
        if key in out:
            continue
        if err["type"] == "extra_forbidden":
            known = _fields_at(model, key[:-1])
            msg = f"unknown key{did_you_mean(str(key[-1]), known)}"
            missing = [k for k in known if _is_required(model, key[:-1], k) and not _present(data, key[:-1], k)]
            if missing:
                msg += "; missing: " + ", ".join(missing)
        elif err["type"] == "missing":
            msg = "required key is missing"
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
        out[key] = msg
    # A missing key already named next to a misspelling of it is not listed again.
    named = {k[:-1] + (m,) for k, msg in out.items() if "; missing: " in msg for m in msg.split("; missing: ")[1].split(", ")}
    return [(k, msg) for k, msg in out.items() if k not in named or msg != "required key is missing"]


def _document_path(data: Any, loc: KeyPath, missing: bool) -> KeyPath:
    """`loc` without pydantic's union member names: only keys and indices that exist in `data`."""
    real: list[Any] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif not (missing and i == len(loc) - 1):
            continue
        real.append(part)
    return tuple(real)


def _model_at(model: type[BaseModel], key: KeyPath) -> type[BaseModel] | None:
    """The model that validates the mapping at `key`, following fields, list items and dict values."""
    from pydantic import BaseModel

    current: Any = model
    for part in key:
        current = _without_none(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        else:
            current = _element(current)
    current = _without_none(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _without_none(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if get_origin(annotation) not in (list, dict) and len(args) == 1 else annotation


def _element(annotation: Any) -> Any:
    """What a list, dict or optional annotation holds (the annotation itself otherwise)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    origin = get_origin(annotation)
    if origin is list and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return annotation


def _fields_at(model: type[BaseModel], key: KeyPath) -> list[str]:
    sub = _model_at(model, key)
    return list(sub.model_fields) if sub else []


def _is_required(model: type[BaseModel], key: KeyPath, name: str) -> bool:
    sub = _model_at(model, key)
    return bool(sub and name in sub.model_fields and sub.model_fields[name].is_required())


def _present(data: Any, key: KeyPath, name: str) -> bool:
    node = data
    for part in key:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(node, dict) and name in node


def _read(cls: type[M], path: Path, what: str) -> M:
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            text = read_bounded(fh, MAX_DOCUMENT_BYTES)
    except (OSError, UnicodeDecodeError, TooLarge) as exc:
        raise ManifestError(f"cannot read {what}: {exc}", location=str(path)) from None
    data, lines = _parse(text, path)
    return _validate(cls, data, path, lines)


def read_manifest_spec(path: Path) -> ManifestSpec:
    return _read(ManifestSpec, path, "manifest")


def read_rules_spec(path: Path) -> RulesFileSpec:
    return _read(RulesFileSpec, path, "rules file")


def manifest_spec_from_dict(data: dict[str, Any], *, origin: str = "<inline>") -> ManifestSpec:
    return _validate(ManifestSpec, data, Path(origin), {})
