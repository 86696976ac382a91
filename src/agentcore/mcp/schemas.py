"""Checking an MCP tool's input schema as a schema before it is used (MCP-3).

A server is untrusted, and so is the schema it sends: it is read as JSON
Schema (by its `$schema` dialect, Draft 2020-12 when it names none; only the
dialects `jsonschema` knows are accepted), bounded in size and depth, and its
references must stay inside the document and must not form a cycle. A tool
whose schema fails any check is unavailable, with the reason.

The arguments are then validated without the schema's regular expressions
(`pattern`, `patternProperties`, and the property checks that would consult
them): Python's `re` cannot be interrupted, and a server's regex could make
validating the model's arguments run forever. The server applies its own
regexes; nothing of the capability check depends on these arguments.
`uniqueItems` is checked in linear time (jsonschema compares arrays of
objects pairwise: minutes for a few hundred KB of arguments), with the same
meaning: `true` differs from `1`, `1` equals `1.0`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError

MAX_SCHEMA_BYTES = 64 * 1024  # compact JSON
MAX_SCHEMA_DEPTH = 32  # nested objects and arrays
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


class SchemaProblem(ValueError):
    """Why a tool's input schema cannot be used."""


def check_input_schema(schema: Any, secrets: Sequence[str] = ()) -> Any:
    """A validator for `schema` (with format checking), or `SchemaProblem` saying what is wrong.

    A schema holding any of `secrets` (the server's configured values) anywhere, in a key or a string, is
    refused (MCP-1): scrubbing it could change what an `enum`, a `const` or a `default` means, and left
    as it is, the model would read the value.
    """
    if not isinstance(schema, dict):
        raise SchemaProblem("the input schema is not a JSON object")
    try:
        size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        raise SchemaProblem("the input schema is not plain JSON") from None
    if size > MAX_SCHEMA_BYTES:
        raise SchemaProblem(f"the input schema has {size} bytes; at most {MAX_SCHEMA_BYTES} are accepted")
    _check_depth(schema)
    if secrets and _holds(schema, secrets):
        raise SchemaProblem("the input schema holds a value the server's configuration keeps secret")
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
    safe = _without_regexes(cls, _mentions(schema, "patternProperties"))
    return safe(schema, format_checker=cls.FORMAT_CHECKER)


def _holds(schema: Any, secrets: Sequence[str]) -> bool:
    """Whether any key or string anywhere in `schema` contains one of `secrets` (depth already bounded)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if any(s in node for s in secrets):
                return True
        elif isinstance(node, dict):
            stack += [*node.keys(), *node.values()]
        elif isinstance(node, list):
            stack += node
    return False


def _mentions(node: Any, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(_mentions(v, key) for v in node.values())
    if isinstance(node, list):
        return any(_mentions(v, key) for v in node)
    return False


def _without_regexes(cls: Any, has_pattern_properties: bool) -> Any:
    """`cls` with the keywords that run a schema's regexes made inert, and `uniqueItems` linear (see the module docstring)."""
    keywords = cls.VALIDATORS
    additional = keywords.get("additionalProperties")
    unevaluated = keywords.get("unevaluatedProperties")

    def inert(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        return iter(())

    def additional_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if "patternProperties" in schema or additional is None:
            return iter(())  # which properties are "additional" depends on the regexes
        return additional(validator, value, instance, schema) or iter(())

    def unevaluated_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if has_pattern_properties or unevaluated is None:
            return iter(())
        return unevaluated(validator, value, instance, schema) or iter(())

    changes: dict[str, Any] = {"pattern": inert, "patternProperties": inert, "additionalProperties": additional_properties,
                               "uniqueItems": _unique_items}
    if unevaluated is not None:
        changes["unevaluatedProperties"] = unevaluated_properties
    return validators.extend(cls, changes)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`uniqueItems` by hashing each item's `_equality_key` once (jsonschema's own check is quadratic)."""
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array"):
        keys = {_equality_key(item) for item in instance}
        if len(keys) != len(instance):
            yield ValidationError("has non-unique elements")  # never the items: they are the model's text


def _equality_key(value: Any) -> Any:
    """A hashable key equal for two JSON values exactly when JSON Schema calls them equal (depth bounded by the pipeline).

    Booleans are tagged apart from numbers (`True == 1` in Python); numbers keep Python's equality (`1 == 1.0`,
    equal hashes too); object member order does not count.
    """
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, dict):
        return ("o", frozenset((k, _equality_key(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("a", tuple(_equality_key(v) for v in value))
    return ("z", None) if value is None else ("?", id(value))


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
