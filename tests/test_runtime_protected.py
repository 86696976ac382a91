"""The runtime's own installation is protected (ENV-7 rule 5, CAP-8): the Python environment agentcore
runs from, the site directories on its path and its packages' directories (an editable install's source).

An agent that could change them would have its code run by the next runtime, or by the next sandbox
launcher and search process the runtime starts, with no sandbox at all. These tests point `fs.write`
at this very installation and check that nothing can be written there, by the file tools or by a
sandboxed command; each probe is removed again should the protection ever fail.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentcore
from agentcore.api import default_catalog, manifest_warnings
from agentcore.protected import runtime_paths

pytestmark = pytest.mark.anyio

PREFIX = Path(os.path.realpath(sys.prefix))
PACKAGE = Path(os.path.realpath(agentcore.__file__)).parent
SITE = Path(os.path.realpath(os.path.dirname(os.path.dirname(pytest.__file__))))  # the site directory pytest came from


@pytest.fixture
def probe() -> Iterator[Callable[[Path], Path]]:
    made: list[Path] = []

    def name(directory: Path) -> Path:
        made.append(directory / f"agentcore-probe-{uuid.uuid4().hex[:8]}")
        return made[-1]

    yield name
    for p in made:
        if p.exists():
            p.unlink()
            pytest.fail(f"a probe was written into the runtime's installation: {p}")


def test_the_runtime_paths_are_this_installation() -> None:
    paths = runtime_paths()
    assert PACKAGE in paths  # also when installed editable, outside the environment
    assert PREFIX in paths
    assert any(SITE == p or p in SITE.parents for p in paths)


def test_a_prefix_shared_with_the_system_counts_only_for_pythons_own_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python installed in /usr shares the prefix with everything else there: protecting all of /usr
    would take a writable /usr/local away from a manifest that grants it. Only Python's parts count."""
    for name in ("prefix", "base_prefix", "exec_prefix", "base_exec_prefix"):
        monkeypatch.setattr(sys, name, "/usr")
    runtime_paths.cache_clear()
    try:
        paths = runtime_paths()
    finally:
        runtime_paths.cache_clear()
    assert Path("/usr") not in paths and Path("/usr/local") not in paths
    assert PACKAGE in paths  # our own packages still count wherever they are


@pytest.mark.parametrize("where", ["prefix", "package", "site"])
async def test_the_file_tools_refuse_to_write_into_it(make_workspace: Callable[..., Path], make_agent: Callable[..., Any],
                                                      probe: Callable[[Path], Path], where: str) -> None:
    target = probe({"prefix": PREFIX, "package": PACKAGE, "site": SITE}[where])
    ws = make_workspace("ws", {"a.txt": "a\n"})
    agent = make_agent(ws, read=["{workspace}/**", f"{target.parent}/**"], write=["{workspace}/**", f"{target.parent}/**"])
    env = await agent.call("write", {"path": os.fspath(target), "content": "import os\n"})
    assert env.refusal == {"layer": "capability", "code": "protected"}, env.to_dict()
    assert not target.exists()
    assert (await agent.call("write", {"path": "notes.txt", "content": "fine\n"})).ok  # the workspace itself stays writable


@pytest.mark.bwrap
async def test_a_sandboxed_command_cannot_write_into_it(make_workspace: Callable[..., Path], make_agent: Callable[..., Any],
                                                       probe: Callable[[Path], Path]) -> None:
    from test_bash_support import ANY, allow, assert_ran, bash_manifest, require_bwrap

    require_bwrap()
    ws = make_workspace("ws", {"a.txt": "a\n"})
    targets = [probe(PREFIX), probe(PACKAGE), probe(SITE)]
    agent = make_agent(ws, bash_manifest([allow("touch", ANY)], read=["{workspace}/**", f"{PREFIX}/**", f"{PACKAGE}/**"],
                                         write=["{workspace}/**", f"{PREFIX}/**", f"{PACKAGE}/**"]), engine_kwargs={"watchdog": "default"})
    for target in targets:
        data = assert_ran(await agent.call("bash", {"command": f"touch {target}"}))
        assert data["exit_code"] != 0, data
        assert not target.exists()
    assert assert_ran(await agent.call("bash", {"command": "touch made.txt"}))["exit_code"] == 0
    assert (ws / "made.txt").exists()
    # A writable root inside the installation (not the installation itself) is read-only too.
    inner = make_agent(ws, bash_manifest([allow("touch", ANY)], read=["{workspace}/**", f"{SITE}/**"], write=["{workspace}/**", f"{SITE}/**"]),
                       engine_kwargs={"watchdog": "default"})
    target = probe(SITE)
    assert assert_ran(await inner.call("bash", {"command": f"touch {target}"}))["exit_code"] != 0
    assert not target.exists()


