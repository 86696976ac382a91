"""PERM-13 in the session scope: the sidecar rule is index 0, then every rule added, one index per rule as written."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from agentcore.api import Engine, load_manifest


def _engine(tmp_path: Path) -> tuple[Engine, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (ws / name).write_text(name)
    dirs = [tmp_path / "one", tmp_path / "two"]
    for d in dirs:
        d.mkdir()
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"name": "idx", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}}}))
    return Engine(load_manifest(manifest, workspace=ws, ad_hoc=dirs)), ws


def test_multi_valued_and_empty_session_rules_take_one_index_each(tmp_path: Path) -> None:
    engine, ws = _engine(tmp_path)

    async def go() -> list[object]:
        with engine.open_session() as session:
            session.add_session_rule("read", "{ad-hoc}/x", "allow")      # two patterns, index 1
            session.add_session_rule("read", f"{ws}/a.txt", "deny")      # index 2 (not 3)
            session.add_session_rule("read", "{user-data}/y", "allow")   # no pattern at all, index 3
            session.add_session_rule("read", f"{ws}/b.txt", "deny")      # index 4 (not 3)
            out = []
            for name in ("a.txt", "b.txt"):
                env = (await engine.call(session, "read", {"path": name})).to_dict()
                out.append((env["metadata"]["refusal"]["scope"], env["metadata"]["refusal"]["rule_index"], env["error_text"]))
            return out

    (a_scope, a_index, a_text), (b_scope, b_index, b_text) = anyio.run(go)
    assert (a_scope, a_index) == ("session", 2) and "#3" in a_text
    assert (b_scope, b_index) == ("session", 4) and "#5" in b_text
