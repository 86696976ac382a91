"""`lazy_dataclass`: a dataclass whose methods are generated when the class is first instantiated.

`dataclasses.dataclass` compiles its `__init__`, `__eq__`, `__repr__`,
`__hash__` and, for a frozen class, `__setattr__` and `__delattr__` when the
class is defined: 0.3-0.6 ms a class on Python 3.11. A one-shot `agentcore
call read` defines some twenty classes it never instantiates (ask requests,
events nobody observes, shell and network grants), which is 8-10 ms of a
start budgeted at 150 ms. Classes decorated here are processed by
`dataclasses.dataclass` itself, with the same parameters, on the first
`__new__`: construction, copy and unpickling all pass through it, so no
instance ever exists without its methods.

Before that first instance, the class is not a dataclass yet:
`dataclasses.fields(cls)` on the class itself would fail, and a field's
class attribute may still be the `field()` object. Only classes that
nothing inspects before making one are decorated. Subclassing one
processes it first, so a subclass (lazy or not) always finds its base's fields.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)

_LOCK = threading.RLock()  # two threads making the first instance process the class once
_PENDING = "__lazy_dataclass_params__"


def materialize(cls: type) -> None:
    """Process `cls` (and any lazy base first) now; nothing when it is already processed."""
    with _LOCK:
        for klass in reversed(cls.__mro__):
            params = klass.__dict__.get(_PENDING)
            if params is None:
                continue
            dataclasses.dataclass(klass, **params)
            # The marker goes last: another thread that no longer sees it may use the class at once.
            for name in ("__init_subclass__", _PENDING):
                delattr(klass, name)


def _pending_new(klass: type, *args: Any, **kwargs: Any) -> Any:
    # It stays after processing (CPython does not give a class back its inherited `__new__` slot once
    # one was assigned), at one dict lookup per instance. Its bases were processed when it was defined.
    if _PENDING in klass.__dict__:
        materialize(klass)
    return object.__new__(klass)


def _pending_subclass(cls: type, **kwargs: Any) -> None:
    materialize(cls)  # the lazy bases: a subclass's own dataclass processing reads their fields
    super(cls, cls).__init_subclass__(**kwargs)  # type: ignore[misc]  # whatever hook the bases have now


@overload
def lazy_dataclass(cls: T, /) -> T: ...
@overload
def lazy_dataclass(cls: None = None, /, **params: Any) -> Callable[[T], T]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def lazy_dataclass(cls: Any = None, /, **params: Any) -> Any:
    """`dataclasses.dataclass(**params)`, applied on the class's first instantiation."""
    if params.get("slots"):
        raise TypeError("lazy_dataclass cannot make slots: that replaces the class")

    def wrap(klass: T) -> T:
        if klass.__new__ not in (object.__new__, _pending_new) or "__init_subclass__" in klass.__dict__:
            raise TypeError("lazy_dataclass: the class or a base defines __new__, or the class __init_subclass__")
        setattr(klass, _PENDING, params)
        klass.__new__ = staticmethod(_pending_new)  # type: ignore[assignment]
        klass.__init_subclass__ = classmethod(_pending_subclass)  # type: ignore[assignment]
        return klass

    return wrap if cls is None else wrap(cls)