@pytest.mark.bwrap
async def test_a_writable_root_reached_through_a_symlink_is_read_only_too(
    tmp_path: Path, make_workspace: Callable[..., Path], make_agent: Callable[..., Any], probe: Callable[[Path], Path]
) -> None:
    """The same installation named through a symlinked ancestor: the roots are compared as they really are."""
    from test_bash_support import ANY, allow, assert_ran, bash_manifest, require_bwrap

    require_bwrap()
    ws = make_workspace("ws", {"a.txt": "a\n"})
    link = tmp_path / "via-link"
    link.symlink_to(PREFIX.parent)
    site = link / PREFIX.name / SITE.relative_to(PREFIX)
    agent = make_agent(ws, bash_manifest([allow("touch", ANY)], read=["{workspace}/**", f"{site}/**"], write=["{workspace}/**", f"{site}/**"]),
                       engine_kwargs={"watchdog": "default"})
    target = probe(SITE)
    assert assert_ran(await agent.call("bash", {"command": f"touch {target}"}))["exit_code"] != 0
    assert not target.exists()


def test_only_what_fs_write_reaches_is_added_and_the_manifest_check_says_so(make_workspace: Callable[..., Path], engine: Callable[..., Any]) -> None:
    ws = make_workspace("ws", {"a.txt": "a\n"})
    plain = engine(ws, {"name": "p", "tools": ["write"], "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}}})
    assert not set(runtime_paths()) & set(plain.manifest.protected_files)  # nothing to mount on every call
    assert not any("agentcore runs from" in w for w in manifest_warnings(plain.manifest, catalog=default_catalog()))
    reaching = engine(ws, {"name": "r", "tools": ["write"], "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**", f"{PREFIX}/lib/**"]}}})
    assert PREFIX in reaching.manifest.protected_files
    warnings = manifest_warnings(reaching.manifest, catalog=default_catalog())
    assert [w for w in warnings if "agentcore runs from" in w] == [
        f"requires.fs.write reaches what agentcore runs from ({PREFIX}): it stays read-only (ENV-7 rule 5); "
        "run agentcore from an environment outside the writable paths if commands should change it"]


def test_the_manifest_check_names_the_python_environments_fs_write_reaches(make_workspace: Callable[..., Path], engine: Callable[..., Any]) -> None:
    """An author who expects the agent to `pip install` learns before the first run that the environments
    stay read-only (ENV-7 rule 3); a workspace without one gets no such warning."""
    ws = make_workspace("ws", {".venv/pyvenv.cfg": "home = /usr/bin\n", ".pixi/envs/default/conda-meta/history": "", "src/a.py": ""})
    bare = make_workspace("bare", {"src/a.py": ""})

    def warned(workspace: Path, write: str) -> list[str]:
        e = engine(workspace, {"name": "w", "tools": ["write"], "requires": {"fs": {"read": ["{workspace}/**"], "write": [write]}}})
        return [w for w in manifest_warnings(e.manifest, catalog=default_catalog()) if "Python environment" in w]

    real = os.path.realpath(ws)
    assert warned(ws, "{workspace}/**") == [
        f"requires.fs.write reaches the Python environments {real}/.venv, {real}/.pixi/envs/default: it stays read-only "
        "(ENV-7 rule 3), so commands cannot install packages into it; run pip, uv or conda yourself"]
    assert warned(ws, "{workspace}/.venv/lib/**") == [
        f"requires.fs.write reaches the Python environment {real}/.venv: it stays read-only (ENV-7 rule 3), so commands "
        "cannot install packages into it; run pip, uv or conda yourself"]
    assert warned(ws, "{workspace}/src/**") == [] and warned(bare, "{workspace}/**") == []
