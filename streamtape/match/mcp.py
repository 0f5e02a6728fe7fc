"""Replaying MCP sessions: the order of a session's calls, and resuming a stream. No I/O.

A recorded MCP session answers one client's questions in the order it asked
them: the second ``tools/call`` was answered knowing the first. So within a
session the JSON-RPC requests are matched in their recorded order
(:class:`SessionOrder`), beside the usual request matching:

- the answer to ``initialize`` hands out the recorded ``Mcp-Session-Id``
  again (it is a recorded header), so the client's later requests name the
  recorded session; serving ``initialize`` starts that session's order over
  (a second client replaying the same session starts from its first call);
- a JSON-RPC request (it has an ``id``) naming a recorded session must equal
  the session's next recorded request, its ``id`` included; anything else is
  an :class:`~streamtape.errors.McpOrderError` naming the call by its number
  in the session (``initialize`` is call 1), both calls and the first place the
  bodies differ (``call 3 is tools/call add (id 2), recorded tools/call count
  (id 2): lacks params._meta (recorded {"progressToken": 2})``);
- notifications, the client's responses, the GET stream and the DELETE are
  matched as any request (they come in no fixed order beside the calls).

A client that reconnects with ``Last-Event-ID`` (the SSE way to resume a cut
stream, which MCP servers with an event store support) gets the recorded
stream that holds that event, from the event after it
(:func:`streamtape.mcp.resume_after`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..capture.mcp import LAST_EVENT_ID_HEADER, SESSION_HEADER
from ..cassette.model import Interaction, Request
from ..errors import McpOrderError, NoMatchError
from ..mcp.resume import resume_after

if TYPE_CHECKING:
    from .matcher import JsonComparison, RequestKey

__all__ = ["SessionOrder", "rpc_label"]


def _rpc(value: Any) -> dict[str, Any] | None:
    """The JSON-RPC request in a body (the first of a batch), or None when it is none."""
    first = value[0] if isinstance(value, list) and value else value
    if isinstance(first, dict) and isinstance(first.get("method"), str) and "id" in first:
        return first
    return None


def rpc_label(value: Any) -> str:
    """``tools/call count (id 2)``: a JSON-RPC request as a replay error names it."""
    rpc = _rpc(value)
    if rpc is None:
        return "not a JSON-RPC request"
    params = rpc.get("params")
    name = params.get("name") or params.get("uri") if isinstance(params, dict) else None
    return f"{rpc['method']}{f' {name}' if isinstance(name, str) else ''} (id {rpc.get('id')})"


def _header(headers: tuple[tuple[str, str], ...], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


class SessionOrder:
    """Holds each recorded MCP session's JSON-RPC requests to their recorded order.

    ``request_of(i)`` gives recorded request ``i`` (of ``count``); a session's
    requests are found on first use. The caller (the matcher) holds its lock
    around :meth:`choose` and :meth:`served`.
    """

    def __init__(self, count: int, request_of: Callable[[int], Request], key_of: Callable[[int], RequestKey],
                 comparison: JsonComparison) -> None:
        self._count = count
        self._request_of = request_of
        self._key_of = key_of
        self._cmp = comparison
        self._sessions: dict[str, list[int]] | None = None
        self._next: dict[str, int] = {}

    def _recorded(self) -> dict[str, list[int]]:
        if self._sessions is None:
            found: dict[str, list[tuple[float, int]]] = {}
            for i in range(self._count):
                r = self._request_of(i)
                sid = r.header(SESSION_HEADER)
                if sid is not None and r.method.upper() == "POST":
                    k = self._key_of(i)
                    if _rpc(k.json) is not None:
                        found.setdefault(sid, []).append((r.started_at, i))
            self._sessions = {s: [i for _, i in sorted(v)] for s, v in found.items()}
        return self._sessions

    def applies(self, key: RequestKey) -> str | None:
        """The recorded session whose order ``key`` is held to, or None."""
        sid = _header(key.headers, SESSION_HEADER)
        if sid is None or key.method != "POST" or _rpc(key.json) is None:
            return None
        return sid if sid in self._recorded() else None

    def resume(self, key: RequestKey, interaction_of: Callable[[int], Interaction]
               ) -> tuple[int, Interaction] | None:
        """A GET naming a recorded session and a ``Last-Event-ID``: the recorded stream of
        that session holding the event, from the event after it; None when ``key`` is no
        such request; :class:`~streamtape.errors.NoMatchError` when no stream has the event."""
        last = _header(key.headers, LAST_EVENT_ID_HEADER)
        sid = _header(key.headers, SESSION_HEADER)
        if last is None or sid is None or key.method != "GET":
            return None
        for i in range(self._count):
            r = self._request_of(i)
            if r.header(SESSION_HEADER) != sid:
                continue
            resumed = resume_after(interaction_of(i), last)
            if resumed is not None:
                return i, resumed
        raise NoMatchError(
            f"GET {key.target} with Last-Event-ID {last}: no recorded stream of MCP session "
            f"{sid} has an event with that id", request=key)

    def choose(self, sid: str, key: RequestKey, candidates: list[int]) -> int:
        """The recording that answers call ``key`` of session ``sid`` (its next one), or
        :class:`McpOrderError`."""
        calls = self._recorded()[sid]
        n = self._next.get(sid, 0)
        number = n + 2  # initialize (which names no session yet) is call 1
        got = rpc_label(key.json)
        if n >= len(calls):
            raise McpOrderError(
                f"MCP session {sid}: call {number} is {got}, but the recorded session made "
                f"{len(calls) + 1} calls", session=sid, call=number, request=key)
        expected = calls[n]
        if expected not in candidates:
            rk = self._key_of(expected)
            d = self._cmp.first_difference(rk.json, key.json, whole="the request")
            raise McpOrderError(
                f"MCP session {sid}: call {number} is {got}, recorded {rpc_label(rk.json)}"
                f"{f': {d}' if d else ''}", session=sid, call=number, request=key)
        self._next[sid] = n + 1
        return expected

    def served(self, key: RequestKey, response_headers: tuple[tuple[str, str], ...]) -> None:
        """A recording was served for ``key``: one that hands out a session id to a
        request that named none (``initialize``'s answer) starts that session over."""
        sid = _header(response_headers, SESSION_HEADER)
        if sid is not None and _header(key.headers, SESSION_HEADER) is None:
            self._next[sid] = 0
