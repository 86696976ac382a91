"""Per-call overhead of the `bash` tool through the pipeline, in the bwrap sandbox.

Measured side: `Engine.call(session, "bash", {"command": "true"})` with a
manifest whose shell requirements allow `{cmd: true}`, an allow rule for it,
and environment `bwrap`. Anchors, interleaved in the same run (>= 50 each):

- bare bwrap: the exact argv the environment would exec for this call
  (`env.command_line(tool.command_argv(args), policy)` with `(env, policy) =
  engine.environment()`), run with `subprocess.run` — same flags, same mounts;
- bare `/bin/true` via `subprocess.run` (process-spawn floor).

Target: pipeline <= 1.3x bare bwrap.

Two manifests, measured side by side: `rw` grants fs.write on the workspace
(a coding agent's manifest: the workspace is a write root, so protected paths
such as .git get read-only mounts and missing ones get placeholders) and `ro`
grants fs.read only. bwrap creates the placeholders in the workspace; the
pipeline removes its own after each run (inside its timing: it is part of the
call), and this benchmark removes those of the bare runs outside the timed
region (reported as bare_placeholder_cleanup_ms) so every side starts from the
same tree.

Also the per-call walk (`environments/calltree.scan`) on a writable tree of
20,000 entries (2,000 quick), which since revision 3 looks for hard links
(ENV-13): `fresh` lists every directory and lstats every regular file (the
first walk), `reused` is a walk of the same unchanged tree, which lstats
each directory and reuses its listing and the links found. Anchors in the same run: the same tree walked by a
bare `os.scandir` loop without lstat (what the walk cost before), and
`find -type f -links +1` (the same question asked by a C program).

Last, `bash true` in a read-write workspace that holds a virtual environment
as uv makes one (1,500 packages, every module a hard link into a cache
outside the workspace, a `.pth` file per 100 packages), against bare bwrap
with the same argv: the environment is one read-only mount, walked neither
for hard links nor for start-up files. Measured when that changed, on this
tree: 188 ms per call before (57 ms without the hard links), 8.1-8.9 ms
after, against 5.9-6.3 ms bare.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, envelope_summary, figure, interleaved, median, p90, parse_args, profile_to_stderr, result, wait_until_settled  # noqa: E402
from agentcore.api import Engine, load_manifest  # noqa: E402
from agentcore.environments import calltree, seccomp  # noqa: E402
from agentcore.environments.bwrap import SECCOMP_FD_SHOWN, with_filter_fd  # noqa: E402

NAME = "bash"
ARGS = {"command": "true"}
TARGET = 1.3
# rw: fs.write on the workspace (a coding agent's manifest: write root, protected-path mounts and
# placeholders); ro: fs.read only (the workspace is bound read-only, no placeholders).
VARIANTS = {"rw": True, "ro": False}


def manifest_doc(*, writable: bool, hosts: list[str] | None = None) -> dict[str, Any]:
    fs: dict[str, list[str]] = {"read": ["{workspace}/**"]}
    if writable:
        fs["write"] = ["{workspace}/**"]
    requires: dict[str, Any] = {"fs": fs, "shell": [{"cmd": "true"}]}
    if hosts:
        requires["net"] = {"hosts": hosts}
    return {
        "name": "bench-bash",
        "tools": ["bash"],
        "environment": "bwrap",
        "requires": requires,
        "rules": [{"permission": "bash", "pattern": "true", "action": "allow"}],
    }


async def _network_cost(tmp: Path, ws: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds per `bash true` call with net.hosts (per-call proxy, socket pair, relay) and without, interleaved.

    No bare-bwrap anchor here: proxy mode needs the host side of the channel,
    which only the pipeline provides. Both sides use a read-only workspace.
    """
    engines = {}
    for name, hosts in (("no_net", None), ("net", ["example.com"])):
        mpath = tmp / f"{name}.json"
        mpath.write_text(json.dumps(manifest_doc(writable=False, hosts=hosts)))
        engines[name] = Engine(load_manifest(mpath, workspace=ws))
    sessions = {k: e.open_session(headless=True) for k, e in engines.items()}
    samples: dict[str, list[float]] = {k: [] for k in engines}
    try:
        for r in range(rounds):
            for name in (["net", "no_net"] if r % 2 else ["no_net", "net"]):
                t0 = time.perf_counter()
                env = await engines[name].call(sessions[name], "bash", ARGS)
                samples[name].append(time.perf_counter() - t0)
                if env.type != "output":
                    raise RuntimeError(f"{name}: {envelope_summary(env)}")
    finally:
        for s in sessions.values():
            s.close()
    return samples


