"""The mitmproxy recording addon: a thin driver around :class:`streamtape.capture.recorder.Recorder`.

Used from ``mitmdump -s addons/record.py`` and by ``streamtape record``. Every
body piece passes through unchanged; the recording callable only timestamps
it and appends it. Disk writes happen on the writer thread, never on the
proxy's event loop.

Options (``--set name=value``): each is declared once, with its default, its
help and the ``streamtape record`` flag that sets it, in
:data:`streamtape.mitm.record_options.RECORD_OPTIONS` (``mitmdump -s
addons/record.py --options`` lists them): the cassette to append to
(``streamtape_out``), labels, recording every response or only streaming
ones, a mitmproxy filter expression, and redaction (on by default; more
headers, query parameters and JSON body fields). Booleans take true/false,
yes/no, on/off or 1/0, and ``--set name`` alone means true; a list takes
several values, repeated or comma separated (the rules both addons share,
:mod:`streamtape.mitm.options`).

Time. The offsets count from the moment the request was handed to the
upstream (:mod:`streamtape.cassette`). mitmproxy has no hook at that moment,
but it sends a request as soon as both the request and a connection are
there: the ``request`` hook gives the first, and the connection hooks
(``server_connected``, ``tls_start_server``, ``tls_established_server``) the
second, with the connection's setup steps (TCP from mitmproxy's own
``timestamp_start``/``timestamp_tcp_setup``; an upstream proxy's CONNECT and
the TLS handshake from the hooks' clock readings). The flow learns its
connection (``flow.server_conn``) only once it has one, so the two meet in
``responseheaders`` (or, for a flow that failed without a response, at its
end): :meth:`streamtape.capture.recorder.Recorder.sent`. Through an upstream proxy
(``--mode upstream:...``) to an https origin, the connection to the proxy has
the ``server_connected`` hook and the origin's TLS runs inside it after the
CONNECT: the marks are TCP to the proxy, the CONNECT, and TLS. Not measured: a
plain-HTTP origin through an upstream proxy (its requests go to the proxy's
connection under another name; no setup is stored and the offsets count from
the request hook).

A piece's own time is when its bytes reached this machine: on Linux, the
kernel's receive time of the read that brought them (:mod:`streamtape.arrival`),
so a busy event loop that comes to the socket late does not make the piece
late; elsewhere, the clock read in the stream callable.

Nothing passes unrecorded. mitmproxy starts listening before it calls the
``running`` hook, where the cassette is opened (not earlier, so a proxy that
cannot listen creates no cassette). A request that arrives in between is held
in the ``request`` hook (mitmproxy awaits what a hook returns) until the
recorder is there, then recorded like any other.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mitmproxy import connection, ctx, flowfilter, http, tls
from mitmproxy.addonmanager import Loader
from mitmproxy.proxy import server_hooks
from mitmproxy.proxy.tunnel import TunnelLayer

from ..arrival import ArrivalSocket, keep_stamps_on, stamp_arrivals
from ..capture.credentials import Credential
from ..capture.mcp import is_mcp_exchange
from ..capture.recorder import Recorder, Redaction, UpstreamConnection, is_streaming, parse_labels
from ..capture.upstream_error import upstream_error_message
from ..cassette.model import Interaction, Outcome, Request
from ..cassette.records import Record
from ..cassette.writer import BackgroundWriter
from ..errors import CassetteError, OptionError, StreamtapeError
from ..fmt import summary_line
from ..wire import UPSTREAM_RESET
from . import error_answer
from . import record_options as option
from .faults import pass_reset_on, upstream_reset
from .options import FailLoudly
from .record_options import OPTION_NAMES, RECORD_OPTIONS
from .transports import transport_of
from .websocket import WebSocketRecording, is_upgrade_request

if TYPE_CHECKING:  # the sender loads httpx: only a run with shadows imports it
    from ..shadow.sender import ShadowSender

log = logging.getLogger("streamtape")

STARTUP_HOLD_S = 10.0
"""How long a request that arrives before the ``running`` hook is held at most (normally: milliseconds)."""


def _headers(fields: http.Headers) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in fields.items(multi=True))


def credential_warning(c: Credential, option: str = "--set streamtape_redact_fields=") -> str:
    """One line about a body field that looks like a credential, naming the option
    (``option`` followed by the field name) that blanks it."""
    return (
        f"request body field {c.path} looks like a credential ({c.kind}) and is recorded as is; "
        f"{option}{c.field} redacts it"
    )


def _span_ns(start: float | None, end: float | None) -> int | None:
    """Nanoseconds between two of mitmproxy's wall-clock stamps (None if either is missing)."""
    return None if start is None or end is None else max(0, round((end - start) * 1e9))


