"""The replay server: an asyncio driver of :class:`~streamtape.profiles.Schedule` values.

:class:`ReplayServer` reads requests (:mod:`.request`), asks the
:class:`~streamtape.match.matcher.Matcher` for the interaction, asks the profile for a
schedule, and plays it with a :class:`~.player.Player` against absolute
deadlines from the moment the request was received. Everything about the
bytes on the wire (the head, the framing headers, chunk framing, error
bodies) comes from :mod:`streamtape.wire`; this module only decides *when*
and *on which socket*.

Schedules are pure functions of (profile, interaction, seed), so they are
computed once and shared, and so are their framed pieces: a thousand
concurrent streams of one recording cost a thousand sockets, not a thousand
copies of the timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..cassette.model import Interaction
from ..cassette.reader import Cassette, load_many
from ..clock import sleep_until
from ..errors import NoMatchError, OptionError, StreamtapeError
from ..fmt import jsonable
from ..interop import timing_note
from ..match.indexed import interactions_of, matcher_for
from ..match.matcher import Matcher, RequestJournal
from ..match.websocket import MessageComparer
from ..profiles import FaultKind, Profile, Schedule, StepKind, parse_profile
from ..profiles.websocket import schedule_session
from ..wire import (
    DIRECT_HEADER,
    ERROR_HEADERS,
    ERROR_STATUSES,
    NO_MATCH_STATUS,
    PROFILE_HEADER,
    ErrorType,
    Framing,
    body_end,
    error_body,
    response_head,
)
from .guard import answer_and_close, drain_within, stalled_note
from .links import Relinker, is_json_body, recorded_origins
from .player import Player, Prepared, Stop, reset
from .request import CLIENT_TIMEOUT_S, MAX_BODY, MAX_HEAD, BadRequest, HTTPRequest, read_request
from .sources import cassette_files
from .websocket import BadUpgrade, SessionPlayer, is_upgrade

__all__ = ["CONTROL_PREFIX", "ReplayServer", "ReplaySource", "ServeOutcome", "ServedRequest"]

CONTROL_PREFIX = "/_streamtape/"
"""Requests under this path are answered by the server itself (``GET /_streamtape/requests``)."""

_log = logging.getLogger("streamtape.serve")

_CACHE = 256  # schedules, framed schedules and per-request profiles kept

_Path = str | os.PathLike[str]
ReplaySource = Matcher | Cassette | _Path | Iterable[Interaction | Cassette | _Path]
"""What a :class:`ReplayServer` serves: a matcher, or cassettes, paths (files or
folders of ``.tape`` files) and interactions to build one from."""


class ServeOutcome(StrEnum):
    """How the server's answer to one request ended (the ``outcome=`` of the log line)."""

    COMPLETE = "complete"
    CUT = "cut"
    RESET = "reset"
    CLIENT_DISCONNECTED = "client_disconnected"
    INTERRUPTED = "interrupted"
    """The server shut down mid-stream."""
    NO_RESPONSE = "no_response"
    """The recording has no response head: the client got none either."""
    NO_MATCH = "no_match"
    MISMATCH = "mismatch"
    """A WebSocket session's request was no upgrade, or a client message differed from the
    recording (closed with 1008; the message is listed under ``/_streamtape/requests``)."""
    BAD_PROFILE = "bad_profile"
    CONTROL = "control"
    BAD_REQUEST = "bad_request"
    """Not a request this server takes (:class:`~.request.BadRequest`): answered 4xx, or closed."""
    CLIENT_STALLED = "client_stalled"
    """The client stopped reading for the client timeout; its connection was dropped."""