def _restore(ws: Path, before: set[str]) -> None:
    """Remove what a bare bwrap run left in the workspace (its mount-point placeholders)."""
    for name in set(os.listdir(ws)) - before:
        p = ws / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _tree(root: Path, dirs: int, files_per_dir: int) -> int:
    """dirs x files_per_dir empty files two levels deep, ten of them hard links to a store outside; the entry count."""
    store = root.parent / "store"
    store.mkdir()
    for d in range(dirs):
        sub = root / f"g{d // 20}" / f"d{d}"
        sub.mkdir(parents=True)
        for f in range(files_per_dir):
            (sub / f"f{f}.txt").touch()
    for i in range(10):
        (store / f"s{i}").touch()
        os.link(store / f"s{i}", root / "g0" / "d0" / f"link{i}")
    wait_until_settled(root)  # a tree nobody touched for a moment: its walks may be reused
    return sum(len(names) + len(subdirs) for _, subdirs, names in os.walk(root))


def _bare_walk(root: str) -> int:
    """The walk without lstat: the per-call walk's cost before it looked for hard links."""
    stack, n = [root], 0
    while stack:
        for entry in os.scandir(stack.pop()):
            n += 1
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return n


def walk_cost(quick: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    dirs = 20 if quick else 200
    with tempfile.TemporaryDirectory() as tmp_s:
        root = Path(tmp_s) / "ws"
        root.mkdir()
        entries = _tree(root, dirs, 99)
        found = calltree.scan([root])
        assert len(found.linked) == 10, found.linked  # the walk really finds the links it pays for

        def fresh() -> None:
            calltree._cache.clear()
            calltree._listings.clear()
            calltree.scan([root])

        sides = {
            "fresh": fresh,
            "reused": lambda: calltree.scan([root]),
            "bare_walk": lambda: _bare_walk(os.fspath(root)),
            "find": lambda: subprocess.run(["find", os.fspath(root), "-type", "f", "-links", "+1"], capture_output=True, check=True),
        }
        samples = interleaved(sides, 5 if quick else 30)
    med = {k: median(v) * 1000 for k, v in samples.items()}
    fresh_label = f"per-call walk, fresh, writable tree of {entries} entries (lstat per file, ENV-13)"
    reused_label = f"per-call walk, same tree unchanged ({entries} entries, lstat per directory)"
    bare = "bare scandir walk, no lstat (the walk before revision 3)"
    figures = [
        figure(fresh_label, med["fresh"], "ms", anchor=bare, anchor_value=med["bare_walk"]),
        figure(fresh_label, med["fresh"], "ms", anchor="find -type f -links +1", anchor_value=med["find"]),
        figure(reused_label, med["reused"], "ms", anchor=bare, anchor_value=med["bare_walk"]),
    ]
    details = {"walk_entries": entries, "walk_ms": {k: round(v, 3) for k, v in med.items()},
               "walk_lstat_us_per_entry": round((med["fresh"] - med["bare_walk"]) * 1000 / entries, 3)}
    return figures, details


def stage_costs(engine: Engine, argv: list[str], n: int) -> dict[str, float]:
    """Milliseconds of the environment's public steps that the engine runs per call."""
    env, policy = engine.environment()
    out: dict[str, float] = {}
    for label, fn in (("environment.verify_ms", lambda: env.verify(policy)), ("environment.command_line_ms", lambda: env.command_line(argv, policy))):
        xs = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - t0)
        out[label] = round(median(xs) * 1000, 3)
    return out


