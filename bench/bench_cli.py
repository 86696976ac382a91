"""`agentcore call` cold start, against `python -c pass` as the anchor.

Measured side: the console script running one `read` call headless (a fresh
process each time: interpreter start, imports, manifest load, registry build,
the call, JSON out). Anchors, interleaved in the same run: `python -c pass`
(interpreter floor) and `python -c "import <the modules the call needs>"`
(import floor), so the ratio splits into "imports" and "our own work", and
`python -c "import <the third-party packages the call needs>"` (dependency
floor: yaml, anyio with its asyncio backend, argparse, wcmatch), which no
change of ours can go below. jsonschema is not among them: a valid call is
proven valid by `pipeline.fastschema` and never imports it (before that, its
import cost the call 35-40 ms). Nor is pydantic: a canonical manifest is
read by `manifest.spec` (before that, pydantic and the models cost the call
70-80 ms). Target (issue 14): start to envelope <= 150 ms. `--profile` prints the
slowest imports (`-X importtime`) to stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, interleaved, median, parse_args, result  # noqa: E402

NAME = "cli"
# What `agentcore call` imports on its way to the envelope: engine, manifest, registry, default
# watchdog and every locked tool module (the registry instantiates all thirteen).
IMPORTS = (
    "import agentcore.cli.main, agentcore.api, agentcore.watchdog.default, agentcore.tools.read, anyio._backends._asyncio"
)
DEPENDENCIES = "import yaml, anyio, argparse, wcmatch.fnmatch, wcmatch.glob; import anyio._backends._asyncio"


def _run(argv: list[str]) -> None:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, check=False)


def import_profile(top: int = 12) -> dict[str, list[dict[str, Any]]]:
    """Top-level packages (no dot in the name) by cumulative import time, from `-X importtime`.

    Each package is charged where it is first imported, so the figures do not
    double count shared dependencies; agentcore's own modules appear by package.
    """
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", IMPORTS], capture_output=True, text=True, check=False)
    rows: dict[str, int] = {}
    own: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        # "import time:  self_us |  cumulative_us | <indent>module"
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        self_us, cum_us, name = line[len("import time:"):].split("|")
        if not cum_us.strip().isdigit():
            continue  # the header line
        key = name.strip()
        if "." not in key:
            rows[key] = max(rows.get(key, 0), int(cum_us))
        if key.startswith("agentcore"):
            own[key] = int(self_us)

    def table(d: dict[str, int], label: str) -> list[dict[str, Any]]:
        return [{"module": k, label: round(v / 1000, 1)} for k, v in sorted(d.items(), key=lambda kv: kv[1], reverse=True)[:top]]

    return {"packages_cumulative": table(rows, "cumulative_ms"), "agentcore_modules_self": table(own, "self_ms")}


def main(quick: bool = False, profile: bool = False) -> dict[str, Any]:
    rounds = 2 if quick else 12
    exe = Path(sys.executable).parent / "agentcore"
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "a.txt").write_text("hello\n")
        m = ws / "m.yaml"
        m.write_text('name: b\ntools: [read]\nrequires: {fs: {read: ["{workspace}/**"]}}\nrules: [{permission: "*", pattern: "*", action: allow}]\n')
        call_argv = [str(exe), "call", "--manifest", str(m), "--workspace", str(ws), "--headless", "read", '{"path": "a.txt"}']
        check = subprocess.run(call_argv, capture_output=True, text=True, check=False)
        try:
            envelope_type = json.loads(check.stdout).get("type")
        except (json.JSONDecodeError, AttributeError):
            envelope_type = None
        sides = {
            "python_pass": [sys.executable, "-c", "pass"],
            "imports_only": [sys.executable, "-c", IMPORTS],
            "dependency_floor": [sys.executable, "-c", DEPENDENCIES],
            "agentcore_call": call_argv,
            "agentcore_help": [str(exe), "--help"],
        }
        samples = interleaved({k: (lambda a=v: _run(a)) for k, v in sides.items()}, rounds)
    med = {k: median(v) for k, v in samples.items()}
    details: dict[str, Any] = {
        "rounds": rounds,
        **{f"{k}_s": round(v, 4) for k, v in med.items()},
        "call_exit_code": check.returncode,
        "call_envelope_type": envelope_type,
        "own_work_s": round(med["agentcore_call"] - med["imports_only"], 4),
        "slowest_imports": import_profile(),
    }
    if profile:
        sys.stderr.write(json.dumps(details["slowest_imports"], indent=1) + "\n")
    py = med["python_pass"]
    figures = [
        figure("cli: `agentcore call` cold start", med["agentcore_call"], "s", anchor="python -c pass", anchor_value=py,
               target="<= 0.15 s", met=med["agentcore_call"] <= 0.15),
        figure("cli: dependency floor (third-party imports alone)", med["dependency_floor"], "s", anchor="python -c pass", anchor_value=py),
        figure("cli: imports the call needs", med["imports_only"], "s", anchor="python -c pass", anchor_value=py),
        figure("cli: `agentcore --help`", med["agentcore_help"], "s", anchor="python -c pass", anchor_value=py),
    ]
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick, profile=a.profile), a.results_dir)
