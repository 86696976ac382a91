"""Rule evaluators that get PERM-9 wrong in one deliberate way each.

Plugged into a session in place of the engine's own RuleEvaluator, so the
rest of the pipeline (capability check, watchdog, asks, search filtering)
stays the real one and only the rule decision is broken.
"""

from __future__ import annotations

from typing import Any, Iterable

from agentcore.rules.evaluator import Decision, Subject
from agentcore.rules.model import ACTION_RANK, CompiledRule

MODES = ("allow", "first-match", "ties-allow", "no-pin", "default-allow", "anonymous-ask")


class BrokenRuleEvaluator:
    def __init__(self, rules: Iterable[CompiledRule], mode: str) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self._rules = tuple(rules)
        self.mode = mode

    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        return self._rules

    def _applies(self, cr: CompiledRule, subject: Subject) -> tuple[bool, tuple[int, int, int]]:
        perm = cr.rule.permission
        if perm != "*" and perm != subject.tool and perm != subject.capability:
            return False, (0, 0, 0)
        fn, literal, exact, _prefix = cr.matcher(subject.kind)
        if fn is None or not fn(subject.value, subject):
            return False, (0, 0, 0)
        return True, (1 if exact else 0, literal, cr.perm_rank)

    def evaluate(self, subject: Subject) -> Decision:
        if self.mode == "allow":
            return Decision("allow", None, subject)
        matching: list[tuple[tuple[int, int, int], CompiledRule]] = []
        for cr in self._rules:
            ok, spec = self._applies(cr, subject)
            if ok:
                if self.mode == "first-match":
                    return Decision(cr.action, cr, subject)
                matching.append((spec, cr))
        if not matching:
            return Decision("allow" if self.mode == "default-allow" else "ask", None, subject)
        if self.mode != "no-pin":
            for _spec, cr in matching:
                if cr.pinned:
                    return Decision("deny", cr, subject, pinned=True)
        best = max(spec for spec, _ in matching)
        tied = [cr for spec, cr in matching if spec == best]
        if self.mode == "ties-allow":
            chosen = min(tied, key=lambda cr: ACTION_RANK[cr.action])
        else:
            chosen = max(tied, key=lambda cr: ACTION_RANK[cr.action])
        if self.mode == "anonymous-ask" and chosen.action == "ask":
            return Decision("ask", None, subject)  # an explicit ask looks like the default one
        return Decision(chosen.action, chosen, subject)

    def evaluate_all(self, subjects: Iterable[Subject]) -> tuple[Decision, list[Decision]]:
        decisions = [self.evaluate(s) for s in subjects]
        if not decisions:
            return Decision("ask", None, None), decisions
        return max(decisions, key=lambda d: ACTION_RANK[d.action]), decisions


def break_session(session: Any, mode: str) -> None:
    """Make `session` evaluate its rules with a broken evaluator from now on."""
    from agentcore.session import Session

    base = type(session)

    class _Broken(base):  # type: ignore[misc, valid-type]
        @property
        def rule_evaluator(self) -> Any:  # noqa: D401 - replaces the property
            rules = self._manifest_rules + self._project_rules + tuple(self._session_rules)
            return BrokenRuleEvaluator(rules, mode)

    assert isinstance(session, Session)
    session.__class__ = _Broken
