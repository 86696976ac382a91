"""`manifest check` names the project directories an `.envrc` puts on PATH that `fs.write` reaches (SPEC, after
Table 5): outside ENV-7, so the warning names the write deny that keeps each one out of reach."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.manifest.envrc import MAX_ENVRC_BYTES, path_dirs

EXE = str(Path(sys.executable).parent / "agentcore")


def _dirs(tmp_path: Path, text: str) -> list[str]:
    envrc = tmp_path / ".envrc"
    envrc.write_text(text)
    base = os.path.realpath(tmp_path)
    return [os.path.relpath(d, base) if d.startswith(base) else d for d in path_dirs(os.fspath(tmp_path / ".envrc"))]


@pytest.mark.parametrize(("text", "expected"), [
    ("PATH_add bin\n", ["bin"]),
    ("PATH_add bin scripts  # two at once\n", ["bin", "scripts"]),
    ('path_add PATH "tools/bin"\n', ["tools/bin"]),
    ("path_add PYTHONPATH src\n", []),  # not PATH
    ("layout node\nlayout go\nlayout php\n", ["node_modules/.bin", "bin", "vendor/bin"]),
    ("layout python3\nuse flake\n", []),  # .direnv is protected (Table 5); flakes put the Nix store on PATH
    ('export PATH="$PWD/bin:$PATH"\n', ["bin"]),
    ("export PATH=${PWD}/a:$(pwd)/b:$PATH\n", ["a", "b"]),
    ("PATH=./local/bin:$PATH\n", ["local/bin"]),
    ("export PATH=/opt/tool/bin:$PATH\n", ["/opt/tool/bin"]),
    ("if has nix; then PATH_add bin; fi\n", ["bin"]),
    ("dotenv && PATH_add one; PATH_add two\n", ["one", "two"]),
    ('PATH_add "$HOME/bin"\nPATH_add ~/bin\nPATH_add "$(npm bin)"\nPATH_add `pwd`/x\n', []),  # not ours to guess
    ("# PATH_add commented\necho PATH_add bin\n", []),
    ("PATH_add 'unterminated\nPATH_add ok\n", ["ok"]),
    ("PATH_add bin\nPATH_add ./bin\n", ["bin"]),
])
def test_the_common_forms_are_read(tmp_path: Path, text: str, expected: list[str]) -> None:
    assert _dirs(tmp_path, text) == expected


def test_a_file_that_cannot_be_read_or_is_too_large_names_nothing(tmp_path: Path) -> None:
    assert path_dirs(os.fspath(tmp_path / "missing")) == []
    assert _dirs(tmp_path, "PATH_add bin\n" + "#" * MAX_ENVRC_BYTES) == []


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("PATH_add layout node export=$(){}`'\";&|#\n\\ ~./bin:")), max_size=80))
def test_any_text_is_read_without_failing_and_names_absolute_directories(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    d = tmp_path_factory.mktemp("envrc")
    (d / ".envrc").write_text(text)
    for found in path_dirs(os.fspath(d / ".envrc")):
        assert os.path.isabs(found) and os.path.normpath(found) == found and "\x01" not in found


MANIFEST = """\
name: envrc
tools: [bash]
requires:
  fs: {read: ["{workspace}/**"], write: ["{workspace}/**"]}
  shell: [{cmd: ls}]
rules:
"""


def _check(tmp_path: Path, rules: str = "", envrc: str = "PATH_add bin\nlayout node\n") -> list[str]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / ".envrc").write_text(envrc)
    m = tmp_path / "m.yaml"
    m.write_text(MANIFEST + (rules or "  []\n"))
    done = subprocess.run([EXE, "manifest", "check", str(m), "--workspace", str(ws)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.splitlines() if "on PATH" in line]


def test_manifest_check_names_each_directory_and_the_rule_that_keeps_it_out_of_reach(tmp_path: Path) -> None:
    lines = _check(tmp_path)
    real = os.path.realpath(tmp_path / "ws")
    assert lines == [
        f"warning: {real}/.envrc puts {real}/bin on PATH and requires.fs.write reaches it: a program the agent writes there "
        'runs when you type its name in that project (outside ENV-7); add the rule {permission: fs.write, pattern: '
        '"{workspace}/bin/**", action: deny} to keep it out of reach',
        f"warning: {real}/.envrc puts {real}/node_modules/.bin on PATH and requires.fs.write reaches it: a program the agent "
        'writes there runs when you type its name in that project (outside ENV-7); add the rule {permission: fs.write, '
        'pattern: "{workspace}/node_modules/.bin/**", action: deny} to keep it out of reach',
    ]


def test_the_rule_it_names_silences_it(tmp_path: Path) -> None:
    rules = ('  - {permission: fs.write, pattern: "{workspace}/bin/**", action: deny}\n'
             '  - {permission: fs.write, pattern: "{workspace}/node_modules/.bin/**", action: deny}\n')
    assert _check(tmp_path, rules) == []


def test_an_envrc_above_the_workspace_counts_and_directories_out_of_reach_do_not(tmp_path: Path) -> None:
    (tmp_path / ".envrc").write_text("PATH_add ws/tools\nPATH_add elsewhere\n")
    lines = _check(tmp_path, envrc="export PATH=/usr/local/bin:$PATH\n")
    assert len(lines) == 1 and "/ws/tools on PATH" in lines[0] and '"{workspace}/tools/**"' in lines[0], lines


def test_manifest_check_warns_when_fs_write_reaches_the_home_directory(tmp_path: Path) -> None:
    """Table 5 protects what shells, editors and tool managers load from the home directory only as far as it
    lists them: a grant on the home directory (or above it) is named, one on a project inside it is not."""
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home)}

    def warnings(write: str) -> list[str]:
        m = tmp_path / "m.yaml"
        m.write_text(f'name: h\ntools: [write]\nrequires: {{fs: {{write: ["{write}"]}}}}\n')
        done = subprocess.run([EXE, "manifest", "check", str(m), "--workspace", str(home / "project")],
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        return [line for line in done.stderr.splitlines() if "home directory" in line]

    real = os.path.realpath(home)
    for reaching in (f"{home}/**", f"{tmp_path}/**"):
        [line] = warnings(reaching)
        assert f"fs.write reaches your home directory ({real})" in line and "grant the directories the agent works in" in line
    assert warnings("{workspace}/**") == []
