"""Per-call cost of protecting a 20,000-entry workspace at any depth (SPEC ENV-7, ENV-14).

Every `bash` call walks the writable roots for protected entries before the
command (`guard.observe`, incremental: a directory is listed again only when
its own ctime changed) and sweeps them after it (`guard.sweep`); `callguard`
adds reading the repositories' configuration. Measured, interleaved, against
the anchor: bare bwrap running `true` with the exact argv of such a call.

Sides:

- `bare_bwrap`: the anchor (`subprocess.run` of the call's command line);
- `observe` and `sweep`: the walk before and the sweep after a command that
  changed nothing (what every call pays);
- `prepare`: observe plus the repositories' configuration and git environment;
- `pipeline`: `Engine.call(session, "bash", {"command": "true"})` end to end,
  with its own anchor `bare_bwrap` (same argv), on a settled tree (no
  directory changed since the previous call, as in a repository nobody is
  editing);
- `pipeline_changed`, measured after the others: the same call right after a
  file was made and removed in a directory near the top. That directory is
  listed again; the hard links the walk found are reused, since the tree's
  names are what they were (before revision 3 of ENV-13 a changed ctime made
  this call lstat every regular file again: 77 ms against 35 ms);
- `sweep_new_tree`: the sweep after a command that made a new 2,000-entry
  directory tree (an install step): the new tree is walked whole.

Also reported: the first (cold) walk of the tree, paid once per process.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, interleaved, median, p90, parse_args, result, wait_until_settled  # noqa: E402
from agentcore.api import Engine, load_manifest  # noqa: E402
from agentcore.environments import callguard, guard, percall, seccomp  # noqa: E402
from agentcore.environments.bwrap import SECCOMP_FD_SHOWN, with_filter_fd  # noqa: E402

NAME = "guard"
ARGS = {"command": "true"}


def make_tree(root: Path, entries: int, seed: int = 7) -> dict[str, int]:
    """`entries` files and directories (about 1 in 8 a directory, at most 10 deep), a repository at the
    top, and protected entries below it: the shape of a mid-sized project."""
    rnd = random.Random(seed)
    dirs = [root]
    made = {"files": 0, "dirs": 0}
    for n in range(entries):
        d = rnd.choice(dirs)
        if rnd.random() < 0.12 and len(d.relative_to(root).parts) < 10:
            p = d / f"d{n}"
            p.mkdir()
            dirs.append(p)
            made["dirs"] += 1
        else:
            (d / f"f{n}.txt").write_text("x\n")
            made["files"] += 1
    subprocess.run(["git", "init", "-q", os.fspath(root)], check=True, env={"PATH": "/usr/bin:/bin", "HOME": os.fspath(root)})
    for d in rnd.sample(dirs[1:], min(5, len(dirs) - 1)):
        (d / ".envrc").write_text("export X=1\n")
    (dirs[-1] / ".github" / "workflows").mkdir(parents=True)
    (dirs[-1] / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    return made


def manifest_doc() -> dict[str, Any]:
    return {
        "name": "bench-guard", "tools": ["bash"], "environment": "bwrap",
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}, "shell": [{"cmd": "true"}]},
        "rules": [{"permission": "bash", "pattern": "true", "action": "allow"}],
    }


def bare(argv: list[str]) -> None:
    fd = seccomp.filter_fd() if SECCOMP_FD_SHOWN in argv else None
    try:
        done = subprocess.run(with_filter_fd(argv, fd) if fd is not None else argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env={}, cwd="/", start_new_session=True, pass_fds=(fd,) if fd is not None else ())
    finally:
        if fd is not None:
            os.close(fd)
    if done.returncode != 0:
        raise RuntimeError(f"bare run failed: {done.stdout[-300:]!r}")


def main(quick: bool = False, profile: bool = False) -> dict[str, Any]:
    entries = 2_000 if quick else 20_000
    rounds = 5 if quick else 40
    details: dict[str, Any] = {"entries": entries, "rounds": rounds}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp_s:
        tmp = Path(tmp_s)
        ws = tmp / "ws"
        ws.mkdir()
        details["tree"] = make_tree(ws, entries)
        wait_until_settled(ws)
        mpath = tmp / "m.json"
        mpath.write_text(json.dumps(manifest_doc()))
        engine = Engine(load_manifest(mpath, workspace=ws))
        tool = engine.catalog.get("bash")
        env, base_policy = engine.environment()
        env.verify(base_policy)

        cold = []
        for _ in range(3 if quick else 5):
            guard.forget_all()
            t0 = time.perf_counter()
            guard.observe([os.fspath(ws)])
            cold.append(time.perf_counter() - t0)
        prepared = percall.prepare(base_policy, engine.manifest)
        argv = env.command_line(tool.command_argv(ARGS), prepared.policy)  # type: ignore[attr-defined]
        details["bare_bwrap_argc"] = len(argv)
        details["protected_entries"] = sum(1 for _ in prepared.observation.entries())
        details["directories"] = sum(len(t.dirs) for t in prepared.observation.trees)

        obs_box: list[guard.Observation] = []

        def observe() -> None:
            obs_box[:] = [guard.observe([os.fspath(ws)])]

        def sweep() -> None:
            guard.sweep(obs_box[0] if obs_box else guard.observe([os.fspath(ws)]))

        session = engine.open_session(headless=True)

        def pipeline() -> None:
            envl = anyio.run(engine.call, session, "bash", ARGS)
            if envl.type != "output" or envl.data.get("exit_code") != 0:
                raise RuntimeError(f"pipeline call failed: {envl.to_dict()}")

        sides = {
            "bare_bwrap": lambda: bare(argv),
            "observe": observe,
            "sweep": sweep,
            "prepare": lambda: callguard.prepare(base_policy, engine.manifest.workspace_roots),
            "pipeline": pipeline,
        }
        interleaved(sides, 2)  # warm
        samples = interleaved(sides, rounds)
        # A directory one level down: within the walk's depth, as most of a project's directories are.
        changed = next(p for p in sorted(ws.iterdir()) if p.is_dir() and p.name != ".git")

        def pipeline_changed() -> None:
            (changed / "touched").touch()
            (changed / "touched").unlink()
            pipeline()

        samples |= interleaved({"bare_bwrap_changed": lambda: bare(argv), "pipeline_changed": pipeline_changed}, max(3, rounds // 4))
        session.close()

        new_tree: list[float] = []
        for r in range(3 if quick else 8):
            before = guard.observe([os.fspath(ws)])
            src = ws / f"installed{r}"
            make_tree_plain(src, 2_000 if not quick else 500, seed=r)
            t0 = time.perf_counter()
            guard.sweep(before)
            new_tree.append(time.perf_counter() - t0)
            shutil.rmtree(src)
        samples["sweep_new_tree"] = new_tree

    med = {k: median(v) * 1000 for k, v in samples.items()}
    details |= {f"{k}_ms": {"median": round(v, 3), "p90": round(p90(samples[k]) * 1000, 3)} for k, v in med.items()}
    details["cold_observe_ms"] = round(median(cold) * 1000, 3)
    anchor = med["bare_bwrap"]
    per_call = med["observe"] + med["sweep"]
    details["guard_per_call_ms"] = round(per_call, 3)
    figures = [
        figure(f"walk + sweep per bash call, {entries} entries (nothing changed)", per_call, "ms", anchor="bare bwrap `true`, same argv", anchor_value=anchor),
        figure(f"prepare (walk + repository configuration + git environment), {entries} entries", med["prepare"], "ms",
               anchor="bare bwrap `true`, same argv", anchor_value=anchor),
        figure(f"bash `true` via pipeline, {entries}-entry workspace", med["pipeline"], "ms", anchor="bare bwrap `true`, same argv", anchor_value=anchor),
        figure(f"bash `true` via pipeline, {entries}-entry workspace, a directory changed since the last call", med["pipeline_changed"], "ms",
               anchor="bare bwrap `true`, same argv", anchor_value=med["bare_bwrap_changed"]),
        figure("sweep after a command made a new 2,000-entry tree" if not quick else "sweep after a new 500-entry tree", med["sweep_new_tree"], "ms",
               anchor="bare bwrap `true`, same argv", anchor_value=anchor),
        figure(f"first walk of the tree (cold, once per process), {entries} entries", details["cold_observe_ms"], "ms",
               anchor="bare bwrap `true`, same argv", anchor_value=anchor),
    ]
    return result(NAME, quick=quick, figures=figures, details=details)


def make_tree_plain(root: Path, entries: int, seed: int) -> None:
    """A new tree as an install step leaves it: plain files and directories, a few protected names."""
    rnd = random.Random(seed)
    root.mkdir()
    dirs = [root]
    for n in range(entries):
        d = rnd.choice(dirs)
        if rnd.random() < 0.15:
            p = d / f"p{n}"
            p.mkdir()
            dirs.append(p)
        else:
            (d / f"m{n}.js").write_text("x\n")
    (dirs[-1] / ".github").mkdir()


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick, profile=a.profile), a.results_dir)
