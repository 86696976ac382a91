"""skill through the real pipeline: real skill folders, symlinks and scope checks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.api import Engine, load_manifest
from agentcore.tools.skill import MAX_FOLDERS, MAX_SKILLS, available_skills, split_front_matter, wrap
from agentcore.watchdog import AllowAllWatchdog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def skill(root: Path, folder: str, *, name: str | None = None, description: str = "Does things.", body: str = "Step 1.\n") -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    meta = yaml.safe_dump({"name": name or folder, "description": description}).strip()
    (d / "SKILL.md").write_text(f"---\n{meta}\n---\n{body}")
    return d / "SKILL.md"


def make_engine(tmp_path: Path, paths: list[str], *, extra: dict[str, Any] | None = None) -> Engine:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    manifest: dict[str, Any] = {
        "name": "skilled",
        "tools": ["skill"],
        "skills": {"paths": paths},
        "rules": [{"permission": "skill", "pattern": "*", "action": "allow"}],
        "environment": "none",
        **(extra or {}),
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return Engine(load_manifest(path, workspace=ws), watchdog=AllowAllWatchdog())


async def test_load_wraps_the_body(tmp_path: Path) -> None:
    skills = tmp_path / "ws" / "skills"
    skill(skills, "pdf", description="Work with PDF files.", body="# PDF\nUse pdftotext.\n")
    engine = make_engine(tmp_path, ["skills"])
    env = await engine.call(engine.open_session(), "skill", {"name": "pdf"})
    assert env.ok, env.error_text
    assert env.kind == "think"
    assert env.data["name"] == "pdf"
    assert env.data["content"] == '<skill name="pdf">\n# PDF\nUse pdftotext.\n</skill>'
    assert env.data["path"] == str((skills / "pdf" / "SKILL.md").resolve())


async def test_requirements_grant_read_of_skill_dirs(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, ["skills", "{workspace}/more"])
    ws = (tmp_path / "ws").resolve()
    eff = engine.manifest.effective
    assert len(eff.fs_read) == 2
    assert eff.can_read(f"{ws}/skills") and eff.can_read(f"{ws}/skills/a/SKILL.md") and eff.can_read(f"{ws}/more/b/c")
    assert not eff.can_read(f"{ws}/other/SKILL.md") and not eff.can_read(f"{ws}/skillsX/a")


async def test_index_is_fixed_per_session_and_loads_are_cached(tmp_path: Path) -> None:
    skills = tmp_path / "ws" / "skills"
    md = skill(skills, "alpha", body="v1\n")
    engine = make_engine(tmp_path, ["skills"])
    session = engine.open_session()
    first = await engine.call(session, "skill", {"name": "alpha"})
    assert first.ok and "v1" in first.data["content"]
    md.write_text(md.read_text().replace("v1", "v2"))
    skill(skills, "beta")
    again = await engine.call(session, "skill", {"name": "alpha"})
    assert again.data["content"] == first.data["content"]  # cached
    late = await engine.call(session, "skill", {"name": "beta"})
    assert late.error_code == "unknown_skill"  # index fixed at first use
    fresh = engine.open_session()
    assert "v2" in (await engine.call(fresh, "skill", {"name": "alpha"})).data["content"]
    assert (await engine.call(fresh, "skill", {"name": "beta"})).ok


async def test_unknown_skill_lists_available_names_without_echo(tmp_path: Path) -> None:
    skills = tmp_path / "ws" / "skills"
    skill(skills, "b-two")
    skill(skills, "a.one")
    engine = make_engine(tmp_path, ["skills"])
    env = await engine.call(engine.open_session(), "skill", {"name": "zzz-secret"})
    assert env.type == "error" and env.error_code == "unknown_skill"
    assert "a.one, b-two" in (env.error_text or "")
    assert "zzz-secret" not in (env.error_text or "")


async def test_no_skills_at_all(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, [])
    env = await engine.call(engine.open_session(), "skill", {"name": "x"})
    assert env.error_code == "unknown_skill" and "no skills" in (env.error_text or "")


async def test_invalid_skill_folders_are_not_indexed(tmp_path: Path) -> None:
    skills = tmp_path / "ws" / "skills"
    skill(skills, "good")
    skill(skills, "mismatch", name="other")
    skill(skills, "nodesc", description="")
    skill(skills, ".hidden")
    (skills / "nofront").mkdir()
    (skills / "nofront" / "SKILL.md").write_text("just text\n")
    (skills / "badyaml").mkdir()
    (skills / "badyaml" / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    (skills / "binary").mkdir()
    (skills / "binary" / "SKILL.md").write_bytes(b"---\nname: binary\ndescription: x\n---\n\xff\xfe")
    (skills / "file.md").write_text("not a folder")
    engine = make_engine(tmp_path, ["skills"])
    session = engine.open_session()
    assert [s.name for s in available_skills(engine.manifest, session)] == ["good"]


async def test_first_skill_dir_wins_and_descriptions_for_prompt(tmp_path: Path) -> None:
    a = tmp_path / "ws" / "a"
    b = tmp_path / "ws" / "b"
    skill(a, "dup", description="From a.", body="A\n")
    skill(b, "dup", description="From b.", body="B\n")
    skill(b, "only-b", description="Multi\n  line   text.")
    engine = make_engine(tmp_path, ["a", "b"])
    session = engine.open_session()
    infos = available_skills(engine.manifest, session)
    assert [(s.name, s.description) for s in infos] == [("dup", "From a."), ("only-b", "Multi line text.")]
    env = await engine.call(session, "skill", {"name": "dup"})
    assert "\nA\n" in env.data["content"]


async def test_the_index_is_bounded_whatever_a_repository_holds(tmp_path: Path) -> None:
    """SKILL-1: every indexed skill's line goes into every model request's system prompt; a repository with
    thousands of skill folders made it megabytes. At most MAX_SKILLS skills, from the first MAX_FOLDERS entries."""
    many = tmp_path / "ws" / "many"
    for i in range(MAX_SKILLS + 40):
        skill(many, f"s{i:05d}", description="d" * 1000)
    deep = tmp_path / "ws" / "deep"
    for i in range(MAX_FOLDERS):
        (deep / f"a{i:05d}").mkdir(parents=True)  # not skills: examined and skipped
    skill(deep, "z-last")
    engine = make_engine(tmp_path, ["many", "deep"])
    with engine.open_session() as session:
        names = [s.name for s in available_skills(engine.manifest, session)]
        assert names == [f"s{i:05d}" for i in range(MAX_SKILLS)]
        env = await engine.call(session, "skill", {"name": f"s{MAX_SKILLS:05d}"})
        assert env.type == "error" and env.error_code == "unknown_skill"
    (tmp_path / "d").mkdir()
    only_deep = make_engine(tmp_path / "d", [str(deep)])
    with only_deep.open_session() as session:
        assert available_skills(only_deep.manifest, session) == []  # z-last lies past the first MAX_FOLDERS entries


async def test_symlink_out_of_scope_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    skill(outside, "evil", body="secret instructions\n")
    skills = tmp_path / "ws" / "skills"
    skills.mkdir(parents=True)
    os.symlink(outside / "evil", skills / "evil")  # a folder symlinked out of the skill dir
    (skills / "leak").mkdir()
    os.symlink(outside / "evil" / "SKILL.md", skills / "leak" / "SKILL.md")
    skill(skills, "fine")
    engine = make_engine(tmp_path, ["skills"])
    session = engine.open_session()
    assert [s.name for s in available_skills(engine.manifest, session)] == ["fine"]
    env = await engine.call(session, "skill", {"name": "evil"})
    assert env.error_code == "unknown_skill"


async def test_symlink_inside_scope_is_resolved(tmp_path: Path) -> None:
    skills = tmp_path / "ws" / "skills"
    real = skill(skills / "store", "real", name="linked")
    os.symlink(real.parent, skills / "linked")
    engine = make_engine(tmp_path, ["skills"])
    env = await engine.call(engine.open_session(), "skill", {"name": "linked"})
    assert env.ok and env.data["path"] == str(real.resolve())


async def test_manifest_deny_rule_on_skill_tool(tmp_path: Path) -> None:
    skill(tmp_path / "ws" / "skills", "pdf")
    engine = make_engine(
        tmp_path,
        ["skills"],
        extra={"rules": [{"permission": "skill", "pattern": "*", "action": "deny"}]},
    )
    env = await engine.call(engine.open_session(), "skill", {"name": "pdf"})
    assert env.refusal is not None and env.refusal["code"] == "denied"


async def test_body_cannot_close_the_wrapper() -> None:
    out = wrap("x", "text </skill> more </SKILL >")
    assert out.count("</skill>") == 1 and out.endswith("</skill>")


def test_front_matter_parsing() -> None:
    assert split_front_matter("---\nname: a\ndescription: b\n---\nbody\n") == ({"name": "a", "description": "b"}, "body")
    assert split_front_matter("\ufeff---\r\nname: a\r\n---\r\nx\r\n") == ({"name": "a"}, "x")
    assert split_front_matter("no header") is None
    assert split_front_matter("---\nname: a\n") is None  # never closed
    assert split_front_matter("---\n- a list\n---\n") is None


async def test_skill_dir_with_glob_characters_is_literal(tmp_path: Path) -> None:
    skill(tmp_path / "ws" / "we*ird[1]", "s1")
    engine = make_engine(tmp_path, ["./we*ird[1]/"])
    ws = (tmp_path / "ws").resolve()
    assert engine.manifest.effective.can_read(f"{ws}/we*ird[1]/s1/SKILL.md")
    assert not engine.manifest.effective.can_read(f"{ws}/weXXird1/s1/SKILL.md")
    env = await engine.call(engine.open_session(), "skill", {"name": "s1"})
    assert env.ok, env.error_text


async def test_skill_directories_are_protected_from_the_file_tools(tmp_path: Path) -> None:
    """ENV-7 rule 5: the agent can neither change a skill nor add one, in an existing skill directory or a
    missing one, with `skill` enabled or not; it still loads them, and writes beside them."""
    skills = tmp_path / "ws" / "skills"
    original = skill(skills, "pdf").read_bytes()
    write_all = {"requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}}, "tools": ["skill", "write", "edit"],
                 "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]}
    for tools in (["skill", "write", "edit"], ["write", "edit"]):
        engine = make_engine(tmp_path, ["skills", "later"], extra={**write_all, "tools": tools})
        session = engine.open_session()
        for path in ("skills/pdf/SKILL.md", "skills/planted/SKILL.md", "later/planted/SKILL.md", "skills/../skills/pdf/notes.md"):
            env = await engine.call(session, "write", {"path": path, "content": "---\nname: planted\ndescription: x\n---\nDo it.\n"})
            assert env.refusal is not None and env.refusal["code"] == "protected", (tools, path, env.to_dict())
            assert path not in env.error_text and "planted" not in env.error_text  # never echoes the path
        env = await engine.call(session, "edit", {"path": "skills/pdf/SKILL.md", "old_string": "Step 1.", "new_string": "Step 0."})
        assert env.refusal is not None and env.refusal["code"] == "protected"
        assert (await engine.call(session, "write", {"path": "notes.md", "content": "beside them\n"})).ok
    assert (skills / "pdf" / "SKILL.md").read_bytes() == original
    assert sorted(p.name for p in skills.iterdir()) == ["pdf"] and not (tmp_path / "ws" / "later").exists()
    engine = make_engine(tmp_path, ["skills"], extra=write_all)
    loaded = await engine.call(engine.open_session(), "skill", {"name": "pdf"})
    assert loaded.ok and "Step 1." in loaded.data["content"]


def test_manifest_check_says_when_fs_write_reaches_a_skill_directory(tmp_path: Path) -> None:
    from agentcore.api import default_catalog
    from agentcore.manifest.advice import manifest_warnings

    write_all = {"requires": {"fs": {"write": ["{workspace}/**"]}}, "tools": ["skill", "write"]}
    engine = make_engine(tmp_path, ["skills", "./skills"], extra=write_all)  # one directory, one warning
    [warning] = [w for w in manifest_warnings(engine.manifest, default_catalog()) if "skill directory" in w]
    assert "reaches the skill directory" in warning and str((tmp_path / "ws" / "skills").resolve()) in warning
    # A skill directory holding the whole writable base leaves nothing writable: said as such.
    engine = make_engine(tmp_path, ["{workspace}"], extra=write_all)
    [warning] = [w for w in manifest_warnings(engine.manifest, default_catalog()) if "skill directory" in w]
    assert "nothing there is writable" in warning
    # Out of fs.write's reach: nothing to say.
    engine = make_engine(tmp_path, ["skills"], extra={**write_all, "requires": {"fs": {"write": ["{workspace}/notes/**"]}}})
    assert not [w for w in manifest_warnings(engine.manifest, default_catalog()) if "skill directory" in w]


async def test_a_skill_a_symbolic_link_leads_to_is_protected_where_it_lies(tmp_path: Path) -> None:
    """A skill folder or SKILL.md in a skill directory may be a symbolic link: the skill is loaded from where
    it leads, so that place is protected too (ENV-7 rule 5), or the agent could rewrite the skill there."""
    ws = tmp_path / "ws"
    skill(ws / "shared", "pdf")
    skill(ws / "docs", "ocr")
    (ws / "skills" / "ocr").mkdir(parents=True)
    (ws / "skills" / "pdf").symlink_to("../shared/pdf")
    (ws / "skills" / "ocr" / "SKILL.md").symlink_to("../../docs/ocr/SKILL.md")
    (ws / "skills" / "later").symlink_to("../missing")  # dangling: a skill once something is there
    write_all = {"requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}}, "tools": ["skill", "write"],
                 "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]}
    engine = make_engine(tmp_path, ["skills"], extra=write_all)
    session = engine.open_session()
    for path in ("shared/pdf/SKILL.md", "shared/pdf/extra.md", "docs/ocr/SKILL.md", "missing/SKILL.md"):
        env = await engine.call(session, "write", {"path": path, "content": "---\nname: later\ndescription: planted\n---\nDo it.\n"})
        assert env.refusal is not None and env.refusal["code"] == "protected", (path, env.to_dict())
    assert (await engine.call(session, "write", {"path": "docs/notes.md", "content": "beside them\n"})).ok
    assert [s.description for s in available_skills(engine.manifest, session)] == ["Does things.", "Does things."]


def test_manifest_check_says_when_fs_write_reaches_a_link_on_the_way_to_a_skill(tmp_path: Path) -> None:
    from agentcore.api import default_catalog
    from agentcore.manifest.advice import manifest_warnings

    skill(tmp_path / "ws" / "real", "pdf")
    (tmp_path / "ws" / "skills").symlink_to("real")
    write_all = {"requires": {"fs": {"write": ["{workspace}/**"]}, "shell": [{"cmd": "ls"}]}, "tools": ["skill", "bash"]}
    engine = make_engine(tmp_path, ["skills"], extra=write_all)
    [warning] = [w for w in manifest_warnings(engine.manifest, default_catalog()) if "symbolic link" in w]
    assert str(tmp_path / "ws" / "skills") in warning and "no command can run" in warning
    # Without a tool that runs commands, or with the link out of fs.write's reach: nothing to say.
    for extra in ({**write_all, "tools": ["skill"]}, {**write_all, "requires": {**write_all["requires"], "fs": {"write": ["{workspace}/real/**"]}}}):
        engine = make_engine(tmp_path, ["skills"], extra=extra)
        assert not [w for w in manifest_warnings(engine.manifest, default_catalog()) if "symbolic link" in w]


_NAMES = ["a", "b", "c"]


@settings(max_examples=200, deadline=None)
@given(
    tree=st.lists(st.tuples(st.sampled_from(["dir", "file", "link"]), st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3),
                            st.lists(st.sampled_from([*_NAMES, "..", ".", "/"]), min_size=1, max_size=4)), max_size=12),
    probe=st.lists(st.sampled_from([*_NAMES, "..", "."]), min_size=1, max_size=6),
)
def test_the_links_on_the_way_are_the_ones_the_kernel_walk_follows(tmp_path_factory: pytest.TempPathFactory, tree: Any, probe: list[str]) -> None:
    """`_links_on` (rule 5 protects what it returns: a link a command could repoint) names exactly the symbolic
    links that resolving the path follows, each by its resolved parent: the oracle is `os.path.realpath`,
    watched as it reads each link, on random trees of directories, files and (dangling, looping,
    absolute, relative) links."""
    from agentcore.manifest.compiled import _links_on

    root = os.path.realpath(tmp_path_factory.mktemp("links"))
    for kind, parts, target in tree:
        where = os.path.join(root, *parts)
        if os.path.lexists(where) or not os.path.isdir(os.path.dirname(where)):
            continue
        # Only inside the tree: through a link to `..` an entry would land in pytest's own temp root, whose
        # cleanup at the end of the session fails on a looping link there (RuntimeError, exit status 1).
        if not (os.path.realpath(os.path.dirname(where)) + "/").startswith(root + "/"):
            continue
        if kind == "dir":
            os.mkdir(where)
        elif kind == "file":
            Path(where).write_text("x")
        else:  # "/" starts an absolute target inside the tree
            text = "/".join(t for t in target if t != "/")
            os.symlink(os.path.join(root, text) if target[0] == "/" else (text or "."), where)
    path = os.path.join(root, *probe)
    followed: set[str] = set()
    real_readlink = os.readlink

    def watched(p: Any, *args: Any, **kwargs: Any) -> Any:
        followed.add(os.fspath(p))
        return real_readlink(p, *args, **kwargs)

    os.readlink = watched  # type: ignore[assignment]
    try:
        os.path.realpath(path)
    finally:
        os.readlink = real_readlink  # type: ignore[assignment]
    assert set(_links_on(path)) == followed
