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
from typing import Any, Callable, Iterable, Mapping

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


def _contains(value: Any, want: Any) -> bool:
    if isinstance(value, str):
        return isinstance(want, str) and want in value
    if isinstance(value, (list, dict)):
        return want in value
    return False


def json_strings(value: Any, *, keys: bool = True) -> Iterable[str]:
    """Every string of a JSON value, unescaped (unlike its JSON text); object keys too unless `keys` is false."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from json_strings(item, keys=keys)
    elif isinstance(value, dict):
        for k, v in value.items():
            if keys:
                yield k
            yield from json_strings(v, keys=keys)


def _not_contains(value: Any, want: Any) -> bool:
    if isinstance(value, list) and not isinstance(want, str):
        return want not in value
    needle = str(want)
    # The JSON text escapes quotes, backslashes and control characters: look in every string as well.
    return needle not in _text_of(value) and not any(needle in s for s in json_strings(value))


def _length(value: Any, want: Any, cmp: Callable[[int, int], bool]) -> bool:
    return isinstance(value, (str, list, dict)) and cmp(len(value), want)


def _quantified(value: Any, want: Mapping[str, Any], how: Callable[[Iterable[bool]], bool]) -> bool:
    if not isinstance(value, list):
        return False
    # A nested `pointer` is resolved inside each item.
    inner = {k: v for k, v in want.items() if k != "pointer"}
    at = want.get("pointer", "")
    return how(not predicate_failures(resolve(item, at), inner) for item in value)


def _sorted(value: Any, want: Any) -> bool:
    if not isinstance(value, list):
        return False
    keys = [_text_of(v).encode("utf-8") for v in value]
    return (keys == sorted(keys)) == bool(want)


# The most of one file the runner reads: paths come from the harness (a sidecar's `output_path`).
MAX_FILE_BYTES = 64 * 1024 * 1024


def read_regular(path: Any, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """At most `limit` + 1 bytes of a regular file (following symlinks); None for anything else.

    A harness names these paths: a FIFO, a device or a huge file must neither block nor exhaust the runner.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _file_content(value: Any, want: Any) -> bool:
    if not isinstance(value, str):
        return False
    expected = want.encode("utf-8")
    return read_regular(value, len(expected)) == expected


def _type(value: Any, want: Any) -> bool:
    names = want if isinstance(want, list) else [want]
    return any(_is_type(value, n) for n in names)


# Each predicate: (value, wanted) -> holds. `exists` is handled before these (it accepts MISSING).
PREDICATE_FUNCS: dict[str, Callable[[Any, Any], bool]] = {
    "equals": _json_equal,
    "not_equals": lambda v, w: not _json_equal(v, w),
    "one_of": lambda v, w: any(_json_equal(v, x) for x in w),
    "contains": _contains,
    "not_contains": _not_contains,
    "matches": lambda v, w: isinstance(v, str) and re.search(w, v) is not None,
    "startswith": lambda v, w: isinstance(v, str) and v.startswith(w),
    "endswith": lambda v, w: isinstance(v, str) and v.endswith(w),
    "type": _type,
    "min": lambda v, w: _is_type(v, "number") and v >= w,
    "max": lambda v, w: _is_type(v, "number") and v <= w,
    "length": lambda v, w: _length(v, w, lambda a, b: a == b),
    "min_length": lambda v, w: _length(v, w, lambda a, b: a >= b),
    "max_length": lambda v, w: _length(v, w, lambda a, b: a <= b),
    "every": lambda v, w: _quantified(v, w, all),
    "some": lambda v, w: _quantified(v, w, any),
    "none": lambda v, w: _quantified(v, w, lambda it: not any(it)),
    "set_equals": lambda v, w: isinstance(v, list) and len(v) == len(w) and sorted(map(_text_of, v)) == sorted(map(_text_of, w)),
    "pattern_set": lambda v, w: isinstance(v, list) and sorted(map(_pattern_text, v)) == sorted(map(_pattern_text, w)),
    "keys": lambda v, w: isinstance(v, dict) and sorted(v) == sorted(w),
    "sorted": _sorted,
    "path_exists": lambda v, w: isinstance(v, str) and os.path.lexists(v) == bool(w),
    "file_content": _file_content,
}
# Keys of a check that are not predicates.
CHECK_META = ("pointer", "profile", "choice", "note")


def predicate_failures(value: Any, preds: Mapping[str, Any]) -> list[str]:
    """Messages for every predicate `value` does not satisfy (empty when all hold)."""
    out: list[str] = []
    for name, want in preds.items():
        if name in CHECK_META:
            continue
        if name == "exists":
            if (value is not MISSING) != bool(want):
                out.append("is missing" if want else f"should be absent, is {_short(value)}")
            continue
        if value is MISSING:
            out.append(f"is missing (wanted {name} {_short(want)})")
            continue
        fn = PREDICATE_FUNCS.get(name)
        if fn is None:
            raise ValueError(f"unknown predicate {name!r}")
        if not fn(value, want):
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
    exists = os.path.lexists(path)
    label = spec["path"]
    if "exists" in spec and exists != spec["exists"]:
        return [f"{label}: should {'exist' if spec['exists'] else 'not exist'}"]
    if not exists and any(k in spec for k in ("content", "contains", "is_symlink", "is_dir", "size", "max_size", "mode")):
        return [f"{label}: does not exist"]
    fails: list[str] = []
    if "is_symlink" in spec and os.path.islink(path) != spec["is_symlink"]:
        fails.append(f"{label}: is_symlink should be {spec['is_symlink']}")
    if "is_dir" in spec and (os.path.isdir(path) and not os.path.islink(path)) != spec["is_dir"]:
        fails.append(f"{label}: is_dir should be {spec['is_dir']}")
    if any(k in spec for k in ("content", "contains", "size", "max_size")):
        content = _content_fails(path, spec, label)
        if content is None:
            return fails + [f"{label}: cannot be read"]
        fails += content
    if "mode" in spec:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if mode != int(spec["mode"], 8):
            fails.append(f"{label}: mode {mode:04o}, expected {spec['mode']}")
    if spec.get("unchanged") and snapshot.get(os.fspath(path)) != _bytes_or_none(path, exists):
        fails.append(f"{label}: changed since setup")
    return fails


def _content_fails(path: Path, spec: Mapping[str, Any], label: str) -> list[str] | None:
    """What differs in the file's bytes from `content`, `contains`, `size` and `max_size`; None: unreadable."""
    data = read_regular(path)
    if data is None:
        return None
    if len(data) > MAX_FILE_BYTES:
        return [f"{label}: larger than the {MAX_FILE_BYTES} bytes the runner inspects"]
    fails = []
    if "content" in spec and data != spec["content"].encode("utf-8"):
        fails.append(f"{label}: content differs ({len(data)} bytes, expected {len(spec['content'].encode('utf-8'))})")
    if "contains" in spec and spec["contains"].encode("utf-8") not in data:
        fails.append(f"{label}: does not contain the expected text")
    if "size" in spec and len(data) != int(spec["size"]):
        fails.append(f"{label}: size {len(data)}, expected {spec['size']}")
    if "max_size" in spec and len(data) > int(spec["max_size"]):
        fails.append(f"{label}: size {len(data)}, expected at most {spec['max_size']}")
    return fails


def _bytes_or_none(path: Path, exists: bool) -> bytes | None:
    return read_regular(path) if exists else None
