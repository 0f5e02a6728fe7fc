"""A JSON array streamed element by element: ``[{...}\\n,{...}\\n]``.

The Gemini API's ``streamGenerateContent`` without ``alt=sse`` answers so
(content type ``application/json``): one JSON array whose elements, each a whole
``GenerateContentResponse`` (pretty-printed over many lines), arrive as they are
made, separated by ``,`` and line breaks (``\\r\\n`` on some fronts). It is neither
SSE nor NDJSON: an element spans lines, and the body is only valid JSON once the
closing ``]`` has come.

Pure, sans-I/O: fed bytes in any split, :meth:`JSONArrayParser.feed` returns the
elements each piece completed, each with its byte range; it never raises on
input. Elements are found by their brackets (strings and escapes skipped), then
parsed: one that does not parse comes back with ``valid=False``. The closing
``]`` sets :attr:`JSONArrayParser.closed` (its range: :attr:`JSONArrayParser.close_span`).
A body that does not start with ``[`` (after whitespace and a BOM) is not an array:
:attr:`JSONArrayParser.error` says so, and nothing is returned.

Ranges: the first element's starts at 0 (it holds the ``[``), each next one at the
end of the one before (it holds the ``,`` and the whitespace before it), so
consecutive elements cover the stream without gaps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .ndjson import NDJSONLine, json_line

_STRUCT = re.compile(rb'[{}\[\]"]')
_IN_STRING = re.compile(rb'["\\]')
_SCALAR_END = re.compile(rb"[,\]\s]")
_WS = b" \t\r\n"
BOM = b"\xef\xbb\xbf"


JSONElement = NDJSONLine
"""An array element: the same value as an NDJSON line (its text, its value or
``valid=False``, when it came, its byte range; ``terminated`` is always True), kept
under this name for the public API."""


class JSONArrayParser:
    """Feed bytes with :meth:`feed`; it returns the array elements each piece completed."""

    __slots__ = (
        "_at_ns", "_buf", "_depth", "_elem", "_esc", "_in_str", "_offset", "_scan",
        "_span_start", "_state", "close_span", "closed", "error", "line_endings",
    )

    def __init__(self) -> None:
        self._buf = b""
        self._offset = 0  # stream offset of _buf[0]
        self._state = "start"  # start | between | element | after
        self._span_start = 0
        self._elem = 0  # offset in _buf where the element began
        self._scan = 0  # offset in _buf scanned so far within the element
        self._depth = 0
        self._in_str = False
        self._esc = False
        self._at_ns = 0
        self.closed = False
        self.close_span: tuple[int, int] | None = None
        self.error: str | None = None
        self.line_endings: set[str] = set()

    @property
    def pending(self) -> bytes:
        """Bytes of an element not yet complete (separators and whitespace alone: none)."""
        if self._state == "after" or self.error is not None:
            return b""
        return self._buf if self._buf.strip(b", \t\r\n") else b""

    def feed(self, data: bytes, at_ns: int = 0) -> list[JSONElement]:
        out: list[JSONElement] = []
        if not data or self.error is not None:
            return out
        self._at_ns = at_ns
        if b"\r\n" in data:
            self.line_endings.add("\r\n")
        if data.count(b"\n") > data.count(b"\r\n"):
            self.line_endings.add("\n")
        buf = self._buf + data
        i = 0
        while True:
            st = self._state
            if st == "after":
                i = len(buf)
                break
            if st in ("start", "between"):
                if st == "start" and buf.startswith(BOM, i):
                    i += 3
                while i < len(buf) and buf[i] in _WS:
                    i += 1
                if i >= len(buf):
                    break
                c = buf[i : i + 1]
                if st == "start":
                    if c != b"[":
                        self.error = "the body is not a JSON array (it does not start with '[')"
                        return out
                    self._state = "between"
                    i += 1
                    continue
                if c == b",":
                    i += 1
                    continue
                if c == b"]":
                    end = self._offset + i + 1
                    self.closed = True
                    self.close_span = (self._span_start, end)
                    self._state = "after"
                    continue
                self._state = "element"
                self._elem = self._scan = i
                self._depth = 0
                self._in_str = self._esc = False
                continue
            # inside an element
            end_at = self._scan_element(buf)
            if end_at is None:
                break
            stop = self._offset + end_at
            out.append(json_line(buf[self._elem : end_at], at_ns, self._span_start, stop))
            self._span_start = stop
            self._state = "between"
            i = end_at
        # keep from the span start on (only whitespace and separators were skipped)
        keep_from = self._elem if self._state == "element" else i
        if self._state == "element":
            self._scan -= keep_from
        self._buf = buf[keep_from:]
        self._offset += keep_from
        if self._state == "element":
            self._elem = 0
        return out

    def _scan_element(self, buf: bytes) -> int | None:
        """Scan on from ``_scan``; the offset after the element when it is complete."""
        j = self._scan
        first = buf[self._elem : self._elem + 1]
        if first not in (b"{", b"[", b'"') and not self._in_str and self._depth == 0:
            # An element holds at least its first byte: a byte \s takes for space that the
            # skip above does not (\x0b, \x0c) would otherwise end an empty element at
            # once, and the parser would never move on (found by atheris).
            m = _SCALAR_END.search(buf, max(j, self._elem + 1))
            if m is None:
                self._scan = len(buf)
                return None
            return m.start()
        while True:
            if self._in_str:
                m = _IN_STRING.search(buf, j)
                if m is None:
                    self._scan = len(buf)
                    return None
                if m.group() == b"\\":
                    if m.start() + 1 >= len(buf):
                        self._scan = m.start()  # the escaped byte is not here yet
                        return None
                    j = m.start() + 2
                    continue
                self._in_str = False
                j = m.end()
                if self._depth == 0:
                    return j
                continue
            m = _STRUCT.search(buf, j)
            if m is None:
                self._scan = len(buf)
                return None
            c = m.group()
            j = m.end()
            if c == b'"':
                self._in_str = True
            elif c in (b"{", b"["):
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth <= 0:
                    return j

    def close(self) -> list[JSONElement]:
        """End of stream: nothing more to dispatch (a cut element stays :attr:`pending`)."""
        return []


def parse_json_array(pieces: Sequence[tuple[int, bytes]] | Sequence[bytes]) -> list[JSONElement]:
    """Parse a whole stream given as ``(at_ns, bytes)`` pieces or plain byte pieces."""
    p = JSONArrayParser()
    out: list[JSONElement] = []
    for piece in pieces:
        if isinstance(piece, bytes | bytearray):
            out.extend(p.feed(bytes(piece)))
        else:
            out.extend(p.feed(piece[1], piece[0]))
    return out
