"""Stream shapes: SSE / NDJSON parsers, one normalizer per LLM wire format, detection.

Pure code: values in, values out.

- :func:`event_spans` / :class:`Span`: byte ranges of complete events (for replay faults);
- :func:`wire_of`, :func:`detect_shape`, :data:`SHAPES`: which wire and which format;
- :func:`analyze` -> :class:`Analysis`: common events (start, text, tool_call, finish,
  usage, error, done) with timestamps, the assembled text, tool calls, finish, usage;
- :func:`error_event`, :func:`error_body`: errors in a format's own shape.
"""

from __future__ import annotations

from .analyze import NORMALIZERS, analyze, check_shape, wire_events
from .body import DecodedBody, decoded_body
from .detect import SHAPES, WIRE_OF_SHAPE, detect_shape, wire_of
from .faults import error_body, error_event
from .model import Analysis, Event, Finish, ShapeError, ToolCall, Usage, WireEvent
from .ndjson import NDJSONLine, NDJSONParser, parse_ndjson
from .spans import Span, event_spans
from .sse import SSEEvent, SSEIgnored, SSEParser, parse_sse

__all__ = [
    "NORMALIZERS",
    "SHAPES",
    "WIRE_OF_SHAPE",
    "Analysis",
    "DecodedBody",
    "Event",
    "Finish",
    "NDJSONLine",
    "NDJSONParser",
    "SSEEvent",
    "SSEIgnored",
    "SSEParser",
    "ShapeError",
    "Span",
    "ToolCall",
    "Usage",
    "WireEvent",
    "analyze",
    "check_shape",
    "decoded_body",
    "detect_shape",
    "error_body",
    "error_event",
    "event_spans",
    "parse_ndjson",
    "parse_sse",
    "wire_events",
    "wire_of",
]
