"""A real MCP server for the tests, written with the SDK's MCPServer (FastMCP in mcp 1.x).

    python demo_server.py                          # stdio
    python demo_server.py http PORT [TOKEN]        # streamable HTTP on 127.0.0.1:PORT, path /mcp
    python demo_server.py sse PORT                 # SSE on 127.0.0.1:PORT, path /sse

Its tools do what the tests need a server to try: read and write files,
fetch a URL (through the proxy the environment gives it), crash, hang (and
record that it was cancelled), return huge or binary output. (The SDK diverts
a stray write to stdout to stderr, so garbage on the wire comes from
`bad_server.py`.) With TOKEN, every HTTP request must carry `X-Token: TOKEN`.
"""

from __future__ import annotations

import os
import sys
import urllib.request

import anyio
from mcp.server.mcpserver import Audio, Image, MCPServer
from mcp_types import BlobResourceContents, EmbeddedResource, ToolAnnotations

server = MCPServer("demo")

if os.environ.get("DEMO_MARKER"):  # proof that the server process ran at all
    with open(os.environ["DEMO_MARKER"], "a", encoding="utf-8") as f:
        f.write("started\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echo the text back unchanged."""
    return text


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_file(path: str) -> str:
    """Read a text file and return its content."""
    with open(path, encoding="utf-8") as f:
        return f.read()


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def write_file(path: str, content: str) -> str:
    """Write content to a file (created or replaced)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    return "written"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def write_when(path: str, content: str, gate: str) -> str:
    """Return at once; write the file later, once something opens the FIFO `gate` for writing (between calls).
    Then `<gate>.done` says how the write went: `ok`, or the error."""
    import threading

    def later() -> None:
        with open(gate, "rb") as g:  # blocks until the test opens the other end
            g.read()
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(content)
            outcome = "ok"
        except OSError as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        with open(gate + ".done", "w", encoding="utf-8") as f:
            f.write(outcome)

    threading.Thread(target=later, daemon=True).start()
    return "armed"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def replant(path: str, content: str, seconds: float, done: str, low_ms: float = 0.2, high_ms: float = 3.0) -> str:
    """Return at once; for `seconds`, write `path` again a moment (`low_ms`-`high_ms`, at random) after each time it
    disappears, then write `done`: a server racing the runtime's sweeps for a file they remove."""
    import os
    import random
    import threading
    import time

    def loop() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if os.path.lexists(path):
                time.sleep(0.0002)
                continue
            time.sleep(random.uniform(low_ms, high_ms) / 1000)
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(content)
            except OSError:
                pass
        with open(done, "w", encoding="utf-8") as f:
            f.write("ok")

    threading.Thread(target=loop, daemon=True).start()
    return "armed"


@server.tool()
def fetch(url: str) -> str:
    """Fetch a URL with GET and return the status and body."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return f"{response.status} {response.read().decode('utf-8', 'replace')}"


@server.tool()
def getenv(name: str) -> str:
    """Return the value of an environment variable, or (unset)."""
    return os.environ.get(name, "(unset)")


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


@server.tool()
async def hang(marker: str) -> str:
    """Never answer; write 'cancelled' to the marker file when the call is cancelled."""
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        with open(marker, "w") as f:
            f.write("cancelled")
        raise
    return "woke"


@server.tool()
def big(size: int) -> str:
    """Return `size` characters of text."""
    return ("0123456789abcdef" * (size // 16 + 1))[:size]


@server.tool()
def media() -> list:
    """Return an image, audio and a binary resource."""
    blob = BlobResourceContents(uri="file:///x.bin", blob="AAEC", mime_type="application/octet-stream")
    return [Image(data=b"\x89PNG\r\n", format="png"), Audio(data=b"RIFF0000", format="wav"),
            EmbeddedResource(type="resource", resource=blob), "and some text"]


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def sleeper() -> int:
    """Start a `sleep` in a session of its own (outside the server's process group); its pid."""
    import subprocess

    return subprocess.Popen(["sleep", "600"], start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid


def _http(kind: str, port: int, token: str | None) -> None:
    import uvicorn

    app = server.streamable_http_app() if kind == "http" else server.sse_app()
    if token is not None:
        inner = app

        async def app(scope, receive, send):  # type: ignore[no-redef]
            if scope["type"] == "http" and dict(scope["headers"]).get(b"x-token") != token.encode():
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"no"})
                return
            await inner(scope, receive, send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("http", "sse"):
        _http(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        server.run()
