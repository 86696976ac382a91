"""Compiling a manifest: variables expanded, effective set computed, patterns compiled once (VAR, CAP)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Container, Iterable, Sequence

from ..errors import CompileError, ManifestError
from ..lazydc import lazy_dataclass  # made on first use: every call imports this module, few make these
from ..limits import Limits
from ..patterns.path import PathPattern, compile_path_pattern
from ..patterns.shell import ShellRequirement, compile_shell_requirement
from ..protected import runtime_paths
from ..rules.model import CompiledRule, Rule, compile_rules
from ..textdata import LineIndex, did_you_mean, key_path_text, line_of
from ..variables import Bindings, expand, variables_in
from ..vocabulary import LOCKED_IDS, WATCHDOG_CATEGORIES, unknown_categories
from .catalog import ToolCatalog
from .loader import read_manifest_spec, read_rules_spec
from .spec import ManifestSpec, McpServerSpec, RequiresSpec

if TYPE_CHECKING:
    from ..net.hosts import HostPattern


@dataclass(frozen=True)
class EffectiveCapabilities:
    """The effective capability set: the manifest's `requires` united with every enabled tool's, variables expanded."""

    fs_read: tuple[PathPattern, ...]
    fs_write: tuple[PathPattern, ...]
    net_hosts: tuple["HostPattern", ...]
    shell: tuple[ShellRequirement, ...]
    capabilities: frozenset[str]
    # Where each entry came from ("manifest" or a tool id), for `explain`.
    origins: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def can_read(self, path: str) -> bool:
        return any(p.matches(path) for p in self.fs_read)

    def can_write(self, path: str) -> bool:
        return any(p.matches(path) for p in self.fs_write)

    def to_json(self) -> dict[str, Any]:
        return {
            "fs": {
                "read": [p.expanded for p in self.fs_read],
                "write": [p.expanded for p in self.fs_write],
            },
            "net": {"hosts": [h.raw for h in self.net_hosts]},
            "shell": [s.to_json() for s in self.shell],
            "capabilities": sorted(self.capabilities),
        }


@lazy_dataclass(frozen=True)
class CompiledMcpServer:
    """An MCP server the manifest declares: its spec and what its process may touch (MCP-4).

    `grant` holds exactly the server's own `requires`, compiled; the same
    entries are part of the agent's effective set (origin `mcp server NAME`).
    """

    name: str
    spec: McpServerSpec
    grant: EffectiveCapabilities


@dataclass(frozen=True)
class CompiledManifest:
    """A manifest checked and compiled against a catalog and a workspace: what the engine enforces for every call."""

    name: str
    spec: ManifestSpec
    source: Path | None
    tools: tuple[str, ...]
    bindings: Bindings
    effective: EffectiveCapabilities
    rules: tuple[CompiledRule, ...]
    limits: Limits
    environment: str
    agents: dict[str, Path]
    skill_dirs: tuple[Path, ...]
    protected_files: tuple[Path, ...]
    deferred: tuple[str, ...] = ()
    sandbox_view: str = "minimal"  # ENV-5: "full" shows the whole root read-only
    mcp_servers: dict[str, CompiledMcpServer] = field(default_factory=dict)
    # Enabled and deferred tools that declare `shell.run`: the sandbox honours the denies written for them (ENV-6).
    shell_tools: tuple[str, ...] = ()

    @property
    def mcp_tool_prefixes(self) -> tuple[str, ...]:
        """`<server>__` for every declared MCP server: rule permissions may name its tools before they are listed."""
        return tuple(f"{name}__" for name in self.mcp_servers)

    @property
    def workspace(self) -> Path | None:
        return self.bindings.workspace

    @property
    def workspace_roots(self) -> tuple[Path, ...]:
        return tuple(Path(p) for p in self.bindings.values.get("workspace", ()))


Locate = Callable[..., str]
"""`at(*key_path)` is where a key of the manifest was written: "file:line: key.path" (or "origin: key.path")."""

# REQ-2: two or more lowercase identifiers joined by dots.
CAPABILITY_NAME = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+")


def locator(spec: ManifestSpec, origin: str) -> Locate:
    """Where each key of `spec` was written, when it was read from a file (the loader keeps the lines)."""
    lines: LineIndex = getattr(spec, "_lines", None) or {}
    file = getattr(spec, "_file", None) or origin

    def at(*key: Any) -> str:
        return f"{file}:{line_of(lines, key)}: {key_path_text(key)}" if lines else f"{file}: {key_path_text(key)}"

    return at


def _compile_paths(patterns: Iterable[str], bindings: Bindings, at: Locate, key: tuple[str, ...]) -> list[PathPattern]:
    out: list[PathPattern] = []
    for i, raw in enumerate(patterns):
        where = at(*key, i)
        for text in expand(raw, bindings, where=where):
            try:
                out.append(compile_path_pattern(raw, text, anchor=bindings.workspace))
            except CompileError as exc:
                raise CompileError(exc.message, location=where) from None
    return out


def _compile_hosts(hosts: Sequence[str], bindings: Bindings, at: Locate) -> list["HostPattern"]:
    if not hosts:
        return []  # without importing the host module (2 ms of a command line's start)
    from ..net.hosts import compile_host_pattern

    out: list[HostPattern] = []
    for i, raw in enumerate(hosts):
        where = at("requires", "net", "hosts", i)
        if variables_in(raw) or "{" in raw:
            # Hosts are not paths: a variable there is a mistake, not a scope (VAR-5).
            raise CompileError("a host pattern cannot contain a variable", location=where)
        for text in expand(raw, bindings, escape=False, where=where):
            try:
                out.append(compile_host_pattern(text))
            except Exception as exc:  # the host module raises its own typed errors
                raise CompileError(f"invalid host pattern: {getattr(exc, 'message', exc)}", location=where) from None
    return out


def _compile_shell(req: RequiresSpec, at: Locate) -> list[ShellRequirement]:
    out: list[ShellRequirement] = []
    for i, s in enumerate(req.shell):
        args = None if s.args is None else [a if isinstance(a, str) else a.as_dict() for a in s.args]
        try:
            out.append(compile_shell_requirement(s.cmd, args))
        except ValueError as exc:
            raise CompileError(str(exc), location=at("requires", "shell", i)) from None
    return out


def _check_capability_names(req: RequiresSpec, at: Locate) -> list[str]:
    for i, name in enumerate(req.capabilities):
        if not CAPABILITY_NAME.fullmatch(name):
            raise CompileError(
                "a capability name is two or more lowercase identifiers joined by '.' (e.g. db.query)",
                location=at("requires", "capabilities", i),
            )
    return list(req.capabilities)


def _compile_requires(req: RequiresSpec, bindings: Bindings, at: Locate) -> dict[str, list[Any]]:
    return {
        "fs_read": _compile_paths(req.fs.read, bindings, at, ("requires", "fs", "read")),
        "fs_write": _compile_paths(req.fs.write, bindings, at, ("requires", "fs", "write")),
        "net_hosts": _compile_hosts(req.net.hosts, bindings, at),
        "shell": _compile_shell(req, at),
        "capabilities": _check_capability_names(req, at),
    }


def _dedupe(items: Iterable[Any], key: Any) -> tuple[Any, ...]:
    seen: set[Any] = set()
    out: list[Any] = []
    for it in items:
        k = key(it)
        if k not in seen:
            seen.add(k)
            out.append(it)
    return tuple(out)


def _bindings(roots: Sequence[str], workspace: Path | None, source: Path | None, at: Locate, ad_hoc: Sequence[Path], user_data: Path | None) -> Bindings:
    """The variables of a manifest with `roots` (its `roots:` key) read from `source` (a path), for `workspace`."""
    ws = Path(os.path.realpath(workspace)) if workspace else None
    roots_bindings = Bindings.for_workspace(ws)
    base = source.parent if source else (ws or Path.cwd())
    extra_roots = [
        Path(os.path.realpath(os.path.join(base, text)))
        for i, raw in enumerate(roots)
        for text in expand(raw, roots_bindings, escape=False, where=at("roots", i))
    ]
    return Bindings.for_workspace(
        ws,
        extra_roots=extra_roots,
        ad_hoc=[Path(os.path.realpath(p)) for p in ad_hoc],
        user_data=Path(os.path.realpath(user_data)) if user_data else None,
    )


def _check_tools(spec: ManifestSpec, catalog: ToolCatalog, at: Locate) -> None:
    for key in ("tools", "deferred_tools"):
        for i, tool_id in enumerate(getattr(spec, key)):
            if not catalog.has(tool_id):
                broken = catalog.load_error(tool_id)
                if broken:
                    raise CompileError(f"tool {tool_id!r} failed to load: {broken}", location=at(key, i))
                raise CompileError(f"unknown tool {tool_id!r}{did_you_mean(tool_id, catalog.ids())}", location=at(key, i))
    for i, tool_id in enumerate(spec.tools):
        if tool_id in spec.tools[:i]:
            raise CompileError(f"tool {tool_id!r} is listed twice", location=at("tools", i))
    for i, tool_id in enumerate(spec.deferred_tools):
        if tool_id in LOCKED_IDS or tool_id in spec.tools:
            raise CompileError(
                f"{tool_id!r} cannot be deferred (locked tools and enabled tools are always advertised)",
                location=at("deferred_tools", i),
            )


def _names(catalog: ToolCatalog) -> Container[str]:
    """The catalogue's ids for `in` tests: the catalogue itself when it answers them (without loading every plugin)."""
    return catalog if isinstance(catalog, Container) else catalog.ids()


