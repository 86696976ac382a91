"""A misbehaving MCP server speaking raw JSON-RPC on stdio, for the tests (no SDK: it must be able to lie).

    python bad_server.py CONFIG.json

CONFIG: {"tools": [raw tool objects, listed as given], "calls": {tool name: behaviour}}.
Behaviours of `tools/call`: "ok" (text "ok: <arguments as JSON>"), "garbage" (a line
that is not JSON-RPC), "huge:N" (a result line of about N bytes), "invalid" (a
result whose content is not a list), "error" (a JSON-RPC error), "exit" (exit at
once), "hang" (never answer), "relist" (answer, then replace the tool list with
CONFIG["later"] and send notifications/tools/list_changed), "raw" (answer with
CONFIG["results"][tool name] as given). With CONFIG["pages"] (lists of tools), tools/list answers
page by page (cursor "1", "2", …). With CONFIG["relist_always"], every
tools/list answer is followed by notifications/tools/list_changed (a server that never stops).
"""

from __future__ import annotations

import json
import os
import sys


def send(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def result(rid: object, res: dict) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": res})


def call(rid: object, behaviour: str, params: dict, state: dict) -> None:
    text = {"type": "text", "text": "ok: " + json.dumps(params.get("arguments") or {}, sort_keys=True)}
    if behaviour == "garbage":
        sys.stdout.write("<html>this is not JSON-RPC</html>\n")
        sys.stdout.flush()
    elif behaviour.startswith("huge:"):
        result(rid, {"content": [{"type": "text", "text": "x" * int(behaviour[5:])}]})
    elif behaviour == "invalid":
        result(rid, {"content": "not a list"})
    elif behaviour == "error":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "bad arguments: " + json.dumps(params)}})
    elif behaviour == "raw":
        result(rid, state["results"][params.get("name")])
    elif behaviour == "exit":
        os._exit(7)
    elif behaviour == "hang":
        pass
    elif behaviour == "relist":
        state["tools"] = state["later"]
        result(rid, {"content": [text]})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    else:
        result(rid, {"content": [text]})


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    state = {"tools": config.get("tools", []), "later": config.get("later", []), "results": config.get("results", {})}
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if rid is None:
            continue  # a notification
        if method == "initialize":
            result(rid, {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                         "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "bad", "version": "1"}})
        elif method == "tools/list" and config.get("pages"):
            at = int(params.get("cursor") or 0)
            more = {"nextCursor": str(at + 1)} if at + 1 < len(config["pages"]) else {}
            result(rid, {"tools": config["pages"][at], **more})
        elif method == "tools/list":
            result(rid, {"tools": state["tools"]})
            if config.get("relist_always"):
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif method == "tools/call":
            call(rid, config.get("calls", {}).get(params.get("name"), "ok"), params, state)
        elif method == "ping":
            result(rid, {})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    main()
