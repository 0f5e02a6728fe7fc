"""An MCP session read from its recorded exchanges: the calls, their progress and results.

Pure code over recorded interactions. A session is every exchange carrying
one ``Mcp-Session-Id`` (:mod:`streamtape.capture.mcp`), in the order the
client sent them; each exchange is one :class:`McpCall`:

- a JSON-RPC request (``initialize``, ``tools/list``, ``tools/call``,
  ``resources/read``...): its ``id``, the tool, resource or prompt it names, the
  progress notifications the server streamed before the answer, and the
  answer's ``result`` or ``error``;
- a notification (no ``id``; the server answers ``202 Accepted``);
- the GET stream (the server's own messages), and the DELETE that ends the session.

The answers are JSON (``application/json``) or an SSE stream of JSON-RPC
messages; both are read here, content encoding undone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..capture.mcp import is_mcp_exchange, session_id_of
from ..cassette.model import Interaction
from ..shapes.body import decoded_body
from ..shapes.sse import SSEEvent, SSEParser

__all__ = [
    "CallKind",
    "McpCall",
    "McpSession",
    "Progress",
    "call_of",
    "rpc_messages",
    "sessions_of",
]

CallKind = Literal["request", "notification", "stream", "end", "other"]
"""What one exchange of a session is: a JSON-RPC request, a notification (or a
client's response), the GET stream, the DELETE, or anything else."""


@dataclass(frozen=True, slots=True)
class Progress:
    """One ``notifications/progress`` the server sent while a call ran."""

    at_ns: int
    """After the call's request went out."""
    progress: float | None
    total: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class McpCall:
    """One exchange of a session, read from its interaction."""

    index: int
    """The interaction's position in the cassette."""
    kind: CallKind
    http_method: str
    status: int | None
    method: str | None = None
    """The JSON-RPC method (None for the GET stream and the DELETE)."""
    id: int | str | None = None
    name: str | None = None
    """What the call names: a tool (``tools/call``), a resource URI, a prompt."""
    arguments: Any = None
    started_ns: int = 0
    """After the session's first request."""
    duration_ns: int | None = None
    progress: tuple[Progress, ...] = ()
    result: Any = None
    error: Any = None
    """The JSON-RPC error object, or None."""
    server_messages: tuple[Any, ...] = ()
    """What else the server sent on this stream (its own requests and notifications)."""
    event_ids: tuple[str, ...] = ()
    """The SSE event ids of the answer (what a reconnecting client names in ``Last-Event-ID``)."""

    @property
    def label(self) -> str:
        """``tools/call count (id 2)``, ``notifications/initialized``, ``GET stream``, ``DELETE``."""
        if self.kind == "stream":
            return "GET stream"
        if self.kind == "end":
            return "DELETE (end of session)"
        if self.method is None:
            return f"{self.http_method} (not JSON-RPC)"
        what = self.method + (f" {self.name}" if self.name else "")
        return what + (f" (id {self.id})" if self.id is not None else "")

    @property
    def outcome(self) -> str:
        """``result``, ``error CODE: MESSAGE``, ``tool error`` (a result flagged ``isError``),
        ``HTTP STATUS``, ``no answer``, or ``-`` (nothing is answered: a notification, a stream)."""
        if self.error is not None:
            e = self.error
            if isinstance(e, dict):
                return f"error {e.get('code')}: {e.get('message')}"
            return f"error: {e}"
        if self.status is not None and self.status >= 400:
            return f"HTTP {self.status}"
        if self.result is not None:
            if isinstance(self.result, dict) and self.result.get("isError") is True:
                return "tool error"
            return "result"
        return "no answer" if self.kind == "request" else "-"

    def result_text(self) -> str:
        """The text of a result's content (a tool's ``content[].text``, a resource's
        ``contents[].text``), else the result as JSON; an error's message."""
        if self.error is not None:
            e = self.error
            return str(e.get("message")) if isinstance(e, dict) else str(e)
        r = self.result
        if not isinstance(r, dict):
            return "" if r is None else json.dumps(r, ensure_ascii=False)
        parts = [c.get("text") for key in ("content", "contents") for c in r.get(key) or []
                 if isinstance(c, dict) and isinstance(c.get("text"), str)]
        return "\n".join(p for p in parts if p) if parts else json.dumps(r, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class McpSession:
    """Every recorded exchange of one MCP session, in the order the client sent them."""

    id: str | None
    """The ``Mcp-Session-Id`` (None: a server that keeps no sessions)."""
    calls: tuple[McpCall, ...]
    started_at: float
    """Wall clock of the first request."""
    duration_ns: int
    """From the first request to the end of the last exchange."""
    server: str | None = None
    """The server's name and version from the answer to ``initialize``."""
    protocol_version: str | None = None

    @property
    def indexes(self) -> tuple[int, ...]:
        return tuple(c.index for c in self.calls)

    @property
    def requests(self) -> tuple[McpCall, ...]:
        """The JSON-RPC requests, in order (what a replay holds the client to)."""
        return tuple(c for c in self.calls if c.kind == "request")

    def summary(self) -> str:
        """One line: the calls in order, a tool call with its tool and progress count."""
        parts = []
        for c in self.requests:
            s = c.method or "?"
            if c.method == "tools/call" and c.name:
                s += f" {c.name}"
            if c.progress:
                s += f" ({len(c.progress)} progress)"
            if c.outcome not in ("result", "-"):
                s += f" [{c.outcome}]"
            parts.append(s)
        return ", ".join(parts)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def rpc_messages(ix: Interaction) -> list[tuple[int, Any, str]]:
    """The JSON-RPC messages of a recorded answer as ``(at_ns, message, sse_id)``: one per SSE
    event (``""`` id when it has none), or the JSON body (a batch is several); a message
    that is not JSON is left out."""
    resp = ix.response
    if resp is None:
        return []
    body = decoded_body(ix)
    if resp.content_type == "text/event-stream":
        out: list[tuple[int, Any, str]] = []
        p = SSEParser()
        for at, data in body.pieces:
            for item in p.feed(data, at):
                if isinstance(item, SSEEvent):
                    v = _json(item.data.encode())
                    if v is not None:
                        out.append((item.at_ns, v, item.id))
        return out
    v = _json(body.data)
    if v is None or not body.pieces:
        return []
    at = body.pieces[-1][0]
    return [(at, m, "") for m in (v if isinstance(v, list) else [v])]


def _name_of(method: str | None, params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    for key in ("name", "uri"):
        v = params.get(key)
        if isinstance(v, str) and method not in ("initialize",):
            return v
    return None


def call_of(index: int, ix: Interaction, t0: float = 0.0) -> McpCall:
    """One exchange as a call; ``t0`` is the session's first request (wall clock)."""
    req = ix.request
    started = max(0, round((req.started_at - t0) * 1e9)) if t0 else 0
    status = ix.response.status if ix.response is not None else None
    common: dict[str, Any] = {
        "index": index, "http_method": req.method.upper(), "status": status,
        "started_ns": started, "duration_ns": ix.duration_ns,
    }
    if req.method.upper() == "DELETE":
        return McpCall(kind="end", **common)
    msgs = rpc_messages(ix)
    ids = tuple(sid for _, _, sid in msgs if sid)
    if req.method.upper() == "GET":
        return McpCall(kind="stream", server_messages=tuple(m for _, m, _ in msgs), event_ids=ids,
                       **common)
    body = _json(req.body)
    first = body[0] if isinstance(body, list) and body else body
    if not isinstance(first, dict) or "method" not in first:
        kind: CallKind = "notification" if isinstance(first, dict) and "jsonrpc" in first else "other"
        return McpCall(kind=kind, **common)
    method = first.get("method")
    method = method if isinstance(method, str) else None
    rid = first.get("id")
    rid = rid if isinstance(rid, int | str) and not isinstance(rid, bool) else None
    params = first.get("params")
    progress: list[Progress] = []
    others: list[Any] = []
    result = error = None
    for at, m, _ in msgs:
        if not isinstance(m, dict):
            continue
        if m.get("method") == "notifications/progress" and isinstance(m.get("params"), dict):
            p = m["params"]
            progress.append(Progress(at, _num(p.get("progress")), _num(p.get("total")),
                                     p.get("message") if isinstance(p.get("message"), str) else None))
        elif "result" in m or "error" in m:
            if rid is None or m.get("id") == rid:
                result, error = m.get("result"), m.get("error")
        else:
            others.append(m)
    return McpCall(
        kind="request" if rid is not None else "notification", method=method, id=rid,
        name=_name_of(method, params),
        arguments=params.get("arguments") if isinstance(params, dict) else None,
        progress=tuple(progress), result=result, error=error, server_messages=tuple(others),
        event_ids=ids, **common,
    )


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def sessions_of(interactions: Sequence[Interaction]) -> list[McpSession]:
    """The MCP sessions among ``interactions``, in the order they started; each
    session's exchanges in the order their requests went out (cassette order on a tie)."""
    groups: dict[str | None, list[int]] = {}
    for i, ix in enumerate(interactions):
        if ix.websocket is not None:
            continue
        rh = ix.request.headers
        resp_h = ix.response.headers if ix.response is not None else ()
        if not is_mcp_exchange(ix.request.method, rh, resp_h):
            continue
        groups.setdefault(session_id_of(rh, resp_h), []).append(i)
    out: list[McpSession] = []
    for sid, members in groups.items():
        members.sort(key=lambda i: (interactions[i].request.started_at, i))
        t0 = interactions[members[0]].request.started_at
        calls = tuple(call_of(i, interactions[i], t0) for i in members)
        end = max((c.started_ns + (c.duration_ns or 0) for c in calls), default=0)
        server = version = None
        for c in calls:
            if c.method == "initialize" and isinstance(c.result, dict):
                info = c.result.get("serverInfo")
                if isinstance(info, dict):
                    server = " ".join(str(info[k]) for k in ("name", "version") if info.get(k))
                v = c.result.get("protocolVersion")
                version = v if isinstance(v, str) else None
        out.append(McpSession(sid, calls, t0, end, server, version))
    out.sort(key=lambda s: s.started_at)
    return out
