"""Running cases against a harness: setup, operations, expectations, properties, variants.

For each case the runner builds a fresh temporary tree (`${ws}` the
workspace, `${outside}` a sibling directory outside it), draws the case's
values from the seeded generators, translates setup and steps into
protocol operations and checks every reply: the case's own expectations,
and the properties every envelope and ask must have (properties.py).

A case runs several times: once with random values, once per boundary run
(every range at its ends, every `pick` option, every rotation of a
`shuffle`, so detection never depends on the seed), and once per
metamorphic variant (fresh names, reordered rules), which must reach the
same decisions as the random run.

Every check carries a profile tag (profiles.py). A run keeps going after a
`spec` failure so that the `rfc` profile is scored too; `all_checks`
keeps going after every failure and reports them all.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

from .cases import Case
from .checks import CHECK_META, MISSING, check_file, predicate_failures, resolve
from .connectors import HarnessClient, HarnessFault, Reply
from .fixtures import HttpFixture
from .generators import TemplateError, boundary_runs, generate, render, rng_for
from .profiles import EXTENSION, Tag, explicit_tag, load_profiles, pointer_tag
from .properties import CallInfo, RuleBook, Violation, ask_violations, envelope_violations

STATUSES: tuple[str, ...] = ("pass", "fail", "error", "timeout", "crash", "skipped", "not_applicable")
FAILING: frozenset[str] = frozenset({"fail", "error", "timeout", "crash"})
DETAIL_LIMIT = 2000
# Runs of a case beyond the random one: boundary runs use variant numbers from here on.
BOUNDARY_BASE = 1000
# Passes at removing a case's tree: each opens up one more level of directories a harness locked.
REMOVE_PASSES = 16


@dataclass(frozen=True)
class RunOptions:
    """How cases are run beyond the seed (`conformance run --all-checks`)."""

    all_checks: bool = False   # report every failing check, not only the first


@dataclass(frozen=True)
class Failure:
    """One failing check: its step, message and profile tag, and the run it failed in (`base` or a metamorphic variant)."""

    step: int | None
    message: str
    tag: Tag
    run: str = "base"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message, "profile": self.tag.profile, "run": self.run}
        if self.step is not None:
            out["step"] = self.step
        if self.tag.profile == "spec":
            out["choice"] = self.tag.choice or "detail"
        return out


@dataclass
class CaseResult:
    """How one case ended against a harness: its status under each profile, its failing checks and the reply that failed."""

    id: str
    area: str
    level: str
    requirements: tuple[str, ...]
    status: str
    message: str = ""
    caught_by: str | None = None      # harness | runner, for error/timeout/crash
    step: int | None = None           # 1-based index of the failing step
    duration_ms: int = 0
    variants: tuple[str, ...] = ()
    detail: Any = None                # the reply that failed, bounded
    rfc_status: str = "pass"          # the status under the rfc profile
    profile: str = "rfc"              # the case's own tag
    choice: str | None = None         # its section-24 choice when spec
    failures: tuple[Failure, ...] = ()
    all_failures: bool = False        # failures lists every failing check (--all-checks)

    def status_for(self, profile: str) -> str:
        return self.rfc_status if profile == "rfc" else self.status

    def first_failure(self) -> Failure | None:
        return self.failures[0] if self.failures else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "case",
            "id": self.id,
            "area": self.area,
            "level": self.level,
            "requirements": list(self.requirements),
            "status": self.status,
            "rfc_status": self.rfc_status,
            "profile": self.profile,
            "duration_ms": self.duration_ms,
        }
        optional = {"message": self.message, "caught_by": self.caught_by, "choice": self.choice, "detail": self.detail}
        out.update({k: v for k, v in optional.items() if v})
        if self.step is not None:
            out["step"] = self.step
        if self.variants:
            out["variants"] = list(self.variants)
        if self.failures:
            shown = self.failures if self.all_failures else self.failures[:1]
            out["failures"] = [f.to_json() for f in shown]
        return out


class Outcome(Exception):
    """The run cannot go on: the harness failed, skipped, or the runner had to step in."""

    def __init__(self, status: str, message: str, *, caught_by: str | None = None, step: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.caught_by = caught_by
        self.step = step
        self.detail = detail


class StopRun(Exception):
    """A failure decided the run (and the caller does not want every check)."""


def _bounded(value: Any) -> Any:
    text = json.dumps(value, default=str)
    if len(text) <= DETAIL_LIMIT:
        return value
    return {"truncated_json": text[:DETAIL_LIMIT]}


# -- filesystem setup ------------------------------------------------------------------------


class Tree:
    def __init__(self) -> None:
        self.root = Path(os.path.realpath(tempfile.mkdtemp(prefix="conformance-case-")))
        self.ws = self.root / "ws"
        self.outside = self.root / "outside"
        self.ws.mkdir()
        self.outside.mkdir()
        self.snapshot: dict[str, bytes | None] = {}

    def values(self) -> dict[str, Any]:
        return {"ws": os.fspath(self.ws), "outside": os.fspath(self.outside), "root": os.fspath(self.root)}

    def path(self, raw: Any) -> Path:
        if not isinstance(raw, str):  # a value saved from a reply (`${sidecar}`) may be anything
            raise ValueError(f"a path must be a string, got {json.dumps(raw, default=str)[:120]}")
        return Path(raw) if os.path.isabs(raw) else self.ws / raw

    def apply(self, entries: Iterable[dict[str, Any]], values: dict[str, Any]) -> None:
        for entry in entries:
            count = render(entry.get("repeat", 1), values)
            for i in range(int(count)):
                e = render({k: v for k, v in entry.items() if k != "repeat"}, {**values, "i": i})
                self._one(e)

    def _clear(self, p: Path, keep_dir: bool) -> None:
        if not os.path.lexists(p) or (keep_dir and p.is_dir() and not p.is_symlink()):
            return
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()

    def _one(self, e: dict[str, Any]) -> None:
        p = self.path(e["path"])
        if e.get("remove"):
            self._clear(p, keep_dir=False)
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        self._clear(p, keep_dir=bool(e.get("dir")))
        if "symlink" in e:
            os.symlink(e["symlink"], p)
        elif "hardlink" in e:
            os.link(self.path(e["hardlink"]), p)  # another name of an existing file
        elif e.get("dir"):
            p.mkdir(exist_ok=True)
        elif "bytes_hex" in e:
            p.write_bytes(bytes.fromhex(e["bytes_hex"]))
        else:
            p.write_bytes(str(e.get("content", "")).encode("utf-8"))
        if "mode" in e and not p.is_symlink():
            os.chmod(p, int(e["mode"], 8))
        if p.is_file() and not p.is_symlink():
            self.snapshot[os.fspath(p)] = p.read_bytes()

    def remove(self) -> None:
        """Remove the tree, opening up directories a harness made unwritable; never following a link out of it.

        Only rmtree (which never follows links) deletes; after a pass that failed, the directories
        around what failed are made writable and the whole tree is removed again.
        """
        for _ in range(REMOVE_PASSES):
            failed: list[str] = []
            shutil.rmtree(self.root, onerror=lambda func, path, exc: failed.append(path))
            if not failed:
                return
            for path in failed:
                for directory in (os.path.dirname(path), path):
                    _open_up(directory, self.root)


def _open_up(path: str, root: Path) -> None:
    """Give the owner every permission on `path` if it is a real directory inside `root` (a link is never followed)."""
    flags = getattr(os, "O_PATH", os.O_RDONLY) | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        where = f"/proc/self/fd/{fd}"
        real = os.readlink(where)
        if real == os.fspath(root) or real.startswith(os.fspath(root) + os.sep):  # no link swapped in above it
            os.chmod(where, stat.S_IRWXU)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- one run of one case -------------------------------------------------------------------------


def _reorder(obj: Any, rng: random.Random) -> Any:
    """Permute every rules list (never to the identity when it has two or more entries)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "rules" and isinstance(v, list) and all(isinstance(r, dict) for r in v):
                perm = list(v)
                if len(perm) >= 2:
                    rng.shuffle(perm)
                    if perm == v:
                        perm.reverse()
                out[k] = perm
            else:
                out[k] = _reorder(v, rng)
        return out
    if isinstance(obj, list):
        return [_reorder(x, rng) for x in obj]
    return obj


