"""The watchdog itself: categories, the per-call review, the verdict and the manifest hook."""

from __future__ import annotations

import os
from typing import Any, Iterable

from ...vocabulary import INTERNAL_CATEGORY, unknown_categories
from ...vocabulary import WATCHDOG_CATEGORIES as CATEGORIES
from ...watchdog import OPEN_SCREEN, AllowAllWatchdog, ReadScreen, Verdict, Watchdog, WatchdogCall
from .paths import _Ctx, _Finding, _norm
from .secrets import _is_secret, secret_markers

# A `read` is asked exactly when its resolved path is secret (WDOG-11), so that is what a search leaves out.
_SECRETS_SCREEN = ReadScreen(_is_secret, secret_markers)


_WORDS = {
    "exfiltration": "possible data exfiltration",
    "destructive": "destructive operation",
    "code_execution_wrapper": "arbitrary code execution",
    "secrets": "secret file access",
}


_PATHISH_KEYS = frozenset({"path", "file_path", "filepath", "file", "notebook_path", "glob", "include", "paths"})
_GLOB_TOOL_KEYS = _PATHISH_KEYS | {"pattern"}  # the glob tool's pattern is a file-name pattern


def _fspath_str(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, os.PathLike):
        p = os.fspath(v)
        return p if isinstance(p, str) else None
    return None


class DefaultWatchdog:
    """The engine's default watchdog; `disabled` names categories to skip."""

    def __init__(self, disabled: Iterable[str] = ()) -> None:
        names = list(disabled)
        unknown = unknown_categories(names)
        if unknown:
            raise ValueError(f"unknown watchdog categories: {', '.join(unknown)}")
        self._enabled = frozenset(CATEGORIES) - frozenset(names)
        self._home = _norm(os.path.expanduser("~"))

    @property
    def enabled(self) -> frozenset[str]:
        return self._enabled

    def read_screen(self, manifest: Any) -> ReadScreen:
        """The paths a `read` would be asked about: the secret ones, unless `secrets` is switched off (WDOG-17)."""
        return _SECRETS_SCREEN if "secrets" in self._enabled else OPEN_SCREEN

    async def review(self, call: WatchdogCall) -> Verdict:
        try:
            return self._review(call)
        except Exception:  # never let a malformed call through
            return Verdict("deny", "watchdog: the call could not be analysed", INTERNAL_CATEGORY)

    def _review(self, call: WatchdogCall) -> Verdict:
        enabled = self._enabled
        check_secrets = "secrets" in enabled
        ws_raw = getattr(call.manifest, "workspace", None)
        ws = _norm(os.fspath(ws_raw)) if ws_raw is not None else None
        effective = getattr(call.manifest, "effective", None)
        ctx = _Ctx(ws, self._home, enabled, getattr(effective, "can_write", None))
        if check_secrets and (_secret_path(call.paths or {}) or _secret_argument(call.tool, call.args)):
            ctx.add("secrets", "ask", "the call touches a secret file")
        shell = getattr(call, "shell", ())
        total = 0
        if call.commands or shell:
            # Whatever the tool is called: a call that declares a shell access runs commands (WDOG-1).
            from .dispatch import _review_command  # the program tables: 4 ms a command line that runs no shell need not pay

            commands = call.commands or _parse_fallback(shell)
            if commands is None:
                return Verdict("deny", "watchdog: the shell command could not be analysed", INTERNAL_CATEGORY)
            for i, cmd in enumerate(commands):
                ctx.index = i
                _review_command(ctx, tuple(cmd.argv), tuple(cmd.redirects or ()), check_secrets)
            total = len(commands)
        return _verdict(ctx.findings, total)


def _secret_path(paths: Any) -> bool:
    return any((p := _fspath_str(v)) is not None and _is_secret(p) for v in paths.values())


def _secret_argument(tool: str, args: Any) -> bool:
    """A path-like argument that is secret as written (WDOG-11); `glob`'s pattern is a path pattern too."""
    keys = _GLOB_TOOL_KEYS if tool == "glob" else _PATHISH_KEYS
    for key, v in args.items():
        if key in keys:
            vals = v if isinstance(v, (list, tuple)) else (v,)
            if any(isinstance(x, str) and _is_secret(x) for x in vals):
                return True
    return False


def _parse_fallback(lines: Any) -> tuple[Any, ...] | None:
    """The pipeline hands the parsed commands over; a caller that gave only the command lines gets them
    parsed by the same parser. None when one of them cannot be parsed."""
    from ...shell.parse import ShellRefused, parse_shell

    commands: list[Any] = []
    for source in lines:
        if not isinstance(source, str):
            return None
        try:
            commands += parse_shell(source).commands
        except ShellRefused:
            return None
    return tuple(commands)


def _verdict(findings: list[_Finding], total: int) -> Verdict:
    if not findings:
        return Verdict.allow()
    chosen = next((f for f in findings if f[0] == "deny"), findings[0])
    action, category, detail, index = chosen
    where = f" (command {index + 1} of {total})" if total > 1 else ""
    return Verdict(action, f"{_WORDS[category]}: {detail}{where}", category)  # type: ignore[arg-type]


def default_watchdog_for(manifest: Any) -> Watchdog:
    """The watchdog a manifest asks for: off, or the default one minus its disabled categories."""
    spec = getattr(getattr(manifest, "spec", None), "watchdog", None)
    if spec is not None and getattr(spec, "enabled", True) is False:
        return AllowAllWatchdog()
    return DefaultWatchdog(getattr(spec, "disable", None) or ())
