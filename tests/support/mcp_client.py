"""The ``mcp`` package's own client running one session, for the agent tests.

:func:`run_session` is what an agent does on an MCP server: ``initialize``,
``tools/list``, one ``tools/call`` (``count`` with its progress, or ``add``),
``resources/read``, then the end of the session (the client's DELETE). It
returns what the client saw, so a replay can be held to the recording.

It runs on mcp 1.x and 2.x alike. What 2.x changed for this client (its
migration guide): ``streamable_http_client`` takes an ``httpx2.AsyncClient`` (1.x: an
``httpx`` one) and yields ``(read, write)`` without the ``get_session_id`` callback
(the session id is read here from the responses' ``Mcp-Session-Id`` header, as the
guide suggests, on both); the result fields are snake_case (``server_info``, 1.x
``serverInfo``). :func:`mcp_http_client` gives the client class the installed version
takes, so a test can put a replay transport in it.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import TextContent, TextResourceContents

from streamtape.capture.mcp import SESSION_HEADER

MCP_MAJOR = int(version("mcp").split(".")[0])
"""The installed mcp's major version (1 or 2)."""


@dataclass(frozen=True)
class SessionSeen:
    """What one client session saw."""

    server: str
    tools: tuple[str, ...]
    result: str
    progress: tuple[tuple[float, float | None, str | None], ...]
    resource: str
    session_id: str | None


def mcp_http_client(transport: Any = None) -> Any:
    """An HTTP client of the kind the installed mcp's client sends through (httpx for
    1.x, httpx2 for 2.x), with ``transport`` (a :class:`streamtape.AsyncReplayTransport`
    serves both), or with the SDK's own defaults when there is none."""
    if transport is None:  # the client streamable_http_client makes when given none, made here to be watched
        return create_mcp_http_client()
    if MCP_MAJOR >= 2:
        import httpx2  # type: ignore[import-not-found,unused-ignore]

        return httpx2.AsyncClient(transport=transport)
    import httpx

    return httpx.AsyncClient(transport=transport)


async def session(url: str, tool: str = "count", http_client: Any = None) -> SessionSeen:
    """One session against ``url`` (``http_client``: the client the SDK sends through, from
    :func:`mcp_http_client`; the SDK's default one when None)."""
    seen: list[tuple[float, float | None, str | None]] = []
    ids: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def note_session(response: Any) -> None:
        if (sid := response.headers.get(SESSION_HEADER)) and not ids:
            ids.append(sid)

    async with contextlib.AsyncExitStack() as stack:
        if http_client is None:
            http_client = await stack.enter_async_context(mcp_http_client())
        http_client.event_hooks["response"].append(note_session)
        streams = await stack.enter_async_context(streamable_http_client(url, http_client=http_client))
        s = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        init: Any = await s.initialize()
        tools = await s.list_tools()
        if tool == "count":
            res = await s.call_tool("count", {"n": 3}, progress_callback=progress)
        else:
            res = await s.call_tool("add", {"a": 1, "b": 2})
        rr = await s.read_resource("notes://today")  # type: ignore[arg-type,unused-ignore]
        content, contents = res.content[0], rr.contents[0]
        assert isinstance(content, TextContent) and isinstance(contents, TextResourceContents)
        server = init.server_info if MCP_MAJOR >= 2 else init.serverInfo
        out = SessionSeen(server.name, tuple(t.name for t in tools.tools), content.text,
                          tuple(seen), contents.text, ids[0] if ids else None)
    return out


def run_session(url: str, tool: str = "count", timeout: float = 30.0) -> SessionSeen:
    """:func:`session` run to its end on a loop of its own (bounded by ``timeout``)."""
    return asyncio.run(asyncio.wait_for(session(url, tool), timeout))
