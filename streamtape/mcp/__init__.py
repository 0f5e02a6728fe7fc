"""MCP Streamable HTTP sessions: what a recorded session holds, and resuming its streams.

An MCP client talks JSON-RPC to one endpoint over POSTs (answered with JSON or
an SSE stream), a GET stream and a DELETE, all naming one ``Mcp-Session-Id``.
The recorder keeps every exchange of a session (:mod:`streamtape.capture.mcp`);
this package reads them back as one unit:

- :func:`sessions_of` -> :class:`McpSession`: the exchanges grouped by session,
  each an :class:`McpCall` (method, tool, :class:`Progress` notifications,
  result or error, timing), what ``streamtape show`` lists;
- :func:`rpc_messages`: the JSON-RPC messages of one recorded answer;
- :func:`resume_after`: a recorded SSE stream from the event after a
  ``Last-Event-ID``, what a replay serves a reconnecting client.

Replaying a session in its recorded order is matching's part
(:mod:`streamtape.match.mcp`). Pure code, no I/O.
"""

from __future__ import annotations

from .resume import event_end, resume_after
from .sessions import CallKind, McpCall, McpSession, Progress, call_of, rpc_messages, sessions_of

__all__ = [
    "CallKind",
    "McpCall",
    "McpSession",
    "Progress",
    "call_of",
    "event_end",
    "resume_after",
    "rpc_messages",
    "sessions_of",
]