INSECURE_HINT = "--set ssl_insecure=true records from a server with a self-signed certificate"
"""How to accept an upstream certificate that fails verification, in mitmdump's words (the default
``insecure_hint``; ``streamtape record`` names its ``--insecure``)."""


HEAD_WORK_AFTER_S = 0.05
"""The longest a recorded response head's work waits for its first piece (see responseheaders)."""


@dataclass(slots=True)
class _Connecting:
    """One upstream connection's setup as the hooks saw it (perf_counter_ns readings)."""

    connected_ns: int
    tcp_ns: int | None
    tls_start_ns: int | None = None
    tunnel: _Connecting | None = None
    """The connection to an upstream proxy this one runs inside (after a CONNECT)."""
    ready: UpstreamConnection | None = None
    """Set once the connection can take a request."""
    arrival: ArrivalSocket | None = None
    """Its socket with the kernel's receive time of each read (:mod:`streamtape.arrival`),
    where that can be had: the pieces read from it are timed by it."""


def _tunnel_of(data: tls.TlsData) -> connection.Connection | None:
    """The upstream proxy connection a server TLS handshake runs inside, if any.

    Through an upstream proxy, mitmproxy opens a connection to the proxy (its
    own ``server_connected``), sends CONNECT on it, and runs the origin's TLS
    inside: a :class:`TunnelLayer` in the handshake's layer stack holds both.
    """
    for layer in data.context.layers:
        if isinstance(layer, TunnelLayer) and layer.conn == data.conn and layer.tunnel_connection != data.conn:
            return layer.tunnel_connection
    return None


def outcome_of(flow: http.HTTPFlow) -> Outcome:
    """Which outcome an errored flow ends with, from mitmproxy's message."""
    msg = (flow.error.msg if flow.error else "") or ""
    if "client disconnected" in msg.lower():
        return Outcome.CLIENT_DISCONNECTED
    if flow.response is None:
        return Outcome.UPSTREAM_ERROR
    return Outcome.UPSTREAM_CLOSED


