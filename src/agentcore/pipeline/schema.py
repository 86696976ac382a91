"""Stage 1: JSON-schema validation, with messages that never echo argument values (ENVL)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the validator comes built from the registry: nothing here needs jsonschema at run time
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

from ..textdata import MAX_DEPTH, holds_surrogate, too_deep
from .fastschema import proven_valid


def _where(err: ValidationError) -> str:
    """The JSON Pointer (RFC 6901) of the offending argument; `""` is the whole object."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path]
    return "/" + "/".join(parts) if parts else '""'


def _constraint(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _words(err: ValidationError) -> str:
    v = err.validator
    if v == "required":
        missing = [p for p in err.validator_value if isinstance(err.instance, dict) and p not in err.instance]
        return f"missing required propert{'y' if len(missing) == 1 else 'ies'} {', '.join(repr(m) for m in missing)}"
    if v == "additionalProperties":
        # Property names are model-written text too (a secret can hide in a key):
        # name the allowed properties instead of the unexpected ones.
        allowed = sorted(err.schema.get("properties") or {})
        n = sum(1 for k in (err.instance or {}) if k not in allowed)
        return f"{n} unexpected propert{'y' if n == 1 else 'ies'}; allowed properties are " + (
            ", ".join(repr(a) for a in allowed) or "none"
        )
    if v == "type":
        return f"must be of type {_constraint(err.validator_value)}"
    if v == "enum":
        return f"must be one of {_constraint(err.validator_value)}"
    return f"must satisfy {v} = {_constraint(err.validator_value)}"


def describe(err: ValidationError) -> str:
    """One failure: JSON Pointer, words, and the violated keyword — never the offending value (ORDER-2)."""
    return f"{_where(err)}: {_words(err)} (keyword '{err.validator}')"


MAX_REPORTED = 8


def validate_args(validator: Callable[[], Draft202012Validator], args: Any, schema: Mapping[str, Any] | None = None) -> str | None:
    """None when valid, else one safe message naming every failure (up to MAX_REPORTED).

    `validator` builds (or returns the cached) jsonschema validator of `schema`. It is asked only when
    `fastschema` cannot prove the arguments valid against `schema` (None: always asked), so a valid call
    to a tool with a plain schema never imports jsonschema.
    """
    if not isinstance(args, dict):
        return '"": must be of type "object" (keyword \'type\')'
    if too_deep(args):
        # Checked before the validator, whose recursion (and every later json.dumps) a deep value would exhaust.
        return f'"": nested more than {MAX_DEPTH} levels deep (limit \'depth\')'
    if holds_surrogate(args):
        # Before any tool: a lone surrogate cannot be encoded, so it would fail deep inside one (or name a file
        # by a byte the model never wrote, through the file system's surrogate escapes).
        return '"": a string holds a lone surrogate, which is not Unicode text (limit \'unicode\')'
    if schema is not None and proven_valid(schema, args):
        return None
    errors = sorted(validator().iter_errors(args), key=lambda e: (list(map(str, e.absolute_path)), str(e.validator)))
    if not errors:
        return None
    text = "; ".join(describe(e) for e in errors[:MAX_REPORTED])
    if len(errors) > MAX_REPORTED:
        text += f"; and {len(errors) - MAX_REPORTED} more"
    return text
