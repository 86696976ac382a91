"""The README's Python example runs as written and prints what the README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using the engine from Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README lost its API example"
    return match.group(1)


def test_the_readme_api_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(_example(), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "TODO: write the README"
    assert lines[1].split() == ["call_started"]
    assert [ln.split() for ln in lines[2:-1]] == [
        ["stage_decided", stage, "allow"] for stage in ("schema", "capability", "permission", "watchdog", "execution")
    ]
    assert lines[-1].split() == ["call_finished"]