def _outcome_of(reply: Reply) -> tuple[str, Any]:
    payload = reply.payload
    if reply.key == "result":
        if "compile_error" in payload:
            return "compile_error", payload["compile_error"]
        return "result", payload
    return reply.key, payload


def _outcome_extra(outcome: str, payload: Any) -> str:
    if outcome == "compile_error":
        return f" ({str(payload.get('message', ''))[:200]})"
    if outcome == "envelope" and payload.get("type") == "error":
        return f" (error {payload.get('metadata', {}).get('error_code')!r}: {str(payload.get('error_text', ''))[:160]})"
    return ""


class CaseRun:
    def __init__(
        self, client: HarnessClient, case: Case, seed: int, variant: int, kind: str, *,
        boundary: int | None = None, options: RunOptions = RunOptions(), http: HttpFixture | None = None,
    ) -> None:
        self.client = client
        self.case = case
        self.seed = seed
        self.variant = variant
        self.kind = kind
        self.boundary = boundary
        self.options = options
        self.tree = Tree()
        self.rng = rng_for(seed, case.id, variant)
        self.values: dict[str, Any] = {}
        self.sessions: set[tuple[str, str]] = set()
        self.pending_ask: str | None = None
        self.pending: tuple[CallInfo, dict[str, Any]] | None = None
        self.signature: list[tuple[Any, ...]] = []
        self.last_request: dict[str, Any] = {}
        self.http = http  # shared by every run of the case: binding servers costs more than a run
        self.rules = RuleBook()
        self.failures: list[Failure] = []
        self.profiles_checked: set[str] = set()
        self.case_tag = explicit_tag({"profile": case.profile, "choice": case.choice}, load_profiles().case_tag(case.requirements))

    @property
    def label(self) -> str:
        return self.kind if self.boundary is None else f"boundary {self.boundary + 1}"

    # -- failures ---------------------------------------------------------------------
    def fail(self, step: int | None, message: str, tag: Tag) -> None:
        """Record a failing check; stop the run unless every check is wanted or the rfc profile is still undecided."""
        if tag.needs is not None and tag.needs not in self.client.features:
            return
        self.failures.append(Failure(step, message, tag, self.label))
        if self.options.all_checks:
            return
        if tag.profile == "rfc" or any(f.tag.profile == "rfc" for f in self.failures[:-1]):
            raise StopRun()
        if len(self.failures) > 1:
            self.failures.pop()  # a later spec failure adds nothing while the rfc profile is still being scored

    def _note(self, detail: Any) -> None:
        """Keep the reply behind the first failure (later ones may only add to the rfc score)."""
        if self._last_detail is None:
            self._last_detail = detail

    def checked(self, tag: Tag) -> None:
        if tag.needs is None or tag.needs in self.client.features:
            self.profiles_checked.add(tag.profile)

    def session_mode(self, agent: str, session: str) -> str:
        """A session's mode is the mode of the first call made in it (fixed at creation, ASK-9)."""
        for step in self.case.steps:
            c = step.get("call")
            if c and c.get("agent", "a") == agent and c.get("session", "s") == session:
                return str(c.get("mode", "headless"))
        return "headless"

    def render(self, obj: Any) -> Any:
        out = render(obj, self.values)
        if self.kind == "reorder_rules":
            out = _reorder(out, random.Random(self.rng.random()))
        return out

    async def _request(self, step: int, op: str, **fields: Any) -> Reply:
        self.last_request = {"op": op, **{k: v for k, v in fields.items() if k != "manifest"}}
        try:
            reply = await self.client.request(op, **fields)
        except HarnessFault as fault:
            raise Outcome(fault.status, fault.message, caught_by="runner", step=step) from None
        if reply.key == "skip":
            raise Outcome("skipped", f"harness skipped {op}: {reply.payload.get('reason', '')}", step=step)
        if reply.key == "error":
            raise Outcome("error", f"harness error in {op}: {reply.payload.get('message', '')}", caught_by="harness", step=step, detail=_bounded(reply.payload))
        return reply

    def _detail(self, payload: Any) -> Any:
        return {"request": _bounded(self.last_request), "reply": _bounded(payload)}

    # -- judging one reply ---------------------------------------------------------------------
    def _judge(self, step: int, label: str, reply: Reply, expect: dict[str, Any], default: str, save: dict[str, str] | None, call: CallInfo | None = None) -> None:
        outcome, payload = _outcome_of(reply)
        self.pending_ask = payload["id"] if outcome == "ask" else None
        self.pending = (call, payload) if outcome == "ask" and call is not None else None
        refusal = payload.get("metadata", {}).get("refusal") if outcome == "envelope" else None
        self.signature.append((
            label.split(" ")[0],
            outcome,
            payload.get("type") if outcome == "envelope" else None,
            refusal.get("layer") if isinstance(refusal, dict) else None,
            payload.get("metadata", {}).get("error_code") if outcome == "envelope" else None,
        ))
        tag = explicit_tag(expect, self.case_tag)
        if call is not None:
            self._properties(step, label, outcome, payload, call)
        want = expect.get("outcome", default)
        self.checked(tag)
        if outcome != want:
            self._note(self._detail(payload))
            self.fail(step, f"step {step} ({label}): expected {want}, got {outcome}{_outcome_extra(outcome, payload)}", tag)
            return
        self._checks(step, label, payload, expect, tag)
        self._save(step, label, payload, save, tag)

    def _properties(self, step: int, label: str, outcome: str, payload: Any, call: CallInfo) -> None:
        found: list[Violation] = []
        if outcome == "envelope":
            found = envelope_violations(call, payload, self.rules)
        elif outcome == "ask":
            found = ask_violations(call, payload)
        for v in found:
            self._note(self._detail(payload))
            self.fail(step, f"step {step} ({label}): {v.message}", v.tag)

    def _checks(self, step: int, label: str, payload: Any, expect: dict[str, Any], tag: Tag) -> None:
        for key, pointer in (("type", "/type"), ("code", "/metadata/error_code"), ("kind", "/metadata/kind")):
            if key in expect:
                self._one_check(step, label, payload, {"pointer": pointer, "equals": expect[key]}, tag if key == "type" else EXTENSION)
        if "layer" in expect:
            self._layer_check(step, label, payload, expect["layer"])
        for check in expect.get("checks", []):
            ctag = explicit_tag(check, pointer_tag(check["pointer"], check, tag))
            self._one_check(step, label, payload, check, ctag)

    def _layer_check(self, step: int, label: str, payload: Any, layer: Any) -> None:
        self.checked(EXTENSION)
        got = resolve(payload, "/metadata/refusal/layer")
        if layer is None:
            if got is not MISSING:
                self.fail(step, f"step {step} ({label}): /metadata/refusal should be absent (a tool error), layer is {got!r}", EXTENSION)
            return
        for msg in predicate_failures(got, {"equals": layer}):
            self.fail(step, f"step {step} ({label}): /metadata/refusal/layer: {msg} [{EXTENSION.label()}]", EXTENSION)

    def _one_check(self, step: int, label: str, payload: Any, check: dict[str, Any], tag: Tag) -> None:
        self.checked(tag)
        preds = {k: v for k, v in check.items() if k not in CHECK_META}
        for msg in predicate_failures(resolve(payload, check["pointer"]), preds):
            self._note(self._detail(payload))
            where = check["pointer"] or "(whole)"
            suffix = "" if tag.profile == "rfc" else f" [{tag.label()}]"
            self.fail(step, f"step {step} ({label}): {where}: {msg}{suffix}", tag)

    def _save(self, step: int, label: str, payload: Any, save: dict[str, str] | None, tag: Tag) -> None:
        for name, pointer in (save or {}).items():
            value = resolve(payload, pointer)
            if value is MISSING:
                self.fail(step, f"step {step} ({label}): nothing at {pointer} to remember as {name}", tag)
                raise StopRun()  # later steps would use the value
            self.values[name] = value

    # -- the run -------------------------------------------------------------------------------
    async def _compile(self, step: int, spec: dict[str, Any], expect: dict[str, Any], save: dict[str, str] | None, label: str) -> None:
        ws_opt = spec.get("workspace", True)
        workspace = os.fspath(self.tree.ws) if ws_opt is True else (None if ws_opt is False else ws_opt)
        agent = spec.get("agent", "a")
        fields: dict[str, Any] = {"agent": agent, "workspace": workspace, "bindings": spec.get("bindings", {})}
        if "manifest_text" in spec:  # the file's exact text: duplicate keys, aliases (REQ-14)
            fields["manifest_text"] = spec["manifest_text"]
            fields["manifest_format"] = spec.get("manifest_format", "yaml")
        else:
            fields["manifest"] = spec["manifest"]
        if spec.get("watchdog") is not None:
            fields["watchdog"] = spec["watchdog"]
        reply = await self._request(step, "compile", **fields)
        if reply.key == "result" and "compile_error" not in reply.payload:
            self.rules.compiled(agent, spec.get("manifest"))
            self.sessions = {s for s in self.sessions if s[0] != agent}
        self._judge(step, label, reply, expect, "result", save)

    def _draw(self, base: dict[str, Any]) -> dict[str, Any]:
        case = self.case
        if self.boundary is not None:
            return generate(case.generate, self.rng, base, boundary=self.boundary)
        # Variants keep the random run's values, except that `rename` draws fresh names.
        values = generate(case.generate, rng_for(self.seed, case.id, 0), base)
        if self.kind == "rename":
            fresh = generate(case.generate, self.rng, base)
            for key, spec in case.generate.items():
                if isinstance(spec, dict) and "name" in spec:
                    values[key] = fresh[key]
        return values

    async def run(self) -> list[tuple[Any, ...]]:
        setup = self.case.setup
        base = self.tree.values()
        if "http" in setup:
            # Bound first: the ports appear in manifests, rules, arguments and in the routes themselves.
            if self.http is None:
                raise Outcome("error", "the case has setup.http but no fixture was started", caught_by="runner")
            self.http.forget()
            base.update(self.http.values())
        self.values = self._draw(base)
        if self.http is not None:
            self.http.set_routes(render(setup["http"]["routes"], self.values))
        self.tree.apply(setup.get("files", []), self.values)
        await self._request(0, "reset")
        if "manifest" in setup:
            spec = self.render({
                "manifest": setup["manifest"],
                "workspace": setup.get("workspace", True),
                "bindings": setup.get("bindings", {}),
                "watchdog": setup.get("watchdog"),
            })
            await self._compile(0, spec, {}, None, "setup compile")
        for scope in ("project", "session"):
            rules = setup.get("rules", {}).get(scope)
            if rules is not None:
                await self._set_rules(0, {"scope": scope, "rules": self.render(rules)}, {}, None, f"setup {scope} rules")
        for i, raw in enumerate(self.case.steps, 1):
            await self._step(i, raw)
        return self.signature

    async def _step(self, i: int, raw: dict[str, Any]) -> None:
        for kind, handler in self._HANDLERS:
            if kind in raw:
                await handler(self, i, raw)
                return

    async def _files_step(self, i: int, raw: dict[str, Any]) -> None:
        tag = explicit_tag(raw, self.case_tag)
        self.checked(tag)
        for spec in self.render(raw["files"]):
            for msg in check_file(self.tree.path(spec["path"]), spec, self.tree.snapshot):
                self.fail(i, f"step {i} (files): {msg}", tag)

    async def _mutate_step(self, i: int, raw: dict[str, Any]) -> None:
        self.tree.apply(raw["mutate"], self.values)

    async def _served_step(self, i: int, raw: dict[str, Any]) -> None:
        spec = self.render(raw["served"])
        if self.http is None:
            raise Outcome("error", f"step {i} (served): the case has no setup.http", caught_by="runner", step=i)
        seen = self.http.server(spec["server"]).seen()
        self.checked(self.case_tag)
        for check in spec["checks"]:
            for msg in predicate_failures(resolve(seen, check["pointer"]), {k: v for k, v in check.items() if k not in CHECK_META}):
                self._note(_bounded(seen))
                self.fail(i, f"step {i} (served by {spec['server']}): {check['pointer']}: {msg}", explicit_tag(check, self.case_tag))

    async def _call_step(self, i: int, raw: dict[str, Any]) -> None:
        c = self.render(raw["call"])
        agent, session = c.get("agent", "a"), c.get("session", "s")
        self.sessions.add((agent, session))
        info = CallInfo(agent, session, c["tool"], c.get("args", {}))
        reply = await self._request(i, "call", agent=agent, session=session, mode=c.get("mode", "headless"), tool=c["tool"], args=info.args)
        self._judge(i, f"call {c['tool']}", reply, self.render(raw.get("expect", {})), "envelope", raw.get("save"), info)

    async def _answer_step(self, i: int, raw: dict[str, Any]) -> None:
        a = self.render(raw["answer"])
        expect = self.render(raw.get("expect", {}))
        if self.pending_ask is None:
            self.fail(i, f"step {i} (answer): there is no pending ask to answer", explicit_tag(expect, self.case_tag))
            return
        fields = {"ask": self.pending_ask}
        fields.update({k: v for k, v in a.items() if k in ("choice", "answers")})
        pending = self.pending
        reply = await self._request(i, "answer", **fields)
        call = pending[0] if pending else None
        if pending is not None and call is not None:
            self.rules.answered(call.agent, call.session, call.tool, pending[1], a.get("choice"))
        self._judge(i, "answer", reply, expect, "envelope", raw.get("save"), call)

    async def _compile_step(self, i: int, raw: dict[str, Any]) -> None:
        spec = self.render(raw["compile"])
        if "manifest" not in spec and "manifest_text" not in spec:
            spec["manifest"] = self.render(self.case.setup.get("manifest", {}))
        await self._compile(i, spec, self.render(raw.get("expect", {})), raw.get("save"), "compile")

    async def _set_rules(self, i: int, s: dict[str, Any], expect: dict[str, Any], save: dict[str, str] | None, label: str) -> None:
        agent = s.get("agent", "a")
        fields = {"agent": agent, "scope": s["scope"], "rules": s["rules"]}
        if s["scope"] == "session":
            fields["session"] = s.get("session", "s")
            fields["mode"] = self.session_mode(agent, fields["session"])
            self.sessions.add((agent, fields["session"]))
        reply = await self._request(i, "set_rules", **fields)
        if reply.key == "result" and "compile_error" not in reply.payload:
            if s["scope"] == "project":
                self.rules.project[agent] = list(s["rules"])
            else:
                self.rules.scope(agent, fields["session"]).extend(s["rules"])
        self._judge(i, label, reply, expect, "result", save)

    async def _set_rules_step(self, i: int, raw: dict[str, Any]) -> None:
        s = self.render(raw["set_rules"])
        await self._set_rules(i, s, self.render(raw.get("expect", {})), raw.get("save"), f"set_rules {s['scope']}")

    async def _close_step(self, i: int, raw: dict[str, Any]) -> None:
        c = self.render(raw["close"])
        agent, session = c.get("agent", "a"), c.get("session", "s")
        self.sessions.discard((agent, session))
        reply = await self._request(i, "close", agent=agent, session=session)
        self.rules.closed(agent, session)
        self._judge(i, "close", reply, self.render(raw.get("expect", {})), "result", raw.get("save"))

    _HANDLERS: tuple[tuple[str, Callable[["CaseRun", int, dict[str, Any]], Awaitable[None]]], ...] = (
        ("files", _files_step),
        ("mutate", _mutate_step),
        ("served", _served_step),
        ("call", _call_step),
        ("answer", _answer_step),
        ("compile", _compile_step),
        ("set_rules", _set_rules_step),
        ("close", _close_step),
    )
    _last_detail: Any = None

    async def cleanup(self) -> list[Outcome]:
        """Close every session the run opened; a fault or error here is reported, never swallowed."""
        problems: list[Outcome] = []
        for agent, session in sorted(self.sessions):
            try:
                reply = await self.client.request("close", agent=agent, session=session)
            except HarnessFault as fault:
                problems.append(Outcome(fault.status, f"cleanup close of session {session!r}: {fault.message}", caught_by="runner"))
                break
            if reply.key == "error":
                problems.append(Outcome("error", f"cleanup close of session {session!r}: harness error: {reply.payload.get('message', '')}", caught_by="harness"))
        self.tree.remove()
        return problems


