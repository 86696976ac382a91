"""What in a compiled manifest will not work as its author probably meant (`agentcore manifest check`).

These are warnings, not errors: the manifest is valid and fails closed. A
grant no enabled tool uses grants nothing, a workspace that does not exist
refuses every path, a rule about a tool that is not enabled never applies.
Each warning is one "file:line: key: message" line.
"""

from __future__ import annotations

import json
import os
from typing import Iterable

from ..patterns.globtext import glob_escape
from ..protected import is_environment
from .catalog import ToolCatalog
from .compiled import CompiledManifest, Locate, locator, reachable_runtime
from .envrc import path_dirs

# Where each built-in capability is granted in `requires`, and what it is called there.
_GRANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fs.read", ("requires", "fs", "read")),
    ("fs.write", ("requires", "fs", "write")),
    ("net.fetch", ("requires", "net", "hosts")),
    ("shell.run", ("requires", "shell")),
)


def manifest_warnings(manifest: CompiledManifest, catalog: ToolCatalog) -> list[str]:
    """Every warning for `manifest`, in the order of the manifest's keys."""
    at = locator(manifest.spec, str(manifest.source) if manifest.source else manifest.name)
    enabled = [*manifest.tools, *manifest.deferred]
    used = {cap for tool_id in enabled if catalog.has(tool_id) for cap in getattr(catalog.get(tool_id), "uses", ())}
    out: list[str] = []
    out += _missing_roots(manifest)
    out += _unused_grants(manifest, catalog, used, enabled, at)
    out += _unused_named(manifest, used, at)
    out += _rules_for_disabled_tools(manifest, catalog, enabled, at)
    out += _unusable_agents(manifest, catalog, at)
    out += _runtime_in_reach(manifest)
    out += _skills_in_reach(manifest, at)
    out += _links_in_reach(manifest)
    out += _environments_in_reach(manifest)
    out += _path_dirs_in_reach(manifest)
    out += _mcp_code_in_reach(manifest, at)
    out += _home_in_reach(manifest, at)
    return out


def _home_in_reach(manifest: CompiledManifest, at: Locate) -> list[str]:
    """`fs.write` on the home directory (or above it): what shells, editors and tool managers load from there
    is protected only as far as Table 5 lists it, and new tools keep adding such files."""
    home = os.path.realpath(os.path.expanduser("~"))
    if home == "/" or not os.path.isdir(home):
        return []
    bases = {os.path.realpath(p.base) for p in manifest.effective.fs_write}
    if not any(home == b or home.startswith(b.rstrip("/") + "/") for b in bases):
        return []
    return [f"{at('requires', 'fs', 'write')}: fs.write reaches your home directory ({home}): the files shells, editors "
            "and tool managers load from it are protected only as far as SPEC Table 5 lists them; grant the directories "
            "the agent works in instead"]


def _path_dirs_in_reach(manifest: CompiledManifest) -> list[str]:
    """Project directories an `.envrc` over the workspace or a writable base puts on PATH that `fs.write` reaches
    and no write deny keeps out: outside ENV-7 (the user chose to run what is there), so worth a warning that
    names the rule to add."""
    from ..rules.evaluator import RuleEvaluator, Subject

    starts = [*map(os.fspath, manifest.workspace_roots), *(os.fspath(p.base) for p in manifest.effective.fs_write)]
    envrcs = [os.path.join(d, ".envrc") for d in dict.fromkeys(a for s in starts for a in _self_and_ancestors(os.path.realpath(s)))]
    rules = RuleEvaluator(manifest.rules)
    out = []
    for envrc in envrcs:
        for d in path_dirs(envrc) if os.path.isfile(envrc) else []:
            probe = os.path.join(d, "git")  # a program that would shadow the user's own
            if not manifest.effective.can_write(probe) or rules.evaluate(Subject("bash", "fs.write", "path", probe)).action == "deny":
                continue
            out.append(f"{envrc} puts {d} on PATH and requires.fs.write reaches it: a program the agent writes there runs "
                       f"when you type its name in that project (outside ENV-7); add the rule "
                       f"{{permission: fs.write, pattern: {json.dumps(_deny_pattern(d, manifest))}, action: deny}} to keep it out of reach")
    return out


