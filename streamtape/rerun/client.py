"""The rerun's HTTP/1.1 client: one exchange as a state machine over h11, and two thin drivers.

A load generator that measures time to first token must not add to it. The
client here is as lean as the benchmark clients (vLLM's benchmark_serving,
LLMPerf): no connection pool, no redirects, no decoding, no retries. The
drivers hand every read straight to :class:`Exchange`, which parses it with
h11 (the sans-I/O HTTP/1.1 library h11 is the model of this package for) and
gives each de-chunked body piece to the same
:class:`~streamtape.capture.recorder.Recorder` as ``record`` uses, with the
time the read's bytes came in: on Linux the kernel's receive time of that read
(:mod:`streamtape.arrival`, plain-HTTP connections), so a client busy with
other streams (its event loop, or a Locust worker's gevent hub, late to a
ready socket) does not make the backend look slower; elsewhere, and over
TLS, the reading of ``perf_counter_ns`` when the read returned. h11 yields one
``Data`` event per HTTP chunk (or per part of one split across reads), and
one per read of a Content-Length or close-delimited body: the piece
boundaries mitmproxy gives the recorder (DESIGN.md).

Its own cost is measured, not assumed: :attr:`Exchange.cost_ns` sums the time
spent inside :meth:`Exchange.receive` (parsing and recording the body; the
response head's record, once per response, is left out), so a run reports
its cost per piece, and ``bench/rerun.py`` sets its TTFT beside a raw
socket client's.

t = 0 of a recording is the moment the request is written to a connection
that is up (TCP, and TLS for ``https``); the connect is kept as the
recording's :class:`~streamtape.cassette.Setup` (``tcp`` for plain HTTP,
``tls`` for the connect and the handshake together over HTTPS), as
``record`` keeps a new upstream connection's. Each request gets a connection
of its own.

- :func:`exchange_async`: asyncio (an :class:`asyncio.Protocol`, so a read is
  handled in the event loop's own callback, with no stream buffer between);
- :func:`exchange_sync`: a blocking socket (the Locust users: gevent makes it
  cooperative).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

from ..arrival import ArrivalSocket, stamp_arrivals, stamp_socket
from ..capture.recorder import Recorder, UpstreamConnection
from ..cassette.model import Interaction, Outcome, Request
from ..fmt import failure_words
from ..shadow.rewrite import ShadowRequest, stored_request

Clock = Callable[[], int]



@dataclass(frozen=True)
class Target:
    """Where a request goes: host, port, TLS, and the request target (path and query)."""

    host: str
    port: int
    tls: bool
    target: str
    host_header: str


def target_of(url: str) -> Target:
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if tls else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(host, port, tls, path, parts.netloc.rpartition("@")[2])


class Exchange:
    """One request and its response, recorded as it arrives. Sans-I/O: bytes in, records out.

    ``begin`` before connecting, ``connected`` once the connection is up (then
    send :meth:`request_bytes`), ``receive`` for every read (True once the
    response has ended), ``eof`` when the peer closed, ``finish`` at the end.
    """

    def __init__(self, recorder: Recorder, key: object, name: str, out: ShadowRequest,
                 labels: dict[str, str]) -> None:
        self.recorder = recorder
        self.key = key
        self.name = name
        self.out = out
        self.labels = labels
        self.where = target_of(out.url)
        self.conn = h11.Connection(h11.CLIENT)
        self.cost_ns = 0
        self.pieces = 0
        self.responded = False
        self.ended = False
        self.outcome = Outcome.COMPLETE
        self.error: str | None = None

    def begin(self, now_ns: int) -> None:
        sent = Request(
            method=self.out.method,
            url=self.out.url,
            http_version="HTTP/1.1",
            headers=(("Host", self.where.host_header), *self.out.headers,
                     ("Content-Length", str(len(self.out.body)))),
            body=self.out.body,
            started_at=time.time(),
        )
        self.recorder.begin(self.key, stored_request(sent, self.out.secret_headers), now_ns, labels=self.labels)

    def connected(self, connection: UpstreamConnection) -> None:
        self.recorder.sent(self.key, connection)

    def request_bytes(self) -> bytes:
        headers = [("Host", self.where.host_header), *self.out.headers,
                   ("Content-Length", str(len(self.out.body)))]
        head = self.conn.send(h11.Request(method=self.out.method, target=self.where.target, headers=headers))
        body = self.conn.send(h11.Data(data=self.out.body)) if self.out.body else b""
        end = self.conn.send(h11.EndOfMessage())
        return (head or b"") + (body or b"") + (end or b"")

    def receive(self, data: bytes, now_ns: int) -> bool:
        """One read from the connection (``b""``: the peer closed); True once the response ended."""
        if self.ended:
            return True
        started = time.perf_counter_ns()
        try:
            self.conn.receive_data(data)
            while True:
                ev = self.conn.next_event()
                if ev is h11.NEED_DATA or ev is h11.PAUSED:
                    break
                if isinstance(ev, h11.Response):
                    self.responded = True
                    head_started = time.perf_counter_ns()
                    self._head(ev, now_ns)
                    started += time.perf_counter_ns() - head_started  # a cost per response, not per piece
                elif isinstance(ev, h11.Data):
                    if ev.data:
                        self.pieces += 1
                        self.recorder.piece(self.key, bytes(ev.data), now_ns)
                elif isinstance(ev, h11.EndOfMessage):
                    self.ended = True
                    break
                elif isinstance(ev, h11.ConnectionClosed):
                    self._closed_early()
                    break
        except h11.RemoteProtocolError as e:
            self._closed_early(f"bad HTTP from the backend: {e}")
        finally:
            self.cost_ns += time.perf_counter_ns() - started
        return self.ended

    def _head(self, ev: h11.Response, now_ns: int) -> None:
        self.recorder.response_headers(
            self.key, ev.status_code, ev.reason.decode("latin-1"), f"HTTP/{ev.http_version.decode()}",
            tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in ev.headers.raw_items()), now_ns,
        )

    def _closed_early(self, why: str | None = None) -> None:
        self.ended = True
        if self.responded:
            self.outcome = Outcome.UPSTREAM_CLOSED
            self.error = why or "the backend closed the connection before the response ended"
        else:
            self.outcome = Outcome.UPSTREAM_ERROR
            self.error = why or "the backend closed the connection without a response"

    def eof(self, now_ns: int) -> None:
        if not self.ended:
            self.receive(b"", now_ns)
        if not self.ended:
            self._closed_early()

    def fail(self, outcome: Outcome, error: str) -> None:
        """End with ``outcome`` unless the response ended already."""
        if not self.ended:
            self.ended = True
            self.outcome, self.error = outcome, error

    def broken(self, e: OSError) -> None:
        """The connection failed: before a response (refused, reset) or during one."""
        self.fail(Outcome.UPSTREAM_CLOSED if self.responded else Outcome.UPSTREAM_ERROR, failure_words(e))

    def finish(self, now_ns: int) -> Interaction | None:
        return self.recorder.finish(self.key, self.outcome, self.error, now_ns)


class _Protocol(asyncio.Protocol):
    def __init__(self, ex: Exchange, done: asyncio.Future[None], clock: Clock) -> None:
        self.ex = ex
        self.done = done
        self.clock = clock
        self.transport: asyncio.Transport | None = None
        self.stamped: ArrivalSocket | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # Before the transport's first read (it starts reading after this call).
        self.stamped = stamp_arrivals(transport) if self.clock is time.perf_counter_ns else None

    def data_received(self, data: bytes) -> None:
        now = self.stamped.arrived_ns if self.stamped is not None else self.clock()
        if self.ex.receive(data, now) and not self.done.done():
            self.done.set_result(None)

    def eof_received(self) -> bool | None:
        self.ex.eof(self.clock())
        if not self.done.done():
            self.done.set_result(None)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ex.ended:
            self.ex.eof(self.clock())
            if exc is not None and not self.ex.responded:
                self.ex.error = failure_words(exc)
        if not self.done.done():
            self.done.set_result(None)


async def exchange_async(ex: Exchange, *, timeout_s: float, ssl_context: ssl.SSLContext | None,
                         clock: Clock = time.perf_counter_ns) -> None:
    """Run one exchange on the running loop; its outcome is on ``ex`` (never raises but
    :class:`asyncio.CancelledError`, after which ``ex`` says ``interrupted``)."""
    loop = asyncio.get_running_loop()
    w = ex.where
    done: asyncio.Future[None] = loop.create_future()
    transport: asyncio.BaseTransport | None = None
    asked = clock()
    ex.begin(asked)
    # The request's bytes are made first: t = 0 is the moment they are handed to the
    # connection, and what is done before it is no part of the server's time.
    payload = ex.request_bytes()
    try:
        async with asyncio.timeout(timeout_s):
            transport, _ = await loop.create_connection(
                lambda: _Protocol(ex, done, clock), w.host, w.port,
                ssl=(ssl_context or ssl.create_default_context()) if w.tls else None,
                server_hostname=w.host if w.tls else None,
            )
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            assert isinstance(transport, asyncio.Transport)
            ready = clock()
            transport.write(payload)
            _connected(ex, ready, asked)
            await done
    except TimeoutError:
        ex.fail(Outcome.UPSTREAM_ERROR, f"no complete answer within {timeout_s:g} s (--timeout)")
    except OSError as e:
        ex.broken(e)
    except asyncio.CancelledError:
        ex.fail(Outcome.INTERRUPTED, "the rerun stopped before the response ended")
        raise
    finally:
        if transport is not None:
            transport.close()


def _connected(ex: Exchange, ready: int, asked: int) -> None:
    """Tell the exchange its connection's setup: from ``asked`` (the exchange began) to
    ``ready`` (its request handed to the connection, t = 0), TCP's or, over TLS, TLS's."""
    setup = ready - asked
    tls = ex.where.tls
    ex.connected(UpstreamConnection(ready, tcp_ns=None if tls else setup, tls_ns=setup if tls else None))


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """A TCP connection; an IP address is connected to without a name lookup (under
    gevent a lookup goes through its resolver's thread pool, which a busy Locust worker
    was seen to leave waiting for seconds)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return socket.create_connection((host, port), timeout=timeout_s)
    sock = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def exchange_sync(ex: Exchange, *, timeout_s: float, ssl_context: ssl.SSLContext | None = None,
                  clock: Clock = time.perf_counter_ns) -> None:
    """Run one exchange on a blocking socket (gevent's, under Locust); its outcome is on ``ex``."""
    w = ex.where
    asked = clock()
    deadline = asked + int(timeout_s * 1e9)
    ex.begin(asked)
    sock: socket.socket | None = None
    payload = ex.request_bytes()  # first, as in exchange_async
    try:
        sock = _connect(w.host, w.port, timeout_s)
        if w.tls:
            sock = (ssl_context or ssl.create_default_context()).wrap_socket(sock, server_hostname=w.host)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stamped = stamp_socket(sock) if clock is time.perf_counter_ns else None
        read = stamped.recv if stamped is not None else sock.recv
        ready = clock()
        sock.sendall(payload)
        _connected(ex, ready, asked)
        while not ex.ended:
            left = (deadline - clock()) / 1e9
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            data = read(65536)
            if not data:
                ex.eof(clock())
                break
            ex.receive(data, stamped.arrived_ns if stamped is not None else clock())
    except TimeoutError:
        ex.fail(Outcome.UPSTREAM_ERROR, f"no complete answer within {timeout_s:g} s (--timeout)")
    except OSError as e:
        ex.broken(e)
    finally:
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
