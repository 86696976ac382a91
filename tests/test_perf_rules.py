"""The rule engine's literal-suffix quick reject, and the cached workspace binding.

The reject must never skip a rule whose matcher would accept the value:
checked against the compiled matchers directly (including values ending in
`/` or a newline, which the matchers accept after the suffix) and against a
plain evaluation without any quick reject.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentcore.rules import ACTION_RANK, Rule, RuleEvaluator, Subject, compile_rules
from agentcore.rules.model import glob_literal_suffix
from agentcore.variables import Bindings

pytestmark = [pytest.mark.timeout(120)]
WS = Path("/ws")
BINDINGS = Bindings.for_workspace(WS)

PIECE = st.sampled_from(["*", "**", "?", "a", "b.env", ".env", "x\\*", "[ab]", "c/", "/", "d e", "\u00e9", "gen1", "\n"])
GLOB = st.lists(PIECE, min_size=1, max_size=5).map("".join)
PATH_PATTERN = st.one_of(GLOB, GLOB.map(lambda g: "{workspace}/" + g), GLOB.map(lambda g: "/" + g))
CHAR = st.sampled_from(["a", "b", ".", "env", "/", "e", "x", "*", "\u00e9", "\n", "gen1", " ", "c"])
VALUE = st.lists(CHAR, max_size=8).map(lambda xs: "/ws/" + "".join(xs))
COMMAND_VALUE = st.lists(CHAR, max_size=8).map("".join)


def test_literal_suffix() -> None:
    assert glob_literal_suffix("**/*.env") == ".env"
    assert glob_literal_suffix("/ws/a") == "/ws/a"
    assert glob_literal_suffix("a*b\\*c") == "b*c"
    assert glob_literal_suffix("a[xy]") == ""
    assert glob_literal_suffix("*") == ""


def _compiled(permission: str, pattern: str) -> list:
    try:
        return list(compile_rules([Rule(permission, pattern, "deny")], BINDINGS))
    except Exception:
        return []  # an invalid pattern is refused at compile time: nothing to check


@settings(max_examples=400, deadline=None)
@given(pattern=PATH_PATTERN, values=st.lists(VALUE, min_size=1, max_size=6))
def test_path_suffix_never_rejects_a_match(pattern: str, values: list[str]) -> None:
    for cr in _compiled("read", pattern):
        fn, _lit, _exact, prefix = cr.matcher("path")
        if fn is None:
            continue
        suffix = cr.literal_suffix("path")
        for v in values:
            if fn(v):
                # The evaluator reads a run of slashes as one before its quick reject, as the matchers do.
                n = re.sub("/+", "/", v)
                assert fn(n), (pattern, v)
                assert n.startswith(prefix), (pattern, v, prefix)
                assert n.endswith(suffix) or n[-1:] in ("/", "\n"), (pattern, v, suffix)


@settings(max_examples=300, deadline=None)
@given(pattern=GLOB, values=st.lists(COMMAND_VALUE, min_size=1, max_size=6))
def test_command_suffix_never_rejects_a_match(pattern: str, values: list[str]) -> None:
    for cr in _compiled("bash", pattern):
        fn, _lit, _exact, _prefix = cr.matcher("command")
        suffix = cr.literal_suffix("command")
        for v in values:
            if fn(v):
                assert v.endswith(suffix) or v.endswith("\n"), (pattern, v, suffix)


def _plain(rules: list, subject: Subject) -> tuple[str, object]:
    """The evaluation order without any quick reject: pinned denies, then most specific, most restrictive."""
    cands = []
    for cr in rules:
        if cr.rule.permission not in ("*", subject.tool, subject.capability):
            continue
        fn, literal, exact, _prefix = cr.matcher(subject.kind)
        if fn is None or not fn(subject.value, subject):
            continue
        if cr.pinned:
            return "deny", cr
        cands.append(((1 if exact else 0, literal, cr.perm_rank), ACTION_RANK[cr.action], cr))
    if not cands:
        return "ask", None
    best = max(cands, key=lambda c: (c[0], c[1]))
    return best[2].action, best[2]


RULE = st.tuples(
    st.sampled_from(["*", "read", "fs.read", "grep"]),
    PATH_PATTERN,
    st.sampled_from(["allow", "deny", "ask"]),
    st.sampled_from(["manifest", "project", "session"]),
)


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(RULE, max_size=8), values=st.lists(VALUE, min_size=1, max_size=5))
# Found by this test: a run of slashes in the value, which the glob matchers read as one
# slash while the literal prefix check and literal patterns did not.
@example(specs=[("*", "*", "deny", "project"), ("*", "\n*", "allow", "manifest")], values=["/ws//\n"])
@example(specs=[("*", "*", "allow", "manifest"), ("*", "\n", "deny", "manifest")], values=["/ws//\n"])
@example(specs=[("*", "*", "allow", "project"), ("read", "{workspace}/secret", "deny", "project")], values=["/ws//secret"])
def test_engine_decides_as_a_plain_evaluation(specs: list[tuple[str, str, str, str]], values: list[str]) -> None:
    rules = []
    for perm, pattern, action, scope in specs:
        rules += _compiled(perm, pattern) and [Rule(perm, pattern, action, scope=scope)]  # type: ignore[arg-type]
    compiled = compile_rules(rules, BINDINGS)
    engine = RuleEvaluator(compiled)
    for v in values:
        s = Subject("grep", "fs.read", "path", v)
        got = engine.evaluate(s)
        action, rule = _plain(list(compiled), s)
        assert got.action == action
        if action != "ask":
            assert got.rule is not None and got.rule.action == action


def test_workspace_binding_is_cached_and_unchanged() -> None:
    b = Bindings.for_workspace(Path("/some/ws"), extra_roots=[Path("/other")])
    assert b.workspace == Path("/some/ws") and b.workspace is b.workspace
    assert Bindings().workspace is None
    assert b == Bindings.for_workspace(Path("/some/ws"), extra_roots=[Path("/other")])


@pytest.mark.parametrize("value", ["/ws/a.env", "/ws/a.env\n", "/ws/a.env/", "/ws/a.env//"])
def test_values_the_matchers_accept_past_the_suffix_are_still_decided_by_them(value: str) -> None:
    # The compiled path matcher accepts trailing slashes and one trailing newline after the
    # literal suffix; the quick reject must leave such values to it (fail closed on a deny).
    compiled = compile_rules([Rule("read", "**/*.env", "deny", scope="manifest"), Rule("*", "*", "allow")], BINDINGS)
    fn, *_ = compiled[0].matcher("path")
    s = Subject("read", "fs.read", "path", value)
    assert RuleEvaluator(compiled).evaluate(s).action == ("deny" if fn(value) else "allow") == _plain(list(compiled), s)[0]
    cmd = compile_rules([Rule("bash", "rm *.txt", "deny"), Rule("*", "*", "allow")], BINDINGS)
    c = Subject("bash", "shell.run", "command", "rm a.txt" + value[len("/ws/a.env"):].replace("/", ""))
    assert RuleEvaluator(cmd).evaluate(c).action == _plain(list(cmd), c)[0] == "deny"


def test_a_run_of_slashes_means_one_slash_for_every_path_pattern() -> None:
    engine = RuleEvaluator(compile_rules([Rule("*", "*", "allow"), Rule("read", "{workspace}/secret", "deny"), Rule("read", "**/*.pem", "deny")], BINDINGS))
    for value in ("/ws//secret", "/ws/secret", "//ws///secret", "/ws//a//k.pem"):
        assert engine.evaluate(Subject("read", "fs.read", "path", value)).action == "deny", value
