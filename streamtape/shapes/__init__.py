"""Stream shapes: SSE / NDJSON parsers, one normalizer per LLM wire format, detection.

Pure code: values in, values out. This package is public; its names:

Parsing a body (incremental, never raising on input):

- :class:`SSEParser` -> :class:`SSEEvent` / :class:`SSEIgnored`, :func:`parse_sse`;
- :class:`NDJSONParser` -> :class:`NDJSONLine`, :func:`parse_ndjson`;
- :class:`EventStreamDecoder` -> :class:`EventStreamMessage` / :class:`EventStreamBreak`
  (the AWS event stream; :func:`encode_message` writes one);
- :class:`JSONArrayParser` -> :class:`JSONElement`, :func:`parse_json_array` (a JSON
  array streamed element by element);
- :func:`decoded_body` -> :class:`DecodedBody`: the pieces with content encoding undone;
- :func:`event_spans` -> :class:`Span`: byte ranges of complete events (for replay faults).

Which wire and which format:

- :func:`wire_of` (:data:`Wire`), :func:`detect_shape` (:data:`ShapeName`),
  :data:`SHAPES`, :data:`WIRE_OF_SHAPE`, :func:`check_shape` (a ``--shape``
  value, or :class:`ShapeError`).

The normalized view:

- :func:`analyze` -> :class:`Analysis`: common :class:`Event` s (kinds
  :data:`EventKind`: start, text, reasoning, refusal, tool_call, finish, usage,
  error, done) with timestamps; every :class:`Choice` assembled (answer text,
  reasoning, refusal, :class:`ToolCall` s, :class:`Finish` with
  :data:`FinishReason`); :class:`Usage`; :func:`wire_events` ->
  :class:`WireEvent`; :data:`NORMALIZERS`, one per format; :class:`FrameError` (a
  wire's framing found broken).

Errors in a format's own shape: :func:`error_event` (mid-stream), :func:`error_body`.
"""

from __future__ import annotations

from ..errors import ShapeError
from .analyze import NORMALIZERS, analyze, check_shape, wire_events
from .body import DecodedBody, decoded_body
from .detect import SHAPES, WIRE_OF_SHAPE, detect_shape, wire_of
from .eventstream import EventStreamBreak, EventStreamDecoder, EventStreamMessage, encode_message
from .faults import error_body, error_event
from .jsonarray import JSONArrayParser, JSONElement, parse_json_array
from .model import (
    KINDS,
    REASONS,
    Analysis,
    Channel,
    Choice,
    Event,
    EventKind,
    Finish,
    FinishReason,
    FrameError,
    ShapeName,
    ToolCall,
    Usage,
    Wire,
    WireEvent,
)
from .ndjson import NDJSONLine, NDJSONParser, parse_ndjson
from .spans import Span, SpanKind, event_spans
from .sse import SSEEvent, SSEIgnored, SSEParser, parse_sse

__all__ = [
    "KINDS",
    "NORMALIZERS",
    "REASONS",
    "SHAPES",
    "WIRE_OF_SHAPE",
    "Analysis",
    "Channel",
    "Choice",
    "DecodedBody",
    "Event",
    "EventKind",
    "EventStreamBreak",
    "EventStreamDecoder",
    "EventStreamMessage",
    "Finish",
    "FinishReason",
    "FrameError",
    "JSONArrayParser",
    "JSONElement",
    "NDJSONLine",
    "NDJSONParser",
    "SSEEvent",
    "SSEIgnored",
    "SSEParser",
    "ShapeError",
    "ShapeName",
    "Span",
    "SpanKind",
    "ToolCall",
    "Usage",
    "Wire",
    "WireEvent",
    "analyze",
    "check_shape",
    "decoded_body",
    "detect_shape",
    "encode_message",
    "error_body",
    "error_event",
    "event_spans",
    "parse_json_array",
    "parse_ndjson",
    "parse_sse",
    "wire_events",
    "wire_of",
]
