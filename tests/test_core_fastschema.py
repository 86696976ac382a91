"""`fastschema.proven_valid` never says "valid" where jsonschema (Draft 2020-12, formats asserted) says
"invalid", and it does prove the ordinary calls of the locked tools, so a valid call needs no jsonschema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentcore.api import default_catalog
from agentcore.pipeline.fastschema import KNOWN, proven_valid


def _jsonschema_valid(schema: Any, value: Any) -> bool:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER).is_valid(value)


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.0, 1.0, 2.5, -1.5, 1e308, float("nan"), float("inf")]),
    st.sampled_from(["", "a", "ab", "abc", "é", "😀😀", "0", "1", "true"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "c", "path"]), inner, max_size=4)),
    max_leaves=12,
)
_type_names = st.sampled_from(["object", "array", "string", "boolean", "null", "integer", "number", "uuid"])
_numbers = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -0.5, 2.0]), st.just(True), st.just("1"))


def _schemas() -> st.SearchStrategy[Any]:
    """Schemas of the keywords `fastschema` knows, some with a keyword it does not (which it must not prove)."""
    def known(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({}, optional={
            "type": st.one_of(_type_names, st.lists(_type_names, min_size=1, max_size=3)),
            "properties": st.dictionaries(st.sampled_from(["a", "b", "path"]), inner, max_size=3),
            "required": st.lists(st.sampled_from(["a", "b", "path"]), max_size=2),
            "additionalProperties": st.one_of(st.booleans(), inner),
            "items": inner,
            "enum": st.lists(_scalars, min_size=1, max_size=3),
            "const": _scalars,
            "minimum": _numbers, "maximum": _numbers, "exclusiveMinimum": _numbers, "exclusiveMaximum": _numbers,
            "minLength": st.integers(0, 3), "maxLength": st.integers(0, 3), "minItems": st.integers(0, 3), "maxItems": st.integers(0, 3),
            "description": st.just("d"), "default": _scalars,
        })

    unknown = st.sampled_from([("format", "email"), ("format", "date"), ("pattern", "^a"), ("uniqueItems", True),
                               ("prefixItems", [{"type": "string"}]), ("$ref", "#/properties/a"), ("not", {}), ("minProperties", 1)])

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(known(inner), st.tuples(known(inner), unknown).map(lambda p: {**p[0], p[1][0]: p[1][1]}))

    return st.recursive(st.one_of(st.booleans(), st.just({})), extend, max_leaves=6)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schemas(), value=_values)
def test_never_proves_what_jsonschema_rejects(schema: Any, value: Any) -> None:
    if proven_valid(schema, value):
        assert _jsonschema_valid(schema, value), (schema, value)


def _fitting(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values shaped after `schema` (near its bounds, its enum, its properties), valid or just not."""
    if not isinstance(schema, dict) or depth > 3:
        return _values
    t = schema.get("type")
    names = [t] if isinstance(t, str) else t if isinstance(t, list) else ["object", "array", "string", "integer"]
    strategies = []
    for name in names:
        if name == "object":
            props, required = schema.get("properties") or {}, set(schema.get("required") or [])
            strategies.append(st.fixed_dictionaries(
                {k: _fitting(props.get(k), depth + 1) for k in required},
                optional={**{k: _fitting(v, depth + 1) for k, v in props.items() if k not in required}, "zz": _values}))
        elif name == "array":
            strategies.append(st.lists(_fitting(schema.get("items"), depth + 1), max_size=4))
        elif name == "string":
            strategies.append(st.one_of(st.text(max_size=4), st.sampled_from([e for e in schema.get("enum", []) if isinstance(e, str)] or [""])))
        elif name in ("integer", "number"):
            strategies.append(st.one_of(st.integers(-4, 4), st.sampled_from([0.5, 2.0, -1.0])))
        else:
            strategies.append(_values)
    return st.one_of(*strategies)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=_schemas().flatmap(lambda s: st.tuples(st.just(s), _fitting(s))))
def test_never_proves_what_jsonschema_rejects_for_values_shaped_after_the_schema(pair: tuple[Any, Any]) -> None:
    schema, value = pair
    if proven_valid(schema, value):
        assert _jsonschema_valid(schema, value), (schema, value)


@settings(max_examples=1500, deadline=None)
@given(value=_values, tool=st.sampled_from(sorted(default_catalog().ids())))
def test_on_the_locked_tools_schemas_too(value: Any, tool: str) -> None:
    schema = default_catalog().get(tool).parameters
    for candidate in (value, {"path": value}, {"command": value}, {"pattern": value}, {"path": "a.txt", "offset": value}):
        if proven_valid(schema, candidate):
            assert _jsonschema_valid(schema, candidate), (tool, candidate)


def test_the_keywords_it_knows_are_all_the_locked_tools_use() -> None:
    """Otherwise a locked tool's every call would fall back to jsonschema (correct, and slow to start)."""
    used: set[str] = set()

    def walk(s: Any) -> None:
        if isinstance(s, dict):
            used.update(s)
            for k in ("properties",):
                for sub in s.get(k, {}).values():
                    walk(sub)
            for k in ("items", "additionalProperties"):
                walk(s.get(k))

    for tool in default_catalog().ids():
        walk(default_catalog().get(tool).parameters)
    assert used <= KNOWN, used - KNOWN


def test_ordinary_calls_are_proven_and_odd_ones_are_left_to_jsonschema() -> None:
    read = default_catalog().get("read").parameters
    assert proven_valid(read, {"path": "a.txt"}) and proven_valid(read, {"path": "a.txt", "offset": 3, "limit": 10})
    for odd in ({}, {"path": ""}, {"path": "a", "offset": 0}, {"path": "a", "offset": 2.0}, {"path": "a", "offset": True},
                {"path": "a", "extra": 1}, {"path": 1}):
        assert not proven_valid(read, odd), odd
    assert not proven_valid({"type": "string", "format": "email"}, "a@b.c")  # formats are jsonschema's
    assert not proven_valid({"enum": [1]}, True) and not proven_valid({"enum": [1]}, 1)  # JSON equality is jsonschema's
    assert proven_valid({"enum": ["a", 1]}, "a") and proven_valid(True, {"anything": []})


def test_a_valid_call_imports_no_jsonschema(tmp_path: Path) -> None:
    """Measured as it matters: a fresh process making one valid `read` call never loads jsonschema; an
    invalid one does, and gets jsonschema's message."""
    (tmp_path / "a.txt").write_text("hi\n")
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"name": "m", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}},
                                    "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]}))
    script = """
import json, sys, anyio
from pathlib import Path
from agentcore.api import Engine, load_manifest
engine = Engine(load_manifest(Path(sys.argv[1]), workspace=Path(sys.argv[2])))
async def main():
    with engine.open_session(headless=True) as s:
        env = await engine.call(s, "read", json.loads(sys.argv[3]))
    print(json.dumps({"type": env.type, "text": env.error_text, "jsonschema": "jsonschema" in sys.modules}))
anyio.run(main)
"""
    def call(args: dict[str, Any]) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-c", script, str(manifest), str(tmp_path), json.dumps(args)],
                              capture_output=True, text=True, timeout=60, check=True)
        return json.loads(done.stdout)

    assert call({"path": "a.txt"}) == {"type": "output", "text": None, "jsonschema": False}
    bad = call({"path": "a.txt", "offset": 0})
    assert bad["type"] == "error" and bad["jsonschema"] is True and "/offset: must satisfy minimum = 1" in bad["text"], bad
