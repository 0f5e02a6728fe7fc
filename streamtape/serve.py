"""The replay HTTP server: cassettes played back over real sockets, on time.

Layers, from the inside out:

* :func:`response_head`, :func:`frame` and :func:`no_match_body` are pure: a
  :class:`~streamtape.profiles.Schedule` in, HTTP/1.1 bytes out.
* :class:`ReplayServer` is the asyncio driver. It parses requests, asks the
  :class:`~streamtape.match.Matcher` for the interaction, asks the profile for
  a schedule and runs the steps against absolute deadlines
  (:func:`streamtape.clock.sleep_until`) from the moment the request was
  received. Every ``send`` step is one write (one HTTP chunk on chunked
  framing) on a socket with ``TCP_NODELAY``, so a recorded boundary is a
  boundary on the wire. Faults act on the socket: ``cut`` closes without the
  terminating chunk, ``reset`` aborts with a TCP RST (``SO_LINGER`` 0), a stall
  is simply a long gap with nothing written.

Special requests:

* header ``X-Streamtape-Profile: <profile>`` overrides the profile for one request;
* ``GET /_streamtape/requests`` returns the requests received so far, as JSON.

One log line per request goes to the ``log`` callback (the CLI prints it;
the default sends it to the ``streamtape.serve`` logger).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .cassette import Interaction
from .clock import Timer, call_at_ns, now_ns, sleep_until
from .errors import NoMatchError, OptionError, StreamtapeError
from .wire import FRAMING_HEADERS
from .wire import HOP_BY_HOP as _HOP

HOP_BY_HOP = _HOP | FRAMING_HEADERS

__all__ = [
    "CONTROL_PREFIX",
    "PROFILE_HEADER",
    "ReplayServer",
    "ServedRequest",
    "frame",
    "no_match_body",
    "response_head",
]

PROFILE_HEADER = "x-streamtape-profile"
DIRECT_HEADER = "x-streamtape-replay"  # internal: the proxy addon names the interaction
CONTROL_PREFIX = "/_streamtape/"

_log = logging.getLogger("streamtape.serve")

MAX_HEAD = 64 * 1024


# --------------------------------------------------------------------------- pure part


def _no_body(status: int, method: str) -> bool:
    return method == "HEAD" or status in (204, 304) or 100 <= status < 200


def response_head(
    status: int,
    reason: str,
    headers: Iterable[tuple[str, str]],
    framing: str,
    *,
    body_length: int | None = None,
    keep_alive: bool = True,
    method: str = "GET",
    chunked_ok: bool = True,
) -> tuple[bytes, str, bool]:
    """The response head to send, the framing actually used, and whether to keep the connection.

    Recorded hop-by-hop and framing headers are dropped and recomputed:
    ``chunked`` (and HTTP/2 ``frames``) become ``Transfer-Encoding: chunked``;
    ``content-length`` sends ``Content-Length: body_length`` (the recorded value
    when the body will be cut short); ``close-delimited`` sends neither and
    ``Connection: close``. An HTTP/1.0 client (``chunked_ok=False``) gets a
    chunked recording close-delimited.
    """
    if framing == "frames":
        framing = "chunked"
    if framing == "chunked" and not chunked_ok:
        framing = "close-delimited"
    out = [f"HTTP/1.1 {status} {reason or _REASONS.get(status, '')}".rstrip()]
    out += [f"{k}: {v}" for k, v in headers if k.lower() not in HOP_BY_HOP]
    if _no_body(status, method):
        if framing == "content-length" and body_length is not None and method == "HEAD":
            out.append(f"Content-Length: {body_length}")
        framing = "none"
    elif framing == "chunked":
        out.append("Transfer-Encoding: chunked")
    elif framing == "content-length":
        out.append(f"Content-Length: {body_length or 0}")
    else:
        framing = "close-delimited"
        keep_alive = False
    if not keep_alive:
        out.append("Connection: close")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1"), framing, keep_alive


def frame(framing: str, data: bytes) -> bytes:
    """One piece as it goes on the wire: one HTTP chunk, or the bytes themselves."""
    if framing == "chunked":
        return b"%x\r\n%s\r\n" % (len(data), data)
    return data


LAST_CHUNK = b"0\r\n\r\n"


def no_match_body(message: str, type_: str = "streamtape_no_match") -> bytes:
    """An OpenAI-shaped error body."""
    return json.dumps({"error": {"message": message, "type": type_}}).encode()


def simple_response(status: int, body: bytes, *, content_type: str = "application/json",
                    keep_alive: bool = True) -> bytes:
    head, _, _ = response_head(
        status, "", [("Content-Type", content_type)], "content-length",
        body_length=len(body), keep_alive=keep_alive,
    )
    return head + body


_REASONS = {
    200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
    403: "Forbidden", 404: "Not Found", 408: "Request Timeout", 413: "Payload Too Large",
    422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}


# --------------------------------------------------------------------------- request parsing


class _BadRequest(Exception):
    pass


@dataclass
class _Req:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    @property
    def keep_alive(self) -> bool:
        conn = (self.header("connection") or "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn


def _parse_head(raw: bytes) -> _Req:
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as e:  # pragma: no cover - latin-1 decodes anything
        raise _BadRequest(str(e)) from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _BadRequest(f"bad request line {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if not sep or not k or k != k.strip():
            raise _BadRequest(f"bad header line {line[:80]!r}")
        headers.append((k, v.strip()))
    return _Req(parts[0].upper(), parts[1], parts[2], headers)


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Req | None:
    """One request from the connection, or None on a clean EOF between requests."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise _BadRequest("connection closed inside the request head") from None
    except asyncio.LimitOverrunError:
        raise _BadRequest("request head too large") from None
    req = _parse_head(raw[:-4])
    if (req.header("expect") or "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    te = (req.header("transfer-encoding") or "").lower()
    if "chunked" in te:
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BadRequest("bad chunk size in request body") from None
            if size == 0:
                # Trailers, then the blank line.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        req.body = b"".join(parts)
    else:
        cl = req.header("content-length")
        if cl:
            try:
                n = int(cl)
            except ValueError:
                raise _BadRequest(f"bad Content-Length {cl!r}") from None
            req.body = await reader.readexactly(n)
    return req


# --------------------------------------------------------------------------- the server


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
    outcome: str
    pieces: int = 0
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
            f" {self.pieces} pieces {self.bytes} B {self.duration_ns / 1e9:.3f}s"
            if self.interaction is not None
            else ""
        )
        detail = f": {self.detail}" if self.detail else ""
        return f"{head}{where}{st}{prof}{body} outcome={self.outcome}{detail}"


