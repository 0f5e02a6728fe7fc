"""Playing a recorded WebSocket session on a replay server connection: the asyncio driver.

The replay server reads the upgrade request like any other, matches it
against the cassette like any other, and when the recording it matched is a
session (:attr:`~streamtape.cassette.Interaction.websocket`) hands the
connection here. The session's :class:`~streamtape.profiles.websocket.SessionSchedule`
says what the server does and when; this module only does it, on the socket
the request came in on (no second server stack):

* the handshake is wsproto's (sans-I/O, the library mitmproxy uses): it checks
  the upgrade request and writes the ``101`` with the recorded end-to-end
  headers, and parses the client's frames (unmasking, fragments, UTF-8,
  control frames) and writes the server's control frames (pong, ping, close);
* the server's data frames are written here (:func:`encode_message`), since a
  profile may split a text message anywhere, even inside a UTF-8 character,
  which a library that takes ``str`` per frame cannot do;
* a reader task feeds wsproto and compares every complete client message with
  the recorded one (:mod:`streamtape.match.websocket`): its arrival starts the clock of
  the server messages recorded after it; a difference closes with 1008 and a
  reason naming it;
* the play loop writes each server message when its anchor has arrived and
  its delay has passed (server messages due together go in one write), then
  does the ending: a close frame, a wait for the client's close, or a drop.

Waits are on :func:`streamtape.clock.call_at_ns` deadlines and a future the
reader resolves, so a client message wakes the loop at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import h11  # wsproto's HTTP/1.1 layer (a dependency of wsproto and of mitmproxy)
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from ..cassette.model import Interaction
from ..clock import Timer, call_at_ns, now_ns, sleep_until
from ..match.websocket import MessageComparer, fit_reason
from ..profiles.websocket import SessionSchedule, SessionStep, SessionStepKind
from ..wire import end_to_end
from .guard import drain_within, stalled_note
from .request import CLIENT_TIMEOUT_S, BadRequest, HTTPRequest

__all__ = [
    "BadUpgrade",
    "SessionEnd",
    "SessionPlayer",
    "SessionResult",
    "encode_message",
    "is_upgrade",
]

CLOSE_WAIT_S = 2.0
"""How long the server waits for the client's close frame after sending its own."""

_HIGH_WATER = 65536
_OP_CONTINUATION, _OP_TEXT, _OP_BINARY = 0x0, 0x1, 0x2
_NOT_REPLAYED = frozenset(
    {"sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-protocol", "date"}
)
"""Recorded 101 headers the handshake writes afresh (or leaves out: no compression is
negotiated, so the server's frames are the recorded bytes)."""


class BadUpgrade(BadRequest):
    """The request asks for a WebSocket but is not a valid upgrade; answered with a 400."""


class SessionEnd(StrEnum):
    """How a replayed session ended (the server's log line says it as ``outcome=``)."""

    COMPLETE = "complete"
    """Played to the recording's end: its close, or the client's close after every server message."""
    CUT = "cut"
    """Ended early by the recording (a dropped connection) or by a fault (close, drop, unanswered ping)."""
    MISMATCH = "mismatch"
    """A client message differed from the recording: closed with 1008."""
    CLIENT_DISCONNECTED = "client_disconnected"
    """The client closed, or went away, before the server's last message."""


@dataclass(frozen=True)
class SessionResult:
    """What the log line says about a session: how it ended, the server messages sent."""

    end: SessionEnd
    messages: int
    bytes: int
    detail: str


def is_upgrade(req: HTTPRequest) -> bool:
    """Whether ``req`` asks to switch to WebSocket (``Upgrade: websocket``)."""
    return "websocket" in (req.header("upgrade") or "").lower()


def encode_message(step: SessionStep) -> bytes:
    """A server message as it goes on the wire: its frames (unmasked), per ``step.frames``."""
    data = step.data
    sizes = step.frames or (len(data),)
    out = bytearray()
    pos = 0
    for i, n in enumerate(sizes):
        op = _OP_CONTINUATION if i else _OP_TEXT if step.text else _OP_BINARY
        first = (0x80 if i == len(sizes) - 1 else 0) | op
        if n < 126:
            out += bytes((first, n))
        elif n < 65536:
            out += struct.pack("!BBH", first, 126, n)
        else:
            out += struct.pack("!BBQ", first, 127, n)
        out += data[pos : pos + n]
        pos += n
    return bytes(out)


