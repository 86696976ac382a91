"""Requirement ids of SPEC.md: parsing and loading.

SPEC.md marks every normative statement as a bullet (or paragraph) that
starts with ``**[AREA-N]** LEVEL — text``. Conformance cases cite these ids,
so the parser is strict: a malformed marker, an unknown area or level, or a
duplicate id is an error rather than a silently skipped requirement.

The spec is not shipped inside the wheel (one copy, in the repository root);
an installed package without a checkout must be given the path explicitly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AREAS",
    "LEVELS",
    "Requirement",
    "SpecFormatError",
    "SpecNotFoundError",
    "default_spec_path",
    "load_requirements",
    "parse_requirements",
]

# The areas SPEC.md may use, in the order the document introduces them.
AREAS: tuple[str, ...] = (
    "TOOL", "MCP", "LOCK", "REQ", "VAR", "CAP", "PERM", "WDOG", "ASK", "ORDER", "ENV",
    "NET", "SHELL", "ENVL", "TRUNC", "FILE", "KIND", "SUB", "QSTN", "SRCH",
    "SKILL", "TSRCH", "TODO",
)
LEVELS: tuple[str, ...] = ("MUST", "SHOULD", "MAY")

_START = re.compile(r"^(?:[-*+][ \t]+)?\*\*\[(?P<id>[^\]]*)\]\*\*(?P<rest>.*)$")
_ID = re.compile(r"^(?P<area>[A-Z]+)-(?P<num>[1-9][0-9]*)$")
_LEVEL = re.compile(r"^[ \t]+(?P<level>[A-Z]+)[ \t]+—[ \t]+(?P<text>\S.*)$")
# A marker anywhere in a line; used to catch markers that are not at the start.
_ANY_MARKER = re.compile(r"\*\*\[[A-Z]+-[0-9]+\]\*\*")
_CODE_SPAN = re.compile(r"`[^`]*`")


class SpecFormatError(ValueError):
    """SPEC.md contains a requirement marker that does not follow the format."""


class SpecNotFoundError(FileNotFoundError):
    """No SPEC.md where one was expected."""


@dataclass(frozen=True)
class Requirement:
    """One normative statement of SPEC.md, as its `**[AREA-N]** LEVEL — text` marker gives it."""

    id: str        # "PERM-7"
    area: str      # "PERM"
    number: int    # 7
    level: str     # "MUST" | "SHOULD" | "MAY"
    text: str      # the sentence(s) after the dash, whitespace-normalised
    line: int      # 1-based line of the marker in the source


def default_spec_path() -> Path:
    """SPEC.md at the repository root, found relative to this module (src/conformance/)."""
    return Path(__file__).resolve().parents[2] / "SPEC.md"


def load_requirements(path: Path | None = None) -> dict[str, Requirement]:
    """All requirements of SPEC.md keyed by id, in document order."""
    spec = Path(path) if path is not None else default_spec_path()
    if not spec.is_file():
        if path is None:
            raise SpecNotFoundError(
                f"SPEC.md not found at {spec}; it lives in the repository root and is not "
                "installed with the package, so pass load_requirements(path=...) explicitly"
            )
        raise SpecNotFoundError(f"spec file not found: {spec}")
    return parse_requirements(spec.read_text(encoding="utf-8"), source=str(spec))


def parse_requirements(text: str, *, source: str = "SPEC.md") -> dict[str, Requirement]:
    """Parse requirement markers out of Markdown text; strict about their format."""
    lines = text.splitlines()
    out: dict[str, Requirement] = {}
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        lineno = i + 1
        i += 1
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = _START.match(line)
        if m is None:
            # Markers quoted in code spans are examples; any other one must start its line.
            if _ANY_MARKER.search(_CODE_SPAN.sub("", line)):
                raise SpecFormatError(f"{source}:{lineno}: requirement marker not at the start of a bullet")
            continue
        req_id = m.group("id")
        idm = _ID.match(req_id)
        if idm is None:
            raise SpecFormatError(f"{source}:{lineno}: malformed requirement id {req_id!r}")
        area = idm.group("area")
        if area not in AREAS:
            raise SpecFormatError(f"{source}:{lineno}: unknown area {area!r} in {req_id}")
        lm = _LEVEL.match(m.group("rest"))
        if lm is None:
            raise SpecFormatError(f"{source}:{lineno}: {req_id} must be followed by 'LEVEL — text'")
        level = lm.group("level")
        if level not in LEVELS:
            raise SpecFormatError(f"{source}:{lineno}: {req_id} has unknown level {level!r}")
        parts = [lm.group("text")]
        # Indented, non-blank lines right after the marker continue the requirement.
        while i < len(lines) and lines[i].strip() and lines[i][:1] in (" ", "\t"):
            if _START.match(lines[i].lstrip()):
                break
            parts.append(lines[i].strip())
            i += 1
        if req_id in out:
            raise SpecFormatError(
                f"{source}:{lineno}: duplicate requirement id {req_id} (first at line {out[req_id].line})"
            )
        out[req_id] = Requirement(
            id=req_id,
            area=area,
            number=int(idm.group("num")),
            level=level,
            text=" ".join(" ".join(parts).split()),
            line=lineno,
        )
    if in_fence:
        raise SpecFormatError(f"{source}: unterminated code fence")
    return out
