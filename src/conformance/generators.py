"""Seeded value generators and `${name}` templating for case files.

Every case draws its file names, contents, sizes and limits from a
`random.Random` seeded with (run seed, case id, variant), so a run is
reproducible from its printed seed, two cases never share a stream, and an
implementation cannot hard-code answers. `{workspace}`-style manifest
variables use single braces and pass through untouched; only `${...}` is
ours.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from typing import Any, Mapping

_TEMPLATE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_.]*)\}|\$\{[^}]*\}?")
_WHOLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)\}")


class TemplateError(ValueError):
    """A case uses `${name}` for a value that does not exist (a suite bug)."""


def rng_for(seed: int, case_id: str, variant: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{case_id}\x00{variant}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _lookup(name: str, values: Mapping[str, Any]) -> Any:
    head, _, rest = name.partition(".")
    if head not in values:
        raise TemplateError(f"unknown template value ${{{name}}}")
    value = values[head]
    for part in rest.split(".") if rest else ():
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise TemplateError(f"unknown template value ${{{name}}}")
    return value


def render(obj: Any, values: Mapping[str, Any]) -> Any:
    """Substitute `${name}` (and `${name.key}`) everywhere; `$$` is a literal `$`.

    A string that is exactly one `${name}` takes the value's own type, so
    generated integers stay integers.
    """
    if isinstance(obj, str):
        whole = _WHOLE.fullmatch(obj)
        if whole:
            return _lookup(whole.group(1), values)

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            if m.group(1) is None:
                raise TemplateError(f"malformed template {m.group(0)!r} (only ${{name}} or ${{name.key}})")
            value = _lookup(m.group(1), values)
            return value if isinstance(value, str) else str(value)

        return _TEMPLATE.sub(sub, obj)
    if isinstance(obj, list):
        return [render(x, values) for x in obj]
    if isinstance(obj, dict):
        return {render(k, values) if isinstance(k, str) else k: render(v, values) for k, v in obj.items()}
    return obj


# -- generators -----------------------------------------------------------------------------

_LOWER = string.ascii_lowercase
_ALNUM = string.ascii_lowercase + string.digits
_WORDS = string.ascii_letters + string.digits


def gen_name(rng: random.Random, spec: Mapping[str, Any]) -> str:
    """A file-name-safe identifier: starts with a letter, lowercase letters and digits."""
    n = rng.randint(int(spec.get("min", 5)), int(spec.get("max", 10)))
    body = rng.choice(_LOWER) + "".join(rng.choice(_ALNUM) for _ in range(n - 1))
    return f"{spec.get('prefix', '')}{body}{spec.get('ext', '')}"


def gen_text(rng: random.Random, spec: Mapping[str, Any]) -> str:
    """ASCII words, spaces and newlines; exactly `size` bytes, or between min and max; ends in a newline."""
    size = int(spec["size"]) if "size" in spec else rng.randint(int(spec.get("min", 16)), int(spec.get("max", 256)))
    if size <= 0:
        return ""
    width = int(spec.get("line", 60))
    out: list[str] = []
    col = 0
    total = 0
    while total < size - 1:
        if col >= width or (col > 0 and rng.random() < 0.12):
            ch = "\n" if col >= width or rng.random() < 0.3 else " "
            col = 0 if ch == "\n" else col + 1
        else:
            ch = rng.choice(_WORDS)
            col += 1
        out.append(ch)
        total += 1
    out.append("\n")
    return "".join(out)


def gen_lines(rng: random.Random, spec: Mapping[str, Any]) -> str:
    """`count` lines (or between min and max), each a short run of words, each ending in a newline."""
    count = int(spec["count"]) if "count" in spec else rng.randint(int(spec.get("min", 2)), int(spec.get("max", 20)))
    lines = []
    for _ in range(count):
        words = [gen_name(rng, {"min": 2, "max": 7}) for _ in range(rng.randint(1, 5))]
        lines.append(" ".join(words) + "\n")
    return "".join(lines)


def gen_secret(rng: random.Random, spec: Mapping[str, Any]) -> str:
    return str(spec.get("prefix", "tok")) + "".join(rng.choice(_ALNUM) for _ in range(int(spec.get("length", 24))))


GENERATORS = ("name", "text", "lines", "int", "pick", "secret", "sum", "shuffle", "value")


def generate(spec: Mapping[str, Any], rng: random.Random, base: Mapping[str, Any]) -> dict[str, Any]:
    """Draw every value of a case's `generate:` block, in order; later ones may use earlier ones."""
    values: dict[str, Any] = dict(base)
    for name, raw in spec.items():
        if not isinstance(raw, dict) or len(raw) != 1:
            raise TemplateError(f"generator {name!r} must be a mapping with exactly one kind")
        kind, params = next(iter(raw.items()))
        params = render(params, values)
        if kind == "name":
            value: Any = gen_name(rng, params or {})
        elif kind == "text":
            value = gen_text(rng, params or {})
        elif kind == "lines":
            value = gen_lines(rng, params or {})
        elif kind == "int":
            value = rng.randint(int(params["min"]), int(params["max"]))
        elif kind == "pick":
            value = rng.choice(list(params))
        elif kind == "secret":
            value = gen_secret(rng, params or {})
        elif kind == "sum":
            value = sum(int(x) for x in params)
        elif kind == "shuffle":
            value = list(params)
            rng.shuffle(value)
        elif kind == "value":
            value = params
        else:
            raise TemplateError(f"generator {name!r}: unknown kind {kind!r}")
        values[name] = value
    return values
