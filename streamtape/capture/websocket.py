"""The WebSocket session recorder: turns capture events into cassette records. No sockets, no files.

The HTTP :class:`~streamtape.capture.recorder.Recorder` takes a flow from its request
to its response head; when that head is a ``101 Switching Protocols`` to
WebSocket, the capture front end hands the flow over (:meth:`Recorder.detach
<streamtape.capture.recorder.Recorder.detach>` gives its request, its t = 0 and its
setup) and this recorder takes it on, per session::

    open(key, begun, status, reason, http_version, headers, headers_at_ns)   the 101 head
    message(key, from_client, text, data, now_ns)                            every message, in order
    finish(key, now_ns, close_code, close_reason, closed_by_client)          -> the Interaction

and ``tick(now_ns)`` now and then; ``close(now_ns)`` when the recording stops.
Offsets count from the session's t = 0, the moment the upgrade request was
handed to the upstream, like an HTTP interaction's.

Records go to ``sink`` as for HTTP: a ``begin`` record (``"websocket": 1``)
when the session opens, message records in batches (a batch goes out once
its oldest message is ``flush_ns`` old and it holds ``min_batch`` messages, or
once it is ``max_flush_ns`` old, or holds ``flush_bytes``: a killed recorder
loses at most about a second of a session), and an ``end`` record with the
close.

Redaction. The upgrade request is redacted like any request (headers, query
parameters: keys travel there, as ``Authorization`` or ``?key=``), and so is a
key offered as a subprotocol (``Sec-WebSocket-Protocol:
openai-insecure-api-key.sk-...``, how browsers pass a key to the Realtime
API). The JSON fields named with ``--redact-field`` are blanked in the text
messages the client sends; server messages are kept as they came, as HTTP
response bodies are. A client message is searched for credentials
(:mod:`streamtape.capture.credentials`) and each field that looks like one is
reported once through ``on_credential``.

The front end sees whole messages: mitmproxy reassembles fragmented
messages and exposes neither their frames nor their pings (see
:mod:`streamtape.mitm.websocket`), so a message's ``fragments`` are what the front end
passes (nothing, from mitmproxy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..cassette.model import (
    REDACTED,
    Direction,
    Headers,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    WebSocketSession,
)
from ..cassette.records import begin_record, end_record, message_record
from ..wire import Framing
from .credentials import Credential, find_credentials
from .recorder import Batching, Begun, Sink, Unsent
from .redaction import Redaction

ABNORMAL_CLOSURE = 1006
"""The close code a WebSocket stack reports when the connection ended without a
close frame (RFC 6455 7.1.5); never sent on the wire. Recorded as no close."""

SUBPROTOCOL_KEY_PREFIXES = ("openai-insecure-api-key.",)
"""Subprotocols that carry a key after their prefix: browsers cannot set an
``Authorization`` header on a WebSocket, so the Realtime API takes the key this way."""


def redact_subprotocols(headers: Headers, redaction: Redaction) -> Headers:
    """Blank keys offered as subprotocols in ``Sec-WebSocket-Protocol`` (the prefix is kept)."""
    if not redaction.enabled:
        return headers

    def clean(value: str) -> str:
        items = [item.strip() for item in value.split(",")]
        out = []
        for item in items:
            prefix = next((p for p in SUBPROTOCOL_KEY_PREFIXES if item.lower().startswith(p)), None)
            out.append(item[: len(prefix)] + REDACTED if prefix else item)
        return ", ".join(out)

    return tuple((k, clean(v) if k.lower() == "sec-websocket-protocol" else v) for k, v in headers)


@dataclass
class _Session:
    rid: int
    request: Request
    response: Response
    t0_ns: int
    begun: Begun
    messages: list[Message] = field(default_factory=list)
    unsent: Unsent[Message] = field(default_factory=Unsent)


class SessionRecorder:
    """Builds WebSocket session interactions from capture events; emits their records to ``sink``."""

    def __init__(
        self,
        sink: Sink,
        new_id: Callable[[], int],
        *,
        redaction: Redaction | None = None,
        on_credential: Callable[[Credential], None] | None = None,
        flush_ns: int = 100_000_000,
        max_flush_ns: int = 1_000_000_000,
        min_batch: int = 8,
        flush_bytes: int = 256 * 1024,
    ) -> None:
        self.sink = sink
        self.new_id = new_id
        self.redaction = redaction or Redaction()
        self.on_credential = on_credential
        self.batching = Batching(flush_ns, max_flush_ns, min_batch, flush_bytes)
        self._sessions: dict[object, _Session] = {}
        self._credentials_seen: set[str] = set()

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    def has(self, key: object) -> bool:
        return key in self._sessions

    def open(
        self,
        key: object,
        begun: Begun,
        status: int,
        reason: str,
        http_version: str,
        headers: Headers,
        headers_at_ns: int,
    ) -> None:
        """The upstream switched protocols: the session begins (its ``begin`` record goes out).

        ``headers_at_ns`` is the clock reading when the 101 head reached the proxy.
        """
        request = self.redaction.request(begun.request)
        request = replace(request, headers=redact_subprotocols(request.headers, self.redaction))
        response = Response(
            status=status,
            reason=reason,
            http_version=http_version,
            headers=self.redaction.redact_headers(headers),
            framing=Framing.NONE,
            headers_at_ns=headers_at_ns - begun.t0_ns,
        )
        rid = self.new_id()
        self._sessions[key] = _Session(rid, request, response, begun.t0_ns, begun)
        self.sink([begin_record(rid, request, response, dict(begun.labels), begun.setup, websocket=True)])

    def _client_data(self, data: bytes, text: bool) -> bytes:
        """A client message as it is stored: the named JSON fields blanked; credentials reported."""
        if not text or not self.redaction.enabled:
            return data
        data = self.redaction.redact_body(data, "application/json")
        if self.on_credential is not None:
            for c in find_credentials(data, "application/json"):
                if c.path not in self._credentials_seen:
                    self._credentials_seen.add(c.path)
                    self.on_credential(c)
        return data

    def message(
        self,
        key: object,
        from_client: bool,
        text: bool,
        data: bytes,
        now_ns: int,
        fragments: tuple[int, ...] = (),
    ) -> None:
        """One whole message, ``now_ns`` when the proxy had it."""
        s = self._sessions.get(key)
        if s is None:
            return
        if from_client:
            stored = self._client_data(data, text)
            if stored is not data and fragments:
                fragments = ()  # redaction changed the size: the frames no longer describe it
            data = stored
        m = Message(
            now_ns - s.t0_ns, Direction.CLIENT if from_client else Direction.SERVER, text, data, fragments
        )
        s.messages.append(m)
        if s.unsent.add(m, len(data), self.batching):
            self._flush(s)

    def _flush(self, s: _Session) -> None:
        if not s.unsent.items:
            return
        messages, previous = s.unsent.take()
        self.sink([message_record(s.rid, messages, previous)])

    def tick(self, now_ns: int) -> None:
        """Hand off messages that have waited longer than ``max_flush_ns``."""
        for s in self._sessions.values():
            if s.unsent.overdue(now_ns - s.t0_ns, self.batching):
                self._flush(s)

    def finish(
        self,
        key: object,
        now_ns: int,
        close_code: int | None,
        close_reason: str = "",
        closed_by_client: bool | None = None,
        *,
        outcome: Outcome | None = None,
        error: str | None = None,
    ) -> Interaction | None:
        """The session ended: with a close frame (its code), or without one (code 1006 or None).

        The outcome is ``complete`` after a close frame from either side (the
        code says whether all went well; ``check`` reads it), and
        ``upstream_closed`` / ``client_disconnected`` when that side's
        connection ended without one, unless ``outcome`` says otherwise.
        """
        s = self._sessions.pop(key, None)
        if s is None:
            return None
        closed_by = None if closed_by_client is None else (Direction.CLIENT if closed_by_client else Direction.SERVER)
        if close_code == ABNORMAL_CLOSURE:
            close_code, close_reason = None, ""
        if outcome is None:
            if close_code is not None:
                outcome = Outcome.COMPLETE
            elif closed_by == Direction.CLIENT:
                outcome = Outcome.CLIENT_DISCONNECTED
                error = error or "the client's connection ended without a close frame"
            else:
                outcome = Outcome.UPSTREAM_CLOSED
                error = error or "the server's connection ended without a close frame"
        if close_code is None:
            close_reason = ""
        ws = WebSocketSession(tuple(s.messages), close_code, close_reason or "", closed_by)
        end_ns = now_ns - s.t0_ns
        ix = Interaction(
            s.request, s.response, outcome, error, end_ns, dict(s.begun.labels), s.begun.setup, websocket=ws
        )
        self._flush(s)
        self.sink([end_record(s.rid, outcome, error, end_ns, ws)])
        return ix

    def close(self, now_ns: int) -> list[Interaction]:
        """Finish every open session as ``interrupted`` (the recorder is stopping)."""
        out = []
        for key in list(self._sessions):
            ix = self.finish(
                key, now_ns, None, outcome=Outcome.INTERRUPTED,
                error="the recorder stopped before the session ended",
            )
            if ix is not None:
                out.append(ix)
        return out