def _as_profile(p: Any) -> Any:
    from .profiles import parse_profile

    return parse_profile(p) if isinstance(p, str) else p


@dataclass(eq=False)
class _Conn:
    writer: asyncio.StreamWriter
    task: asyncio.Task[None] | None = None


@dataclass
class _Stats:
    served: int = 0
    no_match: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)


class ReplayServer:
    """Serve recorded interactions over HTTP/1.1 on ``host:port`` (port 0: any free port).

    ``source`` is a :class:`~streamtape.match.Matcher`, or interactions /
    cassettes / paths from which one is built with ``ignore_fields``,
    ``match_headers`` and ``strict``. ``profile`` is a profile text or a
    :class:`~streamtape.profiles.Profile`. ``log`` receives one line per request.
    ``sources`` names the cassette of each of the matcher's interactions (for
    the log line) when ``source`` is a Matcher.

    Async use: ``await server.start()``, ``server.url``, ``await server.close()``
    (or ``async with``). From synchronous code (tests), ``with server:`` runs it
    on a background thread with its own event loop.
    """

    def __init__(
        self,
        source: Any,
        *,
        profile: Any = "faithful",
        host: str = "127.0.0.1",
        port: int = 0,
        ignore_fields: Iterable[str] = (),
        match_headers: Iterable[str] = (),
        strict: bool = False,
        log: Callable[[str], None] | None = None,
        direct_token: str | None = None,
        sources: Sequence[str | None] | None = None,
    ) -> None:
        from .match import Matcher

        if isinstance(source, Matcher):
            self.matcher = source
            names: list[str | None] = list(sources or [None] * len(source.interactions))
        else:
            interactions, names = _collect(source)
            self.matcher = Matcher(
                interactions,
                ignore_fields=tuple(ignore_fields),
                match_headers=tuple(match_headers),
                strict=strict,
            )
        self._set_where(names)
        self.profile = _as_profile(profile)
        self.direct_token = direct_token
        self.host = host
        self.port = port
        self.log = log or _log.info
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()
        self._profiles: dict[str, Any] = {}
        self._schedules: dict[tuple[int, int, int], tuple[Any, Interaction, Any]] = {}
        self._prepared: dict[tuple[int, str], tuple[Any, _Prepared]] = {}
        self._count = 0
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

    def replace_matcher(self, matcher: Any, sources: Sequence[str | None] | None = None) -> None:
        """Serve from another matcher from the next request on."""
        self.matcher = matcher
        self._set_where(list(sources or [None] * len(matcher.interactions)))

    @property
    def received(self) -> list[dict[str, Any]]:
        """The requests received so far (what ``GET /_streamtape/requests`` returns)."""
        return self.matcher.received

    # ----------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._closed = asyncio.Event()
        try:
            self._server = await asyncio.start_server(
                self._handle, self.host, self.port, limit=MAX_HEAD, backlog=2048
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
                    req = await _read_request(reader, writer)
                except _BadRequest as e:
                    writer.write(simple_response(400, no_match_body(str(e), "streamtape_bad_request"),
                                                 keep_alive=False))
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

    def _profile_for(self, req: _Req) -> Any:
        text = req.header(PROFILE_HEADER)
        if not text:
            return self.profile
        prof = self._profiles.get(text)
        if prof is None:
            prof = _as_profile(text)  # ProfileError propagates
            if len(self._profiles) > 256:
                self._profiles.clear()
            self._profiles[text] = prof
        return prof

    async def _respond(self, req: _Req, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
        t0 = time.perf_counter_ns()
        self._count += 1
        number = self._count
        keep_alive = req.keep_alive

        if req.target.startswith(CONTROL_PREFIX):
            return await self._control(req, writer, number, keep_alive)

        def done(**kw: Any) -> None:
            self._emit(ServedRequest(number=number, method=req.method, target=req.target, **kw))

        try:
            profile = self._profile_for(req)
        except StreamtapeError as e:
            done(status=400, interaction=None, source=None, profile=None, outcome="bad_profile",
                 detail=str(e))
            writer.write(simple_response(400, no_match_body(str(e), "streamtape_bad_profile"),
                                         keep_alive=keep_alive))
            return keep_alive

        try:
            direct = self._direct(req)
            if direct is not None:
                index, ix = direct, self.matcher.interactions[direct]
            else:
                index, ix = self.matcher.match_indexed(
                    req.method, self._url(req), tuple(req.headers), req.body
                )
        except NoMatchError as e:
            self.stats.no_match += 1
            done(status=404, interaction=None, source=None, profile=None, outcome="no_match",
                 detail=str(e))
            writer.write(simple_response(404, no_match_body(str(e)), keep_alive=keep_alive))
            return keep_alive
        n, source = self._where[index] if index < len(self._where) else (index, None)
        ptext = getattr(profile, "text", None) or str(profile)
        self.stats.served += 1

        try:
            sched = self._schedule(profile, index, ix)
        except StreamtapeError as e:
            done(status=400, interaction=n, source=source, profile=ptext, outcome="bad_profile",
                 detail=str(e))
            writer.write(simple_response(400, no_match_body(str(e), "streamtape_bad_profile"),
                                         keep_alive=keep_alive))
            return keep_alive

        reported = False

        def report(outcome: str, pieces: int, nbytes: int) -> None:
            # Called just before the last bytes (or the close) go out, so a client
            # that has seen the end of its response can already read the line.
            nonlocal reported
            if reported:
                return
            reported = True
            if sched.framing == "none":
                outcome = "no_response"
            done(status=sched.status or None, interaction=n, source=source, profile=ptext,
                 outcome=outcome, pieces=pieces, bytes=nbytes,
                 duration_ns=time.perf_counter_ns() - t0)

        outcome, pieces, nbytes, keep = await self._play(sched, req, reader, writer, t0, keep_alive,
                                                         report)
        report(outcome, pieces, nbytes)
        return keep

    def _schedule(self, profile: Any, index: int, ix: Interaction) -> Any:
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
        if len(self._schedules) >= 256:
            self._schedules.pop(next(iter(self._schedules)))
        self._schedules[key] = (profile, ix, sched)
        return sched

    def _prepare(self, sched: Any, framing: str) -> _Prepared:
        """The schedule framed for the wire, once per (schedule, framing)."""
        key = (id(sched), framing)
        hit = self._prepared.get(key)
        if hit is not None and hit[0] is sched:
            return hit[1]
        prepared = _Prepared.of(sched.steps, framing)
        if len(self._prepared) >= 256:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[key] = (sched, prepared)
        return prepared

    def _direct(self, req: _Req) -> int | None:
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

    def _url(self, req: _Req) -> str:
        if "://" in req.target:
            return req.target
        host = req.header("host") or f"{self.host}:{self.port}"
        return f"http://{host}{req.target}"

    async def _play(
        self, sched: Any, req: _Req, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        t0: int, keep_alive: bool,
        report: Callable[[str, int, int], None],
    ) -> tuple[str, int, int, bool]:
        """Run one schedule on the socket. Returns (outcome, pieces, bytes, keep connection)."""
        steps = sched.steps
        transport = writer.transport
        if sched.framing == "none" or not sched.status:
            # The recording got no response head (upstream refused): neither does the client.
            await sleep_until(t0 + (steps[-1].at_ns if steps else sched.head_at_ns))
            report("cut", 0, 0)
            if steps and steps[-1].kind == "reset":
                _reset(transport)
            else:
                writer.close()
            return "cut", 0, 0, False
        declared = _header(sched.headers, "content-length")
        if declared is not None and declared.isdigit():
            body_length = int(declared)  # the profile sets it (the recorded one when cut)
        else:
            body_length = sum(len(s.data) for s in steps if s.kind == "send")
        head, framing, keep = response_head(
            sched.status, sched.reason, sched.headers, sched.framing,
            body_length=body_length, keep_alive=keep_alive, method=req.method,
            chunked_ok=req.version != "HTTP/1.0",
        )
        prepared = self._prepare(sched, framing)
        player = _Player(prepared, t0, transport, reader)
        try:
            await sleep_until(t0 + sched.head_at_ns)
            if transport.is_closing():
                return "client_disconnected", 0, 0, False
            transport.write(head)
            while True:
                why = await player.start()
                if why == "drain":
                    await writer.drain()
                elif why == "yield":
                    # Instant replay of a long stream: let other streams run.
                    await asyncio.sleep(0)
                elif why == "closed":
                    return "client_disconnected", player.pieces, player.byte_count(prepared), False
                else:
                    break
            pieces, nbytes = player.pieces, player.byte_count(prepared)
            kind = prepared.kinds[player.i] if player.i < len(prepared.kinds) else "end"
            if kind == "cut":
                await self._flush(writer)
                report("cut", pieces, nbytes)
                writer.close()
                return "cut", pieces, nbytes, False
            if kind == "reset":
                await self._flush(writer)
                report("reset", pieces, nbytes)
                _reset(transport)
                return "reset", pieces, nbytes, False
            report("complete", pieces, nbytes)
            if framing == "chunked":
                transport.write(LAST_CHUNK)
            if framing == "close-delimited" or not keep:
                await self._flush(writer)
                writer.close()
                return "complete", pieces, nbytes, False
            await writer.drain()
            return "complete", pieces, nbytes, True
        except (ConnectionError, OSError):
            return "client_disconnected", player.pieces, player.byte_count(prepared), False
        except asyncio.CancelledError:
            player.cancel()
            # the server is shutting down
            report("interrupted", player.pieces, player.byte_count(prepared))
            raise

    @staticmethod
    async def _flush(writer: asyncio.StreamWriter, timeout: float = 5.0) -> None:
        """Wait until the transport handed everything to the kernel."""
        transport = writer.transport
        deadline = time.monotonic() + timeout
        while transport.get_write_buffer_size() and time.monotonic() < deadline:
            if transport.is_closing():
                return
            await asyncio.sleep(0.001)

    async def _control(self, req: _Req, writer: asyncio.StreamWriter, number: int,
                       keep_alive: bool) -> bool:
        path = req.target.split("?", 1)[0]
        if req.method == "GET" and path == CONTROL_PREFIX + "requests":
            body = json.dumps(_jsonable(self.matcher.received), indent=None).encode()
            status = 200
        else:
            body = no_match_body(f"unknown control endpoint {req.method} {path}",
                                 "streamtape_bad_request")
            status = 404
        self._emit(ServedRequest(number, req.method, req.target, status, None, None, None,
                                 "control"))
        writer.write(simple_response(status, body, keep_alive=keep_alive))
        await writer.drain()
        return keep_alive


_BURST = 64  # pieces written back to back before other streams get a turn
_WATCH_AFTER_NS = 1_000_000_000
_WATCH_EVERY_NS = 200_000_000


class _Player:
    """Writes the ``send`` steps of a schedule from clock callbacks.

    Each piece is written by :func:`streamtape.clock.call_at_ns` at its
    deadline, without a future or a task switch per piece. :meth:`start`
    returns a future that says why the player stopped: ``"step"`` (the next
    step is a due end/cut/reset), ``"steps"`` (no steps left), ``"drain"``
    (the socket buffer is full), ``"yield"`` (many pieces written back to
    back: let other streams run) or ``"closed"`` (the client went away).

    ``wire`` holds each step's bytes as they go on the wire (the HTTP chunk
    for chunked framing; empty for non-send steps), prepared once per schedule.
    """

    __slots__ = ("fut", "i", "kinds", "offsets", "pieces", "reader", "t0", "timer",
                 "transport", "wire")

    def __init__(self, prepared: _Prepared, t0: int, transport: asyncio.WriteTransport,
                 reader: asyncio.StreamReader | None = None) -> None:
        self.offsets, self.kinds, self.wire = prepared.offsets, prepared.kinds, prepared.wire
        self.reader = reader
        self.t0 = t0
        self.transport = transport
        self.i = 0
        self.pieces = 0
        self.timer: Timer | None = None
        self.fut: asyncio.Future[str] | None = None

    def start(self) -> asyncio.Future[str]:
        self.fut = asyncio.get_running_loop().create_future()
        self.run()
        return self.fut

    def run(self) -> None:
        self.timer = None
        offsets, kinds, wire, t0 = self.offsets, self.kinds, self.wire, self.t0
        transport = self.transport
        write, closing = transport.write, transport.is_closing
        n = len(offsets)
        i = self.i
        now = now_ns()
        burst = 0
        try:
            while i < n:
                due = t0 + offsets[i]
                if due > now:
                    now = now_ns()
                    if due > now:
                        if due - now > _WATCH_AFTER_NS:
                            # A long silence (a stall): look in on the client now and then,
                            # so one that gave up (read timeout) is noticed at once.
                            if closing() or (self.reader and self.reader.at_eof()):
                                return self._stop("closed")
                            due = now + _WATCH_EVERY_NS
                        self.timer = call_at_ns(due, self.run)
                        return
                if closing():
                    return self._stop("closed")
                if kinds[i] != "send":
                    return self._stop("step")
                data = wire[i]
                i += 1
                if data:
                    write(data)
                    self.pieces += 1
                burst += 1
                if not burst & 15:
                    if transport.get_write_buffer_size() > 65536:
                        return self._stop("drain")
                    if burst >= _BURST:
                        return self._stop("yield")
            if transport.get_write_buffer_size() > 65536:
                return self._stop("drain")
            self._stop("steps")
        finally:
            self.i = i

    def byte_count(self, prepared: _Prepared) -> int:
        """Body bytes written so far."""
        return sum(prepared.body_sizes[: self.i])

    def _stop(self, why: str) -> None:
        if self.fut is not None and not self.fut.done():
            self.fut.set_result(why)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A schedule's steps as parallel tuples, with each piece framed for the wire."""

    offsets: tuple[int, ...]
    kinds: tuple[str, ...]
    wire: tuple[bytes, ...]
    body_sizes: tuple[int, ...]

    @classmethod
    def of(cls, steps: Sequence[Any], framing: str) -> _Prepared:
        offsets = tuple(s.at_ns for s in steps)
        kinds = tuple(s.kind for s in steps)
        if framing == "none":  # HEAD, 204, 304: the head only, at the recorded times
            wire = tuple(b"" for _ in steps)
        elif framing == "chunked":
            wire = tuple(
                b"%x\r\n%s\r\n" % (len(s.data), s.data) if s.kind == "send" and s.data else b""
                for s in steps
            )
        else:
            wire = tuple(s.data if s.kind == "send" else b"" for s in steps)
        sizes = tuple(len(s.data) if s.kind == "send" and framing != "none" else 0 for s in steps)
        return cls(offsets, kinds, wire, sizes)


def _reset(transport: asyncio.BaseTransport) -> None:
    """Abort the connection with a TCP RST."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()  # type: ignore[attr-defined]


def _header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v.strip()
    return None


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return v.decode("latin-1")
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _collect(source: Any) -> tuple[list[Interaction], list[str | None]]:
    """Interactions (and the cassette each came from) from a cassette, paths, or interactions."""
    from pathlib import Path

    from .cassette import Cassette, load_many

    if isinstance(source, (str, Path)):
        source = [source]
    if isinstance(source, Cassette):
        name = source.path.name if source.path else None
        return list(source), [name] * len(source)
    items: list[Interaction] = []
    names: list[str | None] = []
    paths = []
    for s in source:
        if isinstance(s, Interaction):
            items.append(s)
            names.append(None)
        elif isinstance(s, Cassette):
            items.extend(s)
            names.extend([s.path.name if s.path else None] * len(s))
        else:
            paths.append(s)
    for cas in load_many(paths) if paths else ():
        items.extend(cas)
        names.extend([cas.path.name if cas.path else None] * len(cas))
    return items, names
