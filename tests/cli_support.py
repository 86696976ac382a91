"""Helpers shared by the CLI tests (no tests here)."""

from __future__ import annotations

from pathlib import Path


def cli_project(tmp_path: Path, permission: str) -> tuple[Path, Path]:
    """The CLI tests' project: `proj/src/` and a manifest enabling read (workspace) and write (`src/`), with one
    allow rule for `permission` (`read`: writes ask; `*`: everything is allowed)."""
    import yaml

    ws = tmp_path / "proj"
    (ws / "src").mkdir(parents=True)
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({
        "name": "n", "tools": ["read", "write"],
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/src/**"]}},
        "rules": [{"permission": permission, "pattern": "*", "action": "allow"}],
    }))
    return ws, m