@dataclass(frozen=True)
class ServedRequest:
    """What the log line says about one request."""

    number: int
    method: str
    target: str
    status: int | None
    interaction: int | None
    source: str | None
    profile: str | None
    outcome: ServeOutcome
    pieces: int = 0
    """Body pieces sent; for a WebSocket session (status 101), server messages."""
    bytes: int = 0
    duration_ns: int = 0
    detail: str = ""

    def line(self) -> str:
        head = f"#{self.number} {self.method} {self.target}"
        if self.interaction is None:
            where = ""
        else:
            where = f" -> interaction {self.interaction}"
            if self.source:
                where += f" of {self.source}"
        st = f" {self.status}" if self.status is not None else ""
        prof = f" profile={self.profile}" if self.profile else ""
        body = (
            f" {self.pieces} {'messages' if self.status == 101 else 'pieces'} {self.bytes} B "
            f"{self.duration_ns / 1e9:.3f}s"
            if self.interaction is not None
            else ""
        )
        detail = f": {self.detail}" if self.detail else ""
        return f"{head}{where}{st}{prof}{body} outcome={self.outcome}{detail}"


@dataclass(eq=False)
class _Conn:
    writer: asyncio.StreamWriter
    task: asyncio.Task[Any] | None = None


@dataclass
class _Stats:
    served: int = 0
    no_match: int = 0
    by_outcome: dict[ServeOutcome, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Served:
    """The request-independent half of a log line: which interaction, from where, which profile."""

    interaction: int
    source: str | None
    profile: str


def _as_profile(p: Profile | str) -> Profile:
    return parse_profile(p) if isinstance(p, str) else p


def _simple_response(status: int, body: bytes, *, keep_alive: bool = True,
                     headers: Sequence[tuple[str, str]] = (("Content-Type", "application/json"),),
                     ) -> bytes:
    """A whole JSON response (head and body) the server answers by itself."""
    head, _, _ = response_head(
        status, "", list(headers), Framing.CONTENT_LENGTH,
        content_length=len(body), keep_alive=keep_alive,
    )
    return head + body


def _error_response(status: int, message: str, type_: ErrorType, *, keep_alive: bool,
                    path: str = "") -> bytes:
    """An error the server invents, in the error shape of the API ``path`` belongs to."""
    return _simple_response(status, error_body(message, type_, path=path), keep_alive=keep_alive,
                            headers=ERROR_HEADERS)


PassOn = Callable[[HTTPRequest, asyncio.StreamWriter], Awaitable[bool | None]]
"""Answers a request no recording answers, in place of the server's no-match answer (the
proxy passes it on upstream): returns whether the connection may be kept, or None to leave
the request to the no-match answer."""


class ReplayServer:
    """Serve recorded interactions over HTTP/1.1 on ``host:port`` (port 0: any free port),
    and recorded WebSocket sessions to an upgrade on the same port (:attr:`ws_url`).

    ``source`` is a :class:`~streamtape.match.matcher.Matcher`, or interactions /
    cassettes / paths from which one is built with ``ignore_fields``,
    ``match_headers``, ``strict`` and ``strict_nulls``. ``profile`` is a profile text or a
    :class:`~streamtape.profiles.Profile`. ``log`` receives one line per request.
    ``sources`` names the cassette of each of the matcher's interactions (for
    the log line, and for the no-match message if the matcher has no ``sources``
    of its own) when ``source`` is a Matcher.

    A request no recording answers gets ``no_match_status``
    (:data:`~streamtape.wire.NO_MATCH_STATUS`, 422: why not a 404 is said there)
    with the explanation in the error shape of the API its path belongs to
    (:func:`~streamtape.wire.error_body`); the log line says ``outcome=no_match``.

    Async use: ``await server.start()``, ``server.url``, ``await server.close()``
    (or ``async with``). From synchronous code (tests), ``with server:`` runs it
    on a background thread with its own event loop.
    """

    def __init__(
        self,
        source: ReplaySource,
        *,
        profile: Profile | str = "faithful",
        host: str = "127.0.0.1",
        port: int = 0,
        ignore_fields: Iterable[str] = (),
        match_headers: Iterable[str] = (),
        strict: bool = False,
        strict_nulls: bool = False,
        log: Callable[[str], None] | None = None,
        direct_token: str | None = None,
        sources: Sequence[str | None] | None = None,
        max_body: int = MAX_BODY,
        client_timeout: float = CLIENT_TIMEOUT_S,
        reuse_port: bool = False,
        journal: RequestJournal | None = None,
        numbers: Callable[[], int] | None = None,
        pass_on: PassOn | None = None,
        no_match_status: int = NO_MATCH_STATUS,
    ) -> None:
        if isinstance(source, Matcher):
            self.matcher = source
            names: list[str | None] = list(sources or [None] * len(source.interactions))
            if sources and source.sources is None:
                source.sources = names
        else:
            interactions, names = _collect(source)
            self.matcher = matcher_for(  # a large cassette file stays on disk (IndexedMatcher)
                interactions,
                ignore_fields=tuple(ignore_fields),
                match_headers=tuple(match_headers),
                strict=strict,
                strict_nulls=strict_nulls,
                journal=journal,
                sources=names,
            )
        self._set_where(names)
        if no_match_status not in ERROR_STATUSES:
            raise OptionError(f"no_match_status={no_match_status!r}: expected an error status, "
                              f"{ERROR_STATUSES.start} to {ERROR_STATUSES.stop - 1}")
        self.no_match_status = no_match_status
        """The status a request no recording answers gets."""
        self.profile = _as_profile(profile)
        self.direct_token = direct_token
        self.max_body = max_body
        """The longest request body read; a longer one gets a 413."""
        self.client_timeout = client_timeout
        """How long a request may take to arrive, and a client may leave its bytes unread."""
        self.host = host
        self.port = port
        self.reuse_port = reuse_port
        """Listen with ``SO_REUSEPORT``: several processes accept on one port (``serve --workers``)."""
        self._numbers = numbers
        self.pass_on = pass_on
        """Where a request no recording answers goes instead of the no-match answer (the proxy's)."""
        self.log = log or _log.info
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()
        self._profiles: dict[str, Profile] = {}
        self._schedules: dict[tuple[int, int, int], tuple[Profile, Interaction, Schedule]] = {}
        self._prepared: dict[tuple[int, Framing], tuple[Schedule, Prepared]] = {}
        self._relinker: Relinker | None = None
        self._count = 0
        self.playing = 0
        """Responses being played right now (the collector waits for none)."""
        self.stats = _Stats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed: asyncio.Event | None = None

    def _set_where(self, names: Sequence[str | None]) -> None:
        # Where each interaction came from: (index within its cassette, cassette name).
        self._where: list[tuple[int, str | None]] = []
        counters: dict[str | None, int] = {}
        for name in names:
            n = counters.get(name, 0)
            counters[name] = n + 1
            self._where.append((n, name))

    def replace_matcher(self, matcher: Matcher, sources: Sequence[str | None] | None = None) -> None:
        """Serve from another matcher from the next request on."""
        self.matcher = matcher
        if sources and matcher.sources is None:
            matcher.sources = list(sources)
        self._set_where(list(sources or [None] * len(matcher.interactions)))
        self._relinker = None

    @property
    def received(self) -> list[dict[str, Any]]:
        """The requests received so far (what ``GET /_streamtape/requests`` returns)."""
        return self.matcher.received

    # ----------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def ws_url(self) -> str:
        """:attr:`url` as ``ws://host:port``: WebSocket sessions are served on the same port."""
        return "ws" + self.url[len("http") :]

    async def serve_socket(self, sock: socket.socket, *, received: bytes = b"",
                           tls: ssl.SSLContext | None = None) -> None:
        """Serve a connection accepted elsewhere (the proxy hands over its client's socket):
        ``received`` are bytes already read from it, ``tls`` the server side of a TLS
        handshake to make first. Returns when the connection ends."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_HEAD, loop=loop)
        if received:
            reader.feed_data(received)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, sock, ssl=tls, ssl_handshake_timeout=self.client_timeout if tls else None)
        except (OSError, ssl.SSLError, TimeoutError):
            sock.close()  # a client that does not trust the certificate, or went away
            return
        await self._handle(reader, asyncio.StreamWriter(transport, protocol, reader, loop))

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._closed = asyncio.Event()
        try:
            self._server = await asyncio.start_server(
                self._handle, self.host, self.port, limit=MAX_HEAD, backlog=2048,
                reuse_port=self.reuse_port or None,
            )
        except OSError as e:
            raise OptionError(
                f"cannot listen on {self.host}:{self.port}: {e.strerror or e}"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._closed is not None
        await self._closed.wait()

    async def close(self) -> None:
        """Stop listening, abort every open connection, wait for their tasks."""
        if self._server is not None:
            self._server.close()
        tasks = []
        for c in list(self._conns):
            with contextlib.suppress(Exception):
                c.writer.transport.abort()
            if c.task is not None and c.task is not asyncio.current_task():
                c.task.cancel()
                tasks.append(c.task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        if self._closed is not None:
            self._closed.set()

    async def __aenter__(self) -> ReplayServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> ReplayServer:
        """Run on a background thread with its own loop (for synchronous callers)."""
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            async def main() -> None:
                try:
                    await self.start()
                except BaseException as e:
                    failure.append(e)
                    started.set()
                    return
                started.set()
                await self.serve_forever()

            asyncio.run(main())

        self._thread = threading.Thread(target=run, name="streamtape-serve", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self

    def __exit__(self, *exc: object) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            fut = asyncio.run_coroutine_threadsafe(self.close(), loop)
            with contextlib.suppress(Exception):
                fut.result(10)
            thread.join(10)

    # ----------------------------------------------------------------- connections

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(writer, asyncio.current_task())
        self._conns.add(conn)
        try:
            while True:
                try:
                    req = await read_request(reader, writer, max_body=self.max_body,
                                             timeout=self.client_timeout)
                except BadRequest as e:
                    self._emit(ServedRequest(self._next_number(), "-", "-", e.status, None, None, None,
                                             ServeOutcome.BAD_REQUEST, detail=str(e)))
                    await answer_and_close(e, reader, writer)
                    break
                if req is None:
                    break
                keep = await self._respond(req, reader, writer)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            # Server shutdown: the transport was aborted already; finish quietly.
            pass
        finally:
            self._conns.discard(conn)
            if not writer.transport.is_closing():
                writer.close()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(writer.wait_closed(), 1.0)

    def _emit(self, rec: ServedRequest) -> None:
        self.stats.by_outcome[rec.outcome] = self.stats.by_outcome.get(rec.outcome, 0) + 1
        try:
            self.log(rec.line())
        except Exception:  # a failing log sink must not break the replay
            _log.exception("streamtape log callback failed")

    def _profile_for(self, req: HTTPRequest) -> Profile:
        text = req.header(PROFILE_HEADER)
        if not text:
            return self.profile
        prof = self._profiles.get(text)
        if prof is None:
            prof = parse_profile(text)  # ProfileError propagates
            if len(self._profiles) > _CACHE:
                self._profiles.clear()
            self._profiles[text] = prof
        return prof

    async def _respond(self, req: HTTPRequest, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
        t0 = time.perf_counter_ns()
        keep_alive = req.keep_alive
        direct = self._direct(req)
        if self.pass_on is not None and direct is None and not self.matcher.answers(
                req.method, self._url(req), tuple(req.headers), req.body):
            kept = await self.pass_on(req, writer)
            if kept is not None:
                return kept and keep_alive
        number = self._next_number()

        if req.target.startswith(CONTROL_PREFIX):
            return await self._control(req, writer, number, keep_alive)

        def refuse(status: int, outcome: ServeOutcome, error: StreamtapeError,
                   type_: ErrorType, served: _Served | None = None) -> bool:
            self._emit(ServedRequest(
                number, req.method, req.target, status,
                served.interaction if served else None, served.source if served else None,
                served.profile if served else None, outcome, detail=str(error),
            ))
            writer.write(_error_response(status, str(error), type_, keep_alive=keep_alive,
                                         path=req.target))
            return keep_alive

        try:
            profile = self._profile_for(req)
        except StreamtapeError as e:
            return refuse(400, ServeOutcome.BAD_PROFILE, e, ErrorType.BAD_PROFILE)

        try:
            if direct is not None:
                index, ix = direct, self.matcher.interactions[direct]
            else:
                index, ix = self.matcher.match_indexed(
                    req.method, self._url(req), tuple(req.headers), req.body
                )
        except NoMatchError as e:
            self.stats.no_match += 1
            return refuse(self.no_match_status, ServeOutcome.NO_MATCH, e, ErrorType.NO_MATCH)
        n, source = self._where[index] if index < len(self._where) else (index, None)
        served = _Served(n, source, profile.text)
        ix = self._relink(ix, req)
        self.stats.served += 1

        if ix.websocket is not None and profile.fault(FaultKind.STATUS) is None:
            return await self._session(req, reader, writer, profile, index, ix, served, number, t0)

        try:
            sched = self._schedule(profile, index, ix)
        except StreamtapeError as e:
            return refuse(400, ServeOutcome.BAD_PROFILE, e, ErrorType.BAD_PROFILE, served)

        reported = False

        def report(outcome: ServeOutcome, pieces: int, nbytes: int) -> None:
            # Called just before the last bytes (or the close) go out, so a client
            # that has seen the end of its response can already read the line.
            nonlocal reported
            if reported:
                return
            reported = True
            if sched.framing == Framing.NONE:
                outcome = ServeOutcome.NO_RESPONSE
            self._emit(ServedRequest(
                number, req.method, req.target, sched.status or None, served.interaction,
                served.source, served.profile, outcome, pieces=pieces, bytes=nbytes,
                duration_ns=time.perf_counter_ns() - t0,
                detail=(stalled_note(self.client_timeout, writer.transport.get_write_buffer_size())
                        if outcome is ServeOutcome.CLIENT_STALLED else timing_note(ix, profile) or ""),
            ))

        self.playing += 1
        try:
            outcome, pieces, nbytes, keep = await self._play(sched, req, reader, writer, t0,
                                                             keep_alive, report)
        finally:
            self.playing -= 1
        report(outcome, pieces, nbytes)
        return keep

    def _next_number(self) -> int:
        """The next request's number in the log (shared by every worker of ``serve --workers``)."""
        if self._numbers is not None:
            return self._numbers()
        self._count += 1
        return self._count

    def _schedule(self, profile: Profile, index: int, ix: Interaction) -> Schedule:
        """The profile's schedule for interaction ``index``, computed once.

        Schedules are pure functions of (profile, interaction, seed), so every
        request for the same pair shares one: concurrent streams cost only
        their own connection, not a copy of the timeline.
        """
        key = (id(profile), index, id(ix))
        hit = self._schedules.get(key)
        if hit is not None and hit[0] is profile and hit[1] is ix:
            return hit[2]
        sched = profile.schedule(ix)
        if len(self._schedules) >= _CACHE:
            self._schedules.pop(next(iter(self._schedules)))
        self._schedules[key] = (profile, ix, sched)
        return sched

    def _prepare(self, sched: Schedule, framing: Framing) -> Prepared:
        """The schedule framed for the wire, once per (schedule, framing)."""
        key = (id(sched), framing)
        hit = self._prepared.get(key)
        if hit is not None and hit[0] is sched:
            return hit[1]
        prepared = Prepared.of(sched.steps, framing)
        if len(self._prepared) >= _CACHE:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[key] = (sched, prepared)
        return prepared

    def _direct(self, req: HTTPRequest) -> int | None:
        """The interaction named by ``X-Streamtape-Replay: TOKEN:INDEX`` (the proxy addon,
        which matched already), or None."""
        if self.direct_token is None:
            return None
        value = req.header(DIRECT_HEADER)
        if value is None:
            return None
        token, _, index = value.rpartition(":")
        if token != self.direct_token or not index.isdigit():
            return None
        n = int(index)
        return n if n < len(self.matcher.interactions) else None

    def _relink(self, ix: Interaction, req: HTTPRequest) -> Interaction:
        """``ix`` with the absolute URLs of its JSON body that name a recorded origin
        pointed at the origin this request reached (:mod:`streamtape.serve.links`). The
        recorded origins are read on the first JSON answer only (a cassette of streams alone
        never reads every request for them)."""
        if not is_json_body(ix):
            return ix
        if self._relinker is None:
            ixs = self.matcher.interactions
            requests = getattr(ixs, "requests", None)
            self._relinker = Relinker(recorded_origins(
                requests() if callable(requests) else (i.request for i in ixs)))
        host = req.header("host")
        return self._relinker.relink(ix, f"http://{host}" if host else self.url)

    def _url(self, req: HTTPRequest) -> str:
        if "://" in req.target:
            return req.target
        host = req.header("host") or f"{self.host}:{self.port}"
        return f"http://{host}{req.target}"

    async def _play(
        self, sched: Schedule, req: HTTPRequest, reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter, t0: int, keep_alive: bool,
        report: Callable[[ServeOutcome, int, int], None],
    ) -> tuple[ServeOutcome, int, int, bool]:
        """Run one schedule on the socket. Returns (outcome, pieces, bytes, keep connection)."""
        steps = sched.steps
        transport = writer.transport
        if sched.framing == Framing.NONE or not sched.status:
            # The recording got no response head (upstream refused): neither does the client.
            await sleep_until(t0 + (steps[-1].at_ns if steps else sched.head_at_ns))
            report(ServeOutcome.CUT, 0, 0)
            if steps and steps[-1].kind == StepKind.RESET:
                reset(transport)
            else:
                writer.close()
            return ServeOutcome.CUT, 0, 0, False
        head, framing, keep = response_head(
            sched.status, sched.reason, sched.end_to_end, sched.framing,
            content_length=sched.content_length, keep_alive=keep_alive, method=req.method,
            chunked_ok=req.chunked_ok,
        )
        prepared = self._prepare(sched, framing)
        player = Player(prepared, t0, transport, reader, sched.apart_ns)
        try:
            await sleep_until(t0 + sched.head_at_ns)
            if transport.is_closing():
                return ServeOutcome.CLIENT_DISCONNECTED, 0, 0, False
            transport.write(head)
            while True:
                why = await player.start()
                if why is Stop.DRAIN:
                    if not await drain_within(writer, self.client_timeout):
                        report(ServeOutcome.CLIENT_STALLED, player.pieces, player.byte_count)
                        transport.abort()
                        return ServeOutcome.CLIENT_STALLED, player.pieces, player.byte_count, False
                elif why is Stop.YIELD:
                    # Instant replay of a long stream: let other streams run.
                    await asyncio.sleep(0)
                elif why is Stop.CLOSED:
                    return ServeOutcome.CLIENT_DISCONNECTED, player.pieces, player.byte_count, False
                else:
                    break
            pieces, nbytes = player.pieces, player.byte_count
            kind = player.next_kind
            if kind == StepKind.CUT:
                await self._flush(writer)
                report(ServeOutcome.CUT, pieces, nbytes)
                writer.close()
                return ServeOutcome.CUT, pieces, nbytes, False
            if kind == StepKind.RESET:
                await self._flush(writer)
                report(ServeOutcome.RESET, pieces, nbytes)
                reset(transport)
                return ServeOutcome.RESET, pieces, nbytes, False
            report(ServeOutcome.COMPLETE, pieces, nbytes)
            if framing == Framing.CHUNKED:
                transport.write(body_end(framing))
            if framing == Framing.CLOSE_DELIMITED or not keep:
                await self._flush(writer)
                writer.close()
                return ServeOutcome.COMPLETE, pieces, nbytes, False
            if not await drain_within(writer, self.client_timeout):
                transport.abort()  # reported complete already: every byte was handed over
                return ServeOutcome.COMPLETE, pieces, nbytes, False
            return ServeOutcome.COMPLETE, pieces, nbytes, True
        except (ConnectionError, OSError):
            return ServeOutcome.CLIENT_DISCONNECTED, player.pieces, player.byte_count, False
        except asyncio.CancelledError:
            player.cancel()
            # the server is shutting down
            report(ServeOutcome.INTERRUPTED, player.pieces, player.byte_count)
            raise

    async def _session(
        self, req: HTTPRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        profile: Profile, index: int, ix: Interaction, served: _Served, number: int, t0: int,
    ) -> bool:
        """Play the WebSocket session ``ix`` (:mod:`.websocket`); the connection ends with it."""

        def emit(outcome: ServeOutcome, status: int | None, detail: str, messages: int = 0,
                 nbytes: int = 0) -> None:
            self._emit(ServedRequest(
                number, req.method, req.target, status, served.interaction, served.source,
                served.profile, outcome, messages, nbytes, time.perf_counter_ns() - t0, detail,
            ))

        def mismatch(message: int, text: bool, data: bytes, difference: str) -> None:
            self.matcher.note({
                "method": "WS", "path": req.target, "headers": [],
                "body": data.decode("utf-8", "replace") if text else data.hex(),
                "matched": None, "error": difference, "session": index, "message": message,
            })

        try:
            if not is_upgrade(req):
                raise BadUpgrade(f"{req.method} {req.target}: the recording is a WebSocket "
                                 "session; ask for an upgrade (Upgrade: websocket)")
            player = SessionPlayer.accept(
                req, schedule_session(profile, ix), ix, reader, writer, t0,
                MessageComparer.of(self.matcher.ignore_fields), mismatch, self.client_timeout,
            )
        except (BadUpgrade, StreamtapeError) as e:
            bad_profile = isinstance(e, StreamtapeError)
            status = 400 if bad_profile or is_upgrade(req) else 426
            outcome = (ServeOutcome.BAD_PROFILE if bad_profile
                       else ServeOutcome.BAD_REQUEST if is_upgrade(req) else ServeOutcome.MISMATCH)
            emit(outcome, status, str(e))
            type_ = ErrorType.BAD_PROFILE if bad_profile else ErrorType.BAD_REQUEST
            writer.write(_error_response(status, str(e), type_, keep_alive=False))
            return False
        try:
            result = await player.run()
        except asyncio.CancelledError:
            emit(ServeOutcome.INTERRUPTED, 101, "", player.messages, player.bytes)
            raise
        emit(ServeOutcome(result.end), 101, result.detail, result.messages, result.bytes)
        return False

    @staticmethod
    async def _flush(writer: asyncio.StreamWriter, timeout: float = 5.0) -> None:
        """Wait until the transport handed everything to the kernel."""
        transport = writer.transport
        deadline = time.monotonic() + timeout
        while transport.get_write_buffer_size() and time.monotonic() < deadline:
            if transport.is_closing():
                return
            await asyncio.sleep(0.001)

    async def _control(self, req: HTTPRequest, writer: asyncio.StreamWriter, number: int,
                       keep_alive: bool) -> bool:
        status, body = control_response(req.method, req.target, self.matcher)
        self._emit(ServedRequest(number, req.method, req.target, status, None, None, None,
                                 ServeOutcome.CONTROL))
        writer.write(_simple_response(status, body, keep_alive=keep_alive))
        if not await drain_within(writer, self.client_timeout):
            writer.transport.abort()
            return False
        return keep_alive


def control_response(method: str, target: str, matcher: Matcher) -> tuple[int, bytes]:
    """The status and JSON body for a request under :data:`CONTROL_PREFIX`."""
    path = target.split("?", 1)[0]
    if method == "GET" and path == CONTROL_PREFIX + "requests":
        return 200, json.dumps(jsonable(matcher.received), indent=None).encode()
    return 404, error_body(f"unknown control endpoint {method} {path}", ErrorType.BAD_REQUEST)


def _collect(source: ReplaySource) -> tuple[Sequence[Interaction], list[str | None]]:
    """Interactions (and the cassette each came from) from a cassette, paths, or interactions.

    Cassette files alone are not read here: they come back as a
    :class:`~streamtape.match.indexed.CassetteChain` that reads each interaction
    when it is asked for.
    """
    if isinstance(source, Cassette):
        return interactions_of([source])
    parts: list[Interaction | Cassette] = []
    paths: list[_Path] = []
    many = [source] if isinstance(source, str | os.PathLike) else source
    assert not isinstance(many, Matcher)
    for s in many:
        if isinstance(s, Interaction | Cassette):
            parts.append(s)
        else:
            paths.append(s)
    found = cassette_files(paths)  # a folder's files, none from outside it
    for skipped in found.skipped:
        _log.warning(f"streamtape: {skipped.line()}")
    parts.extend(load_many(found.files) if found.files else ())
    return interactions_of(parts)