def _mcp_code_in_reach(manifest: CompiledManifest, at: Locate) -> list[str]:
    """Files a stdio MCP server runs (its program, and the arguments that name an existing file) that `fs.write`
    reaches and no write deny keeps out: a command could change what the server does at its next start, with
    the server's own grant, which no rule judges action by action. The user chose to run them (outside ENV-7),
    so this is advice, as for `.envrc` PATH directories."""
    from ..rules.evaluator import RuleEvaluator, Subject

    rules = RuleEvaluator(manifest.rules)
    base = os.fspath(manifest.workspace or os.getcwd())  # where a relative argument is looked up (MCP-5's usual cwd)
    out = []
    for name, server in manifest.mcp_servers.items():
        spec = server.spec
        if spec.command is None:
            continue
        words = ([spec.command] if "/" in spec.command else []) + list(spec.args)
        for path in dict.fromkeys(os.path.realpath(os.path.join(base, w)) for w in words if w and not w.startswith("-")):
            if not os.path.isfile(path) or not manifest.effective.can_write(path):
                continue
            if rules.evaluate(Subject("bash", "fs.write", "path", path)).action == "deny":
                continue
            d = os.path.dirname(path)
            out.append(f"{at('mcp', name)}: the server runs {path}, which requires.fs.write reaches: a command could change what "
                       "the server does at its next start (with the server's own grant); keep its code out of reach, outside "
                       f"fs.write or with the rule {{permission: fs.write, pattern: {json.dumps(_deny_pattern(d, manifest))}, action: deny}}")
    return out


def _deny_pattern(d: str, manifest: CompiledManifest) -> str:
    """`d/**` as a rule pattern: relative to the workspace when inside it (as a manifest author would write it)."""
    for root in manifest.workspace_roots[:1]:
        rel = os.path.relpath(d, os.path.realpath(root))
        if rel != ".." and not rel.startswith("../"):
            return "{workspace}/" + glob_escape(rel) + "/**" if rel != "." else "{workspace}/**"
    return glob_escape(d) + "/**"


def _self_and_ancestors(path: str) -> list[str]:
    out = [path]
    while (parent := os.path.dirname(out[-1])) != out[-1]:
        out.append(parent)
    return out


def _environments_in_reach(manifest: CompiledManifest) -> list[str]:
    """Python environments a writable base holds (directly, or as `.pixi/envs/*`) or lies in: read-only whole
    (ENV-7 rule 3), which an author who expects the agent to `pip install` would not guess."""
    own = set(reachable_runtime(manifest.effective))
    found: dict[str, None] = {}
    for base in dict.fromkeys(os.path.realpath(p.base) for p in manifest.effective.fs_write):
        inside = _enclosing_environment(base)
        if inside is not None:
            found[inside] = None
            continue
        for candidate in [base, *_children(base), *_children(os.path.join(base, ".pixi", "envs"))]:
            if is_environment(candidate):
                found[candidate] = None
    envs = [e for e in found if not any(e == os.fspath(r) or e.startswith(os.fspath(r) + "/") for r in own)]
    if not envs:
        return []
    return [f"requires.fs.write reaches the Python environment{'s' if len(envs) > 1 else ''} {', '.join(envs)}: "
            "it stays read-only (ENV-7 rule 3), so commands cannot install packages into it; run pip, uv or conda yourself"]


def _enclosing_environment(path: str) -> str | None:
    return next((d for d in _self_and_ancestors(path) if is_environment(d)), None)