def _tool_locator(tool_id: str) -> Locate:
    return lambda *key: f"tool {tool_id}: {key_path_text(key)}"


def _server_locator(at: Locate, name: str) -> Locate:
    return lambda *key: at("mcp", name, *key)


def _effective(spec: ManifestSpec, catalog: ToolCatalog, bindings: Bindings, at: Locate) -> tuple[EffectiveCapabilities, dict[str, CompiledMcpServer]]:
    """The union of the manifest's, every enabled tool's and every MCP server's requirements (CAP-1, MCP-4)."""
    parts = [("manifest", _compile_requires(spec.requires, bindings, at))]
    # Deferred tools count toward the effective set from the start, so finding
    # one with tool_search never widens the sandbox (TSRCH-4).
    for tool_id in [*spec.tools, *spec.deferred_tools]:
        tool_req = catalog.get(tool_id).requirements(spec)
        parts.append((tool_id, _compile_requires(tool_req, bindings, _tool_locator(tool_id))))
    servers: dict[str, CompiledMcpServer] = {}
    for name, server in spec.mcp.items():
        part = (f"mcp server {name}", _compile_requires(server.requires, bindings, _server_locator(at, name)))
        parts.append(part)
        servers[name] = CompiledMcpServer(name=name, spec=server, grant=_union([part]))
    return _union(parts), servers


