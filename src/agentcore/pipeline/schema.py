"""Stage 1: JSON-schema validation, with messages that never echo argument values (ENVL)."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match


def _where(err: ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
    return f"args{path}" if path else "args"


def _constraint(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def describe(err: ValidationError) -> str:
    """The validation failure in words, naming the schema's constraint, never the offending value."""
    v = err.validator
    where = _where(err)
    if v == "required":
        missing = [p for p in err.validator_value if isinstance(err.instance, dict) and p not in err.instance]
        return f"{where}: missing required propert{'y' if len(missing) == 1 else 'ies'} {', '.join(repr(m) for m in missing)}"
    if v == "additionalProperties":
        # Property names are model-written text too (a secret can hide in a key):
        # name the allowed properties instead of the unexpected ones.
        allowed = sorted(err.schema.get("properties") or {})
        n = sum(1 for k in (err.instance or {}) if k not in allowed)
        return (
            f"{where}: {n} unexpected propert{'y' if n == 1 else 'ies'}; allowed properties are "
            + (", ".join(repr(a) for a in allowed) or "none")
        )
    if v == "type":
        return f"{where}: must be of type {_constraint(err.validator_value)}"
    if v == "enum":
        return f"{where}: must be one of {_constraint(err.validator_value)}"
    return f"{where}: fails the '{v}' constraint {_constraint(err.validator_value)}"


def validate_args(validator: Draft202012Validator, args: Any) -> str | None:
    """None when valid, else one safe message (the most relevant error first)."""
    if not isinstance(args, dict):
        return "args: must be a JSON object"
    err = best_match(validator.iter_errors(args))
    if err is None:
        return None
    return describe(err)
