"""The manifest reference page (`agentcore manifest reference`, docs/manifest.md), written from the models.

Every key, its type, its default, what it does and an example come from
`schema.py` (descriptions and examples) and `limits.py` (the defaults of
`limits`), so the page cannot drift from what the loader accepts; a test
compares docs/manifest.md with this output.
"""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ..limits import Limits
from .schema import LimitsSpec, ManifestSpec, RulesFileSpec

INTRO = """\
# Manifest reference

A manifest is one YAML (or JSON) file that says what an agent is: its tools,
what they may touch, the permission rules, and how it runs. Unknown keys are
errors (a misspelt `requries:` must not silently grant nothing), and so are
duplicate keys, YAML anchors and aliases. `agentcore manifest check FILE`
validates one and prints its effective capability set; `agentcore manifest
schema` prints the JSON Schema for editors.

This page is generated from the models the loader uses
(`agentcore manifest reference` prints it); `SPEC.md` is the normative text.

**Variables.** Path patterns and rule patterns may use `{workspace}` (every
workspace root), `{ad-hoc}` (directories granted for one session) and
`{user-data}` (the agent's own data directory). A pattern whose variable has
no value matches nothing: it fails closed.
"""


def reference_markdown() -> str:
    """The whole page."""
    parts = [INTRO, "## A manifest using every section\n", "```yaml\n" + example_yaml() + "```\n"]
    parts += _sections(ManifestSpec, (), {})
    parts.append(_rules_file())
    return "\n".join(parts)


def example_manifest() -> dict[str, Any]:
    """A manifest built from every field's first example (the test checks that it compiles)."""
    return _example(ManifestSpec)


def example_yaml() -> str:
    import yaml

    return yaml.safe_dump(example_manifest(), sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)


def _example(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        sub = _model_of(field.annotation)
        if field.examples:
            out[name] = field.examples[0]
        elif sub is not None and get_origin(field.annotation) is None:
            inner = _example(sub)
            if inner:
                out[name] = inner
        elif sub is not None and get_origin(field.annotation) is list:
            inner = _example(sub)
            if inner:
                out[name] = [inner]
    return out


def _sections(model: type[BaseModel], path: tuple[str, ...], seen: dict[type[BaseModel], str]) -> list[str]:
    title = ".".join(path) or "top level"
    if model in seen:  # a model used in two places (requires) is written out once
        return [f"## `{title}`\n\nThe same keys as [`{seen[model]}`](#{_anchor(seen[model])}).\n"]
    seen[model] = title
    lines = [f"## `{title}`\n" if path else "## Top-level keys\n"]
    if model.__doc__ and path:
        lines.append(" ".join(model.__doc__.split()) + "\n")
    lines += ["| key | type | default | description | example |", "|---|---|---|---|---|"]
    nested: list[tuple[type[BaseModel], tuple[str, ...]]] = []
    for name, field in model.model_fields.items():
        key = ".".join((*path, name))
        lines.append(f"| `{key}` | {_type(field.annotation)} | {_default(model, name, field)} | "
                     f"{_cell(field.description or '')} | {_examples(field)} |")
        sub = _model_of(field.annotation)
        if sub is not None and _documented(sub):
            suffix = {list: "[]", dict: ".<name>"}.get(get_origin(field.annotation), "")  # type: ignore[call-overload]
            nested.append((sub, (*path, name + suffix)))
    out = ["\n".join(lines) + "\n"]
    for sub, sub_path in nested:
        out += _sections(sub, sub_path, seen)
    return out


def _anchor(title: str) -> str:
    """The anchor GitHub makes for a `## `title`` heading."""
    return "".join(c for c in title.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def _documented(model: type[BaseModel]) -> bool:
    # Small value forms are described where they are used (requires.shell[].args, mcp.<name>.env).
    return model.__name__ not in ("WildcardArg", "PrefixArg", "FromEnv")


def _rules_file() -> str:
    field = RulesFileSpec.model_fields["rules"]
    return (
        "## The project rules file\n\n"
        + " ".join((RulesFileSpec.__doc__ or "").split())
        + " It holds one key:\n\n| key | type | default | description |\n|---|---|---|---|\n"
        + f"| `rules` | {_type(field.annotation)} | `[]` | {_cell(field.description or '')} |\n\n"
        "Each rule has the keys of `rules[]` above. Its rules sit between the manifest's and the session's: a "
        "manifest deny always wins, and otherwise the most specific matching rule decides whatever its scope.\n\n"
        "```yaml\nrules:\n  - {permission: bash, pattern: \"npm test\", action: allow}\n"
        "  - {permission: fs.write, pattern: \"{workspace}/dist/**\", action: deny}\n```\n"
    )


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None and get_origin(annotation) in (list, dict, Union, types.UnionType, None):
            return found
    return None


def _type(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{json.dumps(a) if isinstance(a, bool) else a}`" for a in args)
    if origin in (Union, types.UnionType):
        kinds = [_shape(a) if isinstance(a, type) and issubclass(a, BaseModel) else _type(a) for a in args if a is not type(None)]
        return " or ".join(kinds)
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(annotation, str(annotation))


def _shape(model: Any) -> str:
    """A small mapping written out, as in `{wildcard: true}`."""
    fields = model.model_fields
    return "`{" + ", ".join(f"{n}: {_type(f.annotation).strip('`')}" for n, f in fields.items()) + "}`"


def _default(model: type[BaseModel], name: str, field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if model is LimitsSpec:
        return f"`{getattr(Limits(), name)}`"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        return "" if isinstance(value, BaseModel) else f"`{json.dumps(value)}`"
    if field.default is None:
        return "(none)"
    return f"`{json.dumps(field.default)}`"


def _examples(field: FieldInfo) -> str:
    if not field.examples:
        return ""
    return "<br>".join(f"`{_flow(e)}`" for e in field.examples)


def _flow(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, allow_unicode=True, sort_keys=False).strip()
    return (text[:-4] if text.endswith("\n...") else text).replace("|", "\\|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
