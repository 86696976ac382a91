"""`grep` and `glob` through the pipeline vs raw ripgrep on a large tree.

Measured side: `Engine.call(session, "grep"|"glob", ...)` on a generated,
deterministic tree (default 20,000 files in 400 packages, ~160 MB; page cache
warmed). Anchors, interleaved in the same run, each a subprocess in the tree:

- plain:            `rg -e PAT .` / `rg --files` (rg defaults: ignore files, no hidden files, parallel, unsorted)
- same flags:       exactly the rg flags the tools pass (`_rg.list_files`, `grep.GrepTool.execute`):
                    `--hidden --no-ignore --glob !.git --null --no-config ...`, still unsorted
- same flags+sort:  the above plus `--sort path`, i.e. the same ordering guarantee as the
                    tools' sorted output (rg goes single-threaded when sorting)

The tools do NOT pass `--sort path` themselves: they list files, filter them
by scope and rules in Python, sort by UTF-8 bytes (FILE-16) and, for grep,
search the sorted list in batches with `-j1`.

Targets: grep <= 1.15x and glob <= 1.2x the anchor (reported against each anchor).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, interleaved, median, parse_args, profile_to_stderr, result  # noqa: E402
from agentcore.api import (
    Engine,  # noqa: E402
    load_manifest,  # noqa: E402
)
from agentcore.runtime import ProcessSurface  # noqa: E402

NAME = "search"
NEEDLE = "NEEDLE_marker"
GLOB = "**/*.py"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()
TARGETS = {"grep": 1.15, "glob": 1.2}


def make_tree(root: Path, files: int, dirs: int, size: int, seed: int = 7) -> int:
    """Deterministic tree; returns the number of needle lines planted.

    Lines come from a fixed pool (fast to generate); about one line in 2,000
    carries the needle, so grep's matches are few and its cost is the scan.
    """
    rnd = random.Random(seed)
    pool = [" ".join(rnd.choice(WORDS) for _ in range(10)) for _ in range(4096)]
    needles = 0
    for d in range(dirs):
        (root / f"pkg{d:03d}" / "sub").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        d = root / f"pkg{i % dirs:03d}" / ("sub" if i % 3 == 0 else "")
        lines: list[str] = []
        n = 0
        while n < size:
            line = pool[rnd.randrange(len(pool))]
            if rnd.random() < 0.0005:
                line += " " + NEEDLE
                needles += 1
            lines.append(line)
            n += len(line) + 1
        (d / f"mod{i:05d}.py").write_text("\n".join(lines) + "\n")
    # A few dot-files so --hidden is not a no-op (they hold no needle).
    for d in range(0, dirs, 50):
        (root / f"pkg{d:03d}" / ".hidden.cfg").write_text("x = 1\n")
    return needles


def anchors(rg: str) -> dict[str, dict[str, list[str]]]:
    grep_flags = [
        rg, "--no-heading", "--with-filename", "--line-number", "--null", "--color", "never", "--no-messages",
        "--no-config", "--hidden", "--no-ignore", "--max-columns", "2000", "--max-columns-preview", "--glob", "!.git",
    ]
    grep_tail = ["-e", NEEDLE, "--", "."]
    # `--glob *.py` is the basename prefilter glob passes for `**/*.py` (glob.basename_prefilter).
    files_flags = [rg, "--files", "--null", "--hidden", "--no-ignore", "--no-messages", "--no-config", "--glob", "*.py", "--glob", "!.git"]
    files_tail = ["--", "."]
    sort = ["--sort", "path"]
    return {
        "grep": {
            "plain": [rg, "--no-heading", "--line-number", "-e", NEEDLE, "."],
            "same_flags": grep_flags + grep_tail,
            "same_flags_sorted": grep_flags + sort + grep_tail,
        },
        "glob": {
            "plain": [rg, "--files"],
            "same_flags": files_flags + files_tail,
            "same_flags_sorted": files_flags + sort + files_tail,
        },
    }


def main(quick: bool = False, profile: bool = False) -> dict[str, Any]:
    files, dirs, size, rounds = (600, 20, 8000, 3) if quick else (20000, 400, 8000, 9)
    rg = ProcessSurface.rg_binary()
    figures: list[dict[str, Any]] = []
    details: dict[str, Any] = {"anchor_note": "the tools sort in Python; they do not pass --sort path to rg"}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        t0 = time.perf_counter()
        needles = make_tree(ws, files, dirs, size)
        details["tree"] = {
            "files": files,
            "bytes": sum(f.stat().st_size for f in ws.rglob("*") if f.is_file()),
            "needle_lines": needles,
            "build_s": round(time.perf_counter() - t0, 1),
        }
        manifest = Path(tmp) / "m.json"
        manifest.write_text(json.dumps({
            "name": "bench-search",
            "tools": ["grep", "glob"],
            "requires": {"fs": {"read": ["{workspace}/**"]}},
            "rules": [{"permission": "*", "pattern": "*", "action": "allow"}],
        }))
        engine = Engine(load_manifest(manifest, workspace=ws))
        calls = {"grep": {"pattern": NEEDLE}, "glob": {"pattern": GLOB}}
        last: dict[str, Any] = {}
        # One session per tool for the whole run, as an agent would have; closed (sidecars removed) at the end.
        sessions = {tool: engine.open_session(headless=True) for tool in calls}

        def pipeline(tool: str) -> None:
            async def go() -> None:
                env = await engine.call(sessions[tool], tool, calls[tool])
                if env.type != "output":
                    raise RuntimeError(f"{tool} was refused: {env.to_dict()}")
                last[tool] = env.data.get("total")
            anyio.run(go)

        def raw(argv: list[str]) -> None:
            subprocess.run(argv, cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

        try:
            raw([rg, "--files", "--hidden", "--no-ignore"])  # warm the page cache and the binary
            raw([rg, "-e", NEEDLE, "--hidden", "--no-ignore", "."])
            for tool, sides in anchors(rg).items():
                pipeline(tool)  # warm imports and caches
                funcs = {"pipeline": (lambda t=tool: pipeline(t))}
                funcs |= {name: (lambda a=argv: raw(a)) for name, argv in sides.items()}
                samples = interleaved(funcs, rounds)
                med = {k: median(v) for k, v in samples.items()}
                expected = needles if tool == "grep" else files
                details[tool] = {
                    "pipeline_s": round(med["pipeline"], 4),
                    **{f"anchor_{k}_s": round(med[k], 4) for k in sides},
                    "argv": {k: " ".join(v[1:]) for k, v in sides.items()},
                    "pipeline_total": last.get(tool),
                    "expected_total": expected,
                }
                if last.get(tool) != expected:
                    details[tool]["warning"] = "the pipeline's result count differs from the tree's"
                target = TARGETS[tool]
                for k, label in (("plain", "plain"), ("same_flags", "same flags"), ("same_flags_sorted", "same flags + --sort path")):
                    ratio = med["pipeline"] / med[k]
                    figures.append(figure(
                        f"{tool} via pipeline vs rg ({label})",
                        med["pipeline"],
                        "s",
                        anchor=f"rg {label}",
                        anchor_value=med[k],
                        target=f"<= {target}x",
                        met=ratio <= target,
                    ))
            if profile:
                for tool in calls:
                    profile_to_stderr(f"{tool} through the pipeline", lambda t=tool: pipeline(t))
        finally:
            for s in sessions.values():
                s.close()
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick, profile=a.profile), a.results_dir)
