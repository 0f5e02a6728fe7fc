"""The recorder: turns capture events into cassette records. No sockets, no files.

A capture front end (the mitmproxy addon) calls, per flow::

    begin(key, request, now_ns)                the proxy has the whole request
    sent(key, connection)                      it went to the upstream over this connection
    response_headers(key, ..., now_ns)         the response head of a recorded flow
    piece(key, data, now_ns)                   every body piece, in order (hot path)
    finish(key, outcome, error, now_ns)        -> the finished Interaction

and ``tick(now_ns)`` now and then. All ``*_ns`` arguments are readings of one
monotonic clock (``time.perf_counter_ns``).

t = 0 of an interaction is the moment its request was handed to the upstream
(see :mod:`streamtape.cassette`). The front end cannot see that moment
directly; it knows when the proxy had the request and when the upstream
connection became ready (:class:`UpstreamConnection`), and the request goes
out at the later of the two: right away on an open connection, or as soon as
a new one is set up. :meth:`Recorder.sent` works that out and keeps the setup
steps as the interaction's :class:`~streamtape.cassette.Setup`, so they never
add to an offset. A flow that never reaches ``sent`` (the connection failed,
or a front end that cannot tell) keeps the moment of ``begin`` as t = 0.

Records go to ``sink`` (a callable taking a list of record dicts, for example
:meth:`BackgroundWriter.submit`): a ``begin`` record when the response head
arrives, ``data`` records with batches of pieces (so a killed recorder loses
at most ``max_flush_ns`` of an unfinished stream), and an ``end`` record. A
batch goes out once its oldest piece is ``flush_ns`` old and it holds
``min_batch`` pieces, or once it is ``max_flush_ns`` old: small batches cost
record overhead, and 20-byte pieces must stay under 1.5x their size on disk.

The request is redacted, and its body searched for credentials
(:mod:`streamtape.capture.credentials`), when its ``begin`` record is built, not in
``begin``: the proxy holds the request until ``begin`` returns, and nothing
slow belongs on that path. Each body field that looks like a credential is
reported once per recorder through ``on_credential``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from ..cassette.model import (
    REDACTED,
    Headers,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    Setup,
)
from ..cassette.pieces import Piece
from ..cassette.records import Record, begin_record, data_record, end_record
from ..errors import OptionError
from ..wire import Framing, header_value
from .credentials import Credential, find_credentials
from .redaction import DEFAULT_REDACT_HEADERS, DEFAULT_REDACT_QUERY, Redaction
from .response_secrets import HOLD_BYTES, AnswerMasker, answer_masker

Item = TypeVar("Item", Piece, Message)

STREAMING_CONTENT_TYPES = (
    "text/event-stream",
    "application/x-ndjson",
    "application/jsonl",
    "application/vnd.amazon.eventstream",  # Bedrock's streams (binary AWS event stream messages)
)


def framing_of(http_version: str, headers: Headers) -> Framing:
    """How the upstream delimited a response body, from its version and head."""
    if http_version.upper().startswith(("HTTP/2", "HTTP/3")):
        return Framing.FRAMES
    te = (header_value(headers, "transfer-encoding") or "").lower()
    if "chunked" in te:
        return Framing.CHUNKED
    if header_value(headers, "content-length") is not None:
        return Framing.CONTENT_LENGTH
    return Framing.CLOSE_DELIMITED


def is_streaming(http_version: str, content_type: str | None, transfer_encoding: str | None) -> bool:
    """The default record filter: SSE, NDJSON/JSONL, or a chunked body of unknown length."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype in STREAMING_CONTENT_TYPES:
        return True
    return not http_version.upper().startswith(("HTTP/2", "HTTP/3")) and "chunked" in (transfer_encoding or "").lower()


