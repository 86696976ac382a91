"""Properties the runner checks on every envelope and every ask, in every case.

A case states what its scenario is about; these hold for every reply of
every scenario, so a property is checked on every envelope type (output,
schema, capability, permission, watchdog, ask refusals, after an answered
ask) and for every tool the suite calls, not only where a case happens to
look: ENVL-1..6, KIND-1, LOCK-4 (exact data fields, canonical paths),
PERM-13 (the reported rule exists, is a deny that applies to the tool, and
the text names it without its pattern) and ASK-1 (ask subjects canonical).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .checks import json_strings
from .profiles import EXTENSION, RFC, Tag

KINDS: dict[str, str] = {
    "read": "read", "write": "edit", "edit": "edit", "glob": "search", "grep": "search", "tool_search": "search",
    "bash": "execute", "web_search": "fetch", "web_fetch": "fetch", "skill": "think",
    "todo": "other", "task": "other", "question": "other",
}
LAYERS = ("schema", "session", "capability", "permission", "watchdog", "ask", "environment", "limit")
# Capabilities whose subjects a tool's calls can have (PERM-3, Table 3): a deciding rule names one of these, the tool or `*`.
TOOL_CAPABILITIES: dict[str, frozenset[str]] = {
    "read": frozenset({"fs.read"}), "glob": frozenset({"fs.read"}), "grep": frozenset({"fs.read"}),
    "write": frozenset({"fs.write"}), "edit": frozenset({"fs.read", "fs.write"}),
    "bash": frozenset({"shell.run", "fs.read", "fs.write"}),
    "web_fetch": frozenset({"net.fetch"}), "web_search": frozenset({"net.fetch"}),
}
# PERM-3: a tool that reads a file's content (not a search) also answers to the `read` rules for that path.
READS_CONTENT = frozenset({"edit", "bash"})
# Table 2 (and TRUNC-3): the exact `data` fields of each locked tool.
DATA_FIELDS: dict[str, tuple[frozenset[str], ...]] = {
    "read": (frozenset({"path", "content", "start_line", "end_line", "total_lines", "next_offset"}),
             frozenset({"path", "content", "byte_offset", "byte_length", "total_bytes", "next_offset"})),
    "write": (frozenset({"path", "bytes_written", "created"}),),
    "edit": (frozenset({"path", "replacements"}),),
    "glob": (frozenset({"paths", "total"}),),
    "grep": (frozenset({"matches", "total"}),),
    "bash": (frozenset({"output", "exit_code", "timed_out"}),),
    "todo": (frozenset({"todos"}),),
    "task": (frozenset({"agent", "result"}),),
    "question": (frozenset({"answers"}),),
    "web_search": (frozenset({"results"}),),
    "web_fetch": (frozenset({"url", "status", "content_type", "content"}),),
    "skill": (frozenset({"name", "content", "path"}),),
    "tool_search": (frozenset({"tools"}),),
}
KEEP_FIELDS_WHEN_CUT = frozenset({"bash", "web_fetch", "task", "glob", "grep", "read"})
ADD_HEAD_WHEN_CUT = frozenset({"bash", "glob", "grep"})
# Argument values shorter than this, or words of the spec's own vocabulary, may legitimately appear in a text.
MIN_ECHO = 6
_VOCABULARY = frozenset(KINDS) | frozenset(LAYERS) | {
    "pending", "in_progress", "completed", "content", "pattern", "old_string", "new_string", "replace_all",
    "byte_offset", "byte_length", "case_insensitive", "timeout_ms", "description", "questions", "question",
    "multi_select", "max_results", "options", "header", "prompt", "fs.read", "fs.write", "net.fetch", "shell.run",
}
_SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
_HOSTPORT = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9.-]+):[0-9]{1,5}$")
_NUMBER = re.compile(r"[0-9]+")
SCHEMA_CHOICE = Tag("spec", "fixed-shapes")
NO_ECHO = Tag("spec", "no-echo")
FIXED_TEXT = Tag("spec", "detail", "envelope.extensions")
HEADLESS_ASK_TEXT = "Permission required but this run is headless; the call was not performed."
HEADLESS_QUESTION_TEXT = "question is unavailable in a headless run; continue with your best judgement."
ONE_BROKER = Tag("spec", "one-broker")


@dataclass(frozen=True)
class Violation:
    """A property a reply broke: what is wrong, and the profile the check counts under."""

    message: str
    tag: Tag


@dataclass
class RuleBook:
    """The rules the runner has given each scope, as written, to check what a refusal reports (PERM-13).

    Session scopes start with the implementation's own sidecar rule at index 0
    (TRUNC-6); rules given with `set_rules` and rules made by "always" answers
    (one per asked subject, ASK-3/ASK-4) follow in the order they were added.
    """

    manifest: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    project: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    session: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def compiled(self, agent: str, manifest: Any) -> None:
        rules = manifest.get("rules") if isinstance(manifest, dict) else None
        self.manifest[agent] = [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []
        self.project.pop(agent, None)
        for key in [k for k in self.session if k[0] == agent]:
            del self.session[key]

    def scope(self, agent: str, session: str) -> list[dict[str, Any]]:
        return self.session.setdefault((agent, session), [{"permission": "read", "pattern": "<sidecar directory>/**", "action": "allow"}])

    def closed(self, agent: str, session: str) -> None:
        self.session.pop((agent, session), None)

    def lookup(self, scope: str, agent: str, session: str) -> list[dict[str, Any]] | None:
        if scope == "manifest":
            return self.manifest.get(agent)
        if scope == "project":
            return self.project.get(agent, [])
        if scope == "session":
            return self.scope(agent, session)
        return None

    def answered(self, agent: str, session: str, tool: str, ask: Mapping[str, Any], choice: Any) -> None:
        if choice not in ("allow_always", "reject_always") or ask.get("layer") != "permission":
            return
        action = "allow" if choice == "allow_always" else "deny"
        for subject in ask.get("subjects") or []:
            self.scope(agent, session).append({"permission": tool, "pattern": f"<exact {subject}>", "action": action})


@dataclass(frozen=True)
class CallInfo:
    """The call a reply belongs to: agent, session, tool and the arguments as sent."""

    agent: str
    session: str
    tool: str
    args: Any


def echo_candidates(args: Any) -> set[str]:
    """Argument values an error text must not contain: long values, and the distinctive components of paths."""
    out: set[str] = set()
    for value in json_strings(args, keys=False):
        if len(value) >= MIN_ECHO and value not in _VOCABULARY:
            out.add(value)
        if "/" in value:
            for comp in value.split("/"):
                if len(comp) >= MIN_ECHO and not comp.isalpha() and comp not in _VOCABULARY:
                    out.add(comp)
    return out


def _is_canonical(path: Any) -> bool:
    if not isinstance(path, str) or not path.startswith("/"):
        return False
    if path != "/" and (path.endswith("/") or "//" in path or os.path.normpath(path) != path):
        return False
    return os.path.realpath(path) == path


def _data_violations(tool: str, data: Any, meta: Mapping[str, Any]) -> list[Violation]:
    shapes = DATA_FIELDS.get(tool)
    if shapes is None:
        return []
    if not isinstance(data, dict):
        return [Violation(f"/data: {tool} data must be an object (LOCK-4)", SCHEMA_CHOICE)]
    keys = frozenset(data)
    if meta.get("truncated") is True and tool not in KEEP_FIELDS_WHEN_CUT:
        allowed: tuple[frozenset[str], ...] = (frozenset({"head"}),)
    elif meta.get("truncated") is True and tool in ADD_HEAD_WHEN_CUT:
        allowed = tuple(s | {"head"} for s in shapes)
    else:
        allowed = shapes
    out: list[Violation] = []
    if keys not in allowed:
        want = " or ".join(str(sorted(s)) for s in allowed)
        out.append(Violation(f"/data: {tool} data has fields {sorted(keys)}, SPEC fixes {want} (LOCK-4, TRUNC-3)", SCHEMA_CHOICE))
    paths = [data.get("path")] if "path" in data else []
    if isinstance(data.get("paths"), list):
        paths += data["paths"]
    if isinstance(data.get("matches"), list):
        paths += [m.get("path") for m in data["matches"] if isinstance(m, dict)]
    bad = [p for p in paths if not _is_canonical(p)]
    if bad:
        out.append(Violation(f"/data: paths must be absolute and canonical (LOCK-4), got {str(bad[0])[:120]!r}", SCHEMA_CHOICE))
    return out


def _shape_violations(env: Mapping[str, Any]) -> list[Violation]:
    """ENVL-1..3: the parts of the envelope the RFC itself fixes."""
    out: list[Violation] = []
    kind = env.get("type")
    want = {"type", "data", "metadata"} if kind == "output" else {"type", "error_text", "metadata"}
    if set(env) != want:
        out.append(Violation(f"(whole): a {kind} envelope has exactly {sorted(want)}, got {sorted(env)} (ENVL-1)", RFC))
    if kind == "error" and not (isinstance(env.get("error_text"), str) and env["error_text"]):
        out.append(Violation("/error_text: must be a non-empty string (ENVL-1)", RFC))
    meta = env.get("metadata")
    if not isinstance(meta, dict):
        return out + [Violation("/metadata: must be an object (ENVL-1)", RFC)]
    d = meta.get("duration_ms")
    if type(d) is not int or d < 0:
        out.append(Violation(f"/metadata/duration_ms: must be a non-negative JSON integer, got {d!r} (ENVL-2)", RFC))
    if "truncated" in meta and meta["truncated"] is not True:
        out.append(Violation(f"/metadata/truncated: present only as true, got {meta['truncated']!r} (ENVL-3)", RFC))
    if "output_path" in meta and (meta.get("truncated") is not True or not isinstance(meta["output_path"], str)):
        out.append(Violation("/metadata/output_path: only with truncated: true, as a path (ENVL-3)", RFC))
    return out


def _refusal_violations(call: CallInfo, meta: Mapping[str, Any], text: str, rules: RuleBook) -> list[Violation]:
    """ENVL-4, ENVL-5 and PERM-13 on one error envelope."""
    out: list[Violation] = []
    code = meta.get("error_code")
    if not (isinstance(code, str) and _SNAKE.match(code)):
        out.append(Violation(f"/metadata/error_code: a snake_case code is required on every error, got {code!r} (ENVL-4)", EXTENSION))
    refusal = meta.get("refusal")
    if code == "headless":
        want = HEADLESS_QUESTION_TEXT if call.tool == "question" and refusal is None else HEADLESS_ASK_TEXT
        if text != want:
            out.append(Violation(f"/error_text: a headless refusal has exactly the fixed text {want!r} (ASK-10, QSTN-3)", FIXED_TEXT))
    if refusal is None:
        return out
    if not isinstance(refusal, dict):
        return out + [Violation("/metadata/refusal: must be an object (ENVL-5)", EXTENSION)]
    layer = refusal.get("layer")
    if layer not in LAYERS:
        out.append(Violation(f"/metadata/refusal/layer: {layer!r} is not a refusal layer (ENVL-5)", EXTENSION))
    if refusal.get("code") != code:
        out.append(Violation("/metadata/refusal/code: must equal error_code (ENVL-5)", EXTENSION))
    extra = set(refusal) - {"layer", "code", "scope", "rule_index", "asked_by"}
    if extra:
        out.append(Violation(f"/metadata/refusal: unknown keys {sorted(extra)} (ENVL-5)", EXTENSION))
    if (layer == "ask") != ("asked_by" in refusal) or ("asked_by" in refusal and refusal["asked_by"] not in ("permission", "watchdog")):
        out.append(Violation("/metadata/refusal/asked_by: present exactly on ask refusals, permission|watchdog (ENVL-5)", EXTENSION))
    if layer == "permission":
        out += _rule_violations(call, refusal, text, rules)
    elif "scope" in refusal or "rule_index" in refusal:
        out.append(Violation(f"/metadata/refusal: scope and rule_index only when a rule decided, not on {layer} refusals (ENVL-5)", EXTENSION))
    return out


def _rule_violations(call: CallInfo, refusal: Mapping[str, Any], text: str, rules: RuleBook) -> list[Violation]:
    """PERM-13: the reported rule is a deny of its scope that applies to this tool, and the text names it."""
    scope, index = refusal.get("scope"), refusal.get("rule_index")
    if scope not in ("manifest", "project", "session") or type(index) is not int or index < 0:
        return [Violation(f"/metadata/refusal: a rule refusal reports scope and a 0-based rule_index, got {scope!r}/{index!r} (PERM-13)", EXTENSION)]
    listed = rules.lookup(scope, call.agent, call.session)
    out: list[Violation] = []
    if listed is not None:
        rule = listed[index] if index < len(listed) else None
        applies = {"*", call.tool} | TOOL_CAPABILITIES.get(call.tool, frozenset()) | ({"read"} if call.tool in READS_CONTENT else set())
        if rule is None or rule.get("action") != "deny" or rule.get("permission") not in applies:
            out.append(Violation(f"/metadata/refusal/rule_index: {scope} rule {index} is not a deny rule for {call.tool} (PERM-13)", EXTENSION))
        elif not _names_rule(text, scope, index, rule):
            out.append(Violation(f"/error_text: a rule refusal names the scope, rule #{index + 1}, permission and action, never the pattern (PERM-13)", EXTENSION))
    return out


def _names_rule(text: str, scope: str, index: int, rule: Mapping[str, Any]) -> bool:
    pattern = str(rule.get("pattern", ""))
    named = scope in text and str(index + 1) in _NUMBER.findall(text) and str(rule.get("permission")) in text and "deny" in text
    shows_pattern = len(pattern) >= 4 and pattern != "*" and pattern in text
    return named and not shows_pattern


def envelope_violations(call: CallInfo, env: Mapping[str, Any], rules: RuleBook) -> list[Violation]:
    """Every property of one envelope, each tagged rfc or spec."""
    out = _shape_violations(env)
    meta = env.get("metadata")
    if not isinstance(meta, dict):
        return out
    if meta.get("tool") != call.tool:
        out.append(Violation(f"/metadata/tool: must be the tool id as called ({call.tool!r}), got {meta.get('tool')!r} (ENVL-2)", EXTENSION))
    # A tool the agent has not enabled is unknown to it (TOOL-10), whatever its id: kind `other`.
    want_kind = "other" if meta.get("error_code") == "unknown_tool" else KINDS.get(call.tool, "other")
    if meta.get("kind") != want_kind:
        out.append(Violation(f"/metadata/kind: {call.tool} has kind {want_kind!r}, got {meta.get('kind')!r} (KIND-1, ENVL-2)", EXTENSION))
    if env.get("type") == "error":
        text = env.get("error_text") if isinstance(env.get("error_text"), str) else ""
        out += _refusal_violations(call, meta, text, rules)
        echoed = sorted(v for v in echo_candidates(call.args) if v in text)
        if echoed:
            out.append(Violation(f"/error_text: repeats an argument value ({len(echoed[0])} characters) (ENVL-6)", NO_ECHO))
    elif env.get("type") == "output" and call.tool in DATA_FIELDS:
        out += _data_violations(call.tool, env.get("data"), meta)
    return out


def _subject_ok(subject: Any) -> bool:
    if not isinstance(subject, str) or not subject:
        return False
    cap, _, value = subject.partition(" ")
    if cap in ("fs.read", "fs.write"):
        return _is_canonical(value)
    if cap == "net.fetch":
        return bool(_HOSTPORT.match(value))
    if cap == "shell.run":
        return bool(value)
    return True


def ask_violations(call: CallInfo, ask: Mapping[str, Any]) -> list[Violation]:
    """ASK-1: a permission ask names the call's tool and kind, the asking layer, and canonical subjects."""
    if ask.get("type") != "permission":
        return []
    out: list[Violation] = []
    if ask.get("tool") != call.tool:
        out.append(Violation(f"/ask/tool: must be the called tool {call.tool!r} (ASK-1)", ONE_BROKER))
    if "kind" in ask and ask["kind"] != KINDS.get(call.tool, "other"):
        out.append(Violation(f"/ask/kind: {call.tool} has kind {KINDS.get(call.tool, 'other')!r} (ASK-1, KIND-1)", ONE_BROKER))
    subjects = ask.get("subjects")
    if not isinstance(subjects, list) or not subjects:
        out.append(Violation("/ask/subjects: a permission ask lists its subjects (ASK-1)", ONE_BROKER))
    else:
        bad = [s for s in subjects if not _subject_ok(s)]
        if bad:
            out.append(Violation(f"/ask/subjects: subjects are canonical (absolute, resolved, host:port), got {str(bad[0])[:160]!r} (ASK-1)", ONE_BROKER))
    return out
