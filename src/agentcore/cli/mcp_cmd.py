"""`agentcore mcp list`: each MCP server of a manifest, its state and its tools with their kinds (MCP-10).

It starts the servers exactly as a session would (sandboxed, vetted), waits
for their first start, prints, and stops them. Values of `env` and
`headers` are never printed, only their names; a URL is shown without its
query.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..textdata import printable


def cmd_mcp_list(args: argparse.Namespace) -> int:
    """Start the manifest's servers in a headless session, print their status, stop them; 2 on usage errors."""
    import anyio

    from ..api import Engine, ManifestError, load_manifest

    workspace = Path(args.workspace) if args.workspace else Path.cwd()
    if not workspace.is_dir():
        print(f"agentcore: --workspace {printable(str(workspace))}: not a directory", file=sys.stderr)
        return 2
    try:
        manifest = load_manifest(Path(args.manifest), workspace=workspace)
    except ManifestError as exc:
        print(f"agentcore: {printable(str(exc), lines=True)}", file=sys.stderr)
        return 2
    engine = Engine(manifest, environment=args.env)

    async def status() -> list[dict[str, Any]]:
        with engine.open_session(headless=True) as session:
            return await engine.mcp_status(session)

    servers = anyio.run(status)
    if args.json:
        print(json.dumps({"manifest": str(manifest.source), "servers": servers}, indent=2))
        return 0
    if not servers:
        print(f"manifest {manifest.name}: no MCP servers")
        return 0
    for s in servers:
        _print_server(s)
    return 0


def _print_server(s: dict[str, Any]) -> None:
    state = s["state"] + (f" ({s['reason']})" if s["reason"] else "")
    print(f"{s['name']}  [{s['transport']}, {s['sandbox']}]  {state}")
    print(f"  runs: {s['runs']}")
    if s["env"] or s["headers"]:
        print(f"  env: {', '.join(s['env']) or '-'}; headers: {', '.join(s['headers']) or '-'} (values not shown)")
    for t in s["tools"]:
        print(f"  {t['id']:<40} kind={t['kind']}{'  deferred' if t['deferred'] else ''}")
    for t in s["unavailable_tools"]:
        print(f"  {t['tool']:<40} unavailable: {t['reason']}")
    for note in s["notes"]:
        print(f"  note: {note}")


def add_subcommand(sub: Any) -> None:
    """`agentcore mcp list` on the main parser's subcommands."""
    p = sub.add_parser("mcp", help="MCP servers of a manifest")
    msub = p.add_subparsers(dest="mcp_command", required=True)
    lst = msub.add_parser("list", help="start each MCP server of the manifest and show its state and tools (with kinds)")
    lst.add_argument("--manifest", required=True, help="the manifest whose mcp: servers are started and listed")
    lst.add_argument("--workspace", help="workspace root (default: the current directory)")
    lst.add_argument("--env", choices=["bwrap", "none"], help="execution environment for stdio servers (default: the manifest's)")
    lst.add_argument("--json", action="store_true", help="one JSON document instead of text (values of env and headers are never shown)")
    lst.set_defaults(func=cmd_mcp_list)
