"""Loading manifest and rules files with errors that point at file:line: key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import ManifestError
from .schema import ManifestSpec, RulesFileSpec

M = TypeVar("M", bound=BaseModel)


def _line_index(node: yaml.Node, prefix: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    # A key's own line wins over the line where its (block) value starts.
    out.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[prefix + (key,)] = key_node.start_mark.line + 1
            _line_index(value_node, prefix + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_index(item, prefix + (i,), out)


def _parse(text: str, path: Path) -> tuple[Any, dict[tuple[Any, ...], int]]:
    lines: dict[tuple[Any, ...], int] = {}
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"invalid JSON: {exc.msg}", location=f"{path}:{exc.lineno}") from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise ManifestError(f"invalid YAML: {getattr(exc, 'problem', exc)}", location=f"{path}{line}") from None
    try:  # JSON is YAML: one line index serves both
        node = yaml.compose(text)
        if node is not None:
            _line_index(node, (), lines)
    except yaml.YAMLError:
        pass
    return data, lines


def parse_document(text: str, path: Path) -> Any:
    """A YAML or JSON document (by the file's suffix), parsed as defensively as manifests are."""
    return _parse(text, path)[0]


def _validate(model: type[M], data: Any, path: Path, lines: dict[tuple[Any, ...], int]) -> M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ManifestError("the top level must be a mapping", location=f"{path}:1")
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
