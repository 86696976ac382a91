"""`conformance smoke`: is the harness broken, or is the implementation behind it non-conforming?

A handful of fixed operations, each judged twice. *Protocol*: did the
harness answer at all, in time, with a reply that matches the published
schema (the harness is broken otherwise, and nothing else it says can be
trusted)? *Conformance*: did the implementation answer what SPEC says (a
non-conforming implementation behind a working harness)? Operations that
need a feature the harness does not declare are reported as not applicable.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .connectors import HarnessClient, HarnessFault, transport_for

HARNESS_OK, HARNESS_BROKEN = "ok", "broken"


@dataclass
class SmokeStep:
    """One smoke operation, judged twice: did the harness follow the protocol, and did the implementation conform."""

    name: str
    protocol: str = "ok"          # ok | broken | not_applicable
    conformance: str = "ok"       # ok | non_conforming | not_applicable | unknown
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {"step": self.name, "protocol": self.protocol, "conformance": self.conformance}
        if self.message:
            out["message"] = self.message
        return out


@dataclass
class SmokeReport:
    """A smoke run: the implementation and features the harness declared, and every step's two judgements."""

    implementation: dict[str, Any] = field(default_factory=dict)
    features: list[str] = field(default_factory=list)
    steps: list[SmokeStep] = field(default_factory=list)

    @property
    def harness_broken(self) -> bool:
        return any(s.protocol == "broken" for s in self.steps)

    @property
    def non_conforming(self) -> bool:
        return any(s.conformance == "non_conforming" for s in self.steps)

    @property
    def exit_code(self) -> int:
        """2: the harness is broken; 1: the harness works, the implementation does not conform; 0: both fine."""
        return 2 if self.harness_broken else (1 if self.non_conforming else 0)

    def verdict(self) -> str:
        if self.harness_broken:
            return "the harness is broken: fix it before reading any conformance result"
        if self.non_conforming:
            return "the harness works; the implementation behind it does not conform (run the suite for details)"
        return "the harness works and the implementation passed the smoke checks"

    def to_json(self) -> dict[str, Any]:
        return {"implementation": self.implementation, "features": self.features, "steps": [s.to_json() for s in self.steps],
                "harness": HARNESS_BROKEN if self.harness_broken else HARNESS_OK, "verdict": self.verdict(), "exit_code": self.exit_code}


MANIFEST = {
    "name": "smoke",
    "tools": ["read"],
    "requires": {"fs": {"read": ["{workspace}/**"]}},
    "rules": [{"permission": "*", "pattern": "*", "action": "allow"}],
}


async def _op(report: SmokeReport, client: HarnessClient, name: str, op: str, **fields: Any) -> Any:
    """One request; returns the reply, or None after recording a protocol failure."""
    step = SmokeStep(name)
    report.steps.append(step)
    try:
        reply = await client.request(op, **fields)
    except HarnessFault as fault:
        step.protocol, step.conformance, step.message = "broken", "unknown", f"{fault.status}: {fault.message}"
        return None
    if reply.key == "error":
        step.protocol, step.conformance = "broken", "unknown"
        step.message = f"the harness reported an error it caught: {reply.payload.get('message', '')}"
        return None
    if reply.key == "skip":
        step.conformance, step.message = "not_applicable", f"skipped: {reply.payload.get('reason', '')}"
        return None
    return reply


def _judge(report: SmokeReport, ok: bool, message: str) -> None:
    step = report.steps[-1]
    if not ok:
        step.conformance, step.message = "non_conforming", message


def _properties(report: SmokeReport, features: frozenset[str], args: dict[str, Any], env: Any) -> None:
    """The properties every envelope must have (the same ones the suite checks on every reply)."""
    from .properties import CallInfo, RuleBook, envelope_violations

    if not isinstance(env, dict):
        return
    found = [v for v in envelope_violations(CallInfo("smoke", "s", "read", args), env, RuleBook()) if v.tag.needs is None or v.tag.needs in features]
    if found and report.steps[-1].conformance == "ok":
        _judge(report, False, found[0].message)


async def _read_steps(report: SmokeReport, client: HarnessClient, ws: Path) -> None:
    args = {"path": "hello.txt"}
    reply = await _op(report, client, "call read (existing file)", "call", agent="smoke", session="s", mode="headless", tool="read", args=args)
    if reply is not None:
        env = reply.payload if reply.key == "envelope" else {}
        ok = env.get("type") == "output" and (env.get("data") or {}).get("content") == "hello\n"
        _judge(report, ok, f"expected an output envelope with the file's content, got {reply.key} {str(env)[:200]}")
        _properties(report, client.features, args, env)
    args = {"path": "missing-file.txt"}
    reply = await _op(report, client, "call read (missing file)", "call", agent="smoke", session="s", mode="headless", tool="read", args=args)
    if reply is not None:
        env = reply.payload if reply.key == "envelope" else {}
        _judge(report, env.get("type") == "error", f"expected an error envelope, got {reply.key} {str(env)[:200]}")
        _properties(report, client.features, args, env)


async def smoke(impl: str | None, *, timeout: float = 15.0) -> SmokeReport:
    report = SmokeReport()
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="conformance-smoke-")))
    ws = root / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello\n", encoding="utf-8")
    try:
        try:
            client_cm = HarnessClient(transport_for(impl), timeout=timeout, max_restarts=3)
            client = await client_cm.__aenter__()
        except HarnessFault as fault:
            report.steps.append(SmokeStep("start", "broken", "unknown", f"{fault.status}: {fault.message}"))
            return report
        try:
            report.implementation, report.features = client.implementation, sorted(client.features)
            report.steps.append(SmokeStep("start"))
            await _op(report, client, "reset", "reset")
            reply = await _op(report, client, "compile", "compile", agent="smoke", manifest=MANIFEST, workspace=os.fspath(ws), bindings={})
            if reply is not None:
                _judge(report, "compile_error" not in reply.payload, f"a valid manifest did not compile: {reply.payload.get('compile_error')}")
            if "tool.read" in client.features and reply is not None:
                await _read_steps(report, client, ws)
            else:
                report.steps.append(SmokeStep("call read", "not_applicable", "not_applicable", "the harness does not declare tool.read (or compile failed)"))
            await _op(report, client, "close", "close", agent="smoke", session="s")
        finally:
            await client_cm.__aexit__(None, None, None)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return report
