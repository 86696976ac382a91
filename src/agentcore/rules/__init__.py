"""Permission rules: (permission, pattern, action) across three scopes (PERM)."""

from .evaluator import Decision, RuleEvaluator, Subject
from .model import ACTION_RANK, Action, CompiledRule, Rule, Scope, compile_rules, most_restrictive

__all__ = [
    "ACTION_RANK",
    "Action",
    "CompiledRule",
    "Decision",
    "Rule",
    "RuleEvaluator",
    "Scope",
    "Subject",
    "compile_rules",
    "most_restrictive",
]
