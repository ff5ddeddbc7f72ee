"""A small MCP server of our own for the tests (the SDK's MCPServer, formerly FastMCP).

Served over streamable HTTP on 127.0.0.1 by `serve_http()` (uvicorn in a thread, for the tests), or
over stdio when run as a script (`python tests/mcp_test_server.py [PIDFILE]`), where `die` ends the
process to test crash handling. Tools: `add` (read-only), `save_note` (no annotations: write),
`fetch_remote` (open-world: dangerous), `big_output`, `picture` (an image block), `slow`, `die` and twelve
small utilities (`add_utilities`).
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations

NOTES: list[str] = []
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def build() -> MCPServer:
    server = MCPServer("notes", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False, destructive_hint=False))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def save_note(text: str) -> str:
        """Save a note on the server."""
        NOTES.append(text)
        return f"saved note {len(NOTES)}"

    @server.tool(annotations=ToolAnnotations(open_world_hint=True, read_only_hint=True))
    def fetch_remote(url: str) -> str:
        """Pretend to fetch a URL (never does)."""
        return f"would fetch {url}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False, destructive_hint=False))
    def big_output(lines: int) -> str:
        """Return many lines of text."""
        return "\n".join(f"line {i} of the big output" for i in range(lines))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False, destructive_hint=False))
    def picture() -> list:
        """Return a caption and a tiny PNG."""
        return ["a 1x1 pixel", Image(data=PNG_1X1, format="png")]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False, destructive_hint=False))
    async def slow(seconds: float) -> str:
        """Wait, then answer (timeout test)."""
        import anyio

        await anyio.sleep(seconds)
        return "finally"

    add_utilities(server)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False, destructive_hint=False))
    def die() -> str:
        """End the server process (stdio crash test)."""
        sys.stderr.write("notes server: dying on request\n")
        sys.stderr.flush()
        os._exit(3)

    return server


def add_utilities(server: MCPServer) -> None:
    """Twelve more small tools, so that built-ins + git + time + this server pass 40 tools."""
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False, destructive_hint=False)

    @server.tool(annotations=read_only)
    def list_notes() -> list[str]:
        """List the saved notes."""
        return list(NOTES)

    @server.tool(annotations=read_only)
    def search_notes(query: str) -> list[str]:
        """Find saved notes containing a word."""
        return [n for n in NOTES if query.lower() in n.lower()]

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    def delete_note(index: int) -> str:
        """Delete a saved note by its number (1 = first)."""
        return f"deleted {NOTES.pop(index - 1)}"

    @server.tool(annotations=read_only)
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return a * b

    @server.tool(annotations=read_only)
    def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    @server.tool(annotations=read_only)
    def reverse_text(text: str) -> str:
        """Reverse a text."""
        return text[::-1]

    @server.tool(annotations=read_only)
    def convert_units(value: float, from_unit: str, to_unit: str) -> str:
        """Convert a length between km, m and miles."""
        metres = {"km": 1000.0, "m": 1.0, "miles": 1609.344}
        return f"{value * metres[from_unit] / metres[to_unit]:.3f} {to_unit}"

    @server.tool(annotations=read_only)
    def days_between(start: str, end: str) -> int:
        """Days between two ISO dates (YYYY-MM-DD)."""
        from datetime import date

        return (date.fromisoformat(end) - date.fromisoformat(start)).days

    @server.tool(annotations=read_only)
    def slugify(title: str) -> str:
        """Turn a title into a URL slug."""
        return "-".join("".join(c if c.isalnum() else " " for c in title.lower()).split())

    @server.tool(annotations=read_only)
    def roll_dice(sides: int = 6) -> int:
        """Roll a die (always the highest face, for repeatable tests)."""
        return sides

    @server.tool(annotations=read_only)
    def weather(city: str) -> str:
        """Today's weather in a city (canned)."""
        return f"{city}: sunny, 21 C"

    @server.tool(annotations=read_only)
    def stock_price(symbol: str) -> str:
        """Latest stock price of a ticker symbol (canned)."""
        return f"{symbol.upper()}: 100.00"


@contextlib.contextmanager
def serve_http() -> Iterator[str]:
    """Serve the notes server over streamable HTTP on 127.0.0.1 (a free port); yields its /mcp URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(build().streamable_http_app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test MCP server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1], "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    build().run("stdio")
