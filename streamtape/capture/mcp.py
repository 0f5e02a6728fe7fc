"""Which exchanges belong to an MCP Streamable HTTP session: the recorder keeps them all.

An MCP client speaks JSON-RPC over HTTP to one endpoint (MCP spec, "Streamable
HTTP" transport): POSTs answered with JSON or an SSE stream, ``202 Accepted``
(no body) for notifications and responses, a GET that opens the server's own
SSE stream, and a DELETE that ends the session. Only the SSE answers look
like streams, so the default record filter would keep a session with holes,
and a replay of it would answer the client's notifications and its DELETE
with 404s. The recorder keeps every exchange this says is MCP:

- the request or the response carries ``Mcp-Session-Id`` (the server hands it
  out on the answer to ``initialize``; the client sends it on every request
  after); or
- a POST (or the GET stream) whose ``Accept`` names both ``application/json``
  and ``text/event-stream``, which the spec requires of every MCP client (a
  server that keeps no sessions hands out no id).

Pure code: headers in, a yes or no out.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..wire import header_value

__all__ = ["LAST_EVENT_ID_HEADER", "SESSION_HEADER", "is_mcp_exchange", "session_id_of"]

SESSION_HEADER = "mcp-session-id"
"""The header carrying an MCP session's id (case-insensitive, as every header name)."""

LAST_EVENT_ID_HEADER = "last-event-id"
"""The header a reconnecting SSE client names the last event it saw with."""


def session_id_of(
    request_headers: Iterable[tuple[str, str]], response_headers: Iterable[tuple[str, str]] = ()
) -> str | None:
    """The MCP session an exchange belongs to: the request's id, else the one its answer hands out."""
    return header_value(request_headers, SESSION_HEADER) or header_value(response_headers, SESSION_HEADER)


def is_mcp_exchange(
    method: str,
    request_headers: Iterable[tuple[str, str]],
    response_headers: Iterable[tuple[str, str]] = (),
) -> bool:
    """Whether an exchange is part of an MCP Streamable HTTP session (see the module)."""
    request_headers = tuple(request_headers)
    if session_id_of(request_headers, response_headers) is not None:
        return True
    if method.upper() not in ("POST", "GET"):
        return False
    accept = (header_value(request_headers, "accept") or "").lower()
    return "application/json" in accept and "text/event-stream" in accept