async def _run(engines: dict[str, Engine], bare_argvs: dict[str, list[str]], ws: Path, rounds: int) -> dict[str, Any]:
    """Seconds per call for every side, interleaved with a rotating start.

    Sides: `pipeline_<variant>` (Engine.call), `bare_bwrap_<variant>` (the same
    argv as that variant's sandbox, via subprocess.run) and `bare_true`.
    """
    sessions = {k: e.open_session(headless=True) for k, e in engines.items()}
    before = set(os.listdir(ws))
    names = [*(f"pipeline_{k}" for k in engines), *(f"bare_bwrap_{k}" for k in bare_argvs), "bare_true"]
    samples: dict[str, list[float]] = {n: [] for n in names}
    cleanup: list[float] = []

    def bare(argv: list[str], cwd: str) -> float:
        t0 = time.perf_counter()
        # A fresh seccomp filter descriptor per run, exactly as the environment makes one (bwrap reads it to the end).
        fd = seccomp.filter_fd() if SECCOMP_FD_SHOWN in argv else None
        try:
            done = subprocess.run(
                with_filter_fd(argv, fd) if fd is not None else argv,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={}, cwd=cwd,
                start_new_session=True, pass_fds=(fd,) if fd is not None else (),
            )
        finally:
            if fd is not None:
                os.close(fd)
        dt = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"bare run failed (exit {done.returncode}): {done.stdout[-500:]!r}")
        return dt

    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                if name.startswith("pipeline_"):
                    variant = name[len("pipeline_"):]
                    t0 = time.perf_counter()
                    env = await engines[variant].call(sessions[variant], "bash", ARGS)
                    dt = time.perf_counter() - t0
                    if env.type != "output" or env.data.get("exit_code") != 0:
                        return {"blocked": {"variant": variant, "envelope": envelope_summary(env)}, "after_calls": len(samples[name])}
                elif name.startswith("bare_bwrap_"):
                    dt = bare(bare_argvs[name[len("bare_bwrap_"):]], "/")
                    t0 = time.perf_counter()
                    _restore(ws, before)
                    cleanup.append(time.perf_counter() - t0)
                else:
                    dt = bare(["/bin/true"], os.fspath(ws))
                samples[name].append(dt)
    finally:
        for s in sessions.values():
            s.close()
    return {"samples": samples, "cleanup": cleanup}


def _venv(ws: Path, cache: Path, packages: int) -> int:
    """A virtual environment as uv makes one: `packages` package directories of 5 modules each, every
    module a hard link to a file in `cache` (outside the workspace), and a `.pth` file per 100 packages."""
    site = ws / ".venv" / "lib" / "python3.11" / "site-packages"
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for i in range(packages):
        (site / f"pkg{i}").mkdir(parents=True)
        for j in range(5):
            original = cache / f"{i}-{j}.py"
            original.write_text("x = 1\n")
            os.link(original, site / f"pkg{i}" / f"m{j}.py")
        if i % 100 == 0:
            (site / f"p{i}.pth").write_text("import os\n")
    return packages * 6 + packages // 100 + 4


