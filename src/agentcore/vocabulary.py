"""The engine's fixed vocabulary: locked tool ids, ACP kinds, watchdog categories.

Data only, at the bottom of the layers, so that the manifest compiler, the
tools and the watchdog agree on these names without importing each other.
"""

from __future__ import annotations

from typing import Iterable, Literal

# The locked set (LOCK-1): thirteen ids every implementation ships with fixed shapes.
LOCKED_IDS: tuple[str, ...] = (
    "read", "write", "edit", "glob", "grep", "bash", "todo", "task",
    "question", "web_search", "web_fetch", "skill", "tool_search",
)

# ACP tool kinds (KIND-2).
AcpKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
ACP_KINDS: frozenset[str] = frozenset(
    ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
)

# The default watchdog's categories (WDOG-5..): the names a manifest may switch off.
WATCHDOG_CATEGORIES: dict[str, str] = {
    "exfiltration": "shell commands that send data to another host (curl/wget data flags or @file, "
    "nc/socat/telnet/ssh/scp/sftp/rsync to a remote target, /dev/tcp redirections)",
    "destructive": "recursive removal or permission changes outside the workspace or of the workspace itself, "
    "disk tools (mkfs, dd to a device, shred, wipefs, fdisk, parted), forced git pushes, "
    "git reset --hard / clean -fd / checkout -- . (ask)",
    "code_execution_wrapper": "commands that run code taken from their arguments or stdin: shells, eval/source, "
    "env/xargs/sudo-style wrappers, find -exec, git -c/aliases/ext::, sed e/w, awk system()/pipes/print >, "
    "options naming a program (tar, rg --pre, sort --compress-program, split --filter, compiler plugins), "
    "editors and pagers, interpreters (-c/-e deny, workspace scripts ask), REPL-like programs (sqlite3, psql: "
    "ask), build tools, test runners and package managers (make, npm run, cargo, pytest, pip install: ask), "
    "programs run by a path inside the workspace (ask)",
    "secrets": "any tool touching well-known secret files (.env, *.pem, *.key, id_rsa*, ~/.ssh, "
    "~/.aws/credentials, ~/.netrc, ~/.npmrc, ~/.pypirc, docker/kube/gh credentials) asks",
    "network_shell": "network clients without data-sending flags are allowed (the capability check and "
    "the sandbox govern hosts); listed so the name is stable, it never refuses",
}

# Not a category a manifest can switch off: a call the watchdog cannot analyse is refused.
INTERNAL_CATEGORY = "internal"


def unknown_categories(names: Iterable[str]) -> list[str]:
    """Names in `names` that are not watchdog categories (for manifest validation)."""
    return sorted({n for n in names if n not in WATCHDOG_CATEGORIES})
