"""A quick proof that arguments satisfy a tool's schema, so a valid call never needs jsonschema.

Importing jsonschema costs a fresh process about 35 ms (issue 14: `agentcore call`
pays it on every start), and the schemas of the locked tools use a dozen plain
keywords. `proven_valid` answers True only when JSON Schema Draft 2020-12 (formats
asserted) would accept the value too, for schemas made of the keywords in `KNOWN`
with well-formed values; for anything else — another keyword, a malformed keyword
value, a float where an integer is asked, an `enum` member that is not a string —
it answers False, meaning "not proven", and the caller asks jsonschema, which
stays the authority on every refusal and writes its message. Never rejecting is
what makes a hand-written check safe in front of the library: a gap costs speed,
not correctness. Tests compare it with jsonschema over generated schemas and
values, and on every in-process call of the test suite.

A schema is compiled once into a checker (about 1 µs a call for `read`'s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"})
KNOWN = _ANNOTATIONS | frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems",
})
_TYPES: dict[str, Check] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    # Exact ints only: jsonschema also counts 2.0 as an integer, which is left to it.
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or (type(v) is float and math.isfinite(v)),
}
_compiled: dict[int, tuple[object, Check | None]] = {}  # id(schema) -> (the schema, kept alive; its checker)


def proven_valid(schema: Any, value: Any) -> bool:
    """True only if `value` is certainly valid against `schema`; False means "ask jsonschema"."""
    hit = _compiled.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = (schema, compile_check(schema))
        if len(_compiled) > 1024:  # schemas come from tools: a handful per process
            _compiled.clear()
        _compiled[id(schema)] = hit
    check = hit[1]
    return check is not None and check(value)


def compile_check(schema: Any) -> Check | None:
    """A function that proves values valid against `schema`, or None when the schema uses anything
    this module does not know (every value is then left to jsonschema)."""
    if schema is True:
        return _ALWAYS
    if type(schema) is not dict or not KNOWN.issuperset(schema):
        return None
    checks: list[Check] = []
    for build in (_type, _choice, _numbers, _strings, _arrays, _objects):
        got = build(schema)
        if got is None:
            return None
        if got is not _ALWAYS:
            checks.append(got)
    if not checks:
        return _ALWAYS
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


def _always(v: Any) -> bool:
    return True


_ALWAYS: Check = _always


def _type(schema: dict[str, Any]) -> Check | None:
    t = schema.get("type")
    if t is None:
        return _ALWAYS
    names = [t] if type(t) is str else t if type(t) is list else None
    if not names or not all(type(n) is str and n in _TYPES for n in names):
        return None
    tests = [_TYPES[n] for n in dict.fromkeys(names)]
    return tests[0] if len(tests) == 1 else lambda v: any(f(v) for f in tests)


def _choice(schema: dict[str, Any]) -> Check | None:
    """`enum` and `const`, proven for strings only (JSON equality tells 1 from true, Python's does not)."""
    allowed: set[str] | None = None
    if "enum" in schema:
        if type(schema["enum"]) is not list:
            return None
        allowed = {o for o in schema["enum"] if type(o) is str}
    if "const" in schema:
        const = {schema["const"]} if type(schema["const"]) is str else set()
        allowed = const if allowed is None else allowed & const
    if allowed is None:
        return _ALWAYS
    return lambda v: type(v) is str and v in allowed


def _numbers(schema: dict[str, Any]) -> Check | None:
    bounds = []
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        b = schema.get(key)
        if b is not None and not (type(b) in (int, float) and math.isfinite(b)):
            return None
        bounds.append(b)
    lo, hi, xlo, xhi = bounds
    if lo is None and hi is None and xlo is None and xhi is None:
        return _ALWAYS

    def check(v: Any) -> bool:
        if type(v) is not int and type(v) is not float:
            return True  # the keywords do not apply to other values (booleans included)
        return (math.isfinite(v) and (lo is None or v >= lo) and (hi is None or v <= hi)
                and (xlo is None or v > xlo) and (xhi is None or v < xhi))

    return check


def _counts(schema: dict[str, Any], low: str, high: str) -> tuple[int | None, int | None] | None:
    a, b = schema.get(low), schema.get(high)
    if (a is not None and type(a) is not int) or (b is not None and type(b) is not int):
        return None
    return a, b


def _strings(schema: dict[str, Any]) -> Check | None:
    got = _counts(schema, "minLength", "maxLength")
    if got is None:
        return None
    a, b = got
    if a is None and b is None:
        return _ALWAYS
    # Code points, as jsonschema counts them.
    return lambda v: type(v) is not str or ((a is None or len(v) >= a) and (b is None or len(v) <= b))


def _arrays(schema: dict[str, Any]) -> Check | None:
    got = _counts(schema, "minItems", "maxItems")
    if got is None:
        return None
    a, b = got
    each = compile_check(schema["items"]) if "items" in schema else _ALWAYS
    if each is None:
        return None
    if a is None and b is None and each is _ALWAYS:
        return _ALWAYS
    return lambda v: type(v) is not list or (
        (a is None or len(v) >= a) and (b is None or len(v) <= b) and all(each(x) for x in v))


def _objects(schema: dict[str, Any]) -> Check | None:
    props, required, extra = schema.get("properties", {}), schema.get("required", []), schema.get("additionalProperties", True)
    if type(props) is not dict or type(required) is not list or not all(type(r) is str for r in required):
        return None
    subs: dict[str, Check] = {}
    for key, sub in props.items():
        compiled = compile_check(sub)
        if compiled is None:
            return None
        subs[key] = compiled
    other = None if extra is False else compile_check(extra)
    if other is None and extra is not False:
        return None
    if not subs and not required and other is _ALWAYS:
        return _ALWAYS

    def check(v: Any) -> bool:
        if type(v) is not dict:
            return True
        for r in required:
            if r not in v:
                return False
        for key, item in v.items():
            sub = subs.get(key, other) if type(key) is str else None
            if sub is None or not sub(item):
                return False
        return True

    return check
