"""The ``mcp`` package's own client running one session, for the agent tests.

:func:`run_session` is what an agent does on an MCP server: ``initialize``,
``tools/list``, one ``tools/call`` (``count`` with its progress, or ``add``),
``resources/read``, then the end of the session (the client's DELETE). It
returns what the client saw, so a replay can be held to the recording.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent, TextResourceContents


@dataclass(frozen=True)
class SessionSeen:
    """What one client session saw."""

    server: str
    tools: tuple[str, ...]
    result: str
    progress: tuple[tuple[float, float | None, str | None], ...]
    resource: str
    session_id: str | None


async def session(url: str, tool: str = "count", http_client: httpx.AsyncClient | None = None) -> SessionSeen:
    """One session against ``url`` (``http_client``: the client the SDK sends through)."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with (
        streamable_http_client(url, http_client=http_client) as (read, write, get_id),
        ClientSession(read, write) as s,
    ):
        init = await s.initialize()
        tools = await s.list_tools()
        if tool == "count":
            res = await s.call_tool("count", {"n": 3}, progress_callback=progress)
        else:
            res = await s.call_tool("add", {"a": 1, "b": 2})
        rr = await s.read_resource("notes://today")  # type: ignore[arg-type]
        content, contents = res.content[0], rr.contents[0]
        assert isinstance(content, TextContent) and isinstance(contents, TextResourceContents)
        return SessionSeen(init.serverInfo.name, tuple(t.name for t in tools.tools), content.text,
                           tuple(seen), contents.text, get_id())


def run_session(url: str, tool: str = "count", timeout: float = 30.0) -> SessionSeen:
    """:func:`session` run to its end on a loop of its own (bounded by ``timeout``)."""
    return asyncio.run(asyncio.wait_for(session(url, tool), timeout))
