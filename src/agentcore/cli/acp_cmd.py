"""`agentcore acp`: serve the agent to an editor over ACP on stdio (stdout carries protocol only)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from .agent_cmds import add_db_arg, add_model_args


def cmd_acp(args: argparse.Namespace) -> int:
    import anyio

    from ..agent.config import ModelConfigError, resolve_model_config
    from ..api import ManifestError, read_manifest_spec
    from ..recorder.store import default_db_path

    # Logs go to stderr: stdout belongs to the protocol.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="agentcore acp: %(levelname)s %(message)s")
    manifest = Path(args.manifest).resolve()
    try:
        spec = read_manifest_spec(manifest)
        config = resolve_model_config(spec.model, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                                      manifest_dir=manifest.parent)
    except (ManifestError, ModelConfigError) as exc:
        print(f"agentcore acp: {exc}", file=sys.stderr)
        return 2
    from acp_adapter.agent import AcpOptions, serve  # the ACP SDK is imported here and nowhere else

    db = None if args.no_record else (Path(args.db) if args.db else default_db_path())
    options = AcpOptions(manifest=manifest, model=config, headless=args.headless, db=db)
    return int(anyio.run(serve, options) or 0)


def add_subcommand(sub: Any) -> None:
    p = sub.add_parser("acp", help="serve the agent to an editor over the Agent Client Protocol (stdio)")
    p.add_argument("--manifest", required=True, help="the agent's manifest; each ACP session's cwd is its workspace")
    add_model_args(p)
    add_db_arg(p)
    p.add_argument("--no-record", action="store_true", help="do not record sessions (session/load then has nothing to load)")
    p.add_argument("--headless", action="store_true", help="every ask is a refusal; no permission request is ever sent")
    p.set_defaults(func=cmd_acp)