def _handshake(req: HTTPRequest) -> tuple[WSConnection, Request]:
    """wsproto's server handshake on the request the server already read; raises
    :class:`BadUpgrade`.

    ``initiate_upgrade_connection`` is wsproto's entry for a server that parsed the
    request itself: it takes the headers and the target, and assumes ``GET`` (so the
    method is checked here, with wsproto's words). h11, wsproto's HTTP/1.1 layer,
    checks the headers as it takes them and raises its own ``LocalProtocolError``
    for ones it would not send (a target or value byte it does not allow).
    """
    if req.method != "GET":
        raise BadUpgrade("not a WebSocket upgrade: Request method must be GET")
    conn = WSConnection(ConnectionType.SERVER)
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in req.headers]
    try:
        conn.initiate_upgrade_connection(headers, req.target.encode("latin-1"))
        events = list(conn.events())
    except (RemoteProtocolError, h11.LocalProtocolError) as e:
        raise BadUpgrade(f"not a WebSocket upgrade: {e}") from None
    request = next((e for e in events if isinstance(e, Request)), None)
    if request is None:
        raise BadUpgrade("not a WebSocket upgrade request")
    return conn, request


class SessionPlayer:
    """Plays one :class:`SessionSchedule` on the connection of its upgrade request.

    Build with :meth:`accept` (which checks the handshake), then ``await run()``.
    ``on_mismatch(number, text, data, difference)`` is told about a client
    message that differed (the server lists it under ``/_streamtape/requests``).
    A client that leaves ``client_timeout`` seconds of messages unread is dropped.
    """

    def __init__(
        self,
        sched: SessionSchedule,
        conn: WSConnection,
        accept: AcceptConnection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        t0: int,
        comparer: MessageComparer,
        on_mismatch: Callable[[int, bool, bytes, str], None],
        client_timeout: float = CLIENT_TIMEOUT_S,
    ) -> None:
        self.sched = sched
        self.client_timeout = client_timeout
        self.conn = conn
        self._accept = accept
        self.reader = reader
        self.writer = writer
        self.t0 = t0
        self.comparer = comparer
        self.on_mismatch = on_mismatch
        self.arrived: list[int] = [t0]
        """When each anchor arrived: index 0 the upgrade request, k client message k."""
        self.messages = 0
        self.bytes = 0
        self._end: tuple[SessionEnd, str] | None = None
        self._eof = False
        self._client_close: int | None = None
        self._partial: list[bytes] = []
        self._waiters: set[asyncio.Future[None]] = set()
        self._ping_sent = 0
        self._pong_seen = 0

    @classmethod
    def accept(
        cls,
        req: HTTPRequest,
        sched: SessionSchedule,
        ix: Interaction,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        t0: int,
        comparer: MessageComparer,
        on_mismatch: Callable[[int, bool, bytes, str], None],
        client_timeout: float = CLIENT_TIMEOUT_S,
    ) -> SessionPlayer:
        """A player for ``ix`` on this connection; :class:`BadUpgrade` when ``req`` is not a
        valid WebSocket upgrade. The ``101`` keeps the recorded end-to-end headers, and the
        recorded subprotocol when the client offers it."""
        conn, request = _handshake(req)
        recorded = ix.response.headers if ix.response is not None else ()
        protocol = next((v for k, v in recorded if k.lower() == "sec-websocket-protocol"), None)
        extra = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in end_to_end(recorded)
            if k.lower() not in _NOT_REPLAYED
        ]
        accept = AcceptConnection(
            subprotocol=protocol if protocol in request.subprotocols else None, extra_headers=extra
        )
        return cls(sched, conn, accept, reader, writer, t0, comparer, on_mismatch, client_timeout)

    # ----------------------------------------------------------------- running

    async def run(self) -> SessionResult:
        """Play the session to its end; the caller closes the connection afterwards."""
        transport = self.writer.transport
        await sleep_until(self.t0 + self.sched.head_at_ns)
        if transport.is_closing():
            return SessionResult(SessionEnd.CLIENT_DISCONNECTED, 0, 0, "the client left before the 101")
        transport.write(self.conn.send(self._accept))
        tasks = [asyncio.create_task(self._read())]
        if self.sched.ping_every_ns:
            tasks.append(asyncio.create_task(self._ping(self.sched.ping_every_ns)))
        try:
            ending = await self._play()
            if self.conn.state is ConnectionState.LOCAL_CLOSING:
                await self._wait(lambda: self.conn.state is ConnectionState.CLOSED or self._eof,
                                 now_ns() + int(CLOSE_WAIT_S * 1e9))
            with contextlib.suppress(ConnectionError, OSError):
                await asyncio.wait_for(self.writer.drain(), CLOSE_WAIT_S)
            return self._result(ending)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _result(self, ending: SessionStep | None) -> SessionResult:
        """The outcome: the ending the server reached (a close or a drop), else why it stopped."""
        sends = len(self.sched.sends)
        where = f"after {self.messages} of {sends} server messages"
        why = "fault" if self.sched.faulted else "as recorded"
        if ending is not None and ending.kind is SessionStepKind.DROP:
            return SessionResult(SessionEnd.CUT, self.messages, self.bytes,
                                 f"dropped without a close frame {where} ({why})")
        if ending is not None and ending.kind is SessionStepKind.CLOSE:
            end = SessionEnd.CUT if self.sched.faulted else SessionEnd.COMPLETE
            return SessionResult(end, self.messages, self.bytes,
                                 f"closed {ending.code} by the server ({why})")
        end, detail = self._end or (SessionEnd.CLIENT_DISCONNECTED, "the session stopped")
        if end is SessionEnd.CLIENT_DISCONNECTED:
            if self._client_close is not None and self.messages == sends:
                end, detail = SessionEnd.COMPLETE, f"closed {self._client_close} by the client"
            else:
                detail = f"{detail} {where}"
        return SessionResult(end, self.messages, self.bytes, detail)

    async def _play(self) -> SessionStep | None:
        """The server's side: every step in order. Returns the ending step reached, or None
        when the session ended otherwise (:attr:`_end`)."""
        transport = self.writer.transport
        pending: list[bytes] = []
        not_before = 0

        def flush() -> None:
            if pending and self.conn.state is ConnectionState.OPEN and not transport.is_closing():
                transport.write(b"".join(pending))
            pending.clear()

        for step in self.sched.steps:
            if len(self.arrived) <= step.after:
                flush()
                await self._wait(functools.partial(self._arrived, step.after))
            if self._end is not None:
                return None
            due = max(self.arrived[step.after] + step.delay_ns, not_before)
            not_before = due
            if due > now_ns():
                flush()
                await self._wait(lambda: False, due)
                if self._over():
                    return None
            if step.kind is SessionStepKind.SEND:
                pending.append(encode_message(step))
                self.messages += 1
                self.bytes += len(step.data)
                if transport.get_write_buffer_size() > _HIGH_WATER:
                    flush()
                    waiting = transport.get_write_buffer_size()
                    if not await drain_within(self.writer, self.client_timeout):
                        self._finish(SessionEnd.CLIENT_DISCONNECTED,
                                     stalled_note(self.client_timeout, waiting))
                        transport.abort()
                        return None
                continue
            flush()
            await self._ending(step)
            return step
        return None  # pragma: no cover - a schedule always ends with an ending step

    async def _ending(self, step: SessionStep) -> None:
        if step.kind is SessionStepKind.CLOSE:
            assert step.code is not None
            self._close(step.code, step.reason)
        elif step.kind is SessionStepKind.DROP:
            with contextlib.suppress(ConnectionError, OSError):
                await asyncio.wait_for(self.writer.drain(), CLOSE_WAIT_S)
            self.writer.close()
        else:  # await-close: the recorded client closed; so must this one
            await self._wait(lambda: False)

    # ----------------------------------------------------------------- waiting

    async def _wait(self, ready: Callable[[], bool], deadline_ns: int | None = None) -> None:
        """Until ``ready()``, the session ended, or the deadline passed (None: no deadline)."""
        loop = asyncio.get_running_loop()
        while not ready() and self._end is None:
            if deadline_ns is not None and now_ns() >= deadline_ns:
                return
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.add(fut)
            timer: Timer | None = None
            if deadline_ns is not None:
                timer = call_at_ns(deadline_ns, functools.partial(_resolve, fut))
            try:
                await fut
            finally:
                self._waiters.discard(fut)
                if timer is not None:
                    timer.cancel()

    def _poke(self) -> None:
        for fut in list(self._waiters):
            _resolve(fut)

    def _arrived(self, anchor: int) -> bool:
        return len(self.arrived) > anchor

    def _over(self) -> bool:
        """Whether the session ended (a method: the reader task sets it while others await)."""
        return self._end is not None

    def _finish(self, end: SessionEnd, detail: str) -> None:
        """The session ends (the first reason wins); wake every wait."""
        if self._end is None:
            self._end = (end, detail)
        self._poke()

    def _close(self, code: int, reason: str) -> None:
        """Send a close frame, once, while the connection is open."""
        if self.conn.state is ConnectionState.OPEN and not self.writer.transport.is_closing():
            self.writer.transport.write(self.conn.send(CloseConnection(code, fit_reason(reason))))

    # ----------------------------------------------------------------- the client's side

    async def _read(self) -> None:
        try:
            while self.conn.state is not ConnectionState.CLOSED:
                data = await self.reader.read(65536)
                if not data:
                    self._eof = True
                    self.conn.receive_data(None)
                    self._events()
                    return
                self.conn.receive_data(data)
                self._events()
        except (ConnectionError, OSError, LocalProtocolError):
            self._eof = True
            self._finish(SessionEnd.CLIENT_DISCONNECTED, "the connection failed")
        finally:
            self._poke()

    def _events(self) -> None:
        write = self.writer.transport.write
        for ev in self.conn.events():
            if isinstance(ev, TextMessage | BytesMessage):
                if self.conn.state is not ConnectionState.OPEN:
                    continue  # after a close frame: not part of the session
                part = ev.data.encode() if isinstance(ev, TextMessage) else bytes(ev.data)
                self._partial.append(part)
                if ev.message_finished:
                    data = b"".join(self._partial)
                    self._partial.clear()
                    self._client_message(isinstance(ev, TextMessage), data)
            elif isinstance(ev, Ping):
                if self.conn.state is ConnectionState.OPEN:
                    write(self.conn.send(ev.response()))
            elif isinstance(ev, Pong):
                if ev.payload == _ping_payload(self._ping_sent):
                    self._pong_seen = self._ping_sent
            elif isinstance(ev, CloseConnection):
                self._client_closed(ev)

    def _client_closed(self, ev: CloseConnection) -> None:
        state = self.conn.state
        if self._eof:
            self._finish(SessionEnd.CLIENT_DISCONNECTED, "the client went away without a close frame")
        elif state is ConnectionState.REMOTE_CLOSING:
            self._client_close = ev.code
            self.writer.transport.write(self.conn.send(ev.response()))
            self._finish(SessionEnd.CLIENT_DISCONNECTED, f"the client closed {ev.code}")
        elif state is ConnectionState.OPEN:
            # wsproto could not parse the client's frames: it names the close code to send.
            detail = f"client protocol error: {ev.reason}"
            self._close(ev.code, detail)
            self._finish(SessionEnd.MISMATCH, detail)
        self._poke()  # CLOSED: the client answered our close

    def _client_message(self, text: bool, data: bytes) -> None:
        number = len(self.arrived)
        expected = self.sched.expected
        if number > len(expected):
            diff: str | None = (
                f"client message {number} is not in the recording "
                f"(it has {len(expected)} client message{'s' if len(expected) != 1 else ''})"
            )
        else:
            diff = self.comparer.difference(number, expected[number - 1], text, data)
        if diff is not None:
            self.on_mismatch(number, text, data, diff)
            self._close(1008, diff)
            self._finish(SessionEnd.MISMATCH, diff)
            return
        self.arrived.append(now_ns())
        self._poke()

    async def _ping(self, every_ns: int) -> None:
        """``ping:S``: a ping every S seconds; one still unanswered when the next is due
        closes the session with 1011 (what a client that stops reading looks like)."""
        start = now_ns()
        while self._end is None and self.conn.state is ConnectionState.OPEN:
            await self._wait(lambda: False, start + (self._ping_sent + 1) * every_ns)
            if self._over() or self.conn.state is not ConnectionState.OPEN:
                return
            if self._ping_sent and self._pong_seen != self._ping_sent:
                reason = f"ping {self._ping_sent} not answered within {every_ns / 1e9:g} s"
                self._close(1011, reason)
                self._finish(SessionEnd.CUT, reason)
                return
            self._ping_sent += 1
            self.writer.transport.write(self.conn.send(Ping(_ping_payload(self._ping_sent))))


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _ping_payload(n: int) -> bytes:
    return f"streamtape ping {n}".encode()
