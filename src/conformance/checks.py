"""Expectations: predicates at JSON Pointers of a reply, and checks on files.

Checks say what the spec fixes (a type, a layer, a code, a field's value or
shape) and nothing it leaves free, so wording and ordering the spec does
not pin never fail a case. Each failed check yields one short message.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Mapping

MISSING = object()
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def resolve(doc: Any, pointer: str) -> Any:
    """RFC 6901 JSON Pointer; MISSING when a step does not exist."""
    if pointer == "":
        return doc
    if not pointer.startswith("/"):
        raise ValueError(f"JSON Pointer must start with '/': {pointer!r}")
    cur = doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict):
            if token not in cur:
                return MISSING
            cur = cur[token]
        elif isinstance(cur, list):
            if not token.isdigit() or int(token) >= len(cur):
                return MISSING
            cur = cur[int(token)]
        else:
            return MISSING
    return cur


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def _canon(value: Any) -> Any:
    """JSON equality: booleans never equal numbers, 1 equals 1.0, objects ignore key order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("num", float(value))
    if isinstance(value, list):
        return ("list", tuple(_canon(v) for v in value))
    if isinstance(value, dict):
        return ("obj", tuple(sorted((k, _canon(v)) for k, v in value.items())))
    return ("val", value)


_INSIGNIFICANT_ESCAPE = re.compile(r"\\([^*?\[\]\\{}])")


def _pattern_text(value: Any) -> str:
    """Pattern text without escapes of ordinary characters (a backslash-dash equals a dash)."""
    return _INSIGNIFICANT_ESCAPE.sub(r"\1", value) if isinstance(value, str) else json.dumps(value)


def _json_equal(a: Any, b: Any) -> bool:
    return _canon(a) == _canon(b)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if value is not MISSING else "<missing>"
    return text if len(text) <= 120 else text[:117] + "..."


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def predicate_failures(value: Any, preds: Mapping[str, Any]) -> list[str]:
    """Messages for every predicate `value` does not satisfy (empty when all hold)."""
    out: list[str] = []
    for name, want in preds.items():
        if name == "pointer":
            continue
        if name == "exists":
            if (value is not MISSING) != bool(want):
                out.append("is missing" if want else f"should be absent, is {_short(value)}")
            continue
        if value is MISSING:
            out.append(f"is missing (wanted {name} {_short(want)})")
            continue
        ok = True
        if name == "equals":
            ok = _json_equal(value, want)
        elif name == "not_equals":
            ok = not _json_equal(value, want)
        elif name == "one_of":
            ok = any(_json_equal(value, w) for w in want)
        elif name == "contains":
            if isinstance(value, str):
                ok = isinstance(want, str) and want in value
            elif isinstance(value, list):
                ok = want in value
            elif isinstance(value, dict):
                ok = want in value
            else:
                ok = False
        elif name == "not_contains":
            if isinstance(value, list) and not isinstance(want, str):
                ok = want not in value
            else:
                ok = str(want) not in _text_of(value)
        elif name == "matches":
            ok = isinstance(value, str) and re.search(want, value) is not None
        elif name == "startswith":
            ok = isinstance(value, str) and value.startswith(want)
        elif name == "endswith":
            ok = isinstance(value, str) and value.endswith(want)
        elif name == "type":
            names = want if isinstance(want, list) else [want]
            ok = any(_is_type(value, n) for n in names)
        elif name == "min":
            ok = _is_type(value, "number") and value >= want
        elif name == "max":
            ok = _is_type(value, "number") and value <= want
        elif name in ("length", "min_length", "max_length"):
            if not isinstance(value, (str, list, dict)):
                ok = False
            else:
                n = len(value)
                ok = n == want if name == "length" else (n >= want if name == "min_length" else n <= want)
        elif name in ("every", "some", "none"):
            if not isinstance(value, list):
                ok = False
            else:
                # A nested `pointer` is resolved inside each item.
                inner = {k: v for k, v in want.items() if k != "pointer"}
                at = want.get("pointer", "")
                results = [not predicate_failures(resolve(item, at), inner) for item in value]
                ok = all(results) if name == "every" else (any(results) if name == "some" else not any(results))
        elif name == "set_equals":
            ok = isinstance(value, list) and sorted(map(_text_of, value)) == sorted(map(_text_of, want)) and len(value) == len(want)
        elif name == "pattern_set":
            ok = isinstance(value, list) and sorted(map(_pattern_text, value)) == sorted(map(_pattern_text, want))
        elif name == "keys":
            ok = isinstance(value, dict) and sorted(value) == sorted(want)
        elif name == "sorted":
            if not isinstance(value, list):
                ok = False
            else:
                keys = [_text_of(v).encode("utf-8") for v in value]
                ok = (keys == sorted(keys)) == bool(want)
        elif name == "path_exists":
            ok = isinstance(value, str) and os.path.lexists(value) == bool(want)
        elif name == "file_content":
            try:
                ok = isinstance(value, str) and Path(value).read_bytes() == want.encode("utf-8")
            except OSError:
                ok = False
        else:
            raise ValueError(f"unknown predicate {name!r}")
        if not ok:
            out.append(f"{name} {_short(want)} failed (value {_short(value)})")
    return out


