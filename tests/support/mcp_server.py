"""A real MCP server for the agent tests: the ``mcp`` package's own high-level server on
streamable HTTP (``FastMCP`` in mcp 1.x, renamed ``MCPServer`` in 2.x).

``python -m tests.support.mcp_server`` binds 127.0.0.1 port 0 itself (so no other
process can take the port between a pick and a bind) and prints
``mcp server on http://127.0.0.1:PORT/mcp``. It serves two tools and a resource:

- ``count(n)``: reports progress ``1..n`` of ``n`` (one ``notifications/progress``
  event each, 20 ms apart) and returns ``"counted to N"``;
- ``add(a, b)``: returns the sum at once (a session that calls it instead of
  ``count`` is the one a replay must refuse);
- ``notes://today``: a text resource.

Sessions are stateful (an ``Mcp-Session-Id`` per client) and answers are SSE
streams, the server's defaults in both major versions. With ``--resumable`` the server keeps its events
in :class:`MemoryEventStore`: every SSE event gets an id, and a client that
reconnects with ``Last-Event-ID`` gets the events after it.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import JSONRPCMessage
from starlette.applications import Starlette

try:  # mcp 2.x: FastMCP renamed MCPServer; the event store moved to streamable_http_app()
    from mcp.server.mcpserver import Context, MCPServer  # type: ignore[import-not-found,unused-ignore]

    MCP2 = True
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context  # type: ignore[no-redef,attr-defined,unused-ignore]
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef,attr-defined,unused-ignore]

    MCP2 = False

PROGRESS_GAP_S = 0.02


def build(event_store: EventStore | None = None) -> Any:
    """The server: the tools and the resource of the module docstring (a ``FastMCP`` on
    mcp 1.x, which takes the event store; an ``MCPServer`` on 2.x, whose
    :func:`http_app` takes it)."""
    options: dict[str, Any] = {} if MCP2 else {"event_store": event_store}
    app = MCPServer("streamtape-test", **options)

    @app.tool()  # type: ignore[untyped-decorator,unused-ignore]
    async def count(n: int, ctx: Context) -> str:  # type: ignore[type-arg,unused-ignore]
        """Count to ``n``, reporting progress on the way."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await asyncio.sleep(PROGRESS_GAP_S)
        return f"counted to {n}"

    @app.tool()  # type: ignore[untyped-decorator,unused-ignore]
    def add(a: int, b: int) -> int:
        """The sum of two numbers."""
        return a + b

    @app.resource("notes://today")  # type: ignore[untyped-decorator,unused-ignore]
    def notes() -> str:
        """Today's notes."""
        return "buy milk; café at 5€"

    return app


def http_app(event_store: EventStore | None = None) -> Starlette:
    """The server's streamable HTTP app, resumable with ``event_store``."""
    app = build(event_store)
    starlette: Starlette = (app.streamable_http_app(event_store=event_store) if MCP2
                            else app.streamable_http_app())
    return starlette


class MemoryEventStore(EventStore):
    """Every event of every stream, numbered in one sequence (the SDK's example store)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(next(self._ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        found = next((s for e, s, _ in self.events if e == last_event_id), None)
        if found is None:
            return None
        after = False
        for e, s, m in self.events:
            if after and s == found and m is not None:
                await send_callback(EventMessage(m, e))
            after = after or e == last_event_id
        return found


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = http_app(MemoryEventStore() if "--resumable" in sys.argv else None)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    print(f"mcp server on http://127.0.0.1:{port}/mcp", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
