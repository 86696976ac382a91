"""Permission rules: (permission, pattern, action) across three scopes (PERM)."""

from .engine import Decision, RuleEngine, Subject
from .model import ACTION_RANK, Action, CompiledRule, Rule, Scope, compile_rules, most_restrictive

__all__ = [
    "ACTION_RANK",
    "Action",
    "CompiledRule",
    "Decision",
    "Rule",
    "RuleEngine",
    "Scope",
    "Subject",
    "compile_rules",
    "most_restrictive",
]