def _union(parts: list[tuple[str, dict[str, list[Any]]]]) -> EffectiveCapabilities:
    def union(key: str, ident: Any) -> tuple[Any, ...]:
        return _dedupe((item for _, p in parts for item in p[key]), ident)

    origins: dict[str, tuple[str, ...]] = {}
    for who, p in parts:
        for key in ("fs_read", "fs_write"):
            for pat in p[key]:
                origins[f"{key}:{pat.expanded}"] = origins.get(f"{key}:{pat.expanded}", ()) + (who,)
    return EffectiveCapabilities(
        fs_read=union("fs_read", lambda p: p.expanded),
        fs_write=union("fs_write", lambda p: p.expanded),
        net_hosts=union("net_hosts", lambda h: h.raw),
        shell=union("shell", lambda s: s),
        capabilities=frozenset(c for _, p in parts for c in p["capabilities"]),
        origins=origins,
    )


def _check_mcp(spec: ManifestSpec, at: Locate) -> None:
    for name, server in spec.mcp.items():
        if server.defer is True and "tool_search" not in spec.tools:
            raise CompileError("defer: true keeps the tools behind tool_search, which is not enabled in tools",
                               location=at("mcp", name, "defer"))


def _check_watchdog(spec: ManifestSpec, at: Locate) -> None:
    for i, name in enumerate(spec.watchdog.disable):
        if unknown_categories([name]):
            raise CompileError(
                f"unknown watchdog category {name!r}{did_you_mean(name, WATCHDOG_CATEGORIES)}",
                location=at("watchdog", "disable", i),
            )


