"""The rule evaluation order (PERM).

Per subject: (1) a matching manifest deny decides (pinned); (2) otherwise the
most specific matching rule over all scopes decides, specificity being the
tuple (exact pattern, literal characters, permission rank) compared
lexicographically; (3) equally specific matches resolve to the most
restrictive action; (4) no match means `ask`. A call's decision is the most
restrictive of its subjects' decisions.

Candidates are pre-sorted by specificity once per (tool, capability, kind),
so evaluation stops at the first specificity level that matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .model import ACTION_RANK, CompiledRule, SubjectKind


@dataclass(frozen=True)
class Subject:
    """One thing a call touches, as the rules see it: a tool's permission with a path, host or command."""

    tool: str
    capability: str | None
    kind: SubjectKind
    value: str
    host: str | None = None
    port: int | None = None

    def describe(self) -> str:
        what = self.capability or self.tool
        return f"{what} {self.value}" if self.value else what


@dataclass(frozen=True)
class Decision:
    """The rules' answer for one subject: the action and the rule that decided it (none: the default)."""

    action: str
    rule: CompiledRule | None
    subject: Subject | None
    pinned: bool = False

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"action": self.action, "pinned": self.pinned}
        if self.rule is not None:
            r = self.rule.rule
            out["rule"] = {
                "scope": r.scope,
                "index": r.index,
                "permission": r.permission,
                "pattern": r.pattern,
                "action": r.action,
                **({"origin": r.origin} if r.origin else {}),
            }
        else:
            out["rule"] = None
        return out


_SLASH_RUN = re.compile(r"/{2,}")
_LOOSE_ENDS = ("/", "\n")

# (specificity, restrictiveness, rule, match function, literal prefix, literal suffix)
_Entry = tuple[tuple[int, int, int], int, CompiledRule, "object", str, str]


class RuleEvaluator:
    """Immutable view over the compiled rules of all three scopes."""

    def __init__(self, rules: Sequence[CompiledRule]) -> None:
        self._rules = tuple(rules)
        self._cache: dict[tuple[str, str | None, str], tuple[list[_Entry], list[_Entry]]] = {}

    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        return self._rules

    def _candidates(self, tool: str, capability: str | None, kind: SubjectKind) -> tuple[list[_Entry], list[_Entry]]:
        key = (tool, capability, kind)
        got = self._cache.get(key)
        if got is not None:
            return got
        pinned: list[_Entry] = []
        ranked: list[_Entry] = []
        for cr in self._rules:
            perm = cr.rule.permission
            if perm != "*" and perm != tool and perm != capability:
                continue
            fn, literal, exact, prefix = cr.matcher(kind)
            if fn is None:
                continue
            spec = (1 if exact else 0, literal, cr.perm_rank)
            entry: _Entry = (spec, ACTION_RANK[cr.action], cr, fn, prefix, cr.literal_suffix(kind))
            if cr.pinned:
                pinned.append(entry)
            ranked.append(entry)
        ranked.sort(key=lambda e: (e[0], e[1]), reverse=True)
        got = (pinned, ranked)
        self._cache[key] = got
        return got

    def evaluate(self, subject: Subject) -> Decision:
        pinned, ranked = self._candidates(subject.tool, subject.capability, subject.kind)
        value = subject.value
        if subject.kind == "path" and "//" in value:
            # Path matchers read a run of slashes as one; the quick rejects below must too, or
            # a non-canonical value could skip a rule its matcher accepts (a deny included).
            value = _SLASH_RUN.sub("/", value)
        # A value not starting with a pattern's literal prefix, or not ending with
        # its literal suffix, cannot match it: skipped without running the matcher.
        # (The compiled matchers also accept trailing `/`s and one trailing newline
        # after the suffix, so a value ending in either always goes to the matcher.)
        loose_end = value[-1:] in _LOOSE_ENDS
        for _spec, _rank, cr, fn, prefix, suffix in pinned:
            if value.startswith(prefix) and (loose_end or value.endswith(suffix)) and fn(value, subject):
                return Decision("deny", cr, subject, pinned=True)
        # Sorted by (specificity, restrictiveness) descending, so the first
        # match is the most specific one and, among equals, the most restrictive.
        for _spec, _rank, cr, fn, prefix, suffix in ranked:
            if value.startswith(prefix) and (loose_end or value.endswith(suffix)) and fn(value, subject):
                return Decision(cr.action, cr, subject)
        return Decision("ask", None, subject)

    def evaluate_all(self, subjects: Iterable[Subject]) -> tuple[Decision, list[Decision]]:
        decisions = [self.evaluate(s) for s in subjects]
        if not decisions:
            return Decision("ask", None, None), decisions
        worst = max(decisions, key=lambda d: ACTION_RANK[d.action])
        return worst, decisions


def manifest_host_denies(rules: Sequence[Any]) -> Callable[[str, int], bool]:
    """(canonical host, port) -> whether a manifest deny rule on `net.fetch` or `*` names it (NET-8, MCP-9).

    For the filtering proxies, which see hosts that no call's arguments showed (a redirect, a server's own
    requests): the pinned denies hold there too.
    """
    from ..net.hosts import format_authority

    evaluator = RuleEvaluator([r for r in rules if r.rule.scope == "manifest" and r.rule.action == "deny"])

    def denied(host: str, port: int) -> bool:
        subject = Subject("", "net.fetch", "host", format_authority(host, port), host=host, port=port)
        return bool(evaluator.evaluate(subject).pinned)

    return denied
