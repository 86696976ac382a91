"""`agentcore acp`: serve the agent to an editor over ACP on stdio (stdout carries protocol only)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..textdata import printable
from .agent_cmds import add_db_arg, add_model_args


def cmd_acp(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from ..agent.config import ModelConfigError, check_model_config, resolve_model_config

    # Logs go to stderr: stdout belongs to the protocol.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="agentcore acp: %(levelname)s %(message)s")
    manifest = Path(args.manifest).resolve()
    try:
        # Only the `model:` block here, so `initialize` is answered fast; the whole manifest is
        # validated when a session compiles it for its workspace.
        block = _model_block(manifest)
        config = resolve_model_config(block, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                                      manifest_dir=manifest.parent)
        check_model_config(config)
    except (ModelConfigError, ValueError) as exc:
        print(f"agentcore acp: {printable(str(exc), lines=True)}", file=sys.stderr)
        return 2
    from acp_adapter.agent import AcpOptions, serve  # the ACP SDK is imported here and nowhere else

    db = None if args.no_record else (Path(args.db) if args.db else _default_db())
    options = AcpOptions(manifest=manifest, model=config, headless=args.headless, db=db)
    # The SDK runs on asyncio; the engine's anyio code runs on the same loop.
    return int(asyncio.run(serve(options)) or 0)


def _default_db() -> Path:
    from ..recorder.store import default_db_path

    return default_db_path()


def _model_block(manifest: Path) -> argparse.Namespace | None:
    import yaml

    from ..textdata import MAX_DOCUMENT_BYTES, TooLarge, read_bounded

    try:
        with open(manifest, "rb") as fh:  # bounded: `--manifest /dev/zero` must not take the machine's memory
            doc = yaml.safe_load(read_bounded(fh, MAX_DOCUMENT_BYTES))
    except (OSError, UnicodeDecodeError, TooLarge, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read the manifest {manifest}: {exc}") from None
    block = doc.get("model") if isinstance(doc, dict) else None
    if block is None:
        return None
    if not isinstance(block, dict):
        raise ValueError(f"{manifest}: model: must be a mapping")
    known = ("id", "base_url", "api_key_env", "max_tokens", "temperature", "max_turn_requests", "request_timeout_s", "context_window")
    return argparse.Namespace(**{k: block.get(k) for k in known})


def add_subcommand(sub: Any) -> None:
    p = sub.add_parser("acp", help="serve the agent to an editor over the Agent Client Protocol (stdio)")
    p.add_argument("--manifest", required=True, help="the agent's manifest; each ACP session's cwd is its workspace")
    add_model_args(p)
    add_db_arg(p)
    p.add_argument("--no-record", action="store_true", help="do not record sessions (session/load then has nothing to load)")
    p.add_argument("--headless", action="store_true", help="every ask is a refusal; no permission request is ever sent")
    p.set_defaults(func=cmd_acp)
