"""`agentcore demo`: the pipeline on an embedded manifest, in a throwaway workspace.

Each step prints the call and the layer that decided it, so a new user sees
allow, a pinned manifest deny, a capability refusal, a schema error, the
watchdog and headless `ask` handling in one run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import anyio

from ..textdata import json_text

STEPS: list[tuple[str, str, dict[str, Any]]] = [
    ("read a source file", "read", {"path": "src/app.py"}),
    ("read .env (a manifest deny: pinned)", "read", {"path": ".env"}),
    ("read outside the workspace (capability)", "read", {"path": "/etc/hostname"}),
    ("escape with ../ (capability)", "read", {"path": "src/../../outside.txt"}),
    ("write outside src/ (capability: fs.write is src/** only)", "write", {"path": "README.md", "content": "x"}),
    ("write a git hook (protected path)", "write", {"path": "src/.git/hooks/pre-commit", "content": "x"}),
    ("edit a source file", "edit", {"path": "src/app.py", "old_string": "hello", "new_string": "hello, world"}),
    ("bad arguments (schema)", "read", {"path": 42}),
    ("glob for Python files", "glob", {"pattern": "**/*.py"}),
    ("grep for TODO (the denied .env is never searched)", "grep", {"pattern": "TODO|SECRET"}),
    ("bash ls (rule says ask; headless means deny)", "bash", {"command": "ls"}),
    ("bash rm -rf (not in the shell requirements)", "bash", {"command": "rm -rf src"}),
    ("bash git -c core.pager=... (allowed by the shell requirements; the watchdog refuses)", "bash",
     {"command": "git -c core.pager=./evil status"}),
]


async def _run(workspace: Path, manifest_path: Path) -> list[dict[str, Any]]:
    from ..api import Engine, load_manifest

    manifest = load_manifest(manifest_path, workspace=workspace)
    engine = Engine(manifest)
    session = engine.open_session(headless=True)
    out: list[dict[str, Any]] = []
    try:
        for title, tool, args in STEPS:
            env = await engine.call(session, tool, args)
            out.append({"step": title, "tool": tool, "args": args, "envelope": env.to_dict()})
    finally:
        session.close()
    return out


def run_demo(*, json_output: bool = False) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="agentcore-demo-"))
    try:
        ws = tmp / "workspace"
        (ws / "src").mkdir(parents=True)
        (ws / "src" / "app.py").write_text("print('hello')  # TODO: greet properly\n")
        (ws / ".env").write_text("SECRET=do-not-leak\n")
        (tmp / "outside.txt").write_text("outside the workspace\n")
        manifest_path = tmp / "demo-manifest.yaml"
        manifest_path.write_text(resources.files("agentcore").joinpath("defaults/demo-manifest.yaml").read_text())
        results = anyio.run(_run, ws, manifest_path)
        if json_output:
            print(json.dumps(results, indent=2))
            return 0
        print(f"agentcore demo — workspace {ws}, manifest {manifest_path.name} (headless)\n")
        for r in results:
            env = r["envelope"]
            meta = env["metadata"]
            if env["type"] == "output":
                verdict = "OUTPUT"
                detail = json_text(env["data"])
                if len(detail) > 110:
                    detail = detail[:107] + "..."
            else:
                ref = meta.get("refusal") or {}
                verdict = f"ERROR [{ref.get('layer', 'tool')}/{ref.get('code', meta.get('error_code', ''))}]"
                detail = env["error_text"]
            print(f"* {r['step']}\n    {r['tool']} {json.dumps(r['args'])}\n    -> {verdict} {detail}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