def _children(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as it:
            return sorted(e.path for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _skills_in_reach(manifest: CompiledManifest, at: Locate) -> list[str]:
    """Skill directories `fs.write` reaches stay read-only (ENV-7 rule 5): an author who asks the agent to write a
    skill would not guess, and a writable base inside one is not writable at all."""
    bases = list(dict.fromkeys(os.path.realpath(p.base) for p in manifest.effective.fs_write))
    out = []
    for d in map(os.fspath, dict.fromkeys(manifest.skill_dirs)):  # two spellings of one directory: one warning
        inside = [b for b in bases if b == d or b.startswith(d.rstrip("/") + "/")]
        if inside:
            out.append(f"{at('skills', 'paths')}: {', '.join(inside)} of requires.fs.write lies in the skill directory {d}, "
                       "which is protected whole (ENV-7 rule 5): nothing there is writable; keep skills in a directory of their own")
        elif manifest.effective.can_write(os.path.join(d, "skill", "SKILL.md")):
            out.append(f"{at('skills', 'paths')}: requires.fs.write reaches the skill directory {d}: it stays read-only "
                       "(ENV-7 rule 5), so the agent cannot add or change a skill; write skills yourself")
    return out


def _links_in_reach(manifest: CompiledManifest) -> list[str]:
    """A symbolic link on the way to a file of rule 5 (a skill, the manifest, a subagent's) that a sandbox's
    fs.write reaches: a command or a stdio MCP server could point it elsewhere and the sandbox cannot keep a
    link read-only, so every command is refused and such a server does not start."""
    links = [os.fspath(p) for p in manifest.protected_files if os.path.islink(p)]
    out = []
    for link in links:
        who = ["no command can run"] if manifest.shell_tools and manifest.effective.can_write(link) else []
        who += [f"the MCP server {name} cannot start" for name, server in manifest.mcp_servers.items()
                if server.spec.command is not None and server.grant.can_write(link)]
        if who:
            out.append(f"requires.fs.write reaches the symbolic link {link} on the way to a skill, the manifest or a subagent's "
                       f"manifest (ENV-7 rule 5): the sandbox cannot keep it read-only, so {_both(who)}; put what it leads to "
                       "in its place")
    return out


def _both(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _unusable_agents(manifest: CompiledManifest, catalog: ToolCatalog, at: Locate) -> list[str]:
    """Named subagents whose manifest `task` would refuse (`agent_invalid`), compiled here as `task` compiles them,
    so the author learns it now and not when a session first delegates. One that cannot even be parsed names
    no skill directories and no subagents of its own: rule 5 cannot protect those until it is fixed."""
    from ..errors import ManifestError
    from .compiled import load_subagent, subagent_document

    out = []
    for name, path in manifest.agents.items():
        try:
            load_subagent(manifest, path, catalog)
            continue
        except ManifestError as exc:
            problem = str(exc)
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"{path}: cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})"
        unknown = ""
        if manifest.effective.fs_write and subagent_document(path) is None:
            unknown = ("; until it can be read, the skill directories and subagents it would name are unknown, "
                       "so nothing keeps them out of fs.write's reach (ENV-7 rule 5)")
        out.append(f"{at('agents', name)}: task refuses the subagent {name} (agent_invalid): {problem}{unknown}")
    return out


def _runtime_in_reach(manifest: CompiledManifest) -> list[str]:
    reached = reachable_runtime(manifest.effective)
    if not reached:
        return []
    return [f"requires.fs.write reaches what agentcore runs from ({', '.join(map(str, reached))}): it stays read-only "
            "(ENV-7 rule 5); run agentcore from an environment outside the writable paths if commands should change it"]


def _missing_roots(manifest: CompiledManifest) -> list[str]:
    out = []
    for root in manifest.workspace_roots:
        if not os.path.isdir(root):
            out.append(f"workspace: {root} is not an existing directory: every path access in it will be refused")
    return out


def _unused_grants(manifest: CompiledManifest, catalog: ToolCatalog, used: set[str], enabled: list[str], at: Locate) -> list[str]:
    spec = manifest.spec.requires
    present = {
        "fs.read": spec.fs.read, "fs.write": spec.fs.write, "net.fetch": spec.net.hosts, "shell.run": spec.shell,
    }
    out = []
    for cap, key in _GRANTS:
        if present[cap] and cap not in used:
            users = _either([t for t in catalog.ids() if cap in getattr(catalog.get(t), "uses", ())]) or "a tool that uses it"
            out.append(
                f"{at(*key)}: no enabled tool uses this grant ({', '.join(enabled) or 'no tools'} enabled); "
                f"it takes effect only with {users}"
            )
    return out


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1] if names else ""


def _unused_named(manifest: CompiledManifest, used: set[str], at: Locate) -> list[str]:
    ruled = {r.rule.permission for r in manifest.rules}
    out = []
    for i, name in enumerate(manifest.spec.requires.capabilities):
        if name not in used and name not in ruled:
            out.append(
                f"{at('requires', 'capabilities', i)}: the named capability {name!r} is used by no enabled tool and "
                "named by no rule, so it grants nothing (named capabilities are for tools that declare them and for rules)"
            )
    return out


def _rules_for_disabled_tools(manifest: CompiledManifest, catalog: ToolCatalog, enabled: Iterable[str], at: Locate) -> list[str]:
    on = set(enabled)
    out = []
    for i, rule in enumerate(manifest.spec.rules):
        if rule.permission in catalog.ids() and rule.permission not in on:
            out.append(f"{at('rules', i, 'permission')}: {rule.permission!r} is not enabled, so this rule never applies")
    return out
