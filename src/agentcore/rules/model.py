"""Rule values and their compiled, kind-aware matchers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Container, Iterable, Literal

from wcmatch import fnmatch as wcfnmatch

from ..errors import CompileError
from ..patterns.globtext import (
    MAX_GLOBSTAR_RUNS,
    _tokens,
    dangling_escape,
    glob_escape,
    glob_literal_count,
    glob_literal_prefix,
    glob_unescape,
    globstar_runs,
    has_wildcard,
)
from ..patterns.path import compile_path_pattern
from ..textdata import did_you_mean
from ..variables import Bindings, expand

Action = Literal["allow", "deny", "ask"]
Scope = Literal["manifest", "project", "session"]
SubjectKind = Literal["path", "host", "command", "none"]

ACTION_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
CAPABILITY_KINDS: dict[str, SubjectKind] = {
    "fs.read": "path",
    "fs.write": "path",
    "net.fetch": "host",
    "shell.run": "command",
}


def glob_literal_suffix(pattern: str) -> str:
    """The literal text after the last wildcard (unescaped); the whole text when there is none.

    Every value a pattern matches as a whole ends with it, as every value
    starts with `glob_literal_prefix`.
    """
    out: list[str] = []
    for lit, text in reversed(_tokens(pattern)):
        if not lit:
            break
        out.append(text)
    return "".join(reversed(out))


def most_restrictive(actions: Iterable[str]) -> str:
    return max(actions, key=lambda a: ACTION_RANK[a], default="ask")


@dataclass(frozen=True)
class Rule:
    """One permission rule as written (manifest, project, or session): permission, pattern and action."""

    permission: str
    pattern: str
    action: Action
    scope: Scope = "session"
    index: int = 0            # position in its scope's list, for explanations
    origin: str = ""          # file:line where it was written, when known
    # A session deny the host pins (a permission mode such as ACP's read-only): like a manifest deny, no
    # allow or ask of any scope, however specific, can override it (PERM-9).
    pinned: bool = False


Matcher = Callable[[str, "object"], bool]


@dataclass
class CompiledRule:
    """One expansion of one rule; matchers are built per subject kind on demand."""

    rule: Rule
    expanded: str
    perm_rank: int
    anchor: Path | None
    paths_only: bool = False  # a deny's pattern with its literal directory resolved (`linked_variant`): paths only
    _matchers: dict[str, tuple[Callable[..., bool] | None, int, bool, str]] = field(default_factory=dict, repr=False)
    _suffixes: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def action(self) -> str:
        return self.rule.action

    @property
    def pinned(self) -> bool:
        return self.rule.action == "deny" and (self.rule.scope == "manifest" or self.rule.pinned)

    def matcher(self, kind: SubjectKind) -> tuple[Callable[..., bool] | None, int, bool, str]:
        """(match function or None if the pattern cannot apply, literal count, exact, literal prefix)."""
        got = self._matchers.get(kind)
        if got is None:
            got = self._build(kind)
            self._matchers[kind] = got
        return got

    def literal_suffix(self, kind: SubjectKind) -> str:
        """Every value the pattern matches for `kind` ends with this ("" when nothing can be said).

        A second quick reject next to the literal prefix, for patterns such as
        `**/*.env` whose prefix (the workspace, once anchored) rejects nothing.
        """
        got = self._suffixes.get(kind)
        if got is None:
            got = self._suffixes[kind] = self._build_suffix(kind)
        return got

    def _build_suffix(self, kind: SubjectKind) -> str:
        text = self.expanded
        if self.paths_only and kind != "path":
            return ""
        if text == "*" or kind in ("none", "host"):
            return ""  # host patterns match on the parsed host and port, not the value text
        if kind == "path":
            try:
                pp = compile_path_pattern(self.rule.pattern, text, anchor=self.anchor)
            except CompileError:
                return ""
            if pp.expanded.endswith("/**"):
                return ""  # also matches the directory itself
            return glob_literal_suffix(pp.expanded)
        if kind == "command":
            return glob_literal_suffix(text)
        return ""

    def _build(self, kind: SubjectKind) -> tuple[Callable[..., bool] | None, int, bool, str]:
        text = self.expanded
        if self.paths_only and kind != "path":
            return None, 0, False, ""
        if text == "*":
            return (lambda value, subject=None: True), 0, False, ""
        if kind == "none":
            return None, 0, False, ""
        if kind == "path":
            try:
                pp = compile_path_pattern(self.rule.pattern, text, anchor=self.anchor)
            except CompileError:
                return None, 0, False, ""
            prefix = glob_literal_prefix(pp.expanded)
            if pp.expanded.endswith("/**") and prefix.endswith("/"):
                # `dir/**` also matches `dir` itself, which lacks the trailing slash.
                prefix = prefix[:-1]
            return (lambda value, subject=None, _m=pp.matches: _m(value)), pp.literal_count, pp.exact, prefix
        if kind == "command":
            if dangling_escape(text):
                return None, 0, False, ""  # wcmatch would drop the backslash that the literal counts keep
            regex = re.compile(wcfnmatch.translate(text, flags=wcfnmatch.DOTMATCH | wcfnmatch.FORCEUNIX | wcfnmatch.CASE)[0][0])
            exact = not has_wildcard(text)
            # `match`, unlike paths: `$` also accepts one final newline, which the shell ignores, so a deny of
            # `rm *.txt` still holds for `rm a.txt` written with one (fail closed); `a\nb` is never accepted.
            return (lambda value, subject=None, _r=regex: _r.match(value) is not None), glob_literal_count(text), exact, glob_literal_prefix(text)
        if kind == "host":
            from ..net.hosts import compile_host_pattern

            try:
                hp = compile_host_pattern(text)
            except Exception:
                return None, 0, False, ""

            def match_host(value: str, subject: object = None, _hp=hp) -> bool:
                host = getattr(subject, "host", None)
                port = getattr(subject, "port", None)
                if host is None or port is None:
                    return False
                return bool(_hp.matches(host, port))

            exact = "*" not in text
            # Counted on the canonical spelling: `example.com.`, `EXAMPLE.COM` or a U-label name one host, and
            # a longer spelling of a manifest's ask must not outrank it (a tie goes to the most restrictive).
            return match_host, len(hp.canonical.replace("*", "")), exact, ""
        return None, 0, False, ""


def _perm_rank(permission: str) -> int:
    if permission == "*":
        return 0
    if permission in CAPABILITY_KINDS or "." in permission:
        return 1
    return 2


_TOOL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _prefixed(permission: str, prefixes: tuple[str, ...]) -> bool:
    """A well-formed tool id with more after one of `prefixes` (an MCP server's tools)."""
    return bool(_TOOL_ID.fullmatch(permission)) and any(
        permission.startswith(p) and len(permission) > len(p) for p in prefixes
    )


def compile_rules(
    rules: Iterable[Rule],
    bindings: Bindings,
    *,
    known_tools: Container[str] = (),
    known_capabilities: Iterable[str] = (),
    locate: Callable[[Rule, str], str] | None = None,
    known_tool_prefixes: Iterable[str] = (),
) -> tuple[CompiledRule, ...]:
    """Expand variables and validate patterns against the kinds they will meet.

    `locate(rule, key)` says where a rule's key was written ("file:line: rules.0.pattern"),
    for errors; without it errors name the rule's origin. `known_tool_prefixes`
    (`<server>__` of each MCP server) admit tool ids whose tools are only listed
    when the server runs.
    """
    anchor = bindings.workspace
    tools = known_tools  # a catalogue answers `in` without loading every plugin
    prefixes = tuple(known_tool_prefixes)
    caps = set(known_capabilities) | set(CAPABILITY_KINDS)
    out: list[CompiledRule] = []
    for rule in rules:
        where = rule.origin or f"{rule.scope} rule #{rule.index + 1}"
        perm = rule.permission
        if perm != "*" and perm not in caps and tools and perm not in tools and not _prefixed(perm, prefixes):
            hint = did_you_mean(perm, [*tools, *caps, "*"])  # type: ignore[misc]
            raise CompileError(
                f"permission {perm!r} is neither a known tool, a capability nor '*'{hint}",
                location=locate(rule, "permission") if locate else where,
            )
        where = locate(rule, "pattern") if locate else where
        if globstar_runs(rule.pattern) > MAX_GLOBSTAR_RUNS:
            # Refused whatever the kinds it meets: as a pattern that matches nothing, a deny would vanish.
            raise CompileError(f"pattern has more than {MAX_GLOBSTAR_RUNS} '**' runs, which no value could be matched against in bounded time",
                               location=where)
        for text in expand(rule.pattern, bindings, where=where):
            cr = CompiledRule(rule=rule, expanded=text, perm_rank=_perm_rank(perm), anchor=anchor)
            kind = CAPABILITY_KINDS.get(perm)
            if kind is not None and text != "*" and cr.matcher(kind)[0] is None:
                raise CompileError(f"pattern is not a valid {kind} pattern for {perm}", location=where)
            out.append(cr)
            if rule.action == "deny" and text != "*" and kind in (None, "path"):
                linked = linked_variant(text, anchor)
                if linked is not None:
                    out.append(CompiledRule(rule=rule, expanded=linked, perm_rank=cr.perm_rank, anchor=anchor, paths_only=True))
    return tuple(out)


def linked_variant(text: str, anchor: Path | None) -> str | None:
    """The path pattern `text` with its literal directory (the whole path, for an exact pattern) resolved
    through the symlinks there now; None when nothing resolves differently or `text` is no path pattern.

    Values are canonical paths (REQ-5), so a deny naming `ws/keys/**` where `keys` links to `ws/store`
    would match nothing while `read keys/id.pem` reads `ws/store/id.pem`: a deny means the files it
    names, by whatever name they are reached. Only denies get this (more denies never allow anything);
    an allow or ask resolved through a link the agent made could outrank a rule the user wrote.
    Symlinks in the wildcard part of a pattern, or made after compilation, are not followed.
    """
    try:
        pp = compile_path_pattern(text, text, anchor=anchor)
    except CompileError:
        return None
    parts = pp.expanded.split("/")
    cut = len(parts) if pp.exact else next((i for i, part in enumerate(parts) if has_wildcard(part)), None)
    if cut is None:
        return None
    literal = glob_unescape("/".join(parts[:cut]))
    # The split must agree with the whole pattern's reading (an escaped `/`, a class spanning one).
    prefix = glob_literal_prefix(pp.expanded)
    if not literal or not (prefix == literal if pp.exact else prefix.startswith(literal + "/")):
        return None
    try:
        real = os.path.realpath(literal)
    except (OSError, ValueError):
        return None
    if real == literal:
        return None
    if cut == len(parts):
        return glob_escape(real)
    return "/".join([glob_escape(real).rstrip("/"), *parts[cut:]])
