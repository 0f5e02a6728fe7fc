"""Stream shapes: SSE / NDJSON parsers, one normalizer per LLM wire format, detection.

Pure code: values in, values out. See :func:`analyze` for the normalized view
of an interaction and :func:`event_spans` for event byte ranges.
"""

from __future__ import annotations

from .body import DecodedBody, decoded_body
from .detect import SHAPES, detect_shape, wire_of
from .ndjson import NDJSONLine, NDJSONParser, parse_ndjson
from .spans import Span, event_spans
from .sse import SSEEvent, SSEIgnored, SSEParser, parse_sse

__all__ = [
    "SHAPES",
    "DecodedBody",
    "NDJSONLine",
    "NDJSONParser",
    "SSEEvent",
    "SSEIgnored",
    "SSEParser",
    "Span",
    "decoded_body",
    "detect_shape",
    "event_spans",
    "parse_ndjson",
    "parse_sse",
    "wire_of",
]
