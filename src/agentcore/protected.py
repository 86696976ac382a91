"""Files that execute code later and so are never writable by the agent (CAP, ENV).

The same list feeds the capability check (the write/edit tools and shell
redirections) and the sandbox policy (read-only binds and placeholders), so
what the engine refuses and what the OS refuses cannot drift apart.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

# Basenames protected wherever they appear.
PROTECTED_NAMES: frozenset[str] = frozenset(
    {
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
        ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".envrc",
        ".gitconfig", ".gitmodules", ".gitattributes",
        ".mcp.json",
    }
)
# Directories whose whole content is protected wherever they appear.
PROTECTED_DIRS: frozenset[str] = frozenset({".vscode", ".idea", ".agentcore", ".zed"})
# Paths inside a `.git` directory.
PROTECTED_GIT: tuple[tuple[str, ...], ...] = (("hooks",), ("config",), ("info", "attributes"))


def protected_reason(path: Path | str, extra: Iterable[Path] = ()) -> str | None:
    """Why writing `path` is refused, or None. `path` must be canonical."""
    p = os.fspath(path)
    for e in extra:
        if p == os.fspath(e):
            return "runtime configuration file"
    parts = Path(p).parts
    if parts and parts[-1] in PROTECTED_NAMES:
        return "shell, git or tool configuration file"
    for i, part in enumerate(parts):
        if part in PROTECTED_DIRS:
            return "editor or agent configuration directory"
        if part == ".git":
            rest = parts[i + 1 :]
            for prefix in PROTECTED_GIT:
                if tuple(rest[: len(prefix)]) == prefix:
                    return "git hooks or configuration"
    return None


def sandbox_protected_paths(roots: Iterable[Path], extra: Iterable[Path] = ()) -> list[Path]:
    """Concrete paths the sandbox keeps read-only (or blocks with placeholders) under each writable root."""
    out: list[Path] = []
    for root in roots:
        for name in sorted(PROTECTED_NAMES):
            out.append(root / name)
        for name in sorted(PROTECTED_DIRS):
            out.append(root / name)
        out.append(root / ".git" / "hooks")
        out.append(root / ".git" / "config")
        out.append(root / ".git" / "info" / "attributes")
    out.extend(Path(e) for e in extra)
    seen: set[str] = set()
    uniq: list[Path] = []
    for p in out:
        if os.fspath(p) not in seen:
            seen.add(os.fspath(p))
            uniq.append(p)
    return uniq
