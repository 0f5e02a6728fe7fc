"""An incremental server-sent events parser (WHATWG HTML, "event stream interpretation").

Pure: fed bytes in any split, returns parsed blocks; no I/O, never raises on any
input. Conformance points:

- line endings LF, CRLF and CR, including a CR that ends one piece and its LF
  that starts the next (the LF is then skipped, not read as a blank line);
- one leading UTF-8 BOM is dropped (even when split across pieces);
- comment lines (``: keep-alive``), multi-line ``data:``, ``event:``, ``id:``
  (ignored when it contains NUL, and persistent across events), ``retry:``
  (only ASCII digits), unknown fields ignored;
- a block without any ``data:`` line is not dispatched (it comes back as
  :class:`SSEIgnored` so callers can count keep-alives and keep byte spans);
- a final event with no blank line after it is never dispatched (:meth:`SSEParser.close`
  drops it and reports it in :attr:`SSEParser.pending`);
- field values are decoded as UTF-8 with replacement. Decoding happens per
  complete line, which gives exactly the result of an incremental decoder over
  the whole stream, since CR and LF are never part of a multi-byte sequence.

Each returned item carries ``at_ns``, the offset of the piece that completed
it, and ``start``/``end``: its byte range in the stream (the BOM counts),
including its terminating blank line. Blank lines between blocks belong to the
following block, so consecutive items cover the stream without gaps. When a
CRLF that ends an item is split across two pieces, ``end`` stops before the LF.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")

BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class SSEEvent:
    """A dispatched event. (Not frozen only because frozen dataclasses cost 4x to
    create, and this is the parser's hot path: treat it as immutable.)"""

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None
    at_ns: int = 0
    start: int = 0
    end: int = 0
    comments: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SSEIgnored:
    """A blank-line-terminated block the standard does not dispatch: comments only,
    or fields without any ``data:`` line (``event: ping``, ``retry: 1000``)."""

    comments: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    at_ns: int = 0
    start: int = 0
    end: int = 0

    @property
    def is_comment(self) -> bool:
        return not self.fields


SSEItem = SSEEvent | SSEIgnored


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace")


class SSEParser:
    """Feed bytes with :meth:`feed`; it returns the blocks each piece completed."""

    __slots__ = (
        "_block_start",
        "_buf",
        "_clean",
        "_comments",
        "_data",
        "_event",
        "_fields",
        "_id",
        "_offset",
        "_retry",
        "_skip_lf",
        "_started",
        "line_endings",
    )

    def __init__(self) -> None:
        self._buf = b""  # bytes of an incomplete line
        self._clean = False  # nothing pending: no partial line, block, CR or BOM decision
        self._offset = 0  # stream offset of the first byte after the complete lines
        self._started = False  # BOM decision made
        self._skip_lf = False  # the last piece ended with CR
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._retry: int | None = None
        self._comments: list[str] = []
        self._fields: list[str] = []
        self._block_start = 0
        self.line_endings: set[str] = set()
        """Line endings seen so far: a subset of {"\\n", "\\r\\n", "\\r"}."""

    @property
    def pending(self) -> bytes:
        """Bytes of the line in progress (not yet terminated)."""
        return self._buf

    @property
    def in_event(self) -> bool:
        """True when lines of a block not yet terminated by a blank line were read."""
        return bool(self._buf or self._data or self._comments or self._fields)

    def feed(self, data: bytes, at_ns: int = 0) -> list[SSEItem]:
        """Parse one piece; returns the blocks it completed, each stamped ``at_ns``."""
        if (
            self._clean
            and data[:5] == b"data:"
            and data[-1:] == b"\n"
            and data.find(b"\n") == len(data) - 2
            and b"\r" not in data
        ):
            # Fast path: the piece is exactly one single-line event and nothing is pending.
            start = self._offset
            end = self._offset = self._block_start = start + len(data)
            v = data[6:-2] if data[5:6] == b" " else data[5:-2]
            self.line_endings.add("\n")
            return [SSEEvent(v.decode("utf-8", "replace"), "message", self._id, None, at_ns,
                             start, end, ())]
        out: list[SSEItem] = self._feed(data, at_ns)
        self._clean = not (
            self._buf or self._skip_lf or self._data or self._fields or self._comments
        ) and self._started
        return out

    def _feed(self, data: bytes, at_ns: int) -> list[SSEItem]:
        out: list[SSEItem] = []
        if not data:
            return out
        if self._skip_lf:
            self._skip_lf = False
            if data[0] == 0x0A:
                self.line_endings.add("\r\n")
                self._offset += 1
                data = data[1:]
                if not data:
                    return out
            else:
                self.line_endings.add("\r")
        buf = self._buf + data if self._buf else data
        if not self._started:
            if len(buf) < 3 and BOM.startswith(buf):
                self._buf = buf
                return out
            self._started = True
            if buf.startswith(BOM):
                self._offset = 3
                buf = buf[3:]
        k = buf.rfind(b"\n")
        kr = buf.rfind(b"\r")
        if kr > k:
            k = kr
        if k < 0:
            self._buf = buf
            return out
        if k == len(buf) - 1:
            complete = buf
            self._buf = b""
        else:
            complete = buf[: k + 1]
            self._buf = buf[k + 1 :]
        pos = self._offset
        line = self._line
        if kr < 0 or b"\r" not in complete:
            # LF only: split into blocks at blank lines; a block that is one data
            # line (the usual LLM event) takes a fast path.
            self.line_endings.add("\n")
            blocks = complete.split(b"\n\n")
            last = blocks.pop()
            append = out.append
            ev_id = self._id
            bstart = self._block_start
            clean = not (self._data or self._fields or self._comments)
            for block in blocks:
                if clean and block[:5] == b"data:" and b"\n" not in block:
                    pos += len(block) + 2
                    append(
                        SSEEvent(
                            (block[6:] if block[5:6] == b" " else block[5:]).decode(
                                "utf-8", "replace"
                            ),
                            "message",
                            ev_id,
                            None,
                            at_ns,
                            bstart,
                            pos,
                            (),
                        )
                    )
                    bstart = pos
                    continue
                self._block_start = bstart
                for ln in block.split(b"\n"):
                    pos += len(ln) + 1
                    line(ln, pos, at_ns, out)
                pos += 1
                line(b"", pos, at_ns, out)
                # a blank line leaves a clean state
                bstart = self._block_start
                ev_id = self._id
                clean = True
            self._block_start = bstart
            if last:
                for ln in last.split(b"\n")[:-1]:
                    pos += len(ln) + 1
                    line(ln, pos, at_ns, out)
        else:
            if complete[-1] == 0x0D and not self._buf:
                self._skip_lf = True  # decided on the next piece (or close)
                self._note_endings(complete[:-1])
            else:
                self._note_endings(complete)
            for ln in complete.splitlines(True):
                pos += len(ln)
                line(ln.rstrip(b"\r\n"), pos, at_ns, out)
        self._offset = pos
        return out

    def _line(self, content: bytes, pos: int, at_ns: int, out: list[SSEItem]) -> None:
        """One line (without its terminator) that ends at stream offset ``pos``."""
        if not content:
            if self._data:
                d = self._data
                out.append(
                    SSEEvent(
                        d[0] if len(d) == 1 else "\n".join(d),
                        self._event or "message",
                        self._id,
                        self._retry,
                        at_ns,
                        self._block_start,
                        pos,
                        tuple(self._comments),
                    )
                )
            elif self._comments or self._fields:
                out.append(
                    SSEIgnored(tuple(self._comments), tuple(self._fields), at_ns,
                               self._block_start, pos)
                )
            else:
                return  # a stray blank line: it belongs to the next block
            self._data = []
            self._comments = []
            self._fields = []
            self._event = ""
            self._retry = None
            self._block_start = pos
            return
        if content[:5] == b"data:":
            v = content[5:]
            if v[:1] == b" ":
                v = v[1:]
            self._data.append(v.decode("utf-8", "replace"))
            return
        if content[0] == 0x3A:  # ":" comment
            c = content[1:]
            self._comments.append(_decode(c[1:] if c[:1] == b" " else c))
            return
        name, colon, value = content.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        self._fields.append(_decode(name))
        if name == b"data":  # "data" without a colon: an empty data line
            self._data.append("")
        elif name == b"event":
            self._event = _decode(value)
        elif name == b"id":
            if b"\0" not in value:
                self._id = _decode(value)
        elif name == b"retry" and value and value.isdigit() and value.isascii():
            self._retry = int(value)

    def _note_endings(self, b: bytes) -> None:
        crlf = b.count(b"\r\n")
        if crlf:
            self.line_endings.add("\r\n")
        if b.count(b"\r") > crlf:
            self.line_endings.add("\r")
        if b.count(b"\n") > crlf:
            self.line_endings.add("\n")

    def close(self) -> list[SSEItem]:
        """End of stream. Returns nothing: a block not ended by a blank line is never
        dispatched (see :attr:`pending` / :attr:`in_event` to learn whether one was cut)."""
        if self._skip_lf:
            self._skip_lf = False
            self.line_endings.add("\r")
        return []


class _Incremental(Protocol[T]):
    def feed(self, data: bytes, at_ns: int = 0) -> list[T]: ...
    def close(self) -> list[T]: ...


def feed_all(parser: _Incremental[T], pieces: list[tuple[int, bytes]] | list[bytes]) -> list[T]:
    """Feed a whole stream, as ``(at_ns, bytes)`` pieces or plain byte pieces, then close."""
    out: list[T] = []
    for piece in pieces:
        if isinstance(piece, bytes | bytearray):
            out.extend(parser.feed(bytes(piece)))
        else:
            out.extend(parser.feed(piece[1], piece[0]))
    out.extend(parser.close())
    return out


def parse_sse(pieces: list[tuple[int, bytes]] | list[bytes]) -> list[SSEItem]:
    """Parse a whole stream given as ``(at_ns, bytes)`` pieces or plain byte pieces."""
    return feed_all(SSEParser(), pieces)
