"""The README works as written: the tour, command by command, and the two opening commands in a fresh venv.

The tour test runs the README's own text: each `bash` block of the tour is run
by bash in a fresh directory (with this venv on PATH, as `source
.venv/bin/activate` would put it), and each `$ command` of a `console` block is
run and its output compared with the lines shown under it (paths as
`/home/me`, JSON compared as JSON without `duration_ms`).

The fresh-venv test (marker `readme`: it installs the project into a new venv,
which takes a minute or two; `.ci/run` runs it) copies the repository's files
into a new directory and runs the README's first two commands there exactly as
written, the test command with the suite narrowed through PYTEST_ADDOPTS.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SHOWN_HOME = "/home/me"


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", text, flags=re.S)]


def _commands(console: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each `$ ` line of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in console.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def _same_json(expected: str, actual: str) -> bool:
    def strip(doc: Any) -> Any:
        doc.get("metadata", {}).pop("duration_ms", None)
        return doc

    return strip(json.loads(expected)) == strip(json.loads(actual))


def _env(bin_dir: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    """The five-minute tour, in a fresh directory, with the shown outputs."""
    tour = _section("A five-minute tour")
    blocks = _blocks(tour)
    env = _env(Path(sys.executable).parent)
    here = tmp_path / "me"
    here.mkdir()
    checked = 0
    for kind, body in blocks:
        if kind == "bash":
            script = "\n".join(line for line in body.splitlines() if not line.startswith("source .venv/"))
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=here, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        elif kind == "console":
            for command, expected in _commands(body):
                done = subprocess.run(["bash", "-c", command], cwd=here, env=env, capture_output=True, text=True, timeout=120)
                assert done.returncode == 0, (command, done.stderr)
                actual = done.stdout.replace(os.fspath(here), SHOWN_HOME).replace(os.fspath(tmp_path), "/home")
                if expected and expected[0].startswith("{"):
                    assert _same_json("".join(expected), actual), (command, actual)
                else:
                    assert actual.splitlines() == expected, (command, actual)
                checked += 1
    assert checked >= 6
    # The tour's manifest grants nothing that goes unused.
    strict = subprocess.run(["agentcore", "manifest", "check", "demo.yaml", "--workspace", "proj", "--strict"],
                            cwd=here, env=env, capture_output=True, text=True, timeout=60)
    assert strict.returncode == 0 and strict.stderr == "", strict.stderr


def _opening_commands() -> list[str]:
    head = README[: README.index("## ")]
    commands = [body.strip() for kind, body in _blocks(head) if kind == "bash"]
    assert len(commands) == 2 and "pytest" in commands[1]
    return commands


def test_the_readme_opens_with_the_two_commands_ci_runs() -> None:
    main_job, tests = _opening_commands()
    assert main_job.startswith("python3 -m venv .venv && .venv/bin/pip install")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.replace(".venv/bin/pytest", ".venv/bin/pytest -p no:cacheprovider") in ci


@pytest.mark.readme
def test_the_opening_commands_work_in_a_fresh_venv(tmp_path: Path) -> None:
    """A new directory with the repository's files and no venv: both commands, exactly as the README writes them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    copy = tmp_path / "agentcore"
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(os.fspath(ROOT)))
    env["XDG_DATA_HOME"] = os.fspath(tmp_path / "data")
    main_job, tests = _opening_commands()
    done = subprocess.run(["bash", "-c", main_job], cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "notes/todo-summary.md" in done.stdout and "refused by watchdog" in done.stderr
    narrowed = {**env, "PYTEST_ADDOPTS": "-p no:cacheprovider tests/test_readme_api.py tests/test_cli_newcomer.py -k 'version or tools_lists'"}
    done = subprocess.run(["bash", "-c", tests], cwd=copy, env=narrowed, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout), done.stdout[-2000:]
