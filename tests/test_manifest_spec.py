"""The plain manifest values (manifest/spec.py) against the pydantic models (manifest/schema.py).

The loader reads a canonical document with spec.py alone and asks pydantic
about everything else. These tests hold the two together: the same keys,
defaults and order; on generated documents, spec.py accepts only what
pydantic accepts and reads it to the same values; and whatever pydantic
accepts, its dump is readable by spec.py (the loader's slow path). conftest
checks the same on every manifest the suite loads.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from agentcore.errors import ManifestError
from agentcore.manifest import schema, spec
from agentcore.manifest.loader import manifest_spec_from_dict, read_manifest_spec
from agentcore.manifest.spec import read_spec

PAIRS = [
    (getattr(schema, name), getattr(spec, name))
    for name in sorted(vars(spec))
    if isinstance(getattr(spec, name), type) and issubclass(getattr(spec, name), spec.SpecValue)
    and getattr(spec, name).FIELDS and hasattr(schema, name)
]


def test_every_model_has_a_plain_twin() -> None:
    models = {n for n, v in vars(schema).items() if isinstance(v, type) and issubclass(v, BaseModel) and v.model_fields}
    assert models == {model.__name__ for model, _ in PAIRS}


@pytest.mark.parametrize(("model", "plain"), PAIRS, ids=[m.__name__ for m, _ in PAIRS])
def test_the_same_keys_in_the_same_order_with_the_same_defaults(model: type[BaseModel], plain: type[spec.SpecValue]) -> None:
    assert list(plain.FIELDS) == list(model.model_fields)
    for name, field in model.model_fields.items():
        assert plain.FIELDS[name].required == field.is_required(), name
        if not field.is_required():
            default = field.get_default(call_default_factory=True)
            dumped = default.model_dump() if isinstance(default, BaseModel) else default
            mine = plain.FIELDS[name].missing()
            assert (mine.as_dict() if isinstance(mine, spec.SpecValue) else mine) == dumped, name


# Documents generated from the models' annotations, with wrong types, coercible values,
# misspelt and missing keys mixed in.

_JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.sampled_from(["", "1", "2.5", "true", "x y"]),
    st.lists(st.integers(0, 2), max_size=2), st.dictionaries(st.sampled_from(["a", "wildcard", "prefix"]), st.booleans(), max_size=2),
)
_TEXT = st.one_of(st.sampled_from(["", "git", "a b", "read", "{workspace}/**", "A_B", "bad name", "x\n", "9lives", "http://h/x"]),
                  st.text(max_size=4))


@functools.cache  # built once per annotation: the models nest, and the strategy tree would grow with every level
def _typed(annotation: Any, right: int) -> st.SearchStrategy[Any]:
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _document(annotation, right)
    if origin is list:
        return st.lists(_value(args[0], right), max_size=3)
    if origin is dict:
        return st.dictionaries(_mostly(_TEXT, st.integers(0, 2), right), _value(args[1], right), max_size=2)
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, types.UnionType):
        return st.one_of([_value(a, right) for a in args])
    if annotation is type(None):
        return st.none()
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(-1, 2**60)
    if annotation is float:
        return st.one_of(st.floats(-1, 5000), st.integers(-1, 5000), st.sampled_from([2**60, float("inf"), float("nan")]))
    return _TEXT


@functools.cache
def _value(annotation: Any, right: int) -> st.SearchStrategy[Any]:
    """A value of the annotated type `right` times in `right + 1`, else something of another type."""
    return _mostly(_typed(annotation, right), _JUNK, right)


def _mostly(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], odds: int) -> st.SearchStrategy[Any]:
    """`usual`, or `rare` once in `odds + 1` draws (one_of alone picks its branches evenly, repeats merged)."""
    return st.integers(0, odds).flatmap(lambda i: rare if i == odds else usual)


@functools.cache
def _document(model: type[BaseModel], right: int = 3) -> st.SearchStrategy[Any]:
    fields = model.model_fields
    required = {n: _value(f.annotation, right) for n, f in fields.items() if f.is_required()}
    optional = {n: _value(f.annotation, right) for n, f in fields.items() if not f.is_required()}
    exact = st.fixed_dictionaries(required, optional=optional)
    return _mostly(exact, st.one_of(
        exact.map(lambda d: {k: v for i, (k, v) in enumerate(d.items()) if i}),  # the first key missing
        st.tuples(exact, st.sampled_from(["requries", "nmae", "extra"]), _JUNK).map(lambda t: {**t[0], t[1]: t[2]}),
    ), right)


def _same_reading(model: type[BaseModel], plain: type[spec.SpecValue], data: Any) -> None:
    fast = read_spec(plain, data)
    try:
        valid = model.model_validate(data)
    except ValidationError:
        assert fast is None, "spec.py read a document pydantic rejects"
        return
    slow = read_spec(plain, valid.model_dump())
    assert slow is not None, "pydantic accepted a document whose dump spec.py cannot read"
    if fast is not None:
        assert fast == slow and fast.as_dict() == valid.model_dump()


@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_the_plain_reader_agrees_with_pydantic_on_generated_documents(data: st.DataObject) -> None:
    model, plain = data.draw(st.sampled_from(PAIRS))
    _same_reading(model, plain, data.draw(_document(model)))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_document(schema.ManifestSpec, right=40))  # a whole manifest has dozens of values: few of them wrong
def test_whole_manifests_read_the_same_either_way(data: Any) -> None:
    _same_reading(schema.ManifestSpec, spec.ManifestSpec, data)


_NO_PYDANTIC = "print('PYDANTIC' if any(n.split('.')[0] in ('pydantic', 'pydantic_core') for n in sys.modules) else 'NONE')\n"


def test_a_canonical_manifest_is_called_without_pydantic(tmp_path: Path) -> None:
    """The point of spec.py: `agentcore call` on an ordinary manifest never imports pydantic."""
    (tmp_path / "a.txt").write_text("hi\n")
    m = tmp_path / "m.yaml"
    m.write_text("name: b\ntools: [read, bash]\nrequires:\n  fs: {read: ['{workspace}/**']}\n  shell: [{cmd: ls, args: [{wildcard: true}]}]\n"
                 "limits: {bash_timeout_s: 5, read_bytes: 1000}\nrules: [{permission: '*', pattern: '*', action: allow}]\n")
    code = ("import sys\nfrom agentcore.cli.main import main\n"
            f"sys.argv = ['agentcore', 'call', '--manifest', {str(m)!r}, '--workspace', {str(tmp_path)!r}, '--headless', 'read', '{{\"path\": \"a.txt\"}}']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n" + _NO_PYDANTIC)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert '"type": "output"' in proc.stdout, proc.stderr
    assert proc.stdout.strip().endswith("NONE")


def test_every_section_of_the_reference_example_is_read_without_pydantic(tmp_path: Path) -> None:
    from agentcore.manifest.reference import example_yaml

    m = tmp_path / "m.yaml"
    m.write_text(example_yaml())
    code = f"import sys\nfrom agentcore.manifest.loader import read_manifest_spec\nread_manifest_spec({str(m)!r})\n" + _NO_PYDANTIC
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.strip() == "NONE", proc.stderr
    assert read_manifest_spec(m).as_dict() == schema.ManifestSpec.model_validate(yaml_load(m)).model_dump()


def yaml_load(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text())


def test_coerced_values_are_read_as_pydantic_reads_them(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text("name: b\nlimits: {read_bytes: '1000', bash_timeout_s: 5}\nwatchdog: {enabled: 'yes'}\n")
    got = read_manifest_spec(m)
    assert got.limits.read_bytes == 1000 and got.limits.bash_timeout_s == 5.0 and type(got.limits.bash_timeout_s) is float
    assert got.watchdog.enabled is True


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_an_unbounded_number_is_an_error_that_points(tmp_path: Path, value: str) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(f"name: b\nlimits:\n  bash_timeout_s: {value}\n")
    with pytest.raises(ManifestError) as exc:
        read_manifest_spec(m)
    assert ":3: limits.bash_timeout_s" in str(exc.value) and "finite" in str(exc.value)


def test_errors_still_come_from_the_models(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text("name: b\nrequries: {fs: {}}\n")
    with pytest.raises(ManifestError) as exc:
        read_manifest_spec(m)
    assert "requries" in str(exc.value) and "did you mean 'requires'" in str(exc.value)
    assert ":2:" in str(exc.value)


def test_values_are_frozen_equal_by_fields_and_readable_from_mappings() -> None:
    s = manifest_spec_from_dict({"name": "m", "requires": {"shell": [{"cmd": "ls", "args": [{"wildcard": True}, {"prefix": "-"}]}]}})
    with pytest.raises(AttributeError):
        s.name = "other"  # type: ignore[misc]
    assert s.requires.shell[0].args == [spec.WildcardArg(wildcard=True), spec.PrefixArg(prefix="-")]
    assert hash(spec.WildcardArg(wildcard=True)) == hash(spec.WildcardArg(wildcard=True))
    assert spec.ManifestSpec(name="m", watchdog={"disable": ["secrets"]}).watchdog == spec.WatchdogSpec(disable=["secrets"])
    assert s != spec.ManifestSpec(name="m")
    assert s.as_dict()["requires"]["shell"][0]["args"] == [{"wildcard": True}, {"prefix": "-"}]


def test_a_bad_constructor_value_is_named_by_its_key_never_shown() -> None:
    with pytest.raises(ValueError) as exc:
        spec.RequiresSpec(fs={"read": ["ok", 7]}, shell=[])
    assert "fs.read.1" in str(exc.value) and "7" not in str(exc.value).replace("fs.read.1", "")
    with pytest.raises(ValueError):
        spec.ShellSpec(cmd="rm -rf /secret")
    with pytest.raises(ValueError):
        spec.McpServerSpec(command="x", url="http://h")  # one of command or url


def test_compile_manifest_takes_the_plain_value_a_mapping_or_the_pydantic_model(tmp_path: Path) -> None:
    from agentcore.api import compile_manifest

    doc = {"name": "m", "tools": ["read"], "limits": {"read_bytes": 100}}
    for given_spec in (doc, manifest_spec_from_dict(doc), schema.ManifestSpec.model_validate(doc)):
        compiled = compile_manifest(given_spec, workspace=tmp_path)
        assert compiled.limits.read_bytes == 100 and compiled.tools == ("read",)
    with pytest.raises(TypeError):
        compile_manifest(["name", "m"], workspace=tmp_path)  # type: ignore[arg-type]
