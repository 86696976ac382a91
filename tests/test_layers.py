"""Imports point down the layers, hosts use only agentcore.api, no cycles (ARCHITECTURE.md).

The contracts live in pyproject.toml ([tool.importlinter]) and are checked by
import-linter, which counts function-local and TYPE_CHECKING imports too. The
planted-import tests copy the source tree, add one upward import, and check
that the same command fails on it: a contract that cannot fail checks nothing.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail("lint-imports is missing: install the test extra (pip install -e '.[test]')")
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=config.parent, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_tree_keeps_every_import_contract() -> None:
    done = _lint(SRC, ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A copy of src/ and pyproject.toml to plant imports in."""
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    "module, line",
    [
        # function-local, upward from the paths layer to the pipeline
        ("agentcore/paths.py", "\n\ndef _planted():\n    from agentcore.pipeline import engine  # noqa: F401\n"),
        # TYPE_CHECKING-only, upward from the manifest layer to the tools
        ("agentcore/manifest/schema.py", "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agentcore.tools.registry import ToolRegistry  # noqa: F401\n"),
        # a host reaching past the API into the engine's internals
        ("agentcore/cli/demo.py", "\n\ndef _planted():\n    from agentcore.session import Session  # noqa: F401\n"),
    ],
)
def test_a_planted_upward_import_breaks_the_check(planted: Path, module: str, line: str) -> None:
    target = planted / "src" / module
    target.write_text(target.read_text() + line)
    done = _lint(planted / "src", planted / "pyproject.toml")
    assert done.returncode != 0, done.stdout
    dotted = module.removesuffix(".py").replace("/", ".")
    assert "BROKEN" in done.stdout and f"{dotted} -> " in done.stdout


def _layer_roots() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["id"] == "layers")["layers"]
    return [name.strip() for layer in layers for name in layer.replace("|", ":").split(":")]


def test_every_engine_module_belongs_to_a_layer() -> None:
    """A new top-level module must be placed in a layer, or the contract would not see it."""
    roots = _layer_roots()
    package = SRC / "agentcore"
    for path in package.iterdir():
        if path.name.startswith(("_", ".")) or path.name in ("py.typed", "defaults"):
            continue
        name = "agentcore." + path.name.removesuffix(".py")
        assert name in roots, f"{name} is in no layer of [tool.importlinter] layers"


def _tool_id_tests(source: str, ids: frozenset[str]) -> list[str]:
    """Comparisons of something named like a tool with a locked id, and collections of locked ids."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            consts = {c.value for p in parts for c in ast.walk(p) if isinstance(c, ast.Constant) and c.value in ids}
            if consts and any("tool" in ast.unparse(p) for p in parts):
                found.append(ast.unparse(node))
        elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            if sum(1 for e in node.elts if isinstance(e, ast.Constant) and e.value in ids) >= 2:
                found.append(ast.unparse(node))
    return found


def test_no_tool_id_in_the_pipeline() -> None:
    """Tools declare what the pipeline needs: the pipeline never tests a tool's id."""
    from agentcore.vocabulary import LOCKED_IDS

    ids = frozenset(LOCKED_IDS)
    assert _tool_id_tests('if tool_id == "bash": pass\nX = frozenset({"read", "grep"})', ids) == [
        "tool_id == 'bash'", "{'read', 'grep'}"
    ]  # the check itself can fail
    for path in (SRC / "agentcore" / "pipeline").rglob("*.py"):
        assert not _tool_id_tests(path.read_text(), ids), f"{path.relative_to(SRC)} tests tool ids"


def test_ruff_pyflakes_import_order_and_complexity_are_clean() -> None:
    """The hygiene .ci/run enforces (pyproject [tool.ruff]: pyflakes, import order, McCabe <= 15)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run([str(ruff), "check", "src", "tests", "bench"], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
