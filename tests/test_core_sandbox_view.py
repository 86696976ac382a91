"""`sandbox.view` (ENV-5): compiled, carried into the policy, and never widened by a subagent (SUB-2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore.api import load_manifest
from agentcore.environments.policy import policy_for
from agentcore.errors import ManifestError
from agentcore.manifest.intersect import intersect


def compiled(write_manifest: Callable[..., Path], manifest_data: Callable[..., dict[str, Any]], ws: Path, **extra: Any) -> Any:
    return load_manifest(write_manifest(manifest_data(**extra)), workspace=ws)


def test_minimal_is_the_default(write_manifest: Callable[..., Path], manifest_data: Callable[..., dict[str, Any]], workspace: Path) -> None:
    m = compiled(write_manifest, manifest_data, workspace)
    assert m.sandbox_view == "minimal" and policy_for(m).view == "minimal"


def test_full_is_an_explicit_opt_in(write_manifest: Callable[..., Path], manifest_data: Callable[..., dict[str, Any]], workspace: Path) -> None:
    m = compiled(write_manifest, manifest_data, workspace, sandbox={"view": "full"})
    assert m.sandbox_view == "full" and policy_for(m).view == "full"


@pytest.mark.parametrize("sandbox", [{"view": "everything"}, {"view": True}, {"show": "full"}, "full"])
def test_anything_else_is_a_manifest_error(write_manifest: Callable[..., Path], manifest_data: Callable[..., dict[str, Any]], workspace: Path, sandbox: Any) -> None:
    with pytest.raises(ManifestError):
        compiled(write_manifest, manifest_data, workspace, sandbox=sandbox)


@pytest.mark.parametrize(("parent", "child", "merged"), [
    ("minimal", "full", "minimal"), ("full", "minimal", "minimal"), ("full", "full", "full"), ("minimal", "minimal", "minimal"),
])
def test_a_child_sees_the_whole_root_only_when_both_do(
    write_manifest: Callable[..., Path], manifest_data: Callable[..., dict[str, Any]], workspace: Path, parent: str, child: str, merged: str
) -> None:
    p = compiled(write_manifest, manifest_data, workspace, sandbox={"view": parent})
    c = compiled(write_manifest, manifest_data, workspace, sandbox={"view": child})
    assert intersect(p, c).sandbox_view == merged
    assert policy_for(intersect(p, c)).view == merged
