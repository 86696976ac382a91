"""`skill`: load a discovered skill's body into context (SKILL).

Skills live in the directories of `skills.paths` (compiled to
`manifest.skill_dirs`). A skill is a folder `<name>/SKILL.md` that starts
with YAML front matter holding `name` (equal to the folder name) and a
one-line `description`; the rest of the file is the body.

The index is built once per session, on first use, and stays fixed for the
session; a repeat load returns the cached text. Every directory listing and
file read goes through `runtime.fs` (scope re-checked, no symlink followed
after the check); `requirements` grants fs.read on the skill directories, so
enabling the tool is enough. A skill directory that is itself a symlink must
be listed by its real path, or its files fall outside that grant.
"""

from __future__ import annotations

import os
import re
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from agentcore.patterns.globtext import glob_escape

from ..errors import Refusal, ToolFailure
from ..manifest.spec import FsSpec, ManifestSpec, RequiresSpec
from ..manifest.strict_yaml import load_yaml
from ..paths import PathRefused, canonicalize
from ..textdata import StructureError
from ..variables import _VAR
from . import _schemas
from .base import Tool, ToolResult

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest
    from ..runtime import ScopedFS
    from ..session import Session

SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_MAX_DESCRIPTION = 1024
# A repository's content decides what its skill directories hold, and every indexed skill's line goes into the
# system prompt of every model request: 10,000 skills made a 10 MB prompt, paid for on every turn.
MAX_SKILLS = 256  # skills indexed per session
MAX_FOLDERS = 4096  # entries examined per skill directory, the first by name (each costs a read)


@dataclass(frozen=True)
class SkillInfo:
    """A discovered skill as the host's system prompt lists it: name, one-line description, where its SKILL.md is."""

    name: str
    description: str
    path: Path  # canonical path of SKILL.md


# One-line descriptions per session, for the host's prompt; the index itself
# (name -> path) lives in `session.stores.skill_index`.
_DESCRIPTIONS: "weakref.WeakKeyDictionary[Session, dict[str, str]]" = weakref.WeakKeyDictionary()


def split_front_matter(text: str) -> tuple[dict[str, Any], str] | None:
    """(metadata, body) of a `---`-fenced YAML header, or None when there is none."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            try:
                # Skills come from other people's repositories: no aliases, duplicate keys or deep nesting.
                meta, _lines = load_yaml("\n".join(lines[1:i]))
            except (yaml.YAMLError, StructureError):
                return None
            if not isinstance(meta, dict):
                return None
            return meta, "\n".join(lines[i + 1 :]).strip("\n")
    return None


def wrap(name: str, body: str) -> str:
    # A body cannot close the wrapper early and pose as text outside the skill.
    safe = re.sub(r"</(skill)", r"<\\/\1", body, flags=re.IGNORECASE)
    return f'<skill name="{name}">\n{safe}\n</skill>'


def _pattern_for(raw: str) -> str:
    """`raw/**` as a path pattern: variables kept, literal text glob-escaped."""
    raw = os.path.normpath(raw) if raw else raw
    parts = _VAR.split(raw)  # literal, name, literal, name, ...
    out = [glob_escape(p) if i % 2 == 0 else "{" + p + "}" for i, p in enumerate(parts)]
    return "".join(out).rstrip("/") + "/**"


def _list_dir(fs: "ScopedFS", directory: Path) -> list[str]:
    try:
        canonical = canonicalize(os.fspath(directory), Path("/"))
    except PathRefused:
        return []
    if not fs.may_read(os.fspath(canonical)):
        return []
    try:
        fd = fs.open_read(canonical)
    except (ToolFailure, OSError):
        return []
    try:
        return sorted(os.listdir(fd))
    except OSError:  # not a directory
        return []
    finally:
        os.close(fd)


def _read_skill(fs: "ScopedFS", path: Path, limit: int) -> tuple[dict[str, Any], str] | None:
    try:
        data = fs.read_bytes(path, limit)
        text = data.decode("utf-8")
    except (ToolFailure, Refusal, OSError, UnicodeDecodeError):  # an oversized or unreadable skill is skipped
        return None
    return split_front_matter(text)


def _valid(meta: dict[str, Any], folder: str) -> tuple[str, str] | None:
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name != folder:
        return None
    if not isinstance(description, str) or not description.strip():
        return None
    return name, " ".join(description.split())[:_MAX_DESCRIPTION]


def skill_index(manifest: "CompiledManifest", session: "Session", fs: "ScopedFS") -> dict[str, Path]:
    """The session's skill index (name -> SKILL.md), built on first use and then fixed."""
    if session.stores.skill_index is not None:
        return session.stores.skill_index
    index: dict[str, Path] = {}
    descriptions: dict[str, str] = {}
    limit = manifest.limits.read_bytes
    for directory in manifest.skill_dirs:
        for folder in _list_dir(fs, directory)[:MAX_FOLDERS]:
            if len(index) >= MAX_SKILLS:
                break
            if folder.startswith(".") or folder in index:
                continue  # hidden folders are not skills; earlier skill dirs win
            try:
                path = canonicalize(os.path.join(os.fspath(directory), folder, SKILL_FILE), Path("/"))
            except PathRefused:
                continue
            if not fs.may_read(os.fspath(path)):
                continue
            parsed = _read_skill(fs, path, limit)
            checked = _valid(parsed[0], folder) if parsed else None
            if checked is None:
                continue
            index[checked[0]] = path
            descriptions[checked[0]] = checked[1]
    session.stores.skill_index = index
    _DESCRIPTIONS[session] = descriptions
    return index


