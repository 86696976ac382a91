"""Lexical facts about glob text: which characters are literal.

Rule specificity (PERM) counts literal characters, so this tokenizer is the
single definition both the rule engine and the docs rely on: `*`, `?` and a
`[...]` class are wildcards; a backslash makes the next character literal;
everything else is literal.
"""

from __future__ import annotations


def _class_end(pattern: str, i: int) -> int:
    """Index of the `]` that closes the class opened at `i`, or -1.

    Read as the matchers (wcmatch) read it: a `]` right after `[`, `[!` or `[^`
    is a member, a backslash escapes the next character and a POSIX class
    `[:name:]` is one member, so `[[:digit:]]`, `[!]x]` and `[\\]x]` each end at
    their last `]`. Ending a class earlier than the matcher does would make the
    text after it look like a literal suffix that matched values need not have,
    and the rule engine's quick reject would then skip a matching rule.
    When this reading finds no end, the first `]` past `[x` is taken, as before,
    so a class is never seen as literal text where a matcher might see a class.
    """
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] in "!^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n:
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "[" and j + 1 < n and pattern[j + 1] in ":.=":
            close = pattern.find(pattern[j + 1] + "]", j + 2)
            if close != -1:
                j = close + 2
                continue
        if c == "]":
            return j
        j += 1
    return pattern.find("]", i + 2)


def _tokens(pattern: str) -> list[tuple[bool, str]]:
    """(is_literal, text) tokens of a glob pattern."""
    out: list[tuple[bool, str]] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            out.append((True, pattern[i + 1]))
            i += 2
        elif ch in "*?":
            out.append((False, ch))
            i += 1
        elif ch == "[":
            end = _class_end(pattern, i)
            if end == -1:  # an unclosed bracket is a literal character
                out.append((True, ch))
                i += 1
            else:
                out.append((False, pattern[i : end + 1]))
                i = end + 1
        else:
            out.append((True, ch))
            i += 1
    return out


def dangling_escape(pattern: str) -> bool:
    """True when the pattern ends in a backslash that escapes nothing.

    The matchers (wcmatch) drop such a backslash while these tokens keep it as
    a literal character, so the two would disagree on what the pattern means:
    the compilers refuse it instead.
    """
    return (len(pattern) - len(pattern.rstrip("\\"))) % 2 == 1


# Each `**` run is a span the translated regex backtracks over, so matching one value costs about
# depth^n for n of them: measured on a 4 KiB path, three take 0.2 s and four 137 s, on the event loop.
MAX_GLOBSTAR_RUNS = 3


def globstar_runs(pattern: str) -> int:
    """Runs of two or more unescaped `*` in `pattern` (an upper bound on its `**` spans)."""
    runs, i, n = 0, 0, len(pattern)
    while i < n:
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "*" and i + 1 < n and pattern[i + 1] == "*":
            runs += 1
            while i < n and pattern[i] == "*":
                i += 1
            continue
        i += 1
    return runs


def has_wildcard(pattern: str) -> bool:
    return any(not lit for lit, _ in _tokens(pattern))


def glob_literal_count(pattern: str) -> int:
    return sum(1 for lit, _ in _tokens(pattern) if lit)


def glob_literal_prefix(pattern: str) -> str:
    """The literal text before the first wildcard (unescaped)."""
    out: list[str] = []
    for lit, text in _tokens(pattern):
        if not lit:
            break
        out.append(text)
    return "".join(out)


def glob_unescape(pattern: str) -> str:
    """The literal value of a pattern that has no wildcard."""
    return "".join(text for _, text in _tokens(pattern))


def glob_escape(literal: str) -> str:
    """Escape exactly the metacharacters of our glob language (`* ? [ ] \\`).

    Narrower than wcmatch's own escape (which also escapes `-`, `{`…), so an
    escaped workspace path stays readable in `manifest check` and `explain`.
    """
    return "".join("\\" + c if c in "*?[]\\" else c for c in literal)