class RecordAddon(FailLoudly):
    """Records streaming responses into a cassette.

    ``on_finished`` is called on the event loop with each finished interaction
    as it ends; ``on_saved`` once it is on disk (the CLI prints its line then,
    so a line means a saved recording even if the recorder is killed right
    after; by default an info line in the log), ``on_lost`` instead when it
    could not be written (the disk filled up; by default an error line in the
    log). ``on_error`` is called with a one-line message when the
    addon cannot work (bad option, unwritable file) -- by default it logs the
    message at error level and stops the proxy, so a bad option never leaves
    mitmproxy running with the addon silently inactive. ``on_credential``
    gets each request body field that looks like a credential, once per field
    (by default a warning in mitmproxy's log, :func:`credential_warning`).

    A request the upstream never answered (refused, unresolvable, a certificate
    that fails verification, closed before the response head) is recorded as
    ``upstream_error`` with mitmproxy's message, and its client gets the 502 as
    a JSON error body in its API's shape that names the upstream and the cause
    (:mod:`streamtape.mitm.error_answer`), not mitmproxy's HTML page; for a
    certificate, the message ends with ``insecure_hint`` (None: no hint).
    """

    activity = "recording"

    def __init__(
        self,
        on_finished: Callable[[Interaction], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        shadow: ShadowSender | None = None,
        on_credential: Callable[[Credential], None] | None = None,
        on_saved: Callable[[Interaction], None] | None = None,
        on_lost: Callable[[Interaction], None] | None = None,
        insecure_hint: str | None = INSECURE_HINT,
    ) -> None:
        super().__init__(on_error)
        self.insecure_hint = insecure_hint
        self._answering = False  # error_answer is installed: upstream errors are answered in JSON
        self.on_finished = on_finished
        self.on_saved = on_saved
        self.on_lost = on_lost
        self.on_credential = on_credential or (lambda c: log.warning(f"streamtape: {credential_warning(c)}"))
        self.shadow = shadow
        """Mirrors each recorded request to shadow backends (``record --shadow``)."""
        self.recorder: Recorder | None = None
        self.writer: BackgroundWriter | None = None
        self.filter: flowfilter.TFilter | None = None
        self.record_all = False
        self.redaction = Redaction()
        self.labels: dict[str, str] = {}
        self.saved = 0
        """Finished interactions on disk (see :meth:`_report_when_saved`)."""
        self.lost = 0
        """Finished interactions that could not be written."""
        self._running = False
        self._deferred: list[Record] = []
        self._finishing: list[Interaction] = []  # ended in this hook: reported once written
        self._written: collections.deque[tuple[list[Interaction], bool]] = collections.deque()
        self._ticker: asyncio.Task[None] | None = None
        self._write_failure_reported = False
        self._pending_heads: dict[str, tuple[http.HTTPFlow, int]] = {}
        # Upstream connections being set up or open, until mitmproxy lets go of them.
        self._connections: weakref.WeakKeyDictionary[connection.Connection, _Connecting] = (
            weakref.WeakKeyDictionary()
        )
        self._accepting = False  # past the running hook: requests are recorded (or the proxy stops)
        self.websockets = WebSocketRecording(self)
        """WebSocket sessions: the upgrade leaves the HTTP recorder at its 101 head."""
        self._started: asyncio.Event | None = None  # created by the first request that has to wait

    # -- options -------------------------------------------------------------

    def load(self, loader: Loader) -> None:
        if not self._answering:
            self._answering = error_answer.install()
        keep_stamps_on()  # before the first upstream read (streamtape.arrival)
        for o in RECORD_OPTIONS:  # declared in streamtape.mitm.record_options, with their flags
            loader.add_option(o.name, o.typespec, o.mitm_default, o.help)

    def configure(self, updated: set[str]) -> None:
        if not updated & OPTION_NAMES:
            return
        try:
            self._configure()
        except StreamtapeError as e:
            self.fail(str(e))

    def _configure(self) -> None:
        o = ctx.options
        labels = parse_labels(option.LABEL.read(o))
        self.filter = None
        if expression := option.FILTER.read(o):
            try:
                self.filter = flowfilter.parse(expression)
            except ValueError as e:
                raise OptionError(f"{option.FILTER.name}: invalid filter expression {expression!r}: {e}") from None
        self.record_all = option.ALL.read(o)
        redaction = Redaction.build(
            enabled=option.REDACT.read(o),
            extra_headers=option.REDACT_HEADERS.read(o),
            extra_query=option.REDACT_QUERY.read(o),
            body_fields=option.REDACT_FIELDS.read(o),
        )
        if not option.OUT.read(o):
            raise OptionError(f"{option.OUT.name}: no cassette file given")
        self.redaction = redaction
        self.labels = labels
        if self._running:
            self._open()
        self.failed = None

    def fail(self, message: str) -> None:
        self.recorder = None
        super().fail(message)

    def running(self) -> None:
        try:
            self._start()
        finally:
            # Whatever happened (recording, or failed and stopping), let held requests go on.
            self._accepting = True
            if self._started is not None:
                self._started.set()

    def _start(self) -> None:
        ps = ctx.master.addons.get("proxyserver")
        if ps is not None and not ps.listen_addrs():
            return  # the proxy could not listen and is stopping: create no cassette
        self.check_deferred()
        if not self.failed:
            self._running = True
            try:
                self._open()
            except StreamtapeError as e:
                self.fail(str(e))
        if self.stop_if_failed():
            return
        if self.shadow is not None and self.writer is not None:
            self.shadow.start(self.writer.submit, self.writer.new_id, self.redaction, self.labels)
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    def _open(self) -> None:
        """Open (or switch) the cassette and build the recorder; only once the proxy runs."""
        out = option.OUT.read(ctx.options)
        if self.writer is None or str(self.writer.path) != out:
            self._close_writer()
            try:
                self.writer = BackgroundWriter(out)
            except CassetteError as e:
                raise OptionError(f"{option.OUT.name}: {e}") from None
            except OSError as e:
                raise OptionError(f"{option.OUT.name}: {out}: {e.strerror or e}") from None
        self.recorder = Recorder(
            self._defer,
            self.writer.new_id,
            redaction=self.redaction,
            labels=self.labels,
            on_credential=self.on_credential,
        )

    def _defer(self, records: list[Record]) -> None:
        """Hand records to the writer after the current hook returns, so the
        writer thread never competes with the proxy for the GIL mid-hook."""
        if not self._deferred:
            asyncio.get_running_loop().call_soon(self._hand_off)
        self._deferred.extend(records)

    def _hand_off(self) -> None:
        done, self._finishing = self._finishing, []
        if self._deferred and self.writer is not None:
            if done:
                try:
                    loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
                except RuntimeError:
                    loop = None

                def written(ok: bool) -> None:  # on the writer thread
                    self._written.append((done, ok))
                    if loop is not None:
                        with contextlib.suppress(RuntimeError):  # the loop is gone: done() reports
                            loop.call_soon_threadsafe(self._report_written)

                self.writer.submit(self._deferred, on_written=written)
            else:
                self.writer.submit(self._deferred)
        elif done:
            self._written.append((done, False))
            self._report_written()
        self._deferred = []

    def _report_when_saved(self, ix: Interaction) -> None:
        """Report a finished interaction once its ``end`` record is on disk, or could not be.

        Its records were handed to :meth:`_defer` already; the hand-off that
        follows this hook submits them with a callback, and the report comes
        back to the event loop (:meth:`_report_written`). So ``on_saved``
        (the CLI's line) never announces a recording a kill could still lose.
        """
        self._finishing.append(ix)

    def _report_written(self) -> None:
        """On the event loop: say what the writer saved, and what it could not save."""
        self._check_writer()
        while self._written:
            done, ok = self._written.popleft()
            for ix in done:
                if ok:
                    self.saved += 1
                    if self.on_saved:
                        self.on_saved(ix)
                    else:
                        log.info(f"streamtape: {summary_line(ix)}")
                else:
                    self.lost += 1
                    if self.on_lost:
                        self.on_lost(ix)
                    else:
                        log.error(f"streamtape: not saved: {summary_line(ix)}")

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            if self.recorder:
                self.recorder.tick(time.perf_counter_ns())
                self.websockets.tick(time.perf_counter_ns())
            self._check_writer()

    def _check_writer(self) -> None:
        """Say so, once, when the cassette can no longer be written (disk full, file gone)."""
        w = self.writer
        if w is not None and w.failure is not None and not self._write_failure_reported:
            self._write_failure_reported = True
            e = w.failure
            self.report(
                f"cannot write {w.path}: {getattr(e, 'strerror', None) or e}; the proxy goes on serving, "
                f"but nothing more is recorded (the cassette keeps what was saved before)"
            )

    # -- flow hooks ----------------------------------------------------------

    def request(self, flow: http.HTTPFlow) -> Coroutine[None, None, None] | None:
        if not self._accepting:
            # Listening, but the running hook has not opened the recorder yet.
            return self._request_when_started(flow)
        self._begin(flow)
        return None

    async def _request_when_started(self, flow: http.HTTPFlow) -> None:
        if self._started is None:
            self._started = asyncio.Event()
        if not self._accepting:
            # Bounded: an addon added to a proxy that already runs gets no running
            # hook unless its caller sends one, and a request must not hang for it.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._started.wait(), STARTUP_HOLD_S)
        self._begin(flow)

    def _begin(self, flow: http.HTTPFlow) -> None:
        if self.recorder is None:
            return
        t0 = time.perf_counter_ns()
        r = flow.request
        request = Request(
            method=r.method,
            url=r.url,
            http_version=r.http_version,
            headers=_headers(r.headers),
            body=r.raw_content or b"",
            started_at=r.timestamp_start,
        )
        # Shadows: the request is queued for the sender's thread; the flow gets its pair labels.
        # A WebSocket upgrade is not mirrored: a shadow sender speaks HTTP request/response.
        labels = None
        if self.shadow is not None and not is_upgrade_request(r):
            labels = self.shadow.request(flow.id, request)
        self.recorder.begin(flow.id, request, t0, labels)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        # On the path of the response head to the client: decide, set the
        # recording callable, and leave the rest (copying and redacting the
        # head, encoding the record) to just after the head has gone out.
        rec = self.recorder
        resp = flow.response
        if rec is None or resp is None:
            return
        arrival = self._arrival(flow.server_conn)
        # The head came in the last read of its connection: the kernel's time of that read
        # where there is one (never later than now, however late the loop got to it).
        now = arrival.arrived_ns if arrival is not None else time.perf_counter_ns()
        if self.websockets.responseheaders(flow, now):
            return
        h = resp.headers
        wanted = (
            self.record_all
            or is_upgrade_request(flow.request)  # a refused WebSocket upgrade (401, 404) is recorded too
            or is_streaming(resp.http_version, h.get("content-type"), h.get("transfer-encoding"))
            # An MCP session is kept whole: its 202s, its DELETE, its JSON answers too.
            or is_mcp_exchange(flow.request.method, _headers(flow.request.headers), _headers(h))
        )
        if wanted and self.filter is not None:
            wanted = self.filter(flow)
        if not wanted or not rec.has(flow.id):  # not wanted, or begun before the addon was configured
            rec.forget(flow.id)
            resp.stream = True  # pass through as it comes, like the recorded ones
            return
        key = flow.id
        self._sent(flow)  # before the first piece: t = 0 moves past the connection's setup
        self._pending_heads[key] = (flow, now)
        # The head's work waits until the first piece is stamped: an upstream that writes
        # its first event with the head has it in the same read, and the work done first
        # made that piece's time late by ~0.5 ms, which every later offset carried
        # (bench/record_timing.py, one stream: offset error p50 1.23 -> 0.69 ms). A head
        # whose first piece is slow to come is applied after HEAD_WORK_AFTER_S; the end
        # of the response applies it in any case.
        loop = asyncio.get_running_loop()
        later = loop.call_later(HEAD_WORK_AFTER_S, self._apply_head, key)
        piece = rec.piece
        apply_head = self._apply_head
        first = True
        clock = time.perf_counter_ns
        if arrival is not None:
            # mitmproxy hands on what a read brought before it reads that socket again,
            # so a piece's bytes came in the connection's last read.
            def clock() -> int:
                return arrival.arrived_ns

        def record(data: bytes) -> bytes:
            nonlocal first
            if data:
                piece(key, data, clock())
                if first:
                    first = False
                    later.cancel()
                    loop.call_soon(apply_head, key)
            return data

        resp.stream = record

    def _arrival(self, conn: connection.Connection) -> ArrivalSocket | None:
        c = self._connections.get(conn)
        return c.arrival if c is not None else None

    def _apply_head(self, key: str) -> None:
        """Register a response head with the recorder (pieces may already have come)."""
        pending = self._pending_heads.pop(key, None)
        if pending is None or self.recorder is None:
            return
        flow, at = pending
        r = flow.response
        if r is None:  # responseheaders only defers a flow that has a response
            return
        self.recorder.response_headers(key, r.status_code, r.reason, r.http_version, _headers(r.headers), at)
        if self.shadow is not None:
            self.shadow.keep(key)

    def _sent(self, flow: http.HTTPFlow) -> None:
        """Tell the recorder which connection the flow's request went out on, if it had one."""
        c = self._connections.get(flow.server_conn)
        if c is not None and c.ready is not None and self.recorder is not None:
            self.recorder.sent(flow.id, c.ready)

    # -- upstream connection hooks: the setup marks ------------------------------

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        now = time.perf_counter_ns()
        s = data.server
        c = _Connecting(now, _span_ns(s.timestamp_start, s.timestamp_tcp_setup),
                        arrival=stamp_arrivals(transport_of(data.client, s)))
        if not s.tls:  # plain HTTP: the request goes out now
            c.ready = UpstreamConnection(now, c.tcp_ns)
        self._connections[s] = c

    def tls_start_server(self, data: tls.TlsData) -> None:
        now = time.perf_counter_ns()
        c = self._connections.get(data.conn)
        if c is None:  # no server_connected of its own: inside an upstream proxy's tunnel?
            tunnel = _tunnel_of(data)
            t = self._connections.get(tunnel) if tunnel is not None else None
            if t is None or t.ready is None:
                return
            c = self._connections[data.conn] = _Connecting(t.connected_ns, t.tcp_ns, tunnel=t, arrival=t.arrival)
        c.tls_start_ns = now

    def tls_established_server(self, data: tls.TlsData) -> None:
        now = time.perf_counter_ns()
        c = self._connections.get(data.conn)
        if c is None:
            return
        t = c.tunnel.ready if c.tunnel is not None else None
        if t is not None and c.tls_start_ns is not None:
            # Through an upstream proxy: TCP (and TLS, for an https:// proxy) to the
            # proxy, then the CONNECT exchange, which ends where this handshake starts.
            tls_ns = now - c.tls_start_ns + (t.tls_ns or 0)
            c.ready = UpstreamConnection(now, t.tcp_ns, c.tls_start_ns - t.ready_ns, tls_ns)
        else:
            # Direct: TLS starts once TCP is up. The mark includes the proxy building
            # its TLS context (tlsconfig's tls_start_server), as a client would.
            c.ready = UpstreamConnection(now, c.tcp_ns, None, now - c.connected_ns)

    def response(self, flow: http.HTTPFlow) -> None:
        if self.websockets.response(flow):
            return
        self._finish(flow, Outcome.COMPLETE, None)

    def error(self, flow: http.HTTPFlow) -> None:
        self.websockets.error(flow)
        msg = flow.error.msg if flow.error else "unknown error"
        if upstream_reset(flow):
            # mitmproxy reports a reset as an early close and closes the client with a FIN:
            # say which it was, and reset the client's connection as the upstream did.
            pass_reset_on(flow)
            msg = f"{UPSTREAM_RESET}: {msg}"
        outcome = outcome_of(flow)
        if outcome is Outcome.UPSTREAM_ERROR:
            self._answer(flow, msg)
        self._finish(flow, outcome, msg)

    def _answer(self, flow: http.HTTPFlow, msg: str) -> None:
        """Have the client of a recorded flow with no response told, in JSON, why
        (:mod:`.error_answer`). Only once its whole request was read: mitmproxy closes
        an HTTP/1 connection whose request was still coming in after its page."""
        rec = self.recorder
        if not self._answering or rec is None or not rec.has(flow.id) or flow.request.timestamp_end is None:
            return
        error_answer.answer(flow, upstream_error_message(error_answer.upstream_of(flow), msg,
                                                          insecure_hint=self.insecure_hint))

    def _finish(self, flow: http.HTTPFlow, outcome: Outcome, error: str | None) -> None:
        if self.recorder is None:
            return
        if flow.response is None:
            self._sent(flow)  # no head came: did the request reach the upstream?
        self._apply_head(flow.id)
        ix = self.recorder.finish(flow.id, outcome, error, time.perf_counter_ns())
        if self.shadow is not None:
            self.shadow.finished(flow.id, recorded=ix is not None)
        if ix is None:
            return
        if self.on_finished:
            self.on_finished(ix)
        self._report_when_saved(ix)

    # -- WebSocket sessions (streamtape.mitm.websocket) ------------------------------

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        self.websockets.websocket_message(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self.websockets.websocket_end(flow)

    # -- shutdown ------------------------------------------------------------

    def done(self) -> None:
        if self._answering:
            self._answering = False
            error_answer.uninstall()
        self._accepting = True
        if self._started is not None:
            self._started.set()
        if self._ticker:
            self._ticker.cancel()
        for key in list(self._pending_heads):
            self._apply_head(key)
        self.websockets.done(time.perf_counter_ns())
        if self.recorder:
            for ix in self.recorder.close(time.perf_counter_ns()):
                if self.on_finished:
                    self.on_finished(ix)
                self._report_when_saved(ix)
        if self.shadow is not None:
            self.shadow.stop()  # its last records reach the writer before it closes
        self._close_writer()
        self._report_written()  # the writer thread has finished: everything it wrote

    def _close_writer(self) -> None:
        if self.writer is not None:
            self._hand_off()
            self.writer.close()
            self.writer = None