# -- one case: every run ----------------------------------------------------------------------


@dataclass
class _Tally:
    """What a case's runs have found so far: failing checks, profiles checked, the outcome that stopped them, the runs made."""

    failures: list[Failure] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)
    outcome: Outcome | None = None
    detail: Any = None
    runs: list[str] = field(default_factory=list)

    def rfc_failed(self) -> bool:
        return any(f.tag.profile == "rfc" for f in self.failures)


def _plan(case: Case) -> list[tuple[str, int | None]]:
    """The runs of a case: random values, boundary runs, metamorphic variants."""
    placeholder = {"ws": "/ws", "outside": "/outside", "root": "/", "http": "http://127.0.0.1:1", "http_port": 1,
                   "http_authority": "127.0.0.1:1", "sentinel": "http://127.0.0.1:2", "sentinel_port": 2, "sentinel_authority": "127.0.0.1:2"}
    runs: list[tuple[str, int | None]] = [("base", None)]
    runs += [("boundary", k) for k in range(boundary_runs(case.generate, placeholder))]
    runs += [(kind, None) for kind in case.metamorphic]
    return runs


async def _one_run(
    client: HarnessClient, case: Case, seed: int, index: int, kind: str, boundary: int | None, options: RunOptions, tally: _Tally, http: HttpFixture | None,
) -> list[tuple[Any, ...]] | None:
    variant = BOUNDARY_BASE + boundary if boundary is not None else index
    run = CaseRun(client, case, seed, variant, kind if boundary is None else "base", boundary=boundary, options=options, http=http)
    sig: list[tuple[Any, ...]] | None = None
    try:
        try:
            sig = await run.run()
        except StopRun:
            pass
        finally:
            problems = await run.cleanup()
            if problems and tally.outcome is None:
                tally.outcome = problems[0]
    except Outcome as out:
        tally.outcome = tally.outcome or out
    except TemplateError as exc:
        if not run.failures:  # a value an earlier failure did not produce is not a suite bug
            tally.outcome = Outcome("error", f"suite could not run the case (TemplateError: {exc})", caught_by="runner")
    except (KeyError, ValueError, TypeError, OSError) as exc:  # a reply's value where the case wanted another kind
        tally.outcome = tally.outcome or Outcome("error", f"suite could not run the case ({type(exc).__name__}: {exc})", caught_by="runner")
    tally.failures += run.failures
    tally.checked |= run.profiles_checked
    tally.detail = tally.detail or run._last_detail
    tally.runs.append(run.label)
    return sig if not run.failures else None


