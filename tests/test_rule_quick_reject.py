"""Rule patterns decide as their matcher reads them, and in bounded time: each test shows a call that was decided wrongly or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcore.rules import Rule, RuleEvaluator, Subject, compile_rules
from agentcore.variables import Bindings

pytestmark = [pytest.mark.timeout(120)]
BINDINGS = Bindings.for_workspace(Path("/ws"))


def _engine(*rules: tuple[str, str, str, str]) -> RuleEvaluator:
    out = [Rule(perm, pat, act, scope=scope, index=i) for i, (scope, perm, pat, act) in enumerate(rules)]  # type: ignore[arg-type]
    return RuleEvaluator(compile_rules(out, BINDINGS))


@pytest.mark.parametrize(
    ("deny", "value"),
    [
        ("rm -r[[:alpha:]]", "rm -rf"),       # a POSIX class: its inner `]` is not the class's end
        ("rm -r[!]x]", "rm -rf"),             # `]` first in a negated class is a member
        ("rm -r[\\]f]", "rm -rf"),            # an escaped `]` inside a class
    ],
)
def test_pinned_command_deny_with_bracket_class_applies(deny: str, value: str) -> None:
    engine = _engine(("manifest", "shell.run", deny, "deny"), ("project", "shell.run", "rm *", "allow"))
    d = engine.evaluate(Subject("bash", "shell.run", "command", value))
    assert d.action == "deny" and d.pinned


def test_pinned_path_deny_with_posix_class_applies() -> None:
    engine = _engine(("manifest", "fs.read", "{workspace}/keys/id[[:digit:]]", "deny"), ("project", "read", "{workspace}/**", "allow"))
    d = engine.evaluate(Subject("read", "fs.read", "path", "/ws/keys/id1"))
    assert d.action == "deny" and d.pinned


@pytest.mark.parametrize(("perm", "pattern"), [("shell.run", "rm -rf *\\"), ("fs.read", "{workspace}/*.key\\")])
def test_pattern_ending_in_a_lone_backslash_is_refused(perm: str, pattern: str) -> None:
    # wcmatch drops the backslash (so `*.key\\` matched `/ws/a.key`) while the quick reject kept
    # it as the literal suffix `.key\\`: a deny written this way matched in the matcher and was
    # skipped by the evaluator. Now the pattern is a compile error for a built-in capability.
    from agentcore.errors import CompileError

    with pytest.raises(CompileError):
        compile_rules([Rule(perm, pattern, "deny", scope="manifest")], BINDINGS)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = st.sampled_from(["[", "]", "!", "^", "\\", ":", "[:digit:]", "[:alpha:]", "a", "1", "x", "-", "*", "?", "/", "[.a.]", "[=a=]"])
_CHARS = st.sampled_from(["a", "1", "x", "]", "[", "!", "^", "\\", ":", "-", "/", ".", "b"])


@settings(max_examples=600, deadline=None)
@given(pattern=st.lists(_PIECES, min_size=1, max_size=6).map("".join), values=st.lists(st.lists(_CHARS, min_size=1, max_size=4).map("".join), min_size=1, max_size=8))
def test_quick_reject_agrees_with_matcher_on_bracket_text(pattern: str, values: list[str]) -> None:
    for perm, kind, pre in (("bash", "command", ""), ("read", "path", "/ws/")):
        try:
            crs = compile_rules([Rule(perm, pre + pattern, "deny")], BINDINGS)
        except Exception:
            continue
        for cr in crs:
            fn, _lit, _exact, prefix = cr.matcher(kind)  # type: ignore[arg-type]
            if fn is None:
                continue
            suffix = cr.literal_suffix(kind)  # type: ignore[arg-type]
            for v in (pre + x for x in values):
                if "//" not in v and fn(v):
                    assert v.startswith(prefix) and (v.endswith(suffix) or v[-1:] in ("/", "\n")), (pattern, v)


# -- `**` runs: matching one value costs about depth^n for n of them -----------------------------------


@pytest.mark.parametrize("scope", ["manifest", "project", "session"])
@pytest.mark.parametrize("permission", ["read", "fs.read", "*"])
def test_a_rule_with_more_than_three_globstar_runs_is_refused_in_every_scope(scope: str, permission: str) -> None:
    from agentcore.errors import CompileError

    # Refused, not skipped: a deny that matched nothing would vanish.
    with pytest.raises(CompileError, match=r"more than 3 '\*\*' runs"):
        _engine((scope, permission, "{workspace}/**/x/**/x/**/y/**/c", "deny"))


def test_three_globstar_runs_are_still_allowed_and_decide_deep_paths() -> None:
    engine = _engine(("manifest", "fs.read", "{workspace}/**/x/**/y/**/c", "deny"), ("project", "read", "{workspace}/**", "allow"))
    deep = "/ws/" + "/".join(["x"] * 500) + "/c"  # 1 KiB of components the spans can split every way
    assert engine.evaluate(Subject("read", "fs.read", "path", deep)).action == "allow"  # (four runs: 2.2 s here, 137 s at 4 KiB)
    assert engine.evaluate(Subject("read", "fs.read", "path", "/ws/a/x/b/y/c")).action == "deny"


def test_a_manifest_scope_pattern_with_more_than_three_globstar_runs_is_a_located_error(tmp_path: Path) -> None:
    from agentcore.api import ManifestError, load_manifest

    m = tmp_path / "m.yaml"
    m.write_text("name: g\ntools: [read]\nrequires:\n  fs:\n    read: ['{workspace}/**/a/**/b/**/c/**']\n")
    with pytest.raises(ManifestError, match=r"m.yaml:5"):
        load_manifest(m, workspace=tmp_path)