def _agents(spec: ManifestSpec, base: Path) -> dict[str, Path]:
    return {name: Path(os.path.realpath(os.path.join(base, rel))) for name, rel in spec.agents.items()}


MAX_AGENT_FILES = 256


def agent_files(agents: dict[str, Path]) -> tuple[Path, ...]:
    """The manifest files of every named subagent, and of theirs in turn (rule 5), and the symbolic links on the way.

    `task` reads them when it runs, so one the agent could rewrite would hand a
    child whatever rules it liked (a named child keeps only its parent's denies,
    SUB-3). The children's own `agents` maps are read here, as text only: a file
    that cannot be read or parsed is protected all the same, and `task` refuses it.
    """
    seen: dict[Path, None] = {}
    links: list[str] = []
    todo = list(agents.values())
    while todo:
        path = Path(os.path.realpath(todo.pop()))
        if path in seen:
            continue
        if len(seen) == MAX_AGENT_FILES:  # one left unprotected would be one the agent could rewrite
            raise CompileError(f"more than {MAX_AGENT_FILES} subagent manifests are reachable through `agents`")
        seen[path] = None
        data = subagent_document(path)
        nested = data.get("agents") if isinstance(data, dict) else None
        if isinstance(nested, dict):
            todo += [path.parent / rel for rel in nested.values() if isinstance(rel, str)]
            links += [link for rel in nested.values() if isinstance(rel, str) for link in _links_on(os.fspath(path.parent / rel))]
    return tuple(seen) + tuple(Path(link) for link in dict.fromkeys(links))


def _skill_paths(paths: Iterable[str], bindings: Bindings, at: Locate) -> list[str]:
    """The skill directories as written (variables expanded, anchored at the workspace), symbolic links not resolved."""
    ws = bindings.workspace
    return [
        text if os.path.isabs(text) else os.path.join(ws or ".", text)
        for i, raw in enumerate(paths)
        for text in expand(raw, bindings, escape=False, where=at("skills", "paths", i))
    ]


def agent_skill_paths(files: Iterable[Path], parent: Bindings) -> list[str]:
    """The skill directories of the subagent manifests `files`, as `task` compiles them (with the parent's bindings).

    Read as text, as `agent_files` reads them: what cannot be read or expanded is skipped (`task` refuses it).
    The links `agent_files` also names are not read again: their targets are among the files.
    """
    out: list[str] = []
    for path in files:
        data = None if path.is_symlink() else subagent_document(path)
        if not isinstance(data, dict):
            continue
        skills = data.get("skills")
        paths = _strings(skills.get("paths") if isinstance(skills, dict) else None)
        at = lambda *key: str(path)  # noqa: E731 - where an unknown variable is reported (it is skipped here)
        try:
            child = _bindings(_strings(data.get("roots")), parent.workspace, path, at, parent.ad_hoc, parent.user_data)
            out += _skill_paths(paths, child, at)
        except ManifestError:  # an unknown variable
            continue
    return out


