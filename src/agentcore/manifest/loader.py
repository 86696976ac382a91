"""Loading manifest and rules files with errors that point at file:line: key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import ManifestError
from ..textdata import MAX_DEPTH, LineIndex, StructureError, key_path_text, load_json, too_deep
from .strict_yaml import load_yaml
from .schema import ManifestSpec, RulesFileSpec

M = TypeVar("M", bound=BaseModel)


def _parse(text: str, path: Path) -> tuple[Any, LineIndex]:
    try:
        if path.suffix == ".json":
            return load_json(text)
        return load_yaml(text)
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


def parse_document(text: str, path: Path) -> Any:
    """A YAML or JSON document (by the file's suffix), parsed as defensively as manifests are."""
    return _parse(text, path)[0]


def _validate(model: type[M], data: Any, path: Path, lines: LineIndex) -> M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ManifestError("the top level must be a mapping", location=f"{path}:1")
    if too_deep(data):  # an in-memory manifest: the text parsers have already checked theirs
        raise ManifestError(f"(top level): nested more than {MAX_DEPTH} levels deep", location=str(path))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        # Pydantic puts union member names into loc; keep only real keys/indices.
        real: list[Any] = []
        for part in loc:
            candidate = tuple(real) + (part,)
            if candidate in lines or isinstance(part, int):
                real.append(part)
        line = lines.get(tuple(real)) or lines.get(tuple(real[:-1])) or 1
        key = ".".join(str(p) for p in real) or "(top level)"
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ManifestError(f"{key}: {first['msg']}{more}", location=f"{path}:{line}") from None


def _read(model: type[M], path: Path, what: str) -> M:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read {what}: {exc}", location=str(path)) from None
    data, lines = _parse(text, path)
    return _validate(model, data, path, lines)


def read_manifest_spec(path: Path) -> ManifestSpec:
    return _read(ManifestSpec, path, "manifest")


def read_rules_spec(path: Path) -> RulesFileSpec:
    return _read(RulesFileSpec, path, "rules file")


def manifest_spec_from_dict(data: dict[str, Any], *, origin: str = "<inline>") -> ManifestSpec:
    return _validate(ManifestSpec, data, Path(origin), {})
