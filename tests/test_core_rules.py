"""The rule engine (PERM): specificity, ties, default, pinned manifest denies; property tests.

The property tests compare `RuleEvaluator` with a direct reading of the rule
text (an oracle written here from the architecture page, matching each path
with its compiled `PathPattern` and no pre-filtering) and check metamorphic
properties: rule order never matters, adding an allow never escalates.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.patterns.path import compile_path_pattern
from agentcore.rules import ACTION_RANK, Rule, RuleEvaluator, Subject, compile_rules
from agentcore.variables import Bindings, expand

pytestmark = [pytest.mark.timeout(120)]

WS = Path("/ws")
BINDINGS = Bindings.for_workspace(WS)
TOOL_CAP = {"read": "fs.read", "glob": "fs.read", "grep": "fs.read", "write": "fs.write", "edit": "fs.write"}


def rules_of(*specs: tuple[str, str, str, str]) -> list[Rule]:
    """(scope, permission, pattern, action) tuples -> Rules with per-scope indexes."""
    counters: dict[str, int] = {}
    out = []
    for scope, perm, pattern, action in specs:
        i = counters.get(scope, 0)
        counters[scope] = i + 1
        out.append(Rule(perm, pattern, action, scope=scope, index=i))  # type: ignore[arg-type]
    return out


def engine_of(rules: Sequence[Rule]) -> RuleEvaluator:
    return RuleEvaluator(compile_rules(rules, BINDINGS))


def subj(tool: str, path: str) -> Subject:
    return Subject(tool, TOOL_CAP[tool], "path", path)


def decide(rules: Sequence[Rule], tool: str, path: str) -> Any:
    return engine_of(rules).evaluate(subj(tool, path))


# -- unit: specificity, ties, default, pinning -------------------------------------------


def test_no_rule_means_ask() -> None:
    assert decide([], "read", "/ws/a.txt").action == "ask"
    d = decide(rules_of(("project", "write", "*", "allow")), "read", "/ws/a.txt")
    assert d.action == "ask" and d.rule is None


@pytest.mark.parametrize(
    ("specific", "general", "path"),
    [
        # exact beats any wildcard pattern, even one with more literal characters
        (("project", "read", "/ws/a.txt", "allow"), ("project", "read", "/ws/**/a.txt", "deny"), "/ws/a.txt"),
        (("session", "read", "{workspace}/a.txt", "deny"), ("project", "read", "/ws/**/a.tx[t]", "allow"), "/ws/a.txt"),
        # more literal characters beat fewer
        (("project", "read", "/ws/src/*", "allow"), ("project", "read", "/ws/*/*", "deny"), "/ws/src/m.py"),
        (("project", "read", "/ws/src/**/*.py", "deny"), ("session", "read", "/ws/src/**", "allow"), "/ws/src/a/m.py"),
        (("session", "*", "/ws/src/**", "allow"), ("project", "read", "/ws/**", "deny"), "/ws/src/m.py"),
        # same pattern: tool id beats capability beats '*'
        (("project", "read", "/ws/**", "allow"), ("project", "fs.read", "/ws/**", "deny"), "/ws/x"),
        (("project", "fs.read", "/ws/**", "allow"), ("project", "*", "/ws/**", "deny"), "/ws/x"),
        (("session", "read", "/ws/**", "deny"), ("project", "*", "/ws/**", "allow"), "/ws/x"),
    ],
)
def test_specificity_order(specific: tuple[str, str, str, str], general: tuple[str, str, str, str], path: str) -> None:
    for order in ((specific, general), (general, specific)):
        d = decide(rules_of(*order), "read", path)
        assert d.action == specific[3]
        assert d.rule is not None and d.rule.rule.pattern == specific[2]


@pytest.mark.parametrize(
    ("actions", "expected"),
    [(("allow", "deny"), "deny"), (("ask", "allow"), "ask"), (("deny", "ask"), "deny"), (("allow", "ask", "deny"), "deny"), (("allow", "allow"), "allow")],
)
@pytest.mark.parametrize("pattern", ["/ws/a.txt", "/ws/*.txt", "*"])
def test_equal_specificity_most_restrictive_wins(actions: tuple[str, ...], expected: str, pattern: str) -> None:
    specs = [("project" if i % 2 else "session", "read", pattern, a) for i, a in enumerate(actions)]
    for order in (specs, specs[::-1]):
        assert decide(rules_of(*order), "read", "/ws/a.txt").action == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "override",
    [
        ("project", "read", "/ws/.env", "allow"),
        ("session", "read", "{workspace}/.env", "allow"),
        ("session", "read", "/ws/.env", "ask"),
        ("project", "*", "*", "allow"),
    ],
)
def test_manifest_deny_is_pinned(override: tuple[str, str, str, str]) -> None:
    rules = rules_of(("manifest", "fs.read", "/ws/**/.env", "deny"), override)
    d = decide(rules, "read", "/ws/.env")
    assert d.action == "deny" and d.pinned and d.rule is not None and d.rule.rule.scope == "manifest"
    # Elsewhere the override applies normally.
    assert decide(rules, "read", "/ws/env.txt").action == (override[3] if override[2] == "*" else "ask")


def test_manifest_allow_and_ask_are_not_pinned() -> None:
    rules = rules_of(("manifest", "read", "/ws/**", "ask"), ("session", "read", "/ws/a.txt", "allow"))
    assert decide(rules, "read", "/ws/a.txt").action == "allow"
    rules = rules_of(("manifest", "read", "/ws/**", "allow"), ("project", "read", "/ws/a.txt", "deny"))
    assert decide(rules, "read", "/ws/a.txt").action == "deny"


@pytest.mark.parametrize("scope", ["manifest", "project", "session"])
def test_dir_double_star_rule_covers_dir_itself(scope: str) -> None:
    rules = rules_of((scope, "read", "{workspace}/secret/**", "deny"), ("session", "*", "*", "allow"))
    assert decide(rules, "read", "/ws/secret").action == "deny"
    assert decide(rules, "read", "/ws/secret/a/b").action == "deny"
    assert decide(rules, "read", "/ws/secretx").action == "allow"
    assert decide(rules, "read", "/ws").action == "allow"


def test_relative_rule_anchored_at_workspace_and_capability_filter() -> None:
    rules = rules_of(("project", "fs.write", "src/**", "allow"), ("project", "glob", "*", "deny"))
    assert decide(rules, "write", "/ws/src/a.py").action == "allow"
    assert decide(rules, "read", "/ws/src/a.py").action == "ask"  # fs.write rule does not apply to fs.read
    assert decide(rules, "write", "/other/src/a.py").action == "ask"
    assert decide(rules, "glob", "/ws/src").action == "deny"


def test_call_decision_is_most_restrictive_over_subjects() -> None:
    eng = engine_of(rules_of(("project", "read", "/ws/**", "allow"), ("project", "write", "/ws/**", "ask"), ("project", "*", "/ws/x", "deny")))
    worst, each = eng.evaluate_all([subj("read", "/ws/a"), subj("write", "/ws/a")])
    assert worst.action == "ask" and [d.action for d in each] == ["allow", "ask"]
    worst, _ = eng.evaluate_all([subj("read", "/ws/a"), subj("write", "/ws/x")])
    assert worst.action == "deny"
    worst, _ = eng.evaluate_all([])
    assert worst.action == "ask"


def test_none_kind_subject_only_matches_star_patterns() -> None:
    eng = engine_of(rules_of(("project", "todo", "/ws/**", "deny"), ("project", "todo", "*", "allow")))
    assert eng.evaluate(Subject("todo", None, "none", "")).action == "allow"


# -- oracle ---------------------------------------------------------------------------------


def _perm_rank(perm: str) -> int:
    return 0 if perm == "*" else (1 if perm.startswith("fs.") else 2)


def oracle(rules: Sequence[Rule], tool: str, path: str) -> tuple[str, bool]:
    """(action, pinned) read straight off the rules, from the architecture page."""
    cap = TOOL_CAP[tool]
    matching: list[tuple[tuple[int, int, int], str, bool]] = []
    for r in rules:
        if r.permission not in ("*", tool, cap):
            continue
        for text in expand(r.pattern, BINDINGS):
            if text == "*":
                spec, hit = (0, 0, _perm_rank(r.permission)), True
            else:
                pp = compile_path_pattern(r.pattern, text, anchor=WS)
                spec, hit = (int(pp.exact), pp.literal_count, _perm_rank(r.permission)), pp.matches(path)
            if hit:
                matching.append((spec, r.action, r.scope == "manifest" and r.action == "deny"))
    if any(pinned for _, _, pinned in matching):
        return "deny", True
    if not matching:
        return "ask", False
    best = max(s for s, _, _ in matching)
    return max((a for s, a, _ in matching if s == best), key=lambda a: ACTION_RANK[a]), False


# -- strategies ------------------------------------------------------------------------------

FRAGMENTS = ["src", "a.txt", "secret", ".env", "*", "**", "?.txt", "*.txt", "[ab].txt", "s*", "deep", "x"]
PREFIXES = ["{workspace}/", "/ws/", "", "/"]
PATHS = [
    "/ws", "/ws/src", "/ws/src/a.txt", "/ws/src/b.txt", "/ws/secret", "/ws/secret/a.txt", "/ws/secret/.env",
    "/ws/a.txt", "/ws/.env", "/ws/src/deep/x", "/ws/src/deep/a.txt", "/ws/sa.txt", "/ws/x", "/other/a.txt", "/wsx/a.txt",
]
PERMISSIONS = ["read", "write", "glob", "grep", "edit", "fs.read", "fs.write", "*"]

patterns = st.one_of(
    st.just("*"),
    st.builds(lambda pre, frags: pre + "/".join(frags), st.sampled_from(PREFIXES), st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4)),
)
actions = st.sampled_from(["allow", "deny", "ask"])
rule_specs = st.tuples(st.sampled_from(["project", "session"]), st.sampled_from(PERMISSIONS), patterns, actions)
manifest_specs = st.tuples(st.just("manifest"), st.sampled_from(PERMISSIONS), patterns, actions)
subjects = st.tuples(st.sampled_from(sorted(TOOL_CAP)), st.sampled_from(PATHS))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _valid(specs: Sequence[tuple[str, str, str, str]]) -> list[Rule]:
    return rules_of(*specs)


@SETTINGS
@given(manifest=st.lists(manifest_specs, max_size=4), others=st.lists(rule_specs, max_size=10), subject=subjects)
def test_engine_agrees_with_oracle(manifest: list[Any], others: list[Any], subject: tuple[str, str]) -> None:
    rules = _valid(manifest + others)
    d = decide(rules, *subject)
    assert (d.action, d.pinned) == oracle(rules, *subject)


@SETTINGS
@given(
    denies=st.lists(st.tuples(st.just("manifest"), st.sampled_from(PERMISSIONS), patterns, st.just("deny")), min_size=1, max_size=3),
    others=st.lists(rule_specs, max_size=12),
    subject=subjects,
)
def test_manifest_deny_always_denies(denies: list[Any], others: list[Any], subject: tuple[str, str]) -> None:
    tool, path = subject
    deny_rules = _valid(denies)
    hit = oracle(deny_rules, tool, path)[0] == "deny"  # some manifest deny matches this subject
    d = decide(deny_rules + _valid(others), tool, path)
    if hit:
        assert d.action == "deny" and d.pinned
        assert d.rule is not None and d.rule.rule.scope == "manifest"


@SETTINGS
@given(manifest=st.lists(manifest_specs, max_size=4), others=st.lists(rule_specs, min_size=1, max_size=12), subject=subjects, seed=st.integers(0, 2**32 - 1))
def test_rule_order_does_not_matter(manifest: list[Any], others: list[Any], subject: tuple[str, str], seed: int) -> None:
    rules = _valid(manifest + others)
    base = decide(rules, *subject)
    rng = random.Random(seed)
    # within each scope
    by_scope: dict[str, list[Rule]] = {}
    for r in rules:
        by_scope.setdefault(r.scope, []).append(r)
    within: list[Rule] = []
    for scope in ("manifest", "project", "session"):
        group = by_scope.get(scope, [])[:]
        rng.shuffle(group)
        within += group
    # and across scopes
    across = rules[:]
    rng.shuffle(across)
    for shuffled in (within, across, rules[::-1]):
        d = decide(shuffled, *subject)
        assert (d.action, d.pinned) == (base.action, base.pinned)


@SETTINGS
@given(
    manifest=st.lists(manifest_specs, max_size=3),
    others=st.lists(rule_specs, max_size=10),
    extra=st.tuples(st.sampled_from(["project", "session"]), st.sampled_from(PERMISSIONS), patterns, st.just("allow")),
    subject=subjects,
)
def test_adding_an_allow_never_escalates(manifest: list[Any], others: list[Any], extra: Any, subject: tuple[str, str]) -> None:
    tool, path = subject
    rules = _valid(manifest + others)
    before = decide(rules, tool, path)
    added = rules_of(extra)[0]
    after = decide(rules + [added], tool, path)
    assert ACTION_RANK[after.action] <= ACTION_RANK[before.action]
    if before.action == "deny" and after.action != "deny":
        assert after.action == "allow"
        assert not before.pinned
        assert after.rule is not None and after.rule.rule is added
        assert oracle([added], tool, path)[0] == "allow"  # it matches the subject ...
        spec = lambda cr: (1 if cr.matcher("path")[2] else 0, cr.matcher("path")[1], cr.perm_rank)  # noqa: E731
        assert spec(after.rule) > spec(before.rule)  # ... and is strictly more specific


def test_random_workload_is_consistent_with_oracle_at_scale() -> None:
    """A fixed seed, many rules at once: the pre-sorted candidate lists stay correct."""
    rng = random.Random(1234)
    specs = []
    for _ in range(300):
        frags = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 4))]
        pattern = "*" if rng.random() < 0.05 else rng.choice(PREFIXES) + "/".join(frags)
        specs.append((rng.choice(["manifest", "project", "session"]), rng.choice(PERMISSIONS), pattern, rng.choice(["allow", "deny", "ask"])))
    rules = _valid(specs)
    eng = engine_of(rules)
    for tool in TOOL_CAP:
        for path in PATHS:
            d = eng.evaluate(subj(tool, path))
            assert (d.action, d.pinned) == oracle(rules, tool, path)
