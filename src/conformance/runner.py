"""Running cases against a harness: setup, operations, expectations, variants.

For each case the runner builds a fresh temporary tree (`${ws}` the
workspace, `${outside}` a sibling directory outside it), draws the case's
values from the seeded generators, translates setup and steps into
protocol operations and checks every reply. Metamorphic variants run the
case again with fresh names or with its rules reordered; a variant that
changes any decision fails the case.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

from .cases import Case
from .checks import MISSING, check_expectations, check_file, resolve
from .connectors import HarnessClient, HarnessFault, Reply
from .fixtures import HttpFixture
from .generators import TemplateError, generate, render, rng_for

STATUSES: tuple[str, ...] = ("pass", "fail", "error", "timeout", "crash", "skipped", "not_applicable")
FAILING: frozenset[str] = frozenset({"fail", "error", "timeout", "crash"})
DETAIL_LIMIT = 2000


@dataclass
class CaseResult:
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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "case",
            "id": self.id,
            "area": self.area,
            "level": self.level,
            "requirements": list(self.requirements),
            "status": self.status,
            "duration_ms": self.duration_ms,
        }
        if self.message:
            out["message"] = self.message
        if self.caught_by:
            out["caught_by"] = self.caught_by
        if self.step is not None:
            out["step"] = self.step
        if self.variants:
            out["variants"] = list(self.variants)
        if self.detail is not None:
            out["detail"] = self.detail
        return out


class Outcome(Exception):
    def __init__(self, status: str, message: str, *, caught_by: str | None = None, step: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.caught_by = caught_by
        self.step = step
        self.detail = detail


def _bounded(value: Any) -> Any:
    import json

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

    def path(self, raw: str) -> Path:
        return Path(raw) if os.path.isabs(raw) else self.ws / raw

    def apply(self, entries: Iterable[dict[str, Any]], values: dict[str, Any]) -> None:
        for entry in entries:
            count = render(entry.get("repeat", 1), values)
            for i in range(int(count)):
                e = render({k: v for k, v in entry.items() if k != "repeat"}, {**values, "i": i})
                self._one(e)

    def _one(self, e: dict[str, Any]) -> None:
        p = self.path(e["path"])
        if e.get("remove"):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif os.path.lexists(p):
                p.unlink()
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(p) and not (e.get("dir") and p.is_dir()):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
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
        def onerror(func: Any, path: str, exc: Any) -> None:
            try:
                os.chmod(path, stat.S_IRWXU)
                func(path)
            except OSError:
                pass

        shutil.rmtree(self.root, onerror=onerror)


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


class CaseRun:
    def __init__(self, client: HarnessClient, case: Case, seed: int, variant: int, kind: str) -> None:
        self.client = client
        self.case = case
        self.seed = seed
        self.variant = variant
        self.kind = kind
        self.tree = Tree()
        self.rng = rng_for(seed, case.id, variant)
        self.values: dict[str, Any] = {}
        self.sessions: set[tuple[str, str]] = set()
        self.pending_ask: str | None = None
        self.signature: list[tuple[Any, ...]] = []
        self.last_request: dict[str, Any] = {}
        self.http: HttpFixture | None = None

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

    def _judge(self, step: int, label: str, reply: Reply, expect: dict[str, Any], default: str, save: dict[str, str] | None) -> None:
        payload = reply.payload
        if reply.key == "result":
            outcome = "compile_error" if "compile_error" in payload else "result"
            if outcome == "compile_error":
                payload = payload["compile_error"]
        else:
            outcome = reply.key
        self.pending_ask = payload["id"] if outcome == "ask" else None
        refusal = payload.get("metadata", {}).get("refusal") if outcome == "envelope" else None
        self.signature.append(
            (
                label.split(" ")[0],
                outcome,
                payload.get("type") if outcome == "envelope" else None,
                refusal.get("layer") if isinstance(refusal, dict) else None,
                payload.get("metadata", {}).get("error_code") if outcome == "envelope" else None,
            )
        )
        want = expect.get("outcome", default)
        if outcome != want:
            extra = ""
            if outcome == "compile_error":
                extra = f" ({str(payload.get('message', ''))[:200]})"
            elif outcome == "envelope" and payload.get("type") == "error":
                extra = f" (error {payload.get('metadata', {}).get('error_code')!r}: {str(payload.get('error_text', ''))[:160]})"
            raise Outcome("fail", f"step {step} ({label}): expected {want}, got {outcome}{extra}", step=step, detail=self._detail(payload))
        fails = check_expectations(payload, expect)
        if fails:
            raise Outcome("fail", f"step {step} ({label}): " + "; ".join(fails[:4]), step=step, detail=self._detail(payload))
        for name, pointer in (save or {}).items():
            value = resolve(payload, pointer)
            if value is MISSING:
                raise Outcome("fail", f"step {step} ({label}): nothing at {pointer} to remember as {name}", step=step, detail=_bounded(payload))
            self.values[name] = value

    async def _compile(self, step: int, spec: dict[str, Any], expect: dict[str, Any], save: dict[str, str] | None, label: str) -> None:
        ws_opt = spec.get("workspace", True)
        workspace = os.fspath(self.tree.ws) if ws_opt is True else (None if ws_opt is False else ws_opt)
        fields: dict[str, Any] = {"agent": spec.get("agent", "a"), "workspace": workspace, "bindings": spec.get("bindings", {})}
        if "manifest_text" in spec:  # the file's exact text: duplicate keys, aliases (REQ-14)
            fields["manifest_text"] = spec["manifest_text"]
            fields["manifest_format"] = spec.get("manifest_format", "yaml")
        else:
            fields["manifest"] = spec["manifest"]
        if spec.get("watchdog") is not None:
            fields["watchdog"] = spec["watchdog"]
        reply = await self._request(step, "compile", **fields)
        self._judge(step, label, reply, expect, "result", save)

    async def run(self) -> list[tuple[Any, ...]]:
        case = self.case
        base = self.tree.values()
        # Variants keep the base run's values, except that `rename` draws fresh names.
        self.values = generate(case.generate, rng_for(self.seed, case.id, 0), base)
        if self.kind == "rename":
            fresh = generate(case.generate, self.rng, base)
            for key, spec in case.generate.items():
                if isinstance(spec, dict) and "name" in spec:
                    self.values[key] = fresh[key]
        setup = case.setup
        if "http" in setup:
            # Bound first: the ports appear in manifests, rules, arguments and in the routes themselves.
            self.http = HttpFixture()
            self.values.update(self.http.values())
            self.http.set_routes(render(setup["http"]["routes"], self.values))
        self.tree.apply(setup.get("files", []), self.values)
        await self._request(0, "reset")
        if "manifest" in setup:
            spec = self.render(
                {
                    "manifest": setup["manifest"],
                    "workspace": setup.get("workspace", True),
                    "bindings": setup.get("bindings", {}),
                    "watchdog": setup.get("watchdog"),
                }
            )
            await self._compile(0, spec, {}, None, "setup compile")
        for scope in ("project", "session"):
            rules = setup.get("rules", {}).get(scope)
            if rules is not None:
                fields = {"agent": "a", "scope": scope, "rules": self.render(rules)}
                if scope == "session":
                    fields["session"] = "s"
                    fields["mode"] = self.session_mode("a", "s")
                    self.sessions.add(("a", "s"))
                reply = await self._request(0, "set_rules", **fields)
                self._judge(0, f"setup {scope} rules", reply, {}, "result", None)
        for i, raw in enumerate(case.steps, 1):
            await self._step(i, raw)
        return self.signature

    async def _step(self, i: int, raw: dict[str, Any]) -> None:
        expect = raw.get("expect", {})
        save = raw.get("save")
        if "files" in raw:
            fails: list[str] = []
            for spec in self.render(raw["files"]):
                fails += check_file(self.tree.path(spec["path"]), spec, self.tree.snapshot)
            if fails:
                raise Outcome("fail", f"step {i} (files): " + "; ".join(fails[:4]), step=i)
            return
        if "mutate" in raw:
            self.tree.apply(raw["mutate"], self.values)
            return
        if "served" in raw:
            spec = self.render(raw["served"])
            if self.http is None:
                raise Outcome("error", f"step {i} (served): the case has no setup.http", caught_by="runner", step=i)
            seen = self.http.server(spec["server"]).seen()
            fails = check_expectations(seen, {"checks": spec["checks"]})
            if fails:
                raise Outcome("fail", f"step {i} (served by {spec['server']}): " + "; ".join(fails[:4]), step=i, detail=_bounded(seen))
            return
        expect = self.render(expect)
        if "call" in raw:
            c = self.render(raw["call"])
            agent, session = c.get("agent", "a"), c.get("session", "s")
            self.sessions.add((agent, session))
            reply = await self._request(i, "call", agent=agent, session=session, mode=c.get("mode", "headless"), tool=c["tool"], args=c.get("args", {}))
            self._judge(i, f"call {c['tool']}", reply, expect, "envelope", save)
        elif "answer" in raw:
            a = self.render(raw["answer"])
            if self.pending_ask is None:
                raise Outcome("fail", f"step {i} (answer): there is no pending ask to answer", step=i)
            fields = {"ask": self.pending_ask}
            fields.update({k: v for k, v in a.items() if k in ("choice", "answers")})
            reply = await self._request(i, "answer", **fields)
            self._judge(i, "answer", reply, expect, "envelope", save)
        elif "compile" in raw:
            spec = self.render(raw["compile"])
            if "manifest" not in spec and "manifest_text" not in spec:
                spec["manifest"] = self.render(self.case.setup.get("manifest", {}))
            await self._compile(i, spec, expect, save, "compile")
        elif "set_rules" in raw:
            s = self.render(raw["set_rules"])
            fields = {"agent": s.get("agent", "a"), "scope": s["scope"], "rules": s["rules"]}
            if s["scope"] == "session":
                fields["session"] = s.get("session", "s")
                fields["mode"] = self.session_mode(fields["agent"], fields["session"])
                self.sessions.add((fields["agent"], fields["session"]))
            reply = await self._request(i, "set_rules", **fields)
            self._judge(i, f"set_rules {s['scope']}", reply, expect, "result", save)
        elif "close" in raw:
            c = self.render(raw["close"])
            agent, session = c.get("agent", "a"), c.get("session", "s")
            self.sessions.discard((agent, session))
            reply = await self._request(i, "close", agent=agent, session=session)
            self._judge(i, "close", reply, expect, "result", save)

    async def cleanup(self) -> None:
        for agent, session in sorted(self.sessions):
            try:
                await self.client.request("close", agent=agent, session=session)
            except HarnessFault:
                break
        self.tree.remove()
        if self.http is not None:
            self.http.close()


async def run_case(client: HarnessClient, case: Case, seed: int) -> CaseResult:
    started = time.perf_counter()
    result = CaseResult(case.id, case.area, case.level, case.requirements, "pass")
    missing = sorted(case.needed_features() - client.features)
    if missing:
        result.status = "not_applicable"
        result.message = "implementation lacks: " + ", ".join(missing)
        return result
    variants = ["base"] + list(case.metamorphic)
    base_sig: list[tuple[Any, ...]] | None = None
    for index, kind in enumerate(variants):
        run = CaseRun(client, case, seed, index, kind)
        try:
            try:
                sig = await run.run()
            finally:
                await run.cleanup()
        except Outcome as out:
            result.status, result.message, result.caught_by = out.status, out.message, out.caught_by
            result.step, result.detail = out.step, out.detail
            if kind != "base" and out.status == "fail":
                result.message = f"metamorphic variant {kind!r}: {out.message}"
            break
        except (TemplateError, KeyError, ValueError, OSError) as exc:
            result.status, result.caught_by = "error", "runner"
            result.message = f"suite could not run the case ({type(exc).__name__}: {exc})"
            break
        if base_sig is None:
            base_sig = sig
        elif sig != base_sig:
            diff = next((j for j, (a, b) in enumerate(zip(base_sig, sig)) if a != b), min(len(sig), len(base_sig)))
            result.status = "fail"
            result.message = f"metamorphic variant {kind!r} changed a decision at reply {diff + 1}"
            break
        result.variants += (kind,)
    result.duration_ms = int((time.perf_counter() - started) * 1000)
    return result


ResultHook = Callable[[CaseResult, int, int], Awaitable[None] | None]


async def run_suite(client: HarnessClient, cases: list[Case], seed: int, on_result: ResultHook | None = None) -> list[CaseResult]:
    results: list[CaseResult] = []
    for n, case in enumerate(cases, 1):
        res = await run_case(client, case, seed)
        results.append(res)
        if on_result is not None:
            maybe = on_result(res, n, len(cases))
            if maybe is not None:
                await maybe
    return results