_LABEL_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def parse_labels(items: Sequence[str]) -> dict[str, str]:
    """``["backend=vllm", ...]`` -> dict, with a clear error for a malformed item."""
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not _LABEL_RE.match(key):
            raise OptionError(f"bad label {item!r}: expected KEY=VALUE (KEY of letters, digits, _.-)")
        labels[key] = value
    return labels


@dataclass(frozen=True, slots=True)
class UpstreamConnection:
    """The upstream connection a request went out on, as the capture front end measured it."""

    ready_ns: int
    """When it could take the request (a clock reading): TCP up, or TLS established."""
    tcp_ns: int | None = None
    """How long its TCP connect took (None: not measured)."""
    proxy_connect_ns: int | None = None
    """How long an upstream proxy's CONNECT took (None: no upstream proxy)."""
    tls_ns: int | None = None
    """How long its TLS handshake took (None: plain HTTP)."""


@dataclass(slots=True)
class Unsent(Generic[Item]):
    """What a recorder holds of one interaction and has not handed to the writer yet.

    Shared by the HTTP recorder (pieces) and the WebSocket one (messages):
    both hand their items off in batches by the same rule (the module
    docstring) and write each batch's offsets as deltas from the last item
    of the batch before.
    """

    items: list[Item] = field(default_factory=list)
    size: int = 0
    last_sent_at: int = 0
    """``at_ns`` of the last item handed off: the delta base of the next record."""

    def add(self, item: Item, size: int, batching: Batching) -> bool:
        """Keep ``item``; whether the batch is due to go now."""
        self.items.append(item)
        self.size += size
        age = item.at_ns - self.items[0].at_ns
        return (
            self.size >= batching.flush_bytes
            or age >= batching.max_flush_ns
            or (age >= batching.flush_ns and len(self.items) >= batching.min_batch)
        )

    def overdue(self, since_t0_ns: int, batching: Batching) -> bool:
        """Whether the oldest item has waited ``max_flush_ns`` (``since_t0_ns``: now, after t = 0)."""
        return bool(self.items) and since_t0_ns - self.items[0].at_ns >= batching.max_flush_ns

    def take(self) -> tuple[list[Item], int]:
        """The batch and the offset its deltas count from; the holder starts empty again."""
        items, previous = self.items, self.last_sent_at
        self.last_sent_at = items[-1].at_ns
        self.items, self.size = [], 0
        return items, previous


@dataclass(frozen=True, slots=True)
class Batching:
    """When a batch of recorded items goes to the writer (see the module docstring)."""

    flush_ns: int = 100_000_000
    max_flush_ns: int = 1_000_000_000
    min_batch: int = 8
    flush_bytes: int = 256 * 1024


@dataclass
class _Flight:
    rid: int | None
    request: Request
    requested_ns: int
    """When the proxy had the whole request."""
    t0_ns: int
    labels: dict[str, str] = field(default_factory=dict)
    setup: Setup | None = None
    redacted: bool = False
    response: Response | None = None
    pieces: list[Piece] = field(default_factory=list)
    unsent: Unsent[Piece] = field(default_factory=Unsent)
    masker: AnswerMasker | None = None
    """Masks the token fields of a JSON answer (:mod:`.response_secrets`); None for others.
    With one, ``pieces`` holds only the pieces it handed on."""


WITHHELD_ERROR = (
    "the rest of this compressed answer was left out: a token field came after its first "
    f"{HOLD_BYTES // 1024} KiB had been stored compressed, and it cannot be masked there "
    "(--no-redact keeps it)"
)
"""The error of an answer whose rest :class:`~.response_secrets.AnswerMasker` withheld."""

Sink = Callable[[list[Record]], None]
"""Where the recorder sends records, in order (for example :meth:`BackgroundWriter.submit`)."""


@dataclass(frozen=True, slots=True)
class Begun:
    """A flow's request as the recorder holds it before a response: what another
    recorder needs to take the flow on (:meth:`Recorder.detach`; a WebSocket
    session, :mod:`streamtape.capture.websocket`). The request is not redacted yet."""

    request: Request
    t0_ns: int
    """t = 0 as a clock reading: the request handed to the upstream."""
    setup: Setup | None
    labels: dict[str, str]