def check_expectations(payload: Any, expect: Mapping[str, Any]) -> list[str]:
    """Envelope/ask/result shorthands plus pointer checks; returns failure messages."""
    fails: list[str] = []
    shorthands = {"type": "/type", "code": "/metadata/error_code", "kind": "/metadata/kind"}
    for key, pointer in shorthands.items():
        if key in expect:
            for msg in predicate_failures(resolve(payload, pointer), {"equals": expect[key]}):
                fails.append(f"{pointer}: {msg}")
    if "layer" in expect:
        got = resolve(payload, "/metadata/refusal/layer")
        if expect["layer"] is None:
            if got is not MISSING:
                fails.append(f"/metadata/refusal should be absent (a tool error), layer is {_short(got)}")
        else:
            for msg in predicate_failures(got, {"equals": expect["layer"]}):
                fails.append(f"/metadata/refusal/layer: {msg}")
    for check in expect.get("checks", []):
        value = resolve(payload, check["pointer"])
        for msg in predicate_failures(value, check):
            fails.append(f"{check['pointer'] or '(whole)'}: {msg}")
    return fails


def check_file(path: Path, spec: Mapping[str, Any], snapshot: Mapping[str, bytes | None]) -> list[str]:
    """Checks on one filesystem path (never following a final symlink unless reading content)."""
    fails: list[str] = []
    exists = os.path.lexists(path)
    label = spec["path"]
    if "exists" in spec and exists != spec["exists"]:
        fails.append(f"{label}: should {'exist' if spec['exists'] else 'not exist'}")
        return fails
    if not exists and any(k in spec for k in ("content", "contains", "is_symlink", "is_dir", "size", "max_size", "mode")):
        return [f"{label}: does not exist"]
    if "is_symlink" in spec and os.path.islink(path) != spec["is_symlink"]:
        fails.append(f"{label}: is_symlink should be {spec['is_symlink']}")
    if "is_dir" in spec and (os.path.isdir(path) and not os.path.islink(path)) != spec["is_dir"]:
        fails.append(f"{label}: is_dir should be {spec['is_dir']}")
    if "content" in spec or "contains" in spec or "size" in spec or "max_size" in spec:
        try:
            data = path.read_bytes()
        except OSError as exc:
            return fails + [f"{label}: cannot be read ({exc.strerror})"]
        if "content" in spec and data != spec["content"].encode("utf-8"):
            fails.append(f"{label}: content differs ({len(data)} bytes, expected {len(spec['content'].encode('utf-8'))})")
        if "contains" in spec and spec["contains"].encode("utf-8") not in data:
            fails.append(f"{label}: does not contain the expected text")
        if "size" in spec and len(data) != int(spec["size"]):
            fails.append(f"{label}: size {len(data)}, expected {spec['size']}")
        if "max_size" in spec and len(data) > int(spec["max_size"]):
            fails.append(f"{label}: size {len(data)}, expected at most {spec['max_size']}")
    if "mode" in spec:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if mode != int(spec["mode"], 8):
            fails.append(f"{label}: mode {mode:04o}, expected {spec['mode']}")
    if spec.get("unchanged"):
        before = snapshot.get(os.fspath(path))
        try:
            now = path.read_bytes() if exists else None
        except OSError:
            now = None
        if before != now:
            fails.append(f"{label}: changed since setup")
    return fails
