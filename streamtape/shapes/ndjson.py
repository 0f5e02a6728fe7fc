"""An incremental NDJSON parser: one JSON value per line.

Pure: fed bytes in any split, never raises. Lines end with LF (a CR before it
is dropped); blank lines are skipped; the last line may lack its newline (it
is read by :meth:`NDJSONParser.close`). A line that is not valid JSON comes
back with ``valid=False`` and ``value=None`` instead of raising. Text is
decoded as UTF-8 with replacement, per complete line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .sse import feed_all

_loads = json.loads


@dataclass(frozen=True, slots=True)
class NDJSONLine:
    """One JSON value read from a body: its text, its value (None with ``valid=False``
    when the text does not parse), when its last byte came and its byte range. An NDJSON
    line, and, as :class:`~streamtape.shapes.jsonarray.JSONElement` (the same type), an
    element of a streamed JSON array (always ``terminated``)."""

    raw: str
    value: Any = None
    valid: bool = True
    at_ns: int = 0
    start: int = 0
    """Byte range of the line including its newline; blank lines before it belong to it."""
    end: int = 0
    terminated: bool = True
    """False for a last line that had no newline after it."""


def json_line(raw_b: bytes, at_ns: int, start: int, end: int, terminated: bool = True) -> NDJSONLine:
    """The value read from ``raw_b`` (UTF-8, with replacement); ``valid=False`` when it
    does not parse. The NDJSON parser's and the JSON array parser's one reader."""
    raw = raw_b.decode("utf-8", "replace")
    try:
        return NDJSONLine(raw, _loads(raw), True, at_ns, start, end, terminated)
    except (ValueError, RecursionError):
        return NDJSONLine(raw, None, False, at_ns, start, end, terminated)


class NDJSONParser:
    __slots__ = ("_at_ns", "_buf", "_offset", "_start", "line_endings")

    def __init__(self) -> None:
        self._buf = b""
        self._offset = 0  # stream offset of _buf[0]
        self._start = 0  # start of the current span (blank lines included)
        self._at_ns = 0
        self.line_endings: set[str] = set()

    @property
    def pending(self) -> bytes:
        return self._buf

    def feed(self, data: bytes, at_ns: int = 0) -> list[NDJSONLine]:
        out: list[NDJSONLine] = []
        if not data:
            return out
        self._at_ns = at_ns
        buf = self._buf + data if self._buf else data
        k = buf.rfind(b"\n")
        if k < 0:
            self._buf = buf
            return out
        self._buf = buf[k + 1 :]
        pos = self._offset
        for line in buf[: k + 1].split(b"\n")[:-1]:
            pos += len(line) + 1
            if line[-1:] == b"\r":
                self.line_endings.add("\r\n")
                line = line[:-1]
            else:
                self.line_endings.add("\n")
            if not line.strip():
                continue
            out.append(json_line(line, at_ns, self._start, pos, True))
            self._start = pos
        self._offset = pos
        return out

    def close(self) -> list[NDJSONLine]:
        """End of stream: a last line without a newline still counts."""
        buf, self._buf = self._buf, b""
        if not buf.strip():
            return []
        end = self._offset + len(buf)
        item = json_line(buf.rstrip(b"\r"), self._at_ns, self._start, end, False)
        self._offset = self._start = end
        return [item]


def parse_ndjson(pieces: list[tuple[int, bytes]] | list[bytes]) -> list[NDJSONLine]:
    """Parse a whole stream given as ``(at_ns, bytes)`` pieces or plain byte pieces."""
    return feed_all(NDJSONParser(), pieces)
