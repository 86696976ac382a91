"""Lexical facts about glob text: which characters are literal.

Rule specificity (PERM) counts literal characters, so this tokenizer is the
single definition both the rule engine and the docs rely on: `*`, `?` and a
`[...]` class are wildcards; a backslash makes the next character literal;
everything else is literal.
"""

from __future__ import annotations


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
            end = pattern.find("]", i + 2)
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
