"""The recorder: turns capture events into cassette records. No sockets, no files.

A capture front end (the mitmproxy addon) calls, per flow::

    begin(key, request, t0_ns)                 the proxy has the whole request
    response_headers(key, ..., now_ns)         the response head of a recorded flow
    piece(key, data, now_ns)                   every body piece, in order (hot path)
    finish(key, outcome, error, now_ns)        -> the finished Interaction

and ``tick(now_ns)`` now and then. Records go to ``sink`` (a callable taking a
list of record dicts, for example :meth:`BackgroundWriter.submit`): a ``begin``
record when the response head arrives, ``data`` records with batches of pieces
(so a killed recorder loses at most ``max_flush_ns`` of an unfinished stream),
and an ``end`` record. A batch goes out once its oldest piece is ``flush_ns``
old and it holds ``min_batch`` pieces, or once it is ``max_flush_ns`` old:
small batches cost record overhead, and 20-byte pieces must stay under 1.5x
their size on disk.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .cassette import (
    UPSTREAM_ERROR,
    Framing,
    Headers,
    Interaction,
    Outcome,
    Piece,
    Record,
    Request,
    Response,
    data_record,
    encode_request,
    encode_response_head,
    header_value,
)
from .errors import OptionError
from .redaction import DEFAULT_REDACT_HEADERS, DEFAULT_REDACT_QUERY, REDACTED, Redaction

STREAMING_CONTENT_TYPES = (
    "text/event-stream",
    "application/x-ndjson",
    "application/jsonl",
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


@dataclass
class _Flight:
    rid: int | None
    request: Request
    t0_ns: int
    response: Response | None = None
    pieces: list[Piece] = field(default_factory=list)
    unsent: list[Piece] = field(default_factory=list)
    last_sent_at: int = 0
    unsent_bytes: int = 0
    labels: dict[str, str] = field(default_factory=dict)


Sink = Callable[[list[Record]], None]
"""Where the recorder sends records, in order (for example :meth:`BackgroundWriter.submit`)."""


class Recorder:
    """Builds interactions from capture events and emits their records to ``sink``."""

    def __init__(
        self,
        sink: Sink,
        new_id: Callable[[], int],
        *,
        redaction: Redaction | None = None,
        labels: dict[str, str] | None = None,
        flush_ns: int = 100_000_000,
        max_flush_ns: int = 1_000_000_000,
        min_batch: int = 8,
        flush_bytes: int = 256 * 1024,
    ) -> None:
        self.sink = sink
        self.new_id = new_id
        self.redaction = redaction or Redaction()
        self.labels = dict(labels or {})
        self.flush_ns = flush_ns
        self.max_flush_ns = max_flush_ns
        self.min_batch = min_batch
        self.flush_bytes = flush_bytes
        self._flights: dict[object, _Flight] = {}

    @property
    def in_flight(self) -> int:
        return len(self._flights)

    def begin(
        self, key: object, request: Request, t0_ns: int, labels: Mapping[str, str] | None = None
    ) -> None:
        """The proxy has the whole request; ``t0_ns`` (a perf_counter_ns reading) is t = 0.
        ``labels`` are this flow's own, on top of the recorder's (shadow pairs: ``pair=``)."""
        merged = {**self.labels, **labels} if labels else self.labels
        self._flights[key] = _Flight(None, self.redaction.request(request), t0_ns, labels=merged)

    def has(self, key: object) -> bool:
        return key in self._flights

    def forget(self, key: object) -> None:
        """Stop tracking a flow that is not recorded."""
        self._flights.pop(key, None)

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
        f.rid = self.new_id()
        self.sink(
            [
                {
                    "t": "begin",
                    "id": f.rid,
                    "request": encode_request(f.request),
                    "response": encode_response_head(f.response),
                    "labels": f.labels,
                }
            ]
        )

    def piece(self, key: object, data: bytes, now_ns: int) -> None:
        """One body piece (hot path: an append, and a batch hand-off now and then)."""
        f = self._flights[key]
        p = Piece(now_ns - f.t0_ns, data)
        f.pieces.append(p)
        f.unsent.append(p)
        f.unsent_bytes += len(data)
        age = p.at_ns - f.unsent[0].at_ns
        if (
            f.unsent_bytes >= self.flush_bytes
            or age >= self.max_flush_ns
            or (age >= self.flush_ns and len(f.unsent) >= self.min_batch)
        ):
            self._flush(f)

    def _flush(self, f: _Flight) -> None:
        if not f.unsent or f.rid is None:
            return
        rec = data_record(f.rid, f.unsent, f.last_sent_at)
        f.last_sent_at = f.unsent[-1].at_ns
        f.unsent = []
        f.unsent_bytes = 0
        self.sink([rec])

    def tick(self, now_ns: int) -> None:
        """Hand off pieces that have waited longer than ``max_flush_ns``."""
        for f in self._flights.values():
            if f.unsent and now_ns - f.t0_ns - f.unsent[0].at_ns >= self.max_flush_ns:
                self._flush(f)

    def finish(self, key: object, outcome: Outcome, error: str | None, now_ns: int) -> Interaction | None:
        """End a flow; returns the interaction (None if the flow was not begun)."""
        f = self._flights.pop(key, None)
        if f is None:
            return None
        end_ns = now_ns - f.t0_ns
        response = replace(f.response, pieces=tuple(f.pieces)) if f.response else None
        ix = Interaction(f.request, response, outcome, error, end_ns, dict(f.labels))
        if f.rid is None:
            # No response head (upstream refused, or it failed before answering).
            f.rid = self.new_id()
            self.sink(
                [
                    {
                        "t": "begin",
                        "id": f.rid,
                        "request": encode_request(f.request),
                        "response": None,
                        "labels": f.labels,
                    }
                ]
            )
        self._flush(f)
        self.sink([{"t": "end", "id": f.rid, "outcome": outcome, "error": error, "end_ns": end_ns}])
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


# Redaction lives in streamtape.redaction (the replay side uses it too); its
# names stay importable from here.
__all__ = [
    "DEFAULT_REDACT_HEADERS",
    "DEFAULT_REDACT_QUERY",
    "REDACTED",
    "STREAMING_CONTENT_TYPES",
    "UPSTREAM_ERROR",
    "Recorder",
    "Redaction",
    "framing_of",
    "is_streaming",
    "parse_labels",
]
