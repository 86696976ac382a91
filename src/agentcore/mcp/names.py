"""Tool ids of MCP tools (MCP-2): `<server>__<tool>`, valid per TOOL-2 and unambiguous."""

from __future__ import annotations

import re
from typing import Callable

from ..manifest.spec import MCP_SERVER_NAME, MCP_SERVER_NAME_MAX

SEPARATOR = "__"
MAX_DESCRIPTION = 4000  # characters of a listed tool's description kept (MCP-3)
_TOOL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+")


class NameProblem(ValueError):
    """A server or tool name that cannot become part of a tool id; the text says why (never the name itself)."""


def check_server_name(name: str) -> None:
    """Raise `NameProblem` unless `name` is a valid server name (as the manifest requires)."""
    if len(name) > MCP_SERVER_NAME_MAX or not MCP_SERVER_NAME.fullmatch(name):
        raise NameProblem(
            f"a server name is 1-{MCP_SERVER_NAME_MAX} letters and digits with single '-' or '_' between them"
        )


def tool_id(server: str, tool: str) -> str:
    """The id of tool `tool` of server `server`; `NameProblem` when it would not be a valid tool id.

    Server names contain no `__` and do not end in `_`, so the server part of
    an id ends at its first `__` and ids of different servers never collide.
    """
    if not tool or not _TOOL_NAME.fullmatch(tool):
        raise NameProblem("the tool name has characters other than ASCII letters, digits, '_' and '-'")
    ident = f"{server}{SEPARATOR}{tool}"
    if not _TOOL_ID.fullmatch(ident):
        raise NameProblem(f"'<server>__<tool>' would be longer than 64 characters ({len(ident)})")
    return ident


def server_of(ident: str) -> str | None:
    """The server part of an MCP tool id, or None when `ident` has no `__`."""
    head, sep, _rest = ident.partition(SEPARATOR)
    return head if sep else None


def clean_description(text: str, server: str, name: str, scrub: Callable[[str], str] = str) -> str:
    """The server's description, white space collapsed, secrets scrubbed (MCP-1) and bounded; a fixed text when it gives none (MCP-3)."""
    # Scrubbed first: before white space is collapsed (a value may hold some) and before the cut.
    text = " ".join(scrub(text).split()) if text else ""
    if not text:
        return f"The tool {name} of the MCP server {server} (it gives no description)."
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"
