"""What a tool call touches, declared by the tool before anything runs (CAP).

Tools turn their validated arguments into accesses; the capability check
proves each one and the rule engine evaluates one subject per access.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from .lazydc import lazy_dataclass  # made on first use: every call imports this module, few make these


@dataclass(frozen=True)
class FsAccess:
    """One path a call will read or write, as the tool declares it before running (checked by the capability stage)."""

    arg: str                        # the argument it came from; the resolved path is handed back under this key
    path: str
    mode: Literal["read", "write"]
    tree: bool = False              # a search root (glob/grep): results are filtered by scope one by one


@lazy_dataclass(frozen=True)
class NetAccess:
    """One URL a call will fetch, as the tool declares it before running (checked by the capability stage)."""

    arg: str
    url: str


@lazy_dataclass(frozen=True)
class ShellAccess:
    """One command line a call will run, as the tool declares it before running (parsed and checked by the capability stage)."""

    arg: str
    command: str


Access = Union[FsAccess, NetAccess, ShellAccess]
