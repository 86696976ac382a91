"""The harness protocol and the runner's guard rails: seq, timeouts, crashes, restarts.

Faulty harnesses are real harness processes (or in-process harness tasks)
that break the protocol in one way each; the runner must give each fault
its own status and keep going with a restarted harness.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conformance import PROTOCOL_VERSION
from conformance.cases import load_cases
from conformance.connectors import HarnessClient, HarnessFault, transport_for
from conformance.protocol import ProtocolViolation, check_reply
from conformance.runner import run_case, run_suite

PY = sys.executable
SMALL = ["cap.out-of-scope-is-final", "file.read-returns-text-verbatim"]


def _cases(ids: list[str]):
    by_id = {c.id: c for c in load_cases()}
    return [by_id[i] for i in ids]


# -- reply validation ------------------------------------------------------------------------


def test_check_reply_accepts_each_payload_kind() -> None:
    call = {"seq": 3, "op": "call"}
    assert check_reply(call, {"seq": 3, "envelope": {"type": "output", "data": 1, "metadata": {}}}) == "envelope"
    ask = {"id": "k", "type": "permission", "tool": "read", "layer": "permission", "subjects": ["fs.read /ws/a"]}
    assert check_reply(call, {"seq": 3, "ask": ask}) == "ask"
    assert check_reply(call, {"seq": 3, "ask": {"id": "q", "type": "question", "questions": [{"question": "?"}]}}) == "ask"
    assert check_reply(call, {"seq": 3, "skip": {"reason": "no"}}) == "skip"
    assert check_reply(call, {"seq": 3, "error": {"message": "boom"}}) == "error"
    assert check_reply({"seq": 1, "op": "compile"}, {"seq": 1, "result": {"compile_error": {"message": "x"}}}) == "result"


@pytest.mark.parametrize(
    "reply, fragment",
    [
        ({"seq": 4, "envelope": {"type": "output"}}, "does not match"),
        ({"seq": 3}, "exactly one"),
        ({"seq": 3, "envelope": {"type": "output"}, "skip": {"reason": "x"}}, "exactly one"),
        ({"seq": 3, "result": {}}, "not valid for op"),
        ({"seq": 3, "envelope": {"type": "maybe"}}, "envelope"),
        ({"seq": 3, "ask": {"type": "question", "questions": []}}, "'id' is a required property"),
        ({"seq": 3, "ask": {"id": "a", "type": "permission", "tool": "read", "layer": "permission"}}, "/ask: 'subjects'"),
        ({"seq": 3.0, "envelope": {"type": "output", "metadata": {}}}, "/seq: must be a JSON integer"),
        ({"seq": True, "envelope": {"type": "output", "metadata": {}}}, "/seq: must be a JSON integer"),
        ({"seq": "3", "envelope": {"type": "output", "metadata": {}}}, "/seq: must be a JSON integer"),
        ({"seq": 3, "envelope": {"type": "output", "metadata": []}}, "/envelope/metadata: "),
        ({"seq": 3, "envelope": {"type": "output"}}, "/envelope: 'metadata' is a required property"),
        ({"seq": 3, "envelope": {"type": "error", "error_text": 5, "metadata": {}}}, "/envelope/error_text: "),
        ({"seq": 3, "skip": {}}, "skip"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_check_reply_rejects_malformed(reply: object, fragment: str) -> None:
    with pytest.raises(ProtocolViolation, match=fragment):
        check_reply({"seq": 3, "op": "call"}, reply)


def test_start_result_must_describe_the_implementation() -> None:
    with pytest.raises(ProtocolViolation, match="/result/implementation: 'name'"):
        check_reply({"seq": 1, "op": "start"}, {"seq": 1, "result": {"protocol": 1, "implementation": {}}})
    with pytest.raises(ProtocolViolation, match="/result/features/0"):
        check_reply({"seq": 1, "op": "start"}, {"seq": 1, "result": {"protocol": 1, "implementation": {"name": "x"}, "features": [3]}})


def test_compile_description_is_required_only_with_its_feature() -> None:
    compile_req = {"seq": 1, "op": "compile"}
    assert check_reply(compile_req, {"seq": 1, "result": {}}) == "result"  # a tools-only harness describes nothing
    with pytest.raises(ProtocolViolation, match="/result/effective: required by the feature compile.describe"):
        check_reply(compile_req, {"seq": 1, "result": {"tools": {}}}, frozenset({"compile.describe"}))
    with pytest.raises(ProtocolViolation, match="/result/tools/read: 'kind'"):
        check_reply(compile_req, {"seq": 1, "result": {"effective": {}, "tools": {"read": {}}}})
    assert check_reply(compile_req, {"seq": 1, "result": {"compile_error": {"message": "bad"}}}, frozenset({"compile.describe"})) == "result"


def test_the_published_schemas_are_valid_and_cover_every_operation() -> None:
    from jsonschema import Draft202012Validator

    from conformance.protocol import OPS, load_schema, request_problem

    for name in ("requests", "replies"):
        Draft202012Validator.check_schema(load_schema(name))
    assert set(OPS) <= set(load_schema("requests")["$defs"]) and set(OPS) <= set(load_schema("replies")["$defs"])
    assert request_problem({"seq": 1, "op": "call", "agent": "a", "session": "s", "mode": "headless", "tool": "read", "args": {}}) is None
    assert "mode" in (request_problem({"seq": 1, "op": "call", "agent": "a", "session": "s", "mode": "sleepy", "tool": "read", "args": {}}) or "")
    assert "session" in (request_problem({"seq": 1, "op": "set_rules", "agent": "a", "scope": "session", "rules": []}) or "")


# -- our harness as a real command -------------------------------------------------------------


def test_agentcore_harness_speaks_the_protocol_over_stdio(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    requests = [
        {"seq": 1, "op": "start", "protocol": PROTOCOL_VERSION},
        {"seq": 2, "op": "compile", "agent": "a", "workspace": str(ws), "manifest": {"name": "t", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}}}},
        {"seq": 3, "op": "call", "agent": "a", "session": "s", "mode": "interactive", "tool": "read", "args": {"path": "a.txt"}},
        {"seq": 4, "op": "answer", "ask": "ask-1", "choice": "allow_once"},
        {"seq": 5, "op": "call", "agent": "a", "session": "h", "mode": "headless", "tool": "read", "args": {"path": "a.txt"}},
        {"seq": 6, "op": "compile", "agent": "b", "workspace": str(ws), "manifest": {"name": "t", "tools": ["nope"]}},
        {"seq": 7, "op": "bogus"},
    ]
    lines = [json.dumps(r) for r in requests]
    proc = subprocess.run([PY, "-m", "conformance.harness_agentcore"], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["seq"] for r in replies] == [1, 2, 3, 4, 5, 6, 7]
    assert replies[0]["result"]["implementation"]["name"] == "agentcore"
    assert "tool.read" in replies[0]["result"]["features"]
    assert replies[1]["result"]["tools"] == {"read": {"kind": "read"}}
    assert replies[2]["ask"]["type"] == "permission" and replies[2]["ask"]["tool"] == "read"
    assert replies[3]["envelope"]["data"]["content"] == "hello\n"
    assert replies[4]["envelope"]["metadata"]["refusal"]["layer"] == "ask"
    assert "compile_error" in replies[5]["result"]
    assert "error" in replies[6]
    assert proc.returncode == 0


def test_command_connector_matches_in_process() -> None:
    cases = _cases(SMALL)

    async def run(impl: str | None) -> list[str]:
        async with HarnessClient(transport_for(impl)) as client:
            return [r.status for r in await run_suite(client, cases, 7)]

    inproc = anyio.run(run, None)
    command = anyio.run(run, "command:python -m conformance.harness_agentcore")
    assert inproc == command == ["pass", "pass"]


# -- faults ----------------------------------------------------------------------------------


async def _statuses(impl: str, *, timeout: float = 15.0) -> tuple[list[tuple[str, str | None, str]], int]:
    cases = _cases(SMALL)
    async with HarnessClient(transport_for(impl), timeout=timeout) as client:
        results = [await run_case(client, c, 3) for c in cases]
        return [(r.status, r.caught_by, r.message) for r in results], client.restarts


@pytest.mark.parametrize("mode", ["broken", "command"])
def test_crash_is_reported_and_harness_restarted(mode: str) -> None:
    impl = "broken:crash-on-call" if mode == "broken" else "command:python -m conformance.broken crash-on-call"
    results, restarts = anyio.run(_statuses, impl)
    assert [s for s, _, _ in results] == ["crash", "crash"]
    assert all(by == "runner" for _, by, _ in results)
    assert restarts == 2  # one restart per crash, and the second case still ran


def test_hang_is_a_timeout_and_harness_restarted() -> None:
    results, restarts = anyio.run(lambda: _statuses("broken:hang-on-call", timeout=0.5))
    assert [s for s, _, _ in results] == ["timeout", "timeout"]
    assert restarts == 2


def test_wrong_seq_is_caught_by_the_runner() -> None:
    results, restarts = anyio.run(_statuses, "command:python -m conformance.broken wrong-seq")
    assert [(s, by) for s, by, _ in results] == [("error", "runner"), ("error", "runner")]
    assert "seq" in results[0][2]
    assert restarts == 2


def test_missing_payload_is_caught_by_the_runner() -> None:
    results, _ = anyio.run(_statuses, "broken:no-payload")
    assert [(s, by) for s, by, _ in results] == [("error", "runner"), ("error", "runner")]


def test_harness_error_and_skip_keep_the_harness_running() -> None:
    results, restarts = anyio.run(_statuses, "broken:error-on-call")
    assert [(s, by) for s, by, _ in results] == [("error", "harness"), ("error", "harness")]
    assert restarts == 0
    results, restarts = anyio.run(_statuses, "broken:skip-calls")
    assert [s for s, _, _ in results] == ["skipped", "skipped"]
    assert restarts == 0


def test_a_run_in_which_nothing_was_judged_is_not_clean() -> None:
    """A harness that skips everything claims nothing: `conformance run` must not exit 0 for it."""
    argv = [sys.executable, "-m", "agentcore.cli.main", "conformance", "run", "--impl", "broken:skip-everything", "--seed", "1",
            "--format", "jsonl", *(a for c in SMALL for a in ("--case", c))]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "no case was judged" in proc.stderr
    foot = json.loads(proc.stdout.strip().splitlines()[-1])
    assert foot["exit_code"] == 1 and foot["expectations"]["judged"] == 0, foot
    # Control: the same cases through a harness that runs them are judged, and the run is clean.
    ok = subprocess.run([*argv[:6], "command:python -m conformance.harness_agentcore", *argv[7:]], capture_output=True, text=True, timeout=120, check=False)
    assert ok.returncode == 0 and json.loads(ok.stdout.strip().splitlines()[-1])["expectations"]["judged"] >= 1, ok.stderr


def test_harness_that_cannot_start_is_a_fault(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("import sys\nsys.stdin.readline()\nprint('{\"seq\": 1, \"result\": {\"protocol\": 99, \"implementation\": {\"name\": \"x\"}}}')\n")

    async def go() -> None:
        async with HarnessClient(transport_for(f"command:python {script}")):
            pass

    with pytest.raises(HarnessFault, match="protocol 99"):
        anyio.run(go)


def test_not_applicable_when_features_are_missing(tmp_path: Path) -> None:
    # A minimal harness declaring no features at all: every case is not_applicable, none is run.
    script = tmp_path / "none.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    out = {'seq': r['seq'], 'result': {'protocol': 1, 'implementation': {'name': 'none'}, 'features': []}}\n"
        "    print(json.dumps(out), flush=True)\n"
    )
    results, restarts = anyio.run(_statuses, f"command:python {script}")
    assert [s for s, _, _ in results] == ["not_applicable", "not_applicable"]
    assert "tool.read" in results[0][2]
