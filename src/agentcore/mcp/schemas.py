"""Checking an MCP tool's input schema as a schema before it is used (MCP-3).

A server is untrusted, and so is the schema it sends: it is read as JSON
Schema (by its `$schema` dialect, Draft 2020-12 when it names none; only the
dialects `jsonschema` knows are accepted), bounded in size and depth, and its
references must stay inside the document and must not form a cycle. A tool
whose schema fails any check is unavailable, with the reason.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError

MAX_SCHEMA_BYTES = 64 * 1024  # compact JSON
MAX_SCHEMA_DEPTH = 32  # nested objects and arrays
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


class SchemaProblem(ValueError):
    """Why a tool's input schema cannot be used."""


def check_input_schema(schema: Any) -> Any:
    """A validator for `schema` (with format checking), or `SchemaProblem` saying what is wrong."""
    if not isinstance(schema, dict):
        raise SchemaProblem("the input schema is not a JSON object")
    try:
        size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        raise SchemaProblem("the input schema is not plain JSON") from None
    if size > MAX_SCHEMA_BYTES:
        raise SchemaProblem(f"the input schema has {size} bytes; at most {MAX_SCHEMA_BYTES} are accepted")
    _check_depth(schema)
    if schema.get("type") != "object":
        raise SchemaProblem("the input schema's top level is not {\"type\": \"object\"}")
    dialect = schema.get("$schema")
    cls = validators.validator_for(schema, default=None) if dialect is not None else Draft202012Validator
    if cls is None:
        raise SchemaProblem("the input schema names a JSON Schema dialect that is not supported")
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise SchemaProblem(f"the input schema is not a valid schema ({exc.validator} at {_pointer(exc.absolute_path)})") from None
    _check_refs(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path) if path else "the top level"


def _check_depth(schema: Any) -> None:
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaProblem(f"the input schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _refs_in(node: Any, out: list[str]) -> None:
    """Every reference in `node`, without following any."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _REF_KEYS and isinstance(value, str):
                out.append(value)
            else:
                _refs_in(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs_in(value, out)


def _resolve(schema: Any, ref: str) -> Any:
    """The subschema a local JSON-pointer reference names; `SchemaProblem` for any other reference."""
    if ref != "#" and not ref.startswith("#/"):
        raise SchemaProblem("the input schema has a reference outside the document (only '#' and '#/…' are accepted)")
    node = schema
    for raw in ref[2:].split("/") if ref != "#" else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaProblem("the input schema has a reference to nothing")
    return node


def _check_refs(schema: Any) -> None:
    """Every reference resolves inside the document, and following them never comes back (no cycle)."""
    done: set[str] = set()

    def visit(ref: str, path: tuple[str, ...]) -> None:
        if ref in path:
            raise SchemaProblem("the input schema's references form a cycle")
        if ref in done:
            return
        found: list[str] = []
        _refs_in(_resolve(schema, ref), found)
        for nxt in found:
            visit(nxt, (*path, ref))
        done.add(ref)

    top: list[str] = []
    _refs_in(schema, top)
    for ref in top:
        visit(ref, ("#",))
