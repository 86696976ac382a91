"""Parsing JSON text and nested values that other people wrote: manifests, rule files, call arguments.

Project rule files and skills come from other people's repositories, so the
parsers refuse what would let a file say one thing to a reader and another
to us, or cost us without bound:

- a duplicate key, at any depth (a parser keeps the last one silently, so a
  second `rules:` or `read:` would replace the first unseen);
- (YAML, in `manifest/strict_yaml.py`) anchors, aliases and merge keys;
- nesting deeper than `MAX_DEPTH` containers, checked while descending and
  before any recursive step can run out of stack.

Errors name the line and the key path, never a value.

Text flows the other way too: `printable` makes what a model, a tool or a
server wrote safe to put on a human's terminal.
"""

from __future__ import annotations

import json
import re
from typing import IO, Any, Iterable, Iterator

MAX_DEPTH = 64
"""Containers (mappings, sequences, objects, arrays) nested deeper than this are refused."""

MAX_DOCUMENT_BYTES = 16 << 20
"""A manifest or rules file longer than this is refused before it is parsed: no agent's is near it, and
/dev/zero or a file that never ends would otherwise be read until the kernel kills the process."""

KeyPath = tuple[Any, ...]
LineIndex = dict[KeyPath, int]


class StructureError(ValueError):
    """Text that is refused: `line` is 1-based (0 when unknown), `path` the key path to where it happened."""

    def __init__(self, message: str, *, line: int = 0, path: KeyPath = ()) -> None:
        self.message = message
        self.line = line
        self.path = path
        super().__init__(message)


def key_path_text(path: KeyPath) -> str:
    """`requires.fs.read`, `rules.1.action`; `(top level)` for the empty path; a long path keeps its first keys."""
    shown = [str(p) for p in path[:8]] + (["..."] if len(path) > 8 else [])
    return ".".join(shown) or "(top level)"


def line_of(lines: LineIndex, path: KeyPath) -> int:
    """The line of `path`, else of its nearest ancestor that has one (1 when nothing is known)."""
    for n in range(len(path), -1, -1):
        line = lines.get(tuple(path[:n]))
        if line:
            return line
    return 1


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices` to a misspelt `word`, else ``."""
    import difflib

    close = difflib.get_close_matches(word, sorted(set(choices)), n=2, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


_SURROGATE = re.compile("[\ud800-\udfff]")


def holds_surrogate(value: Any) -> bool:
    """Whether a string anywhere in `value` (keys included) holds a lone surrogate: JSON's `\\udcff` escapes
    decode to one, and it is no Unicode text (it cannot be encoded, written or matched). Call after
    `too_deep`: this walk is iterative but visits every container."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack += item.keys()
            stack += item.values()
        elif isinstance(item, (list, tuple)):
            stack += item
    return False


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` (dicts, lists and tuples of anything) nests more than `limit` containers.

    Iterative, and stops at the first container past the limit, so it is safe
    on any depth and costs at most one visit per container within the limit.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return False


# -- JSON -----------------------------------------------------------------------------------