class Recorder:
    """Builds interactions from capture events and emits their records to ``sink``."""

    def __init__(
        self,
        sink: Sink,
        new_id: Callable[[], int],
        *,
        redaction: Redaction | None = None,
        labels: dict[str, str] | None = None,
        on_credential: Callable[[Credential], None] | None = None,
        flush_ns: int = 100_000_000,
        max_flush_ns: int = 1_000_000_000,
        min_batch: int = 8,
        flush_bytes: int = 256 * 1024,
    ) -> None:
        self.sink = sink
        self.new_id = new_id
        self.redaction = redaction or Redaction()
        self.labels = dict(labels or {})
        self.on_credential = on_credential
        self.batching = Batching(flush_ns, max_flush_ns, min_batch, flush_bytes)
        self._flights: dict[object, _Flight] = {}
        self._credentials_seen: set[str] = set()

    @property
    def in_flight(self) -> int:
        return len(self._flights)

    def begin(
        self, key: object, request: Request, now_ns: int, labels: Mapping[str, str] | None = None
    ) -> None:
        """The proxy has the whole request (t = 0 until :meth:`sent` moves it).
        ``labels`` are this flow's own, on top of the recorder's (shadow pairs: ``pair=``)."""
        merged = {**self.labels, **labels} if labels else self.labels
        self._flights[key] = _Flight(None, request, now_ns, now_ns, labels=merged)

    def sent(self, key: object, connection: UpstreamConnection) -> None:
        """The request went to the upstream over ``connection``: t = 0 becomes that moment.

        Call before the response head and pieces. A connection that became
        ready after the proxy had the request was set up for it (the request
        waited): t = 0 is when it became ready, and its setup steps are the
        interaction's marks. One that was ready before was open already: t = 0
        stays, and the setup has no marks.
        """
        f = self._flights.get(key)
        if f is None:
            return
        c = connection
        if c.ready_ns > f.requested_ns:
            f.t0_ns = c.ready_ns
            f.setup = Setup(c.ready_ns - f.requested_ns, c.tcp_ns, c.proxy_connect_ns, c.tls_ns)
        else:
            f.t0_ns = f.requested_ns
            f.setup = Setup(0)

    def has(self, key: object) -> bool:
        return key in self._flights

    def forget(self, key: object) -> None:
        """Stop tracking a flow that is not recorded."""
        self._flights.pop(key, None)

    def detach(self, key: object) -> Begun | None:
        """Stop tracking a flow that another recorder takes on (after :meth:`sent`,
        before any record of it): its request, t = 0, setup and labels."""
        f = self._flights.pop(key, None)
        return None if f is None else Begun(f.request, f.t0_ns, f.setup, f.labels)

    def _redact(self, f: _Flight) -> None:
        """Redact the request once, and report the credentials left in its body."""
        if f.redacted:
            return
        f.redacted = True
        f.request = self.redaction.request(f.request)
        if self.on_credential is None or not self.redaction.enabled:
            return  # --no-redact: the user keeps secrets on purpose
        for c in find_credentials(f.request.body, f.request.header("content-type")):
            if c.path not in self._credentials_seen:
                self._credentials_seen.add(c.path)
                self.on_credential(c)

    def _begin_record(self, f: _Flight) -> Record:
        self._redact(f)
        f.rid = self.new_id()
        return begin_record(f.rid, f.request, f.response, f.labels, f.setup)

    def response_headers(
        self,
        key: object,
        status: int,
        reason: str,
        http_version: str,
        headers: Headers,
        now_ns: int,
    ) -> None:
        f = self._flights[key]
        headers = self.redaction.redact_headers(headers)
        f.response = Response(
            status=status,
            reason=reason,
            http_version=http_version,
            headers=headers,
            framing=framing_of(http_version, headers),
            headers_at_ns=now_ns - f.t0_ns,
        )
        ready: list[Piece] = []
        if self.redaction.enabled:
            f.masker = answer_masker(headers, self.redaction.response_fields)
        if f.masker is not None:
            # Pieces that came before the head are all still unsent (no id yet): they go
            # through the masker from the start.
            early, f.pieces, f.unsent = f.pieces, [], Unsent()
            ready = [q for p in early for q in f.masker.feed(p)]
        self.sink([self._begin_record(f)])
        if ready:
            self._hand_on(f, ready)

    def _hand_on(self, f: _Flight, pieces: list[Piece]) -> None:
        """Keep and hand on the pieces the masker has decided (masked where needed)."""
        due = False
        for p in pieces:
            f.pieces.append(p)
            due = f.unsent.add(p, len(p.data), self.batching) or due
        if due:
            self._flush(f)

    def piece(self, key: object, data: bytes, now_ns: int) -> None:
        """One body piece (hot path: an append, and a batch hand-off now and then)."""
        f = self._flights[key]
        p = Piece(now_ns - f.t0_ns, data)
        if f.masker is not None:
            self._hand_on(f, f.masker.feed(p))
            return
        f.pieces.append(p)
        if f.unsent.add(p, len(data), self.batching):
            self._flush(f)

    def _flush(self, f: _Flight) -> None:
        if not f.unsent.items or f.rid is None:
            return
        pieces, previous = f.unsent.take()
        self.sink([data_record(f.rid, pieces, previous)])

    def tick(self, now_ns: int) -> None:
        """Hand off pieces that have waited longer than ``max_flush_ns``."""
        for f in self._flights.values():
            if f.unsent.overdue(now_ns - f.t0_ns, self.batching):
                self._flush(f)

    def finish(self, key: object, outcome: Outcome, error: str | None, now_ns: int) -> Interaction | None:
        """End a flow; returns the interaction (None if the flow was not begun)."""
        f = self._flights.pop(key, None)
        if f is None:
            return None
        end_ns = now_ns - f.t0_ns
        if f.rid is None:
            # No response head (upstream refused, or it failed before answering).
            self.sink([self._begin_record(f)])
        headers = None
        if f.masker is not None:
            self._hand_on(f, f.masker.end())
            headers = f.masker.headers
            if f.masker.withheld:
                outcome, error = Outcome.INTERRUPTED, WITHHELD_ERROR
        response = None
        if f.response is not None:
            response = replace(f.response, pieces=tuple(f.pieces), headers=headers or f.response.headers)
        ix = Interaction(f.request, response, outcome, error, end_ns, dict(f.labels), f.setup)
        self._flush(f)
        assert f.rid is not None  # the begin record above gave it one
        self.sink([end_record(f.rid, outcome, error, end_ns, headers=headers)])
        return ix

    def close(self, now_ns: int) -> list[Interaction]:
        """Finish every flow still in flight as ``interrupted`` (the recorder is stopping)."""
        out = []
        for key in list(self._flights):
            f = self._flights[key]
            if f.rid is None and f.response is None:
                # Never got an answer and was never going to be recorded.
                self._flights.pop(key)
                continue
            ix = self.finish(key, Outcome.INTERRUPTED, "the recorder stopped before the response ended", now_ns)
            if ix:
                out.append(ix)
        return out


# Redaction lives in streamtape.capture.redaction (the replay side uses it too); its
# names stay importable from here.
__all__ = [
    "DEFAULT_REDACT_HEADERS",
    "DEFAULT_REDACT_QUERY",
    "REDACTED",
    "STREAMING_CONTENT_TYPES",
    "Begun",
    "Recorder",
    "Redaction",
    "UpstreamConnection",
    "framing_of",
    "is_streaming",
    "parse_labels",
]
