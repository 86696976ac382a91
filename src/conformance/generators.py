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
    """A file-name-safe identifier (starts with a letter, lowercase letters and digits), unless `letters` is given.

    `letters`: draw every character from these instead (a limit counted in characters, not bytes,
    is only tested by characters that take several bytes).
    """
    n = rng.randint(int(spec.get("min", 5)), int(spec.get("max", 10)))
    if "letters" in spec:
        return f"{spec.get('prefix', '')}{''.join(rng.choices(str(spec['letters']), k=n))}{spec.get('ext', '')}"
    body = rng.choice(_LOWER) + "".join(rng.choices(_ALNUM, k=n - 1))
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
    return str(spec.get("prefix", "tok")) + "".join(rng.choices(_ALNUM, k=int(spec.get("length", 24))))


GENERATORS = ("name", "text", "lines", "int", "pick", "secret", "sum", "shuffle", "value")


def _sized(params: Mapping[str, Any], boundary: int | None, key: str) -> Mapping[str, Any]:
    """A `min`/`max` range pinned to one of its ends on a boundary run."""
    if boundary is None or key in params or "min" not in params or "max" not in params:
        return params
    end = params["min"] if boundary % 2 == 0 else params["max"]
    return {**params, key: end}


def _domain(kind: str, params: Any) -> int:
    """How many boundary runs it takes to give every boundary value of one generator its turn."""
    if kind in ("pick", "shuffle"):
        return len(list(params))
    if kind == "int":
        return 2 if int(params["min"]) != int(params["max"]) else 1
    if kind in ("text", "lines") and isinstance(params, Mapping) and "min" in params and "max" in params:
        return 2 if int(params["min"]) != int(params["max"]) else 1
    return 1


def _draw(kind: str, params: Any, rng: random.Random, boundary: int | None) -> Any:
    if kind == "name":
        return gen_name(rng, params or {})
    if kind == "text":
        return gen_text(rng, _sized(params or {}, boundary, "size"))
    if kind == "lines":
        return gen_lines(rng, _sized(params or {}, boundary, "count"))
    if kind == "int":
        if boundary is not None:
            return int(params["min"]) if boundary % 2 == 0 else int(params["max"])
        return rng.randint(int(params["min"]), int(params["max"]))
    if kind == "pick":
        options = list(params)
        return options[boundary % len(options)] if boundary is not None else rng.choice(options)
    if kind == "secret":
        return gen_secret(rng, params or {})
    if kind == "sum":
        return sum(int(x) for x in params)
    if kind == "shuffle":
        items = list(params)
        if boundary is not None:
            k = boundary % len(items) if items else 0
            return items[k:] + items[:k]  # every item takes every position over the rotations
        rng.shuffle(items)
        return items
    if kind == "value":
        return params
    raise TemplateError(f"unknown generator kind {kind!r}")


def generate(spec: Mapping[str, Any], rng: random.Random, base: Mapping[str, Any], boundary: int | None = None) -> dict[str, Any]:
    """Draw every value of a case's `generate:` block, in order; later ones may use earlier ones.

    On a boundary run (`boundary` = k) every range takes an end (its minimum
    on even runs, its maximum on odd ones), every `pick` its k-th option and
    every `shuffle` its k-th rotation; names stay random. Boundary runs come
    on top of the random run, so random values add to the boundaries and
    never replace them.
    """
    values: dict[str, Any] = dict(base)
    for name, raw in spec.items():
        if not isinstance(raw, dict) or len(raw) != 1:
            raise TemplateError(f"generator {name!r} must be a mapping with exactly one kind")
        kind, params = next(iter(raw.items()))
        try:
            values[name] = _draw(kind, render(params, values), rng, boundary)
        except TemplateError as exc:
            raise TemplateError(f"generator {name!r}: {exc}") from None
    return values


def boundary_runs(spec: Mapping[str, Any], base: Mapping[str, Any]) -> int:
    """The number of boundary runs a case needs (0 when none of its values has boundaries)."""
    values: dict[str, Any] = dict(base)
    rng = random.Random(0)
    most = 1
    for name, raw in spec.items():
        kind, params = next(iter(raw.items()))
        params = render(params, values)
        most = max(most, _domain(kind, params))
        values[name] = _draw(kind, params, rng, 0)
    return most if most > 1 else 0