def venv_cost(quick: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`bash true` in a workspace that holds its virtual environment: kept read-only whole (one mount), not
    walked for hard links or start-up files file by file (revision 3 of ENV-6/7)."""
    rounds = 5 if quick else 30
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        ws, cache = tmp / "ws", tmp / "cache"
        ws.mkdir()
        cache.mkdir()
        (ws / "README").write_text("bench\n")
        entries = _venv(ws, cache, 150 if quick else 1500)
        mpath = tmp / "m.json"
        mpath.write_text(json.dumps(manifest_doc(writable=True)))
        engine = Engine(load_manifest(mpath, workspace=ws))
        env, policy = engine.environment()
        argv = env.command_line(engine.catalog.get("bash").command_argv(ARGS), policy)
        wait_until_settled(ws)
        got = anyio.run(_run, {"rw": engine}, {"rw": argv}, ws, 2)  # the first walk of the tree: not a per-call cost
        if "blocked" not in got:
            got = anyio.run(_run, {"rw": engine}, {"rw": argv}, ws, rounds)
    if "blocked" in got:
        return [], {"venv_blocked": got["blocked"]}
    samples = {"pipeline": got["samples"]["pipeline_rw"], "bare": got["samples"]["bare_bwrap_rw"]}
    med = {k: median(v) * 1000 for k, v in samples.items()}
    label = f"bash `true` via pipeline, rw workspace holding a venv of {entries} entries (uv-style hard links)"
    return ([figure(label, med["pipeline"], "ms", anchor="bare bwrap, same argv", anchor_value=med["bare"])],
            {"venv_entries": entries, "venv_ms": {k: round(v, 3) for k, v in med.items()}})


def main(quick: bool = False, profile: bool = False) -> dict[str, Any]:
    rounds = 6 if quick else 60
    details: dict[str, Any] = {"rounds": rounds}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        ws = tmp / "ws"
        ws.mkdir()
        (ws / "README").write_text("bench\n")
        engines: dict[str, Engine] = {}
        bare_argvs: dict[str, list[str]] = {}
        for variant, writable in VARIANTS.items():
            mpath = tmp / f"{variant}.json"
            mpath.write_text(json.dumps(manifest_doc(writable=writable)))
            engine = Engine(load_manifest(mpath, workspace=ws))
            argv = engine.catalog.get("bash").command_argv(ARGS)
            try:
                env, policy = engine.environment()
                env.verify(policy)
                bare_argvs[variant] = env.command_line(argv, policy)
            except Exception as exc:  # EnvironmentUnavailable, or a half-finished environment layer
                details["blocked"] = {"variant": variant, "stage": "environment", "error": f"{type(exc).__name__}: {exc}"}
                return result(NAME, quick=quick, figures=[], details=details, status="blocked")
            engines[variant] = engine
            details[f"bare_bwrap_argc_{variant}"] = len(bare_argvs[variant])
        got = anyio.run(_run, engines, bare_argvs, ws, 3)  # warm: imports, bwrap self-test, page cache
        if "blocked" not in got:
            got = anyio.run(_run, engines, bare_argvs, ws, rounds)
        if "blocked" in got:
            details["blocked"] = got["blocked"]
            return result(NAME, quick=quick, figures=[], details=details, status="blocked")
        for variant, engine in engines.items():
            argv = engine.catalog.get("bash").command_argv(ARGS)
            details[f"per_call_stages_{variant}"] = stage_costs(engine, argv, 5 if quick else 30)
        if profile:
            engine = engines["rw"]

            async def many() -> None:
                s = engine.open_session(headless=True)
                for _ in range(20):
                    await engine.call(s, "bash", ARGS)
                s.close()
            profile_to_stderr("bash true x 20 through the pipeline (rw workspace)", lambda: anyio.run(many), sort="cumulative", top=40)
    with tempfile.TemporaryDirectory() as tmp_s:
        ws = Path(tmp_s) / "ws"
        ws.mkdir()
        anyio.run(_network_cost, Path(tmp_s), ws, 2)  # warm
        net = anyio.run(_network_cost, Path(tmp_s), ws, max(6, rounds // 2))
    samples = got["samples"]
    med = {k: median(v) * 1000 for k, v in samples.items()}
    # Not in the bare timings; the pipeline's own placeholder cleanup is in its timings.
    details["bare_placeholder_cleanup_ms"] = round(median(got["cleanup"]) * 1000, 3) if got["cleanup"] else None
    details |= {f"{k}_ms": {"median": round(v, 3), "p90": round(p90(samples[k]) * 1000, 3)} for k, v in med.items()}
    figures = []
    for variant, label in (("rw", "rw workspace"), ("ro", "read-only workspace")):
        p, b = med[f"pipeline_{variant}"], med[f"bare_bwrap_{variant}"]
        details[f"overhead_vs_bare_bwrap_ms_{variant}"] = round(p - b, 3)
        figures.append(figure(f"bash `true` via pipeline, {label}", p, "ms", anchor="bare bwrap, same argv",
                              anchor_value=b, target=f"<= {TARGET}x", met=p / b <= TARGET))
    net_med = {k: median(v) * 1000 for k, v in net.items()}
    details["network_ms"] = {k: round(v, 3) for k, v in net_med.items()}
    figures += [
        figure("bash `true` via pipeline with net.hosts (proxy + relay)", net_med["net"], "ms",
               anchor="same manifest without net.hosts", anchor_value=net_med["no_net"]),
        figure("bash `true` via pipeline, rw workspace", med["pipeline_rw"], "ms", anchor="bare /bin/true", anchor_value=med["bare_true"]),
        figure("bare bwrap `true`, rw workspace", med["bare_bwrap_rw"], "ms", anchor="bare /bin/true", anchor_value=med["bare_true"]),
    ]
    walk_figures, walk_details = walk_cost(quick)
    figures += walk_figures
    details |= walk_details
    venv_figures, venv_details = venv_cost(quick)
    figures += venv_figures
    details |= venv_details
    return result(NAME, quick=quick, figures=figures, details=details)


if __name__ == "__main__":
    a = parse_args(__doc__.splitlines()[0])
    emit(NAME, main(quick=a.quick, profile=a.profile), a.results_dir)
