"""Byte spans of the events in a body, for replay faults that act per event."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .eventstream import EventStreamDecoder, EventStreamMessage
from .jsonarray import JSONArrayParser
from .ndjson import NDJSONParser
from .sse import SSEEvent, SSEParser

SpanKind = Literal["event", "comment", "done"]


@dataclass(frozen=True, slots=True)
class Span:
    """Byte range ``[start, end)`` of one event, including its terminating blank
    line (SSE) or newline (NDJSON).

    ``kind``: ``"event"``; ``"comment"`` (an SSE block that carries no data:
    ``: keep-alive`` or a field such as ``event: ping`` without ``data:``);
    ``"done"`` (``data: [DONE]``, a JSON array's closing ``]``).
    """

    start: int
    end: int
    kind: SpanKind


def event_spans(body: bytes, wire: str) -> list[Span]:
    """The complete events of ``body`` (identity-encoded) in order.

    Spans are contiguous from offset 0: stray blank lines (and a leading BOM)
    belong to the span that follows them, so ``body[spans[-1].end:]`` is the
    remainder that holds no complete event (a trailing partial event, or blank
    lines). SSE: a final block with no blank line after it is not a span.
    NDJSON: a last line without a newline is a span only if it is valid JSON
    (the body is complete there; a line cut mid-way is not).
    AWS event stream (``eventstream``): one span per message (an exception message
    too), up to a prelude that cannot be trusted. JSON array (``jsonarray``): one
    span per element (the first holds the ``[``, each next its ``,``), and the
    closing ``]`` a ``"done"`` span.
    Any other ``wire`` gives ``ValueError``.
    """
    if wire == "eventstream":
        return [Span(m.start, m.end, "event") for m in EventStreamDecoder().feed(body)
                if isinstance(m, EventStreamMessage)]
    if wire == "jsonarray":
        arr = JSONArrayParser()
        out = [Span(e.start, e.end, "event") for e in arr.feed(body)]
        if arr.close_span is not None:
            out.append(Span(*arr.close_span, "done"))
        return out
    if wire == "sse":
        spans: list[Span] = []
        kind: SpanKind
        for item in SSEParser().feed(body):
            if isinstance(item, SSEEvent):
                kind = "done" if item.data.strip() == "[DONE]" else "event"
            else:
                kind = "comment"
            spans.append(Span(item.start, item.end, kind))
        return spans
    if wire == "ndjson":
        p = NDJSONParser()
        lines = p.feed(body)
        lines.extend(ln for ln in p.close() if ln.valid)
        return [Span(ln.start, ln.end, "event") for ln in lines]
    raise ValueError(f"event_spans: unknown wire {wire!r} "
                     "(expected 'sse', 'ndjson', 'eventstream' or 'jsonarray')")