def subagent_document(path: Path) -> Any:
    """A subagent manifest read as text by the loader's defensive parser (no model validation), or None
    when it cannot be read or parsed: rule 5 protects it all the same, and `task` refuses it."""
    from .loader import parse_document

    try:
        return parse_document(path.read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError, ManifestError):
        return None


def load_subagent(parent: "CompiledManifest", path: Path, catalog: ToolCatalog) -> "CompiledManifest":
    """A named subagent's manifest compiled as `task` runs it: the parent's workspace and the parent's
    bindings of {ad-hoc} and {user-data} (SUB-2), so its variables mean what the parent's do."""
    return load_manifest(path, workspace=parent.workspace, catalog=catalog,
                         ad_hoc=parent.bindings.ad_hoc, user_data=parent.bindings.user_data)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _links_on(path: str) -> list[str]:
    """The symbolic links met on the way to `path`, as the kernel walks it, each by its resolved parent."""
    links: list[str] = []
    todo, cur = (path if os.path.isabs(path) else os.path.join(os.getcwd(), path)).split("/")[::-1], "/"
    while todo and len(links) <= 40:  # the kernel's own bound on links in one lookup
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            cur = os.path.dirname(cur)
            continue
        cand = os.path.join(cur, part)
        try:
            target = os.readlink(cand)
        except OSError:  # not a link, or missing: the rest is taken as written
            cur = cand
            continue
        links.append(cand)
        cur = "/" if target.startswith("/") else cur
        todo += target.split("/")[::-1]
    return links


def _entries(directory: Path) -> list[str]:
    try:
        return [e for e in os.listdir(directory) if not e.startswith(".")]  # hidden folders are not skills
    except OSError:
        return []


def skill_files(skill_dirs: Sequence[str | Path]) -> tuple[Path, ...]:
    """The skill directories of `skills.paths`, each whole (rule 5), whether `skill` is enabled or not.

    What a skill says reaches the system prompt of every later session, and its body the model as
    instructions: one the agent could write or add would steer the sessions after it as the agent
    chose, not as the manifest's author did. A skill is read from where symbolic links lead (a skill
    directory named through one, a skill folder or SKILL.md that is one): those places are protected
    too, and so is every link on the way outside a skill directory, which a command could point elsewhere
    (the sandbox cannot keep a link read-only, so it refuses to run, ENV-7).
    """
    dirs = list(dict.fromkeys(Path(os.path.realpath(d)) for d in skill_dirs))
    ways = [os.fspath(d) for d in skill_dirs]
    ways += [os.path.join(d, e, leaf) for d in dirs for e in _entries(d) for leaf in ("", "SKILL.md")]
    found = [Path(os.path.realpath(w)) for w in ways] + [Path(link) for w in ways for link in _links_on(w)]
    return tuple(dict.fromkeys([*dirs, *(p for p in found if not any(p == d or d in p.parents for d in dirs))]))


def reachable_runtime(effective: EffectiveCapabilities) -> tuple[Path, ...]:
    """The parts of the runtime's installation (rule 5) that fs.write reaches: a writable base inside one,
    or one inside a writable base. Only these are worth a read-only mount on every call."""
    bases = [Path(os.path.realpath(p.base)) for p in effective.fs_write]
    if not bases:
        return ()
    reached = [r for r in runtime_paths() if any(b == r or r in b.parents or b in r.parents for b in bases)]
    return tuple(r for r in reached if not any(o in r.parents for o in reached))  # outermost: one mount each