def _finish(result: CaseResult, tally: _Tally, options: RunOptions) -> None:
    result.failures = tuple(tally.failures)
    result.all_failures = options.all_checks
    out = tally.outcome
    if out is not None:  # it may quote a harness message of any length: every case's result is kept
        out.message = out.message[:DETAIL_LIMIT]
    if tally.failures:
        first = tally.failures[0]
        result.status, result.message, result.step = "fail", first.message, first.step
        if first.run != "base":
            result.message = f"{first.run} run: {first.message}"
        result.detail = tally.detail
        rfc = next((f for f in tally.failures if f.tag.profile == "rfc"), None)
        if rfc is not None:
            result.rfc_status = "fail"
        elif out is not None and out.status in FAILING:
            result.rfc_status = out.status
        else:
            result.rfc_status = "pass" if "rfc" in tally.checked else "not_applicable"
        return
    if out is not None:
        result.status, result.message, result.caught_by = out.status, out.message, out.caught_by
        result.step, result.detail = out.step, out.detail or tally.detail
        result.rfc_status = out.status
        return
    result.rfc_status = "pass" if "rfc" in tally.checked else "not_applicable"


async def run_case(client: HarnessClient, case: Case, seed: int, options: RunOptions = RunOptions()) -> CaseResult:
    started = time.perf_counter()
    tag = explicit_tag({"profile": case.profile, "choice": case.choice}, load_profiles().case_tag(case.requirements))
    result = CaseResult(case.id, case.area, case.level, case.requirements, "pass", profile=tag.profile, choice=tag.choice)
    missing = sorted(case.needed_features() - client.features)
    if missing:
        result.status = result.rfc_status = "not_applicable"
        result.message = "implementation lacks: " + ", ".join(missing)
        return result
    http = HttpFixture() if "http" in case.setup else None
    tally = _Tally()
    try:
        await _all_runs(client, case, seed, options, result, tally, http)
    finally:
        if http is not None:
            http.close()
    result.variants = tuple(r for r in tally.runs if r != "base")
    _finish(result, tally, options)
    result.duration_ms = int((time.perf_counter() - started) * 1000)
    return result


