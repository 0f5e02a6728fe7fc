"""WebSocket sessions in the mitmproxy recording addon: the hooks, delegated from :class:`~streamtape.mitm.record.RecordAddon`.

mitmproxy carries a WebSocket connection as an HTTP flow: the upgrade request
and the ``101`` response pass the usual hooks (``request``,
``responseheaders``, ``response``), then ``websocket_start``, one
``websocket_message`` per message (``flow.websocket.messages[-1]``) and
``websocket_end`` (``flow.websocket.close_code``, ``close_reason``,
``closed_by_client``). This module turns those into one session interaction
through :class:`streamtape.capture.websocket.SessionRecorder`:

- ``responseheaders`` with a ``101`` to WebSocket: the flow leaves the HTTP
  recorder (:meth:`~streamtape.capture.recorder.Recorder.detach`, after its t = 0 has
  moved past the connection's setup) and waits, with the head's arrival time.
- ``response``: mitmproxy sets ``flow.websocket`` just before this hook when it
  will relay the session (the ``websocket`` option, a valid handshake); the
  record filter is applied here, so ``~websocket`` matches. The session opens.
- ``websocket_message``: the message is noted on the hook, with the time it
  came in (below), and recorded just after the hooks return, once mitmproxy has relayed it:
  redaction and the credential search never delay a message, and what is
  recorded is what was sent (a message another addon dropped is left out; one
  an addon injected is kept, the peer got it).
- ``websocket_end``: the close. mitmproxy reports a connection that ended
  without a close frame as code 1006 from the side whose connection ended.

A message's time is the kernel's receive time of the last read of the
connection it came on (:mod:`streamtape.arrival`): the upstream's socket is
stamped from its connect on (as for HTTP pieces), the client's from the
``101`` on. mitmproxy runs the hook as a task of its own, so by then that
connection may have been read again: the time is never later than the hook's
clock reading, and never earlier than the message before it, so a session's
messages keep the order mitmproxy relayed them in with times that do not go
back. A message read while mitmproxy's loop was busy elsewhere keeps the time
it came in; where there is no stamp (not Linux, QUIC) the hook's clock reading
is the time, as before.

What mitmproxy does not expose, on 11 and 12 alike: the frames of a
fragmented message (its WebSocket layer reassembles them and keeps their
sizes only to forward the message in the same frames; the hook sees the whole
message), and pings and pongs (answered and logged by the layer, never a
hook). So recorded messages carry no ``fragments``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mitmproxy import http
from mitmproxy.websocket import WebSocketMessage

from ..arrival import ArrivalSocket, stamp_arrivals
from ..capture.credentials import Credential
from ..capture.recorder import Begun, Recorder
from ..capture.websocket import SessionRecorder
from ..cassette.model import Interaction
from ..cassette.records import Record
from .transports import transport_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from mitmproxy import connection, flowfilter

    from ..capture.redaction import Redaction

def is_upgrade_request(request: http.Request) -> bool:
    """The request asks to switch to WebSocket (``Upgrade: websocket``)."""
    return str(request.headers.get("upgrade", "")).lower() == "websocket"


def is_upgrade(flow: http.HTTPFlow) -> bool:
    """The upstream agreed to switch to WebSocket: a 101 with ``Upgrade: websocket``."""
    r = flow.response
    return r is not None and r.status_code == 101 and r.headers.get("upgrade", "").lower() == "websocket"


class _Host(Protocol):
    """What the recording addon gives its WebSocket part."""

    recorder: Recorder | None
    redaction: Redaction
    filter: flowfilter.TFilter | None
    on_credential: Callable[[Credential], None]
    on_finished: Callable[[Interaction], None] | None

    def _defer(self, records: list[Record]) -> None: ...
    def _sent(self, flow: http.HTTPFlow) -> None: ...
    def _arrival(self, conn: connection.Connection) -> ArrivalSocket | None: ...
    def _report_when_saved(self, ix: Interaction) -> None: ...


@dataclass(slots=True)
class _Upgrading:
    """A flow between its 101 head and the ``response`` hook."""

    begun: Begun
    headers_at_ns: int


@dataclass(slots=True)
class _Clocks:
    """Where an open session's message times come from: each side's stamped socket (None
    where there is none) and the last time given, which the next never goes below."""

    client: ArrivalSocket | None
    server: ArrivalSocket | None
    last_ns: int

    def time_of(self, m: WebSocketMessage, now_ns: int) -> int:
        """``m``'s time: its connection's last read (an injected message: now)."""
        arrival = None if m.injected else self.client if m.from_client else self.server
        at = min(arrival.arrived_ns, now_ns) if arrival is not None else now_ns
        at = self.last_ns = max(at, self.last_ns)
        return at


class WebSocketRecording:
    """The WebSocket half of the recording addon (it calls these from its hooks)."""

    def __init__(self, host: _Host) -> None:
        self.host = host
        self.sessions: SessionRecorder | None = None
        self._for: Recorder | None = None
        self._upgrading: dict[str, _Upgrading] = {}
        self._clocks: dict[str, _Clocks] = {}

    def _recorder(self) -> SessionRecorder | None:
        """The session recorder, following the addon's (rebuilt when its options change)."""
        h = self.host
        if h.recorder is None:
            return None
        if self.sessions is None:
            self.sessions = SessionRecorder(
                h._defer, h.recorder.new_id, redaction=h.redaction, on_credential=h.on_credential
            )
        elif self._for is not h.recorder:  # reconfigured: new sessions follow the new options
            self.sessions.new_id = h.recorder.new_id
            self.sessions.redaction = h.redaction
        self._for = h.recorder
        return self.sessions

    # -- the HTTP hooks of the upgrade ------------------------------------------

    def responseheaders(self, flow: http.HTTPFlow, now_ns: int) -> bool:
        """Take a flow the upstream upgrades to WebSocket; True when taken (the HTTP
        recorder has let go of it and the addon leaves it alone)."""
        rec = self.host.recorder
        if rec is None or not is_upgrade(flow) or not rec.has(flow.id):
            return False
        self.host._sent(flow)  # t = 0 past the connection's setup, before the flow leaves
        begun = rec.detach(flow.id)
        if begun is not None:
            self._upgrading[flow.id] = _Upgrading(begun, now_ns)
        return True

    def response(self, flow: http.HTTPFlow) -> bool:
        """Open the session if mitmproxy relays one; True when the flow was taken."""
        up = self._upgrading.pop(flow.id, None)
        if up is None:
            return False
        sessions = self._recorder()
        r = flow.response
        wanted = flow.websocket is not None and r is not None
        if wanted and self.host.filter is not None:
            wanted = self.host.filter(flow)
        if sessions is None or r is None or not wanted:
            return True
        headers = tuple((k, v) for k, v in r.headers.items(multi=True))
        sessions.open(flow.id, up.begun, r.status_code, r.reason, r.http_version, headers, up.headers_at_ns)
        client = flow.client_conn
        self._clocks[flow.id] = _Clocks(stamp_arrivals(transport_of(client, client)),
                                        self.host._arrival(flow.server_conn), up.headers_at_ns)
        return True

    def error(self, flow: http.HTTPFlow) -> None:
        """An upgrade that failed between its head and its response hook is not a session;
        a session whose flow errors without a ``websocket_end`` ends with that error."""
        self._upgrading.pop(flow.id, None)
        sessions = self.sessions
        if sessions is None or not sessions.has(flow.id):
            return
        now = time.perf_counter_ns()
        msg = flow.error.msg if flow.error else "unknown error"
        asyncio.get_running_loop().call_soon(self._failed, flow.id, now, msg)

    def _failed(self, key: str, now_ns: int, error: str) -> None:
        sessions = self.sessions
        if sessions is None:
            return
        client = "client" in error.lower()
        self._clocks.pop(key, None)
        ix = sessions.finish(key, now_ns, None, closed_by_client=client, error=error)
        if ix is not None:
            self._finished(ix)

    # -- the WebSocket hooks -------------------------------------------------------

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        sessions = self.sessions
        ws = flow.websocket
        if sessions is None or ws is None or not ws.messages or not sessions.has(flow.id):
            return
        m = ws.messages[-1]
        now = time.perf_counter_ns()
        clocks = self._clocks.get(flow.id)
        at = clocks.time_of(m, now) if clocks is not None else now
        # Read after every addon's hook has returned and mitmproxy has relayed the
        # message: what went on the wire (another addon may change or drop it).
        asyncio.get_running_loop().call_soon(self._message, flow.id, m, at)

    def _message(self, key: str, m: WebSocketMessage, now_ns: int) -> None:
        if self.sessions is not None and not m.dropped:  # a dropped message never reached the peer
            self.sessions.message(key, m.from_client, m.is_text, m.content, now_ns)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        sessions = self.sessions
        ws = flow.websocket
        if sessions is None or ws is None or not sessions.has(flow.id):
            return
        now = time.perf_counter_ns()
        # Queued behind the last messages' call_soon, so the session ends after them.
        asyncio.get_running_loop().call_soon(
            self._end, flow.id, now, ws.close_code, ws.close_reason or "", ws.closed_by_client
        )

    def _end(self, key: str, now_ns: int, code: int | None, reason: str, by_client: bool | None) -> None:
        sessions = self.sessions
        if sessions is None:
            return
        self._clocks.pop(key, None)
        ix = sessions.finish(key, now_ns, code, reason, by_client)
        if ix is not None:
            self._finished(ix)

    def _finished(self, ix: Interaction) -> None:
        """Report a finished session as the addon reports an HTTP interaction (its line once saved)."""
        h = self.host
        if h.on_finished:
            h.on_finished(ix)
        h._report_when_saved(ix)

    # -- the addon's clock and shutdown ---------------------------------------------

    def tick(self, now_ns: int) -> None:
        if self.sessions is not None:
            self.sessions.tick(now_ns)

    def done(self, now_ns: int) -> None:
        """The recording stops: open sessions end as ``interrupted``."""
        self._clocks.clear()
        if self.sessions is not None:
            for ix in self.sessions.close(now_ns):
                self._finished(ix)

