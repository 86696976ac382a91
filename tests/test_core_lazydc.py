"""`lazy_dataclass` behaves as `dataclasses.dataclass` once there is an instance, however the instance was made."""

from __future__ import annotations

import ast
import copy
import dataclasses
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.lazydc import lazy_dataclass


def _twins(**params: Any) -> tuple[type, type]:
    """The same class body, decorated eagerly and lazily."""

    def body(decorate: Any) -> type:
        @decorate(**params)
        class Point:
            x: int
            y: str = "y"
            tags: list[int] = dataclasses.field(default_factory=list)
            note: str = dataclasses.field(default="", compare=False)

            def norm(self) -> int:
                return self.x * 2

        return Point

    return body(dataclasses.dataclass), body(lazy_dataclass)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([{}, {"frozen": True}, {"kw_only": True}, {"frozen": True, "kw_only": True}, {"eq": False}, {"order": True}]),
       st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2), st.text(max_size=2))
def test_a_lazy_class_is_the_eager_one_once_made(params: dict[str, Any], x: int, y: str, tags: list[int], note: str) -> None:
    eager, lazy = _twins(**params)
    a, b = eager(x=x, y=y, tags=tags, note=note), lazy(x=x, y=y, tags=tags, note=note)
    assert repr(a) == repr(b)
    assert [f.name for f in dataclasses.fields(lazy)] == [f.name for f in dataclasses.fields(eager)]
    assert dataclasses.asdict(a) == dataclasses.asdict(b) and b.norm() == a.norm()
    assert (b == lazy(x=x, y=y, tags=list(tags), note=note + "!")) == (a == eager(x=x, y=y, tags=list(tags), note=note + "!"))
    if params.get("eq", True) and not params.get("frozen"):
        assert lazy.__hash__ is None and eager.__hash__ is None
    if params.get("frozen"):
        assert hash(lazy(x=x, y=y, tags=(), note="")) == hash(lazy(x=x, y=y, tags=(), note="a"))  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            b.x = 1
    assert dataclasses.replace(b, x=x + 1).x == x + 1
    if not params.get("kw_only"):
        assert repr(lazy(x, y)) == repr(lazy(x=x, y=y))
        with pytest.raises(TypeError):
            lazy()  # the generated __init__, not object's


def test_not_a_dataclass_until_its_first_instance() -> None:
    _, lazy = _twins(frozen=True)
    assert not dataclasses.is_dataclass(lazy)
    lazy(x=1)
    assert dataclasses.is_dataclass(lazy)


def test_copies_are_whole_instances() -> None:
    _, lazy = _twins(frozen=True)
    p = lazy(x=3, tags=[1])
    assert copy.deepcopy(p) == p and copy.copy(p) == p and repr(copy.deepcopy(p)) == repr(p)


def test_an_instance_unpickled_before_any_was_made_has_every_method(tmp_path: Path) -> None:
    """Unpickling skips __init__: the first __new__ still processes the class, in a process that never made one."""
    from agentcore.pipeline.events import StageDecided

    blob = tmp_path / "event.pickle"
    blob.write_bytes(pickle.dumps(StageDecided(session_id="s", call_id="c", stage="rules", decision="allow")))
    code = (
        "import dataclasses, pickle, sys\n"
        "from agentcore.pipeline.events import StageDecided\n"
        "assert '__dataclass_fields__' not in StageDecided.__dict__\n"
        f"e = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
        "assert e == StageDecided(session_id='s', call_id='c', stage='rules', decision='allow')\n"
        "assert e != StageDecided(session_id='s', call_id='c', stage='rules', decision='deny')\n"
        "print(repr(e)); print(sorted(e.to_dict()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("StageDecided(session_id='s', call_id='c', parent_call_id=None, stage='rules'")


def test_subclasses_find_the_lazy_base_fields() -> None:
    @lazy_dataclass(frozen=True, kw_only=True)
    class Base:
        a: int
        b: str = "b"

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Eager(Base):
        c: int = 0

    @lazy_dataclass(frozen=True, kw_only=True)
    class Lazy(Base):
        d: int = 0

    assert [f.name for f in dataclasses.fields(Eager)] == ["a", "b", "c"]
    assert Lazy(a=1, d=2) == Lazy(a=1, d=2) and repr(Lazy(a=1)) == "test_subclasses_find_the_lazy_base_fields.<locals>.Lazy(a=1, b='b', d=0)"
    assert Base(a=1) != Eager(a=1)


def test_threads_making_the_first_instances_together_all_get_whole_ones() -> None:
    _, lazy = _twins(frozen=True)
    start = threading.Barrier(8)
    made: list[Any] = []
    errors: list[BaseException] = []

    def make(i: int) -> None:
        start.wait()
        try:
            made.append(lazy(x=i))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sorted(p.x for p in made) == list(range(8))
    assert all(p == lazy(x=p.x) for p in made)


def test_what_it_cannot_do_is_refused() -> None:
    with pytest.raises(TypeError):
        lazy_dataclass(slots=True)

    class Hooked:
        def __init_subclass__(cls, **kw: Any) -> None: ...

    with pytest.raises(TypeError):
        lazy_dataclass(Hooked)


def test_a_one_shot_call_makes_none_of_the_lazy_classes(tmp_path: Path) -> None:
    """The point of it: `agentcore call read` leaves them unprocessed (and so does not pay for them)."""
    (tmp_path / "a.txt").write_text("hi\n")
    m = tmp_path / "m.yaml"
    m.write_text("name: b\ntools: [read]\nrequires: {fs: {read: ['{workspace}/**']}}\nrules: [{permission: '*', pattern: '*', action: allow}]\n")
    code = (
        "import sys\nfrom agentcore.cli.main import main\n"
        f"sys.argv = ['agentcore', 'call', '--manifest', {str(m)!r}, '--workspace', {str(tmp_path)!r}, '--headless', 'read', '{{\"path\": \"a.txt\"}}']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "from agentcore.lazydc import _PENDING, _pending_new\n"
        "lazy = {c for name, mod in list(sys.modules.items()) if name.startswith('agentcore') for c in vars(mod).values()\n"
        "        if isinstance(c, type) and getattr(c.__dict__.get('__new__'), '__func__', None) is _pending_new}\n"
        "print('\\nLAZY', len(lazy), sorted(c.__name__ for c in lazy if _PENDING not in c.__dict__))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert '"type": "output"' in proc.stdout, proc.stderr
    _, count, processed = next(line for line in proc.stdout.splitlines() if line.startswith("LAZY ")).split(" ", 2)
    assert int(count) >= 10 and processed == "['Event']"  # a base is made when it is subclassed


def test_every_dataclass_has_a_docstring() -> None:
    # Without one, `dataclasses.dataclass` builds `__doc__` from `inspect.signature(cls)` when the class is
    # defined: 0.1-0.3 ms a class, paid at every import (the start of `agentcore call` crossed 25 of them).
    src = Path(__file__).resolve().parent.parent / "src"
    missing = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None
                    and any("dataclass" in ast.unparse(d) for d in node.decorator_list)):
                missing.append(f"{path.relative_to(src)}:{node.lineno} {node.name}")
    assert missing == [], missing
