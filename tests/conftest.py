"""Shared fixtures: temporary workspaces, manifest files, engines and sessions.

Everything here builds real objects (real directories, real manifest files
loaded through `load_manifest`, the real `Engine`); nothing is mocked.

    ws = make_workspace("ws", {"a.txt": "hello\\n", "src/m.py": "x = 1\\n"})
    eng = engine(ws, manifest_data(read=["{workspace}/**"]))
    ses = open_session(eng)
    env = await eng.call(ses, "read", {"path": "a.txt"})

or, in one step, `agent = make_agent(ws, read=[...])` then `await agent.call("read", {...})`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

# On CI the property tests run a fixed set of examples (derandomised): a run is
# reproducible and a red build always means a change broke something. Locally
# they keep exploring new examples, which is where new counterexamples come from.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")

from agentcore.api import Engine, load_manifest
from agentcore.envelope import Envelope
from agentcore.session import Session
from agentcore.watchdog import AllowAllWatchdog

ALLOW_ALL: tuple[dict[str, str], ...] = ({"permission": "*", "pattern": "*", "action": "allow"},)
FILE_TOOLS: tuple[str, ...] = ("read", "write", "edit", "glob", "grep")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _fast_schema_checked_by_jsonschema() -> Iterator[None]:
    """Every call the suite makes in-process that `fastschema` proves valid is validated by jsonschema
    too, and the two must agree: thousands of real calls on top of the property tests."""
    from jsonschema import Draft202012Validator

    from agentcore.pipeline import schema

    real = schema.proven_valid

    def checked(tool_schema: Any, value: Any) -> bool:
        proven = real(tool_schema, value)
        if proven:
            validator = Draft202012Validator(tool_schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
            assert validator.is_valid(value), f"fastschema proved arguments jsonschema rejects: {value!r}"
        return proven

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "proven_valid", checked)
        yield


@pytest.fixture(scope="session", autouse=True)
def _plain_manifest_reader_checked_by_pydantic() -> Iterator[None]:
    """Every manifest and rules file the suite loads in-process without pydantic (manifest/spec.py) is
    validated by the pydantic models too, and must mean the same: every fixture on top of the property tests."""
    from agentcore.manifest import loader, schema

    real = loader.read_spec

    def checked(cls: Any, data: Any) -> Any:
        got = real(cls, data)
        if got is not None:
            model = getattr(schema, cls.__name__)
            assert got.as_dict() == model.model_validate(data).model_dump(), "spec.py and pydantic read a manifest differently"
        return got

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loader, "read_spec", checked)
        yield


@pytest.fixture(scope="session", autouse=True)
def _own_temp_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Everything the engine puts in the temp directory during the run goes to a directory of the
    run's own (subprocesses included, through TMPDIR), and nothing may be left there at the end."""
    import gc
    import tempfile

    root = tmp_path_factory.mktemp("temp-root")
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = str(root)
    os.environ["TMPDIR"] = str(root)
    try:
        yield root
    finally:
        tempfile.tempdir = saved[0]
        if saved[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[1]
    gc.collect()  # sessions dropped without close() remove their directories when collected
    # agentcore-bwrap-UID is the sandbox's per-user runtime directory (one empty mask file), reused by design.
    leftovers = sorted(p.name for p in root.iterdir()
                       if p.name.startswith(("agentcore-", "conformance-")) and not p.name.startswith("agentcore-bwrap-"))
    assert leftovers == [], f"the test run left {len(leftovers)} engine temp entries behind: {leftovers[:10]}"


def _put(root: Path, files: Mapping[str, str | bytes]) -> None:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


@pytest.fixture
def make_workspace(tmp_path: Path) -> Callable[..., Path]:
    """`make_workspace(name="ws", files=None, parent=None) -> canonical Path`.

    `name` may contain glob metacharacters; `files` maps relative paths to text or bytes.
    """

    def make(name: str = "ws", files: Mapping[str, str | bytes] | None = None, parent: Path | None = None) -> Path:
        root = (parent or tmp_path) / name
        root.mkdir(parents=True, exist_ok=True)
        _put(root, files or {})
        return Path(os.path.realpath(root))

    return make


@pytest.fixture
def workspace(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace("ws")


def build_manifest_data(
    *,
    name: str = "test-agent",
    tools: Sequence[str] = FILE_TOOLS,
    read: Sequence[str] = ("{workspace}/**",),
    write: Sequence[str] = ("{workspace}/**",),
    rules: Sequence[Mapping[str, str]] = ALLOW_ALL,
    limits: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "tools": list(tools),
        "requires": {"fs": {"read": list(read), "write": list(write)}},
        "rules": [dict(r) for r in rules],
        "environment": "none",
    }
    if limits:
        data["limits"] = dict(limits)
    data.update(extra)
    return data


@pytest.fixture
def manifest_data() -> Callable[..., dict[str, Any]]:
    """`manifest_data(tools=..., read=..., write=..., rules=..., limits=..., **extra) -> dict`.

    Defaults: the five file tools, read and write on `{workspace}/**`, one
    rule allowing everything (so headless calls are not refused by `ask`).
    """
    return build_manifest_data


@pytest.fixture
def write_manifest(tmp_path: Path) -> Callable[..., Path]:
    """`write_manifest(data, directory=None, name="manifest", fmt="yaml"|"json") -> Path`.

    Writes outside any workspace by default (tmp_path/"config").
    """
    counter = iter(range(1_000_000))

    def write(data: Mapping[str, Any] | str, *, directory: Path | None = None, name: str | None = None, fmt: str = "yaml") -> Path:
        where = directory or (tmp_path / "config")
        where.mkdir(parents=True, exist_ok=True)
        stem = name or f"manifest{next(counter)}"
        path = where / f"{stem}.{fmt}"
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        elif fmt == "json":
            path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        else:
            path.write_text(yaml.safe_dump(dict(data), sort_keys=False), encoding="utf-8")
        return path

    return write


def _watchdog(spec: Any, manifest: Any) -> Any:
    if spec == "allow":
        return AllowAllWatchdog()
    if spec == "default":
        from agentcore.api import default_watchdog

        return default_watchdog(manifest)
    return spec


@pytest.fixture
def engine(write_manifest: Callable[..., Path]) -> Callable[..., Engine]:
    """`engine(workspace, manifest=None|dict|Path, *, watchdog="allow"|"default"|obj, broker=None,
    registry=None, project_rules=(), fmt="yaml", manifest_dir=None, **load_kwargs) -> Engine`."""

    def build(
        workspace: Path | None,
        manifest: Mapping[str, Any] | Path | None = None,
        *,
        watchdog: Any = "allow",
        broker: Any = None,
        registry: Any = None,
        project_rules: tuple[Any, ...] = (),
        fmt: str = "yaml",
        manifest_dir: Path | None = None,
        **load_kwargs: Any,
    ) -> Engine:
        if manifest is None:
            manifest = build_manifest_data()
        path = manifest if isinstance(manifest, Path) else write_manifest(manifest, directory=manifest_dir, fmt=fmt)
        compiled = load_manifest(path, workspace=workspace, catalog=registry, **load_kwargs)
        return Engine(
            compiled,
            catalog=registry,
            broker=broker,
            watchdog=_watchdog(watchdog, compiled),
            project_rules=project_rules,
        )

    return build


@pytest.fixture
def open_session() -> Iterator[Callable[..., Session]]:
    """`open_session(engine, **kw) -> Session`; every session is closed at teardown."""
    sessions: list[Session] = []

    def open_(eng: Engine, **kw: Any) -> Session:
        ses = eng.open_session(**kw)
        sessions.append(ses)
        return ses

    yield open_
    for ses in sessions:
        ses.close()


@dataclass
class Agent:
    """An engine plus one open session, for tests that make several calls."""

    engine: Engine
    session: Session
    workspace: Path | None

    async def call(self, tool: str, args: Any) -> Envelope:
        return await self.engine.call(self.session, tool, args)


@pytest.fixture
def make_agent(engine: Callable[..., Engine], open_session: Callable[..., Session]) -> Callable[..., Agent]:
    """`make_agent(workspace, manifest=None, *, engine_kwargs..., **manifest_data_kwargs) -> Agent`."""

    def make(workspace: Path | None, manifest: Mapping[str, Any] | Path | None = None, *, engine_kwargs: Mapping[str, Any] | None = None, **data_kwargs: Any) -> Agent:
        if manifest is None:
            manifest = build_manifest_data(**data_kwargs)
        eng = engine(workspace, manifest, **dict(engine_kwargs or {}))
        return Agent(eng, open_session(eng), workspace)

    return make


# -- the bash lab (real bwrap) ---------------------------------------------------------------


@pytest.fixture
def lab() -> Iterator[Any]:
    """A throwaway tree for the bash tests: root/ws, root/outside, root/ws_evil (see test_bash_support.lab_tree)."""
    from test_bash_support import lab_tree, require_bwrap

    require_bwrap()
    with lab_tree() as tree:
        yield tree


@pytest.fixture
def agent_for(make_agent: Callable[..., Agent], lab: Any) -> Callable[..., Agent]:
    """`agent_for(shell, **bash_manifest_kwargs)`: an engine with the DEFAULT watchdog over the lab workspace."""
    from test_bash_support import bash_manifest

    def make(shell: Sequence[Mapping[str, Any]], **kw: Any) -> Agent:
        return make_agent(lab.ws, bash_manifest(shell, **kw), engine_kwargs={"watchdog": "default"})

    return make


# -- a filesystem that keeps whole seconds ------------------------------------------------------


@pytest.fixture
def whole_second_fs(tmp_path: Path) -> Iterator[Path]:
    """A real ext4 filesystem with 128-byte inodes (what `mkfs.ext4` makes below 512 MB), loop-mounted:
    it stamps files with whole seconds, so two changes within one second leave the same ctime."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("a loop-mounted ext4 needs root and mkfs.ext4")
    image, mount = tmp_path / "ext4-128.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(32 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-I", "128", str(image)], check=True, capture_output=True)
    done = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {done.stderr.strip()[:200]}")
    try:
        probe = mount / "probe"
        probe.mkdir()
        assert os.lstat(probe).st_ctime_ns % 1_000_000_000 == 0, "the filesystem keeps sub-second stamps"
        probe.rmdir()
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
