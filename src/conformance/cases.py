"""Case files: one YAML scenario each under `cases/<area>/`, validated strictly.

The schema below is the suite's own linter: an unknown key, a misspelt
predicate or a step of no known kind is an error when the suite loads,
never a check that silently does nothing.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is there
from jsonschema import Draft202012Validator

CASES_DIR = Path(__file__).parent / "cases"
LEVELS = ("MUST", "SHOULD", "MAY")
METAMORPHIC = ("rename", "reorder_rules")
PREDICATES = (
    "equals", "not_equals", "one_of", "contains", "not_contains", "matches", "startswith", "endswith",
    "exists", "type", "min", "max", "length", "min_length", "max_length", "every", "some", "none",
    "set_equals", "path_exists", "file_content", "sorted", "keys", "pattern_set",
)
LOCKED_TOOLS = (
    "read", "write", "edit", "glob", "grep", "bash", "todo", "task",
    "question", "web_search", "web_fetch", "skill", "tool_search",
)


class CaseError(ValueError):
    """A case file is malformed (a bug in the suite, reported when it loads)."""


_RULE = {
    "type": "object",
    "required": ["permission", "pattern", "action"],
    "properties": {"permission": {"type": "string"}, "pattern": {"type": "string"}, "action": {"type": "string"}},
    "additionalProperties": False,
}
_PRED_PROPS: dict[str, Any] = {p: {} for p in PREDICATES}
_PROFILE_PROPS: dict[str, Any] = {"profile": {"enum": ["rfc", "spec"]}, "choice": {"type": "string"}}
_CHECK = {
    "type": "object",
    "required": ["pointer"],
    "properties": {"pointer": {"type": "string"}, **_PRED_PROPS, **_PROFILE_PROPS},
    "additionalProperties": False,
    "minProperties": 2,
}
_PRED_OBJ = {"type": "object", "properties": _PRED_PROPS, "additionalProperties": False}
_TEMPLATED = {"type": "string", "pattern": "^\\$\\{[A-Za-z_][A-Za-z0-9_.]*\\}$"}
_EXPECT = {
    "type": "object",
    "properties": {
        "outcome": {"anyOf": [{"enum": ["envelope", "ask", "result", "compile_error"]}, _TEMPLATED]},
        "type": {"anyOf": [{"enum": ["output", "error"]}, _TEMPLATED]},
        "layer": {"type": ["string", "null"]},
        "code": {"type": "string"},
        "kind": {"type": "string"},
        "checks": {"type": "array", "items": _CHECK},
        **_PROFILE_PROPS,
    },
    "additionalProperties": False,
}
_FILE_CHECK = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {"type": "string"},
        "exists": {"type": "boolean"},
        "content": {"type": "string"},
        "contains": {"type": "string"},
        "is_symlink": {"type": "boolean"},
        "is_dir": {"type": "boolean"},
        "size": {},
        "max_size": {},
        "mode": {"type": "string"},
        "unchanged": {"type": "boolean"},
    },
    "additionalProperties": False,
}
_FILE_SETUP = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "symlink": {"type": "string"},
        "hardlink": {"type": "string"},
        "dir": {"type": "boolean"},
        "bytes_hex": {"type": "string"},
        "mode": {"type": "string"},
        "repeat": {},
        "remove": {"type": "boolean"},
    },
    "required": ["path"],
    "additionalProperties": False,
}
_ROUTE = {
    "type": "object",
    "properties": {
        "status": {"anyOf": [{"type": "integer", "minimum": 100, "maximum": 599}, _TEMPLATED]},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "body": {"type": "string"},
        "repeat": {},
        "body_hex": {"type": "string"},
        "gzip": {"type": "boolean"},
    },
    "additionalProperties": False,
}
_HTTP_SETUP = {
    "type": "object",
    "required": ["routes"],
    "properties": {"routes": {"type": "object", "propertyNames": {"pattern": "^/"}, "additionalProperties": _ROUTE}},
    "additionalProperties": False,
}
_STEP_COMMON = {"expect": _EXPECT, "save": {"type": "object", "additionalProperties": {"type": "string"}}, "note": {"type": "string"}}
_STEP = {
    "type": "object",
    "oneOf": [
        {
            "required": ["call"],
            "properties": {
                "call": {
                    "type": "object",
                    "required": ["tool"],
                    "properties": {
                        "tool": {"type": "string"},
                        "args": {},
                        "mode": {"type": "string"},
                        "session": {"type": "string"},
                        "agent": {"type": "string"},
                    },
                    "additionalProperties": False,
                },
                **_STEP_COMMON,
            },
            "additionalProperties": False,
        },
        {
            "required": ["answer"],
            "properties": {
                "answer": {
                    "type": "object",
                    "properties": {"choice": {"type": "string"}, "answers": {}},
                    "additionalProperties": False,
                },
                **_STEP_COMMON,
            },
            "additionalProperties": False,
        },
        {
            "required": ["compile"],
            "properties": {
                "compile": {
                    "type": "object",
                    "properties": {
                        "manifest": {},
                        "manifest_text": {"type": "string"},
                        "manifest_format": {"enum": ["yaml", "json"]},
                        "agent": {"type": "string"},
                        "workspace": {"type": ["boolean", "string"]},
                        "bindings": {"type": "object"},
                        "watchdog": {"type": "object"},
                    },
                    "additionalProperties": False,
                },
                **_STEP_COMMON,
            },
            "additionalProperties": False,
        },
        {
            "required": ["set_rules"],
            "properties": {
                "set_rules": {
                    "type": "object",
                    "required": ["scope", "rules"],
                    "properties": {
                        "scope": {"enum": ["project", "session"]},
                        "rules": {},
                        "session": {"type": "string"},
                        "agent": {"type": "string"},
                    },
                    "additionalProperties": False,
                },
                **_STEP_COMMON,
            },
            "additionalProperties": False,
        },
        {
            "required": ["close"],
            "properties": {
                "close": {"type": "object", "properties": {"session": {"type": "string"}, "agent": {"type": "string"}}, "additionalProperties": False},
                **_STEP_COMMON,
            },
            "additionalProperties": False,
        },
        {"required": ["files"], "properties": {"files": {"type": "array", "items": _FILE_CHECK}, "note": {"type": "string"}}, "additionalProperties": False},
        {
            "required": ["served"],
            "properties": {
                "served": {
                    "type": "object",
                    "required": ["server", "checks"],
                    "properties": {"server": {"enum": ["http", "sentinel"]}, "checks": {"type": "array", "items": _CHECK, "minItems": 1}},
                    "additionalProperties": False,
                },
                "note": {"type": "string"},
            },
            "additionalProperties": False,
        },
        {"required": ["mutate"], "properties": {"mutate": {"type": "array", "items": _FILE_SETUP}, "note": {"type": "string"}}, "additionalProperties": False},
    ],
}
CASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "title", "requirements", "level", "steps", "catches"],
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$"},
        "title": {"type": "string", "minLength": 1},
        "requirements": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"}},
        "level": {"enum": list(LEVELS)},
        "features": {"type": "array", "items": {"type": "string"}},
        **_PROFILE_PROPS,
        "catches": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "metamorphic": {"type": "array", "items": {"enum": list(METAMORPHIC)}},
        "generate": {"type": "object"},
        "setup": {
            "type": "object",
            "properties": {
                "files": {"type": "array", "items": _FILE_SETUP},
                "manifest": {"type": "object"},
                "workspace": {"type": "boolean"},
                "bindings": {"type": "object"},
                "watchdog": {"type": "object"},
                "http": _HTTP_SETUP,
                "rules": {
                    "type": "object",
                    "properties": {"project": {"type": "array", "items": _RULE}, "session": {"type": "array", "items": _RULE}},
                    "additionalProperties": False,
                },
            },
            "additionalProperties": False,
        },
        "steps": {"type": "array", "minItems": 1, "items": _STEP},
    },
    "additionalProperties": False,
}
_VALIDATOR = Draft202012Validator(CASE_SCHEMA)


@dataclass(frozen=True)
class Case:
    """One validated case file: what it covers (area, requirements, level, features), its setup and steps, and its profile if set."""

    id: str
    title: str
    area: str
    requirements: tuple[str, ...]
    level: str
    features: tuple[str, ...]
    catches: tuple[str, ...]
    metamorphic: tuple[str, ...]
    generate: dict[str, Any]
    setup: dict[str, Any]
    steps: tuple[dict[str, Any], ...]
    source: Path
    raw_digest: str = field(compare=False, default="")
    profile: str | None = None
    choice: str | None = None

    def tools(self) -> set[str]:
        """Every tool the case calls (enabling a tool in a manifest needs no feature: LOCK-1)."""
        return {s["call"]["tool"] for s in self.steps if "call" in s and s["call"]["tool"] in LOCKED_TOOLS}

    def expects(self) -> list[dict[str, Any]]:
        return [s["expect"] for s in self.steps if isinstance(s.get("expect"), dict)]

    def manifests(self) -> list[Any]:
        return [self.setup.get("manifest")] + [s["compile"].get("manifest") for s in self.steps if "compile" in s]

    def all_rules(self) -> list[dict[str, Any]]:
        rules: list[Any] = []
        for m in self.manifests():
            if isinstance(m, dict) and isinstance(m.get("rules"), list):
                rules += m["rules"]
        for scope in ("project", "session"):
            rules += self.setup.get("rules", {}).get(scope) or []
        rules += [r for s in self.steps if "set_rules" in s for r in (s["set_rules"].get("rules") or [])]
        return [r for r in rules if isinstance(r, dict)]

    def needed_features(self) -> frozenset[str]:
        feats = set(self.features)
        feats.update(f"tool.{t}" for t in self.tools())
        if any(s.get("call", {}).get("mode") == "interactive" for s in self.steps) or any("answer" in s for s in self.steps):
            feats.add("interactive")
        if self.setup.get("rules", {}).get("project") or any(s.get("set_rules", {}).get("scope") == "project" for s in self.steps):
            feats.add("rules.project")
        if self.setup.get("rules", {}).get("session") or any(s.get("set_rules", {}).get("scope") == "session" for s in self.steps):
            feats.add("rules.session")
        if "watchdog" in self.setup or any("watchdog" in s.get("compile", {}) for s in self.steps):
            feats.add("watchdog.host")
        if any("manifest_text" in s.get("compile", {}) for s in self.steps):
            feats.add("manifest.text")
        if any(isinstance(m, dict) and "limits" in m for m in self.manifests()):
            feats.add("limits")
        if any(isinstance(m, dict) and "mcp" in m for m in self.manifests()):
            feats.add("mcp")
        if "http" in self.setup or any("served" in s for s in self.steps):
            feats.add("fixture.http")
        if any("symlink" in f for f in self.setup.get("files", [])) or any("symlink" in f for s in self.steps for f in s.get("mutate", [])):
            feats.add("symlinks")
        if any("hardlink" in f for f in self.setup.get("files", [])) or any("hardlink" in f for s in self.steps for f in s.get("mutate", [])):
            feats.add("hardlinks")
        return frozenset(feats | self.layer_needs())

    def layer_needs(self) -> set[str]:
        """The layer features (HARNESS.md) a case needs, from what it expects and what it sets up."""
        areas = {r.split("-")[0] for r in self.requirements}
        expects = self.expects()
        outcomes = {str(e.get("outcome", "")) for e in expects}
        layers = {str(e.get("layer")) for e in expects if "layer" in e}
        templated = {o for o in outcomes | layers if o.startswith("${")}
        needs: set[str] = set()
        if "compile_error" in outcomes or templated & outcomes:
            needs.add("manifest")
        if "capability" in layers or templated & layers or areas & {"CAP", "REQ", "VAR", "ENV"} or set(self.requirements) & _SCOPE_REQUIREMENTS:
            needs.add("capability")
        if self._needs_rules(areas, outcomes, layers | templated):
            needs.add("rules")
        compile_checks = [c for s in self.steps if "compile" in s for c in s.get("expect", {}).get("checks", [])]
        if any(str(c.get("pointer", "")).startswith(("/effective", "/tools")) for c in compile_checks):
            needs.add("compile.describe")
        return needs

    def _needs_rules(self, areas: set[str], outcomes: set[str], layers: set[str]) -> bool:
        if areas & {"PERM", "ASK"} or "ask" in outcomes or layers & {"permission", "ask"} or any(l.startswith("${") for l in layers):
            return True
        if any("set_rules" in s or "answer" in s for s in self.steps) or self.setup.get("rules"):
            return True
        rules = self.all_rules()
        if any(r.get("action") != "allow" for r in rules):
            return True
        # Without a catch-all allow, a call no rule matches would ask (PERM-9): the case relies on rules.
        for m in self.manifests():
            if isinstance(m, dict) and not any(r.get("pattern") == "*" and r.get("action") == "allow" for r in m.get("rules") or [] if isinstance(r, dict)):
                return bool(self.tools())
        return False


# Requirements whose cases rely on the capability check keeping something out even without expecting its refusal.
_SCOPE_REQUIREMENTS = frozenset({"LOCK-5", "FILE-7", "FILE-13", "PERM-14", "SKILL-1", "SRCH-1", "NET-5", "NET-9"})


def _area_of(path: Path) -> str:
    return path.parent.name.upper()


def load_case(path: Path) -> Case:
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise CaseError(f"{path}: invalid YAML: {exc}") from None
    errors = sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        raise CaseError(f"{path}: {where}: {err.message[:300]}")
    # The directory names the case's main area; it may cite requirements of other areas too.
    area = _area_of(path)
    return Case(
        id=data["id"],
        title=data["title"],
        area=area,
        requirements=tuple(data["requirements"]),
        level=data["level"],
        features=tuple(data.get("features", [])),
        catches=tuple(data["catches"]),
        metamorphic=tuple(data.get("metamorphic", [])),
        generate=dict(data.get("generate") or {}),
        setup=dict(data.get("setup") or {}),
        steps=tuple(data["steps"]),
        source=path,
        raw_digest=hashlib.sha256(text.encode()).hexdigest(),
        profile=data.get("profile"),
        choice=data.get("choice"),
    )


def case_files(root: Path | None = None) -> list[Path]:
    base = root or CASES_DIR
    return sorted(p for p in base.glob("*/*.yaml") if p.is_file())


def load_cases(root: Path | None = None, patterns: Iterable[str] = ()) -> list[Case]:
    """All cases (optionally only ids or area/id matching one of the globs); ids must be unique."""
    cases: list[Case] = []
    seen: dict[str, Path] = {}
    for path in case_files(root):
        case = load_case(path)
        if case.id in seen:
            raise CaseError(f"{path}: duplicate case id {case.id!r} (also in {seen[case.id]})")
        seen[case.id] = path
        cases.append(case)
    pats = list(patterns)
    if pats:
        cases = [
            c for c in cases
            if any(fnmatch.fnmatchcase(c.id, p) or fnmatch.fnmatchcase(f"{c.area.lower()}/{c.id}", p) for p in pats)
        ]
    return cases


def suite_digest(root: Path | None = None) -> str:
    """SHA-256 over every case file's relative path and bytes, in order."""
    h = hashlib.sha256()
    base = root or CASES_DIR
    for path in case_files(root):
        h.update(str(path.relative_to(base)).encode() + b"\x00")
        h.update(path.read_bytes() + b"\x00")
    return h.hexdigest()