# Strings (escapes included), punctuation, runs of anything else. Every character of the
# text belongs to exactly one token, so lines can be counted token by token.
_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|[{}\[\],:]|\s+|[^\s{}\[\],:"]+', re.S)


class _Frame:
    __slots__ = ("is_object", "path", "seen", "expect_key", "key", "index")

    def __init__(self, is_object: bool, path: KeyPath) -> None:
        self.is_object = is_object
        self.path = path
        self.seen: dict[str, int] = {}
        self.expect_key = is_object
        self.key: str | None = None
        self.index = 0

    def child_path(self) -> KeyPath:
        if self.is_object:
            return self.path + (self.key,) if self.key is not None else self.path
        return self.path + (self.index,)


def _tokens(text: str) -> Iterator[tuple[str, int]]:
    line = 1
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        yield tok, line
        line += tok.count("\n")


def _json_key(token: str) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        return token  # malformed: json.loads of the whole text reports it
    return key if isinstance(key, str) else token


def _scan_json(text: str, max_depth: int) -> LineIndex:
    """Depth and duplicate keys checked, and the line of every key path recorded, without recursion."""
    lines: LineIndex = {}
    stack: list[_Frame] = []
    for tok, line in _tokens(text):
        top = stack[-1] if stack else None
        if tok in ("{", "["):
            path = top.child_path() if top is not None else ()
            lines.setdefault(path, line)
            if len(stack) >= max_depth:
                raise StructureError(f"nested more than {max_depth} levels deep", line=line, path=path)
            stack.append(_Frame(tok == "{", path))
        elif tok in ("}", "]"):
            if stack:
                stack.pop()
        elif top is None or tok.isspace() or tok == ":":
            continue
        elif tok == ",":
            top.expect_key = top.is_object
            top.index += 1
        elif top.is_object and top.expect_key:
            key = _json_key(tok)
            if key in top.seen:
                raise StructureError(f"duplicate key (first at line {top.seen[key]})", line=line, path=top.path + (key,))
            top.seen[key] = line
            top.key, top.expect_key = key, False
            lines[top.path + (key,)] = line
        else:
            lines.setdefault(top.child_path(), line)
    return lines


def load_json(text: str, *, max_depth: int = MAX_DEPTH) -> tuple[Any, LineIndex]:
    """(data, line of each key path); raises StructureError, or json.JSONDecodeError for a syntax error.

    The structure is checked by an iterative scan before the (recursive) decoder runs.
    """
    lines = _scan_json(text, max_depth)
    return json.loads(text), lines


def loads_json(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` that refuses duplicate keys and deep nesting (StructureError); other errors as json.loads raises them.

    `max_depth` above MAX_DEPTH suits a transport that carries call arguments
    (which the engine then refuses past MAX_DEPTH itself); the decoder's own
    recursion stays far away either way.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    return load_json(text, max_depth=max_depth)[0]


class TooLarge(ValueError):
    """A file or stream longer than its reader's bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"larger than {limit // (1 << 20)} MiB")


def read_bounded(stream: IO[bytes], limit: int) -> str:
    """The UTF-8 text of `stream`, read to its end; TooLarge once more than `limit` bytes came.

    Reads in blocks so that /dev/zero, a FIFO that never ends or a huge file costs at most `limit`
    bytes before it is refused (a plain `read()` grows until the kernel kills the process).
    Raises UnicodeDecodeError for text that is not UTF-8.
    """
    blocks: list[bytes] = []
    size = 0
    while block := stream.read(min(1 << 20, limit + 1 - size)):
        blocks.append(block)
        size += len(block)
        if size > limit:
            raise TooLarge(limit)
    return b"".join(blocks).decode("utf-8")


def printable(text: str, *, lines: bool = False) -> str:
    """`text` safe to write to a terminal: every control and format character is shown as `\\xNN` or
    `\\uNNNN` instead of being sent. That covers escape sequences, which can erase or rewrite what a
    permission prompt shows, set the clipboard (OSC 52) or make some terminals type back; carriage
    returns; and bidirectional overrides. A line break or tab is kept with `lines`, else made a space."""
    if text.isprintable():
        return text
    keep = "\n\t" if lines else ""
    return "".join(
        c if c.isprintable() or c in keep else " " if c in "\n\t" else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
        for c in text
    )


def _json_escape(c: str) -> str:
    n = ord(c)
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000  # a UTF-16 surrogate pair: JSON's escapes name 16-bit units
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


def json_text(value: Any, **kwargs: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **kwargs)` that a terminal shows as it is: every character
    JSON leaves raw that is not printable (C1 controls such as U+009B, which some terminals read as an
    escape, bidirectional overrides, line separators) is written as a `\\u` escape, so the text is
    still the same JSON value while an envelope holding a file's content cannot drive the terminal
    it is printed on (ASK-13)."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n " else _json_escape(c) for c in text)