async def _all_runs(client: HarnessClient, case: Case, seed: int, options: RunOptions, result: CaseResult, tally: _Tally, http: HttpFixture | None) -> None:
    tag = explicit_tag({"profile": case.profile, "choice": case.choice}, load_profiles().case_tag(case.requirements))
    base_sig: list[tuple[Any, ...]] | None = None
    for index, (kind, boundary) in enumerate(_plan(case)):
        sig = await _one_run(client, case, seed, index, kind, boundary, options, tally, http)
        if tally.outcome is not None or (tally.failures and not options.all_checks and (tally.rfc_failed() or result.profile == "spec")):
            break
        if sig is None:
            continue
        if kind == "base":
            base_sig = sig
        elif boundary is None and base_sig is not None and sig != base_sig:
            diff = next((j for j, (a, b) in enumerate(zip(base_sig, sig)) if a != b), min(len(sig), len(base_sig)))
            tally.failures.append(Failure(None, f"metamorphic variant {kind!r} changed a decision at reply {diff + 1}", tag, kind))
            if not options.all_checks:
                break


ResultHook = Callable[[CaseResult, int, int], Awaitable[None] | None]


async def run_suite(client: HarnessClient, cases: list[Case], seed: int, on_result: ResultHook | None = None, options: RunOptions = RunOptions()) -> list[CaseResult]:
    results: list[CaseResult] = []
    for n, case in enumerate(cases, 1):
        res = await run_case(client, case, seed, options)
        results.append(res)
        if on_result is not None:
            maybe = on_result(res, n, len(cases))
            if maybe is not None:
                await maybe
    return results
