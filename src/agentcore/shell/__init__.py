"""Shell-command parsing for the capability check of the ``bash`` tool."""

from agentcore.shell.parse import (
    ParsedShell,
    Redirect,
    ShellRefused,
    SimpleCommand,
    parse_shell,
)

__all__ = ["ParsedShell", "Redirect", "ShellRefused", "SimpleCommand", "parse_shell"]
