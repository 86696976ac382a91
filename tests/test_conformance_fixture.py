"""The runner's HTTP fixture: what it serves, what it records, and that a `served` check can fail."""

from __future__ import annotations

import gzip
import http.client
from pathlib import Path

import anyio
import pytest

from conformance.cases import CaseError, load_case
from conformance.connectors import HarnessClient, transport_for
from conformance.fixtures import HttpFixture
from conformance.runner import run_case


def _get(authority: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    host, port = authority.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_routes_are_served_and_every_request_recorded() -> None:
    fx = HttpFixture()
    try:
        values = fx.values()
        assert values["http"] == f"http://127.0.0.1:{values['http_port']}" and values["http_port"] != values["sentinel_port"]
        fx.set_routes({
            "/a": {"status": 201, "headers": {"Content-Type": "text/plain", "X-Test": "1"}, "body": "ab", "repeat": 3},
            "/z": {"body": "z", "repeat": 1000, "gzip": True},
            "/bin": {"body_hex": "00ff10"},
        })
        status, headers, body = _get(values["http_authority"], "/a?q=1", {"User-Agent": "probe"})
        assert (status, headers["x-test"], body) == (201, "1", b"ababab")
        status, headers, body = _get(values["http_authority"], "/z")
        assert headers["content-encoding"] == "gzip" and gzip.decompress(body) == b"z" * 1000
        assert _get(values["http_authority"], "/bin")[2] == b"\x00\xff\x10"
        assert _get(values["http_authority"], "/missing")[0] == 404
        seen = fx.http.seen()
        assert seen["count"] == 4 and seen["requests"][0] == {"method": "GET", "path": "/a?q=1", "headers": seen["requests"][0]["headers"]}
        assert seen["requests"][0]["headers"]["user-agent"] == "probe"
        assert fx.sentinel.seen() == {"count": 0, "requests": []}
    finally:
        fx.close()


CASE = """
id: fixture.probe
title: a served check that must fail
requirements: [NET-9]
level: MUST
catches: [always-allow]
setup:
  http:
    routes:
      /x: {headers: {Content-Type: text/plain}, body: "x"}
  manifest:
    name: probe
    tools: [web_fetch]
    requires: {net: {hosts: ["${http_authority}"]}}
    rules: [{permission: web_fetch, pattern: "${http_authority}", action: allow}]
steps:
  - call: {tool: web_fetch, args: {url: "${http}/x"}}
    expect: {type: output}
  - served:
      server: http
      checks: [{pointer: /count, equals: COUNT}]
"""


@pytest.mark.parametrize(("count", "status"), [(1, "pass"), (2, "fail")])
def test_a_served_check_passes_or_fails_on_what_the_server_saw(tmp_path: Path, count: int, status: str) -> None:
    path = tmp_path / "net" / "probe.yaml"
    path.parent.mkdir()
    path.write_text(CASE.replace("COUNT", str(count)))
    case = load_case(path)
    assert "fixture.http" in case.needed_features()

    async def go() -> str:
        async with HarnessClient(transport_for("inprocess")) as client:
            return (await run_case(client, case, seed=1)).status

    assert anyio.run(go) == status


def test_a_served_step_names_a_known_server(tmp_path: Path) -> None:
    path = tmp_path / "net" / "bad.yaml"
    path.parent.mkdir()
    path.write_text(CASE.replace("server: http", "server: upstream").replace("COUNT", "1"))
    with pytest.raises(CaseError):
        load_case(path)