def compile_manifest(
    spec: ManifestSpec,
    *,
    workspace: Path | None,
    catalog: ToolCatalog,
    source: Path | None = None,
    ad_hoc: Sequence[Path] = (),
    user_data: Path | None = None,
    extra_protected: Sequence[Path] = (),
) -> CompiledManifest:
    """Expand variables, check names against `catalog`, compute the effective set and compile the rules."""
    at = locator(spec, str(source) if source else spec.name)
    bindings = _bindings(spec.roots, workspace, source, at, ad_hoc, user_data)
    _check_tools(spec, catalog, at)
    effective, mcp_servers = _effective(spec, catalog, bindings, at)
    rules = [
        Rule(r.permission, r.pattern, r.action, scope="manifest", index=i, origin=at("rules", i))
        for i, r in enumerate(spec.rules)
    ]
    compiled_rules = compile_rules(
        rules, bindings, known_tools=_names(catalog), known_capabilities=effective.capabilities,
        locate=lambda rule, key: at("rules", rule.index, key),
        known_tool_prefixes=tuple(f"{name}__" for name in mcp_servers),
    )
    _check_watchdog(spec, at)
    _check_mcp(spec, at)
    base = source.parent if source else (bindings.workspace or Path.cwd())
    written = ([source] if source else []) + list(extra_protected)
    protected = tuple(Path(os.path.realpath(p)) for p in written)
    # A link on the way, which a command could point elsewhere, would choose what the next compile reads.
    written += [base / rel for rel in spec.agents.values()]
    protected += tuple(Path(link) for p in written for link in _links_on(os.fspath(p)))
    agents = _agents(spec, base)
    skill_paths = _skill_paths(spec.skills.paths, bindings, at)
    skill_dirs = tuple(Path(os.path.realpath(p)) for p in skill_paths)
    subagents = agent_files(agents)
    # A named child's skills reach its prompt as the parent's reach the parent's: protected here too.
    skill_paths += agent_skill_paths(subagents, bindings)
    protected = tuple(dict.fromkeys(protected + subagents + skill_files(skill_paths) + reachable_runtime(effective)))
    return CompiledManifest(
        name=spec.name,
        spec=spec,
        source=source,
        tools=tuple(spec.tools),
        bindings=bindings,
        effective=effective,
        rules=compiled_rules,
        limits=Limits().merged(spec.limits.as_dict()),
        environment=spec.environment,
        agents=agents,
        skill_dirs=skill_dirs,
        protected_files=protected,
        deferred=tuple(spec.deferred_tools),
        sandbox_view=spec.sandbox.view,
        mcp_servers=mcp_servers,
        shell_tools=_shell_tools(spec, catalog),
    )


def _shell_tools(spec: ManifestSpec, catalog: ToolCatalog) -> tuple[str, ...]:
    """The tools that run commands, by what they declare (a catalogue whose tools declare nothing gives none)."""
    return tuple(t for t in (*spec.tools, *spec.deferred_tools) if "shell.run" in getattr(catalog.get(t), "uses", ()))


def load_manifest(path: Path, *, workspace: Path | None, catalog: ToolCatalog, **kwargs: Any) -> CompiledManifest:
    """Read, validate and compile the manifest file at `path` (see `compile_manifest`)."""
    spec = read_manifest_spec(Path(path))
    # The path as given too: a link on the way to the file is protected with it (compile_manifest).
    kwargs["extra_protected"] = [*kwargs.get("extra_protected", ()), Path(path)]
    return compile_manifest(spec, workspace=workspace, catalog=catalog, source=Path(os.path.realpath(path)), **kwargs)


def load_project_rules(
    path: Path, bindings: Bindings, *, catalog: ToolCatalog, tool_prefixes: Sequence[str] = ()
) -> tuple[CompiledRule, ...]:
    """The rules of a project-rules file, compiled in the `project` scope (`tool_prefixes`: the MCP servers' `<server>__`)."""
    spec = read_rules_spec(Path(path))
    lines: LineIndex = getattr(spec, "_lines", None) or {}

    def at(*key: Any) -> str:
        return f"{path}:{line_of(lines, key)}: {key_path_text(key)}"

    rules = [
        Rule(r.permission, r.pattern, r.action, scope="project", index=i, origin=at("rules", i))
        for i, r in enumerate(spec.rules)
    ]
    return compile_rules(rules, bindings, known_tools=_names(catalog), locate=lambda rule, key: at("rules", rule.index, key),
                         known_tool_prefixes=tool_prefixes)
