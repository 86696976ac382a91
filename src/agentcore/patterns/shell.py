"""Shell requirements: argv matching for `bash` (REQ, SHELL).

`cmd` must equal argv[0] exactly (no basename matching: `./git` is not
`git`). `args` are positional and their count must equal the number of
arguments; a requirement without `args` allows the bare command only.
"""

from __future__ import annotations

import shlex
from typing import Literal, Sequence

from ..lazydc import lazy_dataclass  # made on first use: every call imports this module, few make these


@lazy_dataclass(frozen=True)
class ArgPattern:
    """One positional argument of a shell requirement: an exact word, a prefix, or any single argument."""

    kind: Literal["exact", "wildcard", "prefix"]
    value: str = ""

    def matches(self, arg: str) -> bool:
        if self.kind == "exact":
            return arg == self.value
        if self.kind == "prefix":
            return arg.startswith(self.value)
        return True

    def describe(self) -> str:
        """As a command-line word: a literal quoted as a shell would need it, `<one arg>` for a wildcard."""
        if self.kind == "exact":
            return shlex.quote(self.value)
        if self.kind == "prefix":
            return f"{shlex.quote(self.value)}…"
        return "<one arg>"


@lazy_dataclass(frozen=True)
class ShellRequirement:
    """One compiled `requires.shell` entry: argv[0] exactly, then one pattern per argument."""

    cmd: str
    args: tuple[ArgPattern, ...]

    def matches(self, argv: Sequence[str]) -> bool:
        if not argv or argv[0] != self.cmd:
            return False
        rest = argv[1:]
        if len(rest) != len(self.args):
            return False
        return all(p.matches(a) for p, a in zip(self.args, rest))

    def describe(self) -> str:
        return " ".join([self.cmd, *(a.describe() for a in self.args)])

    def to_json(self) -> dict[str, object]:
        def one(a: ArgPattern) -> object:
            if a.kind == "exact":
                return a.value
            if a.kind == "prefix":
                return {"prefix": a.value}
            return {"wildcard": True}

        return {"cmd": self.cmd, "args": [one(a) for a in self.args]}


def compile_shell_requirement(cmd: str, args: Sequence[object] | None) -> ShellRequirement:
    compiled: list[ArgPattern] = []
    for a in args or ():
        if isinstance(a, str):
            compiled.append(ArgPattern("exact", a))
        elif isinstance(a, dict) and a.get("wildcard") is True and len(a) == 1:
            compiled.append(ArgPattern("wildcard"))
        elif isinstance(a, dict) and isinstance(a.get("prefix"), str) and len(a) == 1:
            compiled.append(ArgPattern("prefix", a["prefix"]))
        else:
            raise ValueError("an argument pattern is a string, {wildcard: true} or {prefix: str}")
    return ShellRequirement(cmd=cmd, args=tuple(compiled))