def available_skills(manifest: "CompiledManifest", session: "Session") -> list[SkillInfo]:
    """Name, one-line description and path of every skill, for the host's system prompt."""
    from ..runtime import ScopedFS

    index = skill_index(manifest, session, ScopedFS(manifest, session, SkillTool.id))
    descriptions = _DESCRIPTIONS.get(session, {})
    return [SkillInfo(name, descriptions.get(name, ""), path) for name, path in sorted(index.items())]


class SkillTool(Tool):
    id = "skill"
    description = (
        "Load a skill by name: returns the skill's instructions wrapped in <skill name=...> tags. "
        "The available skills and what they are for are listed in your instructions."
    )
    parameters = _schemas.SKILL
    kind = "think"
    concurrency_safe = True

    def requirements(self, manifest: ManifestSpec) -> RequiresSpec:
        return RequiresSpec(fs=FsSpec(read=[_pattern_for(p) for p in manifest.skills.paths]))

    def title(self, args: dict[str, Any]) -> str:
        name = str(args.get("name", ""))
        return f"Load skill {name}" if _NAME.fullmatch(name) else "Load skill"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        name: str = args["name"]
        stores = runtime.session.stores
        index = skill_index(runtime.manifest, runtime.session, runtime.fs)
        path = index.get(name)
        if path is None:
            if not index:
                raise ToolFailure("unknown_skill", "no skills are available to this agent")
            raise ToolFailure("unknown_skill", "no skill has that name; available skills: " + ", ".join(sorted(index)))
        cached = stores.skill_cache.get(name)
        if cached is None:
            try:
                data = runtime.fs.read_bytes(path, runtime.limits.read_bytes)
            except OSError:
                raise ToolFailure("skill_unreadable", "the skill's file can no longer be read") from None
            try:
                parsed = split_front_matter(data.decode("utf-8"))
            except UnicodeDecodeError:
                parsed = None
            if parsed is None:
                raise ToolFailure("skill_unreadable", "the skill's file no longer has valid front matter")
            cached = wrap(name, parsed[1])
            stores.skill_cache[name] = cached
        return ToolResult(data={"name": name, "content": cached, "path": os.fspath(path)})
