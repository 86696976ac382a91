"""`agentcore call` cold start, against `python -c pass` as the anchor."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main(repeat: int = 10) -> dict[str, float]:
    exe = Path(sys.executable).parent / "agentcore"
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "a.txt").write_text("hello\n")
        m = ws / "m.yaml"
        m.write_text('name: b\ntools: [read]\nrequires: {fs: {read: ["{workspace}/**"]}}\nrules: [{permission: "*", pattern: "*", action: allow}]\n')
        anchor = timed([sys.executable, "-c", "pass"], repeat)
        call = timed([str(exe), "call", "--manifest", str(m), "--workspace", str(ws), "--headless", "read", '{"path": "a.txt"}'], repeat)
        imports = timed([sys.executable, "-c", "import acp.schema"], 3)
    return {
        "python_startup_s": round(anchor, 3),
        "agentcore_call_s": round(call, 3),
        "ratio": round(call / anchor, 1),
        "acp_schema_import_s_for_reference": round(imports, 3),
    }


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=2)
    print()
