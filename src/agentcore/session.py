"""Sessions: identity, working directory, session-scope rules, abort (PERM, TRUNC, SUB)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import anyio

from agentcore.patterns.globtext import glob_escape

from .limits import Limits
from .rules.evaluator import RuleEvaluator
from .rules.model import CompiledRule, Rule, compile_rules
from .truncation import SidecarBudget
from .variables import Bindings


@dataclass
class SessionStores:
    """Session-internal state of the tools that need it."""

    todos: list[dict[str, Any]] = field(default_factory=list)
    web_search_calls: int = 0
    skill_cache: dict[str, str] = field(default_factory=dict)
    skill_index: dict[str, Path] | None = None
    discovered_tools: set[str] = field(default_factory=set)
    watchdog_approvals: set[tuple[str, str]] = field(default_factory=set)
    watchdog_rejections: set[tuple[str, str]] = field(default_factory=set)
    # Tools that exist for this session only (its MCP servers'): a `tools.source.SessionToolSource`.
    tool_source: Any = None


class ClientFiles(Protocol):
    """What a front end offers as the source of file text (an editor's unsaved buffers, ACP `fs/read_text_file`).

    Asked only by a tool that has passed the whole pipeline, for the one canonical path it was allowed to
    read; None means "use the file on disk".
    """

    async def read_text(self, path: str) -> str | None: ...


class Session:
    """One conversation's state: id, sidecar directory, session rules, tool stores, in-flight calls.

    Open sessions with `Engine.open_session`; `close()` (or leaving a `with`
    block) aborts what still runs and removes the working directory.
    """

    def __init__(
        self,
        *,
        workspace: Path | None,
        bindings: Bindings,
        manifest_rules: tuple[CompiledRule, ...],
        project_rules: tuple[CompiledRule, ...] = (),
        headless: bool = True,
        session_id: str | None = None,
        depth: int = 0,
        parent: "Session | None" = None,
        parent_call_id: str | None = None,
        workdir_root: Path | None = None,
        sidecar_bytes: int | None = None,
        client_files: ClientFiles | None = None,
    ) -> None:
        self.id = session_id or f"ses_{os.urandom(8).hex()}"
        # A front end's file text, for `read` after the pipeline allowed it; children do not inherit it.
        self.client_files = client_files
        self.workspace = workspace
        self.bindings = bindings
        self.headless = headless
        self.depth = depth
        self.parent = parent
        # The parent's `task` call that started this (subagent) session, for attributing events.
        self.parent_call_id = parent_call_id
        self.children: list[Session] = []
        root = workdir_root or Path(tempfile.gettempdir())
        # Resolved so the sidecar paths handed to the model are canonical and
        # pass the capability check when read back.
        self.workdir = Path(os.path.realpath(tempfile.mkdtemp(prefix=f"agentcore-{self.id}-", dir=root)))
        # A session nobody closed still leaves nothing behind: its directory goes when the
        # object does, or when the interpreter exits (not after a SIGKILL).
        self._cleanup = weakref.finalize(self, shutil.rmtree, os.fspath(self.workdir), True)
        self.stores = SessionStores()
        # TRUNC-9: the sidecars of this session and of its children share the tree's cap.
        limit = Limits().session_sidecar_bytes if sidecar_bytes is None else sidecar_bytes
        self.sidecar_budget = SidecarBudget(limit, parent.sidecar_budget if parent is not None else None)
        self._manifest_rules = manifest_rules
        self._project_rules = project_rules
        self._session_rules: list[CompiledRule] = []
        # Rules as written, counted before expansion: a rule's index is its position here (PERM-13).
        self._session_rule_count = 0
        self._transient: set[int] = set()  # indexes of the host's transient session rules (never remembered)
        self._engine: RuleEvaluator | None = None
        self._scopes: set[anyio.CancelScope] = set()
        # Counts abort() calls: a call whose scope was cancelled tells an abort
        # from its own time limit by whether this moved while it ran (ORDER-6).
        self.aborts = 0
        self._on_close: list[Callable[[], None]] = []
        self.closed = False
        # The model must be able to read its own sidecars even headless (TRUNC-6).
        self.add_session_rule("read", glob_escape(os.fspath(self.workdir)) + "/**", "allow")
        if parent is not None:
            parent.children.append(self)

    # -- rules -------------------------------------------------------------
    @property
    def rule_evaluator(self) -> RuleEvaluator:
        if self._engine is None:
            self._engine = RuleEvaluator(self._manifest_rules + self._project_rules + tuple(self._session_rules))
        return self._engine

    @property
    def session_rules(self) -> tuple[CompiledRule, ...]:
        return tuple(self._session_rules)

    def set_project_rules(self, rules: tuple[CompiledRule, ...]) -> None:
        self._project_rules = rules
        self._engine = None

    def add_session_rule(self, permission: str, pattern: str, action: str, *, pinned: bool = False) -> None:
        """Append one rule to the session scope; index 0 is the sidecar rule, the rest follow in the order added.

        `pinned` (denies only) is for the host's own restrictions, such as a read-only mode: such a deny holds
        against every allow, as a manifest deny does, and is not one of the session's remembered answers."""
        if pinned and action != "deny":
            raise ValueError("only a deny can be pinned")
        rule = Rule(permission, pattern, action, scope="session", index=self._session_rule_count, pinned=pinned)  # type: ignore[arg-type]
        # A multi-valued or empty expansion yields several or no compiled rules, but one index.
        self._session_rules.extend(compile_rules([rule], self.bindings))
        self._session_rule_count += 1
        self._engine = None

    def inherit_session_rules(self, rules: Sequence[CompiledRule], *, pin_denies: bool = False) -> None:
        """Append another (a parent) session's compiled rules to the session scope, renumbered after this scope's.

        Taken as compiled, not expanded again: a variable keeps the values it had where the rule was written
        (a parent's `{workspace}` names the parent's roots, whatever roots the child's manifest names).
        `pin_denies` pins every deny among them (a subagent's: SUB-3)."""
        numbering: dict[int, int] = {}
        for cr in rules:
            index = numbering.setdefault(cr.rule.index, self._session_rule_count + len(numbering))
            pinned = cr.rule.pinned or (pin_denies and cr.rule.action == "deny")
            self._session_rules.append(CompiledRule(rule=replace(cr.rule, index=index, pinned=pinned), expanded=cr.expanded,
                                                    perm_rank=cr.perm_rank, anchor=cr.anchor, paths_only=cr.paths_only))
        self._session_rule_count += len(numbering)
        self._engine = None

    def set_session_rules(self, rules: Sequence[tuple[str, str, str]], *, pinned: Sequence[tuple[str, str]] = (),
                          transient: Sequence[tuple[str, str, str]] = ()) -> None:
        """Replace the session scope: the sidecar rule, then `pinned` denies (permission, pattern), then
        `transient` rules, then `rules`.

        `transient`: the host's own rules for now (an editor's auto-edit mode): they apply like `rules`, but
        they are not answers the session remembers, so a recording never brings them back elsewhere."""
        self._session_rules = []
        self._session_rule_count = 0
        self._transient = set()
        self.add_session_rule("read", glob_escape(os.fspath(self.workdir)) + "/**", "allow")
        for permission, pattern in pinned:
            self.add_session_rule(permission, pattern, "deny", pinned=True)
        for permission, pattern, action in transient:
            self._transient.add(self._session_rule_count)
            self.add_session_rule(permission, pattern, action)
        for permission, pattern, action in rules:
            self.add_session_rule(permission, pattern, action)

    def remembered(self) -> dict[str, Any]:
        """The answers this session remembers ("always" answers): its session rules and watchdog answers.

        JSON-ready; `restore` puts them into another session (a continued or
        reloaded one). The rule that lets the model read its own sidecars is
        per working directory and is not part of it.
        """
        rules = [(r.rule.permission, r.rule.pattern, r.rule.action) for r in self._session_rules[1:]
                 if not r.rule.pinned and r.rule.index not in self._transient]
        return {
            "rules": [list(r) for r in rules],
            "watchdog_approvals": sorted(list(d) for d in self.stores.watchdog_approvals),
            "watchdog_rejections": sorted(list(d) for d in self.stores.watchdog_rejections),
        }

    def restore(self, remembered: dict[str, Any]) -> None:
        """Take over what `remembered()` returned for another session."""
        self.set_session_rules([tuple(r) for r in remembered.get("rules", [])])  # type: ignore[misc]
        self.stores.watchdog_approvals |= {tuple(d) for d in remembered.get("watchdog_approvals", [])}  # type: ignore[misc]
        self.stores.watchdog_rejections |= {tuple(d) for d in remembered.get("watchdog_rejections", [])}  # type: ignore[misc]

    # -- abort -------------------------------------------------------------
    def track(self, scope: anyio.CancelScope) -> None:
        self._scopes.add(scope)

    def untrack(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)

    def abort(self) -> None:
        """Cancel every in-flight call of this session and of its children."""
        self.aborts += 1
        for scope in list(self._scopes):
            scope.cancel()
        for child in self.children:
            child.abort()

    @property
    def busy(self) -> bool:
        return bool(self._scopes)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when the session closes (after its calls are aborted); e.g. to stop its MCP servers."""
        self._on_close.append(callback)

    def close(self) -> None:
        """Abort what still runs, run the `on_close` callbacks and remove the working directory (sidecars included)."""
        if self.closed:
            return
        self.abort()
        for child in list(self.children):  # each child leaves the list as it closes
            child.close()
        for callback in self._on_close:
            try:
                callback()
            except Exception:  # one failing callback must not keep the others (or the cleanup) from running
                logging.getLogger("agentcore.session").exception("a session close callback failed")
        self._cleanup()
        self.sidecar_budget.close()
        self.closed = True
        # A closed child is let go: a long-lived parent would otherwise keep every subagent session it ever had.
        if self.parent is not None and self in self.parent.children:
            self.parent.children.remove(self)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
