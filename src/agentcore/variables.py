"""Variable expansion for path and host patterns (VAR).

`{workspace}`, `{ad-hoc}` and `{user-data}` each expand to zero or more
directories; a pattern mentioning a variable expands to one pattern per
value (the cross product when it mentions several). Values are glob-escaped
so a workspace path containing `[`, `*` or `?` is matched literally. An
unknown name is a compile error; an empty expansion yields no pattern, so
the scope it would have granted stays empty and calls fail closed.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from agentcore.patterns.globtext import glob_escape

from .errors import CompileError
from .textdata import did_you_mean

KNOWN_VARIABLES = ("workspace", "ad-hoc", "user-data")
_VAR = re.compile(r"(?<!\\)\{([^{}]*)\}")


@dataclass(frozen=True)
class Bindings:
    """The values each variable expands to for one compilation."""

    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def for_workspace(
        cls,
        workspace: Path | None,
        *,
        extra_roots: Sequence[Path] = (),
        ad_hoc: Sequence[Path] = (),
        user_data: Path | None = None,
    ) -> "Bindings":
        roots = [os.fspath(p) for p in ([workspace] if workspace else []) + list(extra_roots)]
        return cls(
            {
                "workspace": tuple(roots),
                "ad-hoc": tuple(os.fspath(p) for p in ad_hoc),
                "user-data": (os.fspath(user_data),) if user_data else (),
            }
        )

    @functools.cached_property
    def workspace(self) -> Path | None:
        # Cached: read on every call by the pipeline (CompiledManifest.workspace);
        # `values` never changes after construction (a frozen dataclass).
        roots = self.values.get("workspace", ())
        return Path(roots[0]) if roots else None

    @property
    def ad_hoc(self) -> tuple[Path, ...]:
        return tuple(Path(p) for p in self.values.get("ad-hoc", ()))

    @property
    def user_data(self) -> Path | None:
        return next((Path(p) for p in self.values.get("user-data", ())), None)


def variables_in(pattern: str) -> list[str]:
    return _VAR.findall(pattern)


def expand(pattern: str, bindings: Bindings, *, escape: bool = True, where: str = "") -> list[str]:
    """All expansions of `pattern`; [] when a variable it uses has no value."""
    names = variables_in(pattern)
    for name in names:
        if name not in KNOWN_VARIABLES:
            raise CompileError(
                f"unknown variable {{{name}}}{did_you_mean('{' + name + '}', ['{' + v + '}' for v in KNOWN_VARIABLES])}; known variables are "
                + ", ".join(f"{{{v}}}" for v in KNOWN_VARIABLES),
                location=where or None,
            )
    if not names:
        return [pattern]
    choices: list[tuple[str, ...]] = []
    for name in names:
        vals = tuple(v for v in bindings.values.get(name, ()) if v)
        if not vals:
            return []
        choices.append(tuple(glob_escape(v) if escape else v for v in vals))
    out: list[str] = []
    for combo in itertools.product(*choices):
        it = iter(combo)
        out.append(_VAR.sub(lambda _m: next(it), pattern))
    return out
