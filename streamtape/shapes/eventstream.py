"""The AWS event stream (``application/vnd.amazon.eventstream``): an incremental decoder
and an encoder. Amazon Bedrock's ``converse-stream`` and ``invoke-with-response-stream``
answer in it.

Pure, sans-I/O: fed bytes in any split, :meth:`EventStreamDecoder.feed` returns the
messages each piece completed; it never raises on input. A message, all integers
big-endian (as botocore's ``eventstream.py`` reads it)::

    total length (4) | headers length (4) | prelude CRC32 (4)   <- the prelude
    headers (headers length bytes) | payload | message CRC32 (4)

The prelude CRC covers the first 8 bytes; the message CRC every byte before it (the
prelude CRC included). A header is a name (1-byte length, UTF-8), a type byte and
a value: 0 true, 1 false, 2 int8, 3 int16, 4 int32, 5 int64, 6 bytes (2-byte
length), 7 string (2-byte length, UTF-8), 8 timestamp (int64 ms), 9 UUID (16 bytes).
Bedrock names the message with ``:message-type`` (``event``, ``exception``,
``error``), ``:event-type`` (``contentBlockDelta``, ``chunk``...), ``:exception-type``
(``throttlingException``...) and ``:content-type`` (``application/json``).

What goes wrong is reported, not raised: a message whose CRC does not match comes
back with :attr:`EventStreamMessage.crc_ok` False (its length was sound, so decoding
goes on after it); a prelude that cannot be trusted (its CRC does not match, or the
lengths are impossible) or headers that do not parse come back as an
:class:`EventStreamBreak`, and decoding stops there: without a sound length
nothing after it can be framed. Bytes of a message not yet complete are
:attr:`EventStreamDecoder.pending`.
"""

from __future__ import annotations

import json
import struct
import uuid
from binascii import crc32
from collections.abc import Sequence
from dataclasses import dataclass

HeaderValue = bool | int | bytes | str
"""A header's value: booleans, integers (and timestamps, in ms), byte arrays, strings
(and UUIDs, written as text)."""

PRELUDE = 12
"""Bytes of the prelude: total length, headers length, prelude CRC."""
MIN_MESSAGE = PRELUDE + 4
MAX_MESSAGE = 16 * 1024 * 1024
"""The largest message the format allows (botocore's limit): 16 MiB."""
MAX_HEADERS = 128 * 1024

CONTENT_TYPE = "application/vnd.amazon.eventstream"


@dataclass(frozen=True, slots=True)
class EventStreamMessage:
    """One complete message. ``start``/``end``: its byte range in the stream."""

    headers: tuple[tuple[str, HeaderValue], ...]
    payload: bytes
    at_ns: int = 0
    start: int = 0
    end: int = 0
    crc_ok: bool = True
    """False when the message CRC32 does not match its bytes."""

    def header(self, name: str) -> HeaderValue | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def _text(self, name: str) -> str:
        v = self.header(name)
        return v if isinstance(v, str) else ""

    @property
    def message_type(self) -> str:
        """``:message-type``: ``event``, ``exception`` or ``error`` ("" when absent)."""
        return self._text(":message-type")

    @property
    def event_type(self) -> str:
        """What the message is: ``:event-type`` for an event, ``:exception-type`` for an
        exception, ``:error-code`` for an error."""
        mt = self.message_type
        if mt == "exception":
            return self._text(":exception-type")
        if mt == "error":
            return self._text(":error-code")
        return self._text(":event-type")


@dataclass(frozen=True, slots=True)
class EventStreamBreak:
    """The stream cannot be framed from ``start`` on: why, and when it was seen."""

    reason: str
    at_ns: int = 0
    start: int = 0


EventStreamItem = EventStreamMessage | EventStreamBreak


def _read_headers(b: bytes) -> tuple[tuple[str, HeaderValue], ...] | str:
    """The headers, or why they do not parse."""
    out: list[tuple[str, HeaderValue]] = []
    i, n = 0, len(b)
    try:
        while i < n:
            ln = b[i]
            name = b[i + 1 : i + 1 + ln].decode("utf-8")
            i += 1 + ln
            t = b[i]
            i += 1
            v: HeaderValue
            if t in (0, 1):
                v = t == 0
            elif t == 2:
                (v,) = struct.unpack_from("!b", b, i)
                i += 1
            elif t == 3:
                (v,) = struct.unpack_from("!h", b, i)
                i += 2
            elif t == 4:
                (v,) = struct.unpack_from("!i", b, i)
                i += 4
            elif t in (5, 8):
                (v,) = struct.unpack_from("!q", b, i)
                i += 8
            elif t in (6, 7):
                (size,) = struct.unpack_from("!H", b, i)
                raw = b[i + 2 : i + 2 + size]
                if len(raw) != size:
                    return f"header {name!r} is cut"
                v = raw if t == 6 else raw.decode("utf-8")
                i += 2 + size
            elif t == 9:
                raw = b[i : i + 16]
                if len(raw) != 16:
                    return f"header {name!r} is cut"
                v = str(uuid.UUID(bytes=raw))
                i += 16
            else:
                return f"header {name!r} has unknown type {t}"
            out.append((name, v))
    except (IndexError, struct.error, UnicodeDecodeError) as e:  # cut short or not UTF-8
        return f"headers do not parse ({e})"
    return tuple(out)


class EventStreamDecoder:
    """Feed bytes with :meth:`feed`; it returns the messages each piece completed."""

    __slots__ = ("_buf", "_offset", "broken")

    def __init__(self) -> None:
        self._buf = b""
        self._offset = 0  # stream offset of _buf[0]
        self.broken: EventStreamBreak | None = None
        """The break decoding stopped at, or None."""

    @property
    def pending(self) -> bytes:
        """Bytes not framed into a message: a message cut short, or all after a break."""
        return self._buf

    def feed(self, data: bytes, at_ns: int = 0) -> list[EventStreamItem]:
        out: list[EventStreamItem] = []
        if self.broken is not None:
            self._buf += data
            return out
        buf = self._buf + data if self._buf else data
        pos = 0
        while len(buf) - pos >= PRELUDE:
            total, hlen, pcrc = struct.unpack_from("!III", buf, pos)
            start = self._offset + pos
            reason = None
            if crc32(buf[pos : pos + 8]) != pcrc:
                reason = f"prelude CRC32 mismatch at byte {start}"
            elif not MIN_MESSAGE <= total <= MAX_MESSAGE or hlen > min(MAX_HEADERS, total - MIN_MESSAGE):
                reason = f"impossible message length {total} (headers {hlen}) at byte {start}"
            if reason is None and len(buf) - pos < total:
                break
            headers: tuple[tuple[str, HeaderValue], ...] = ()
            if reason is None:
                read = _read_headers(buf[pos + PRELUDE : pos + PRELUDE + hlen])
                if isinstance(read, str):
                    reason = f"message at byte {start}: {read}"
                else:
                    headers = read
            if reason is not None:
                self.broken = EventStreamBreak(reason, at_ns, start)
                out.append(self.broken)
                break
            end = pos + total
            (mcrc,) = struct.unpack_from("!I", buf, end - 4)
            out.append(EventStreamMessage(
                headers, bytes(buf[pos + PRELUDE + hlen : end - 4]), at_ns, start,
                self._offset + end, crc32(buf[pos : end - 4]) == mcrc,
            ))
            pos = end
        self._buf = buf[pos:]
        self._offset += pos
        return out

    def close(self) -> list[EventStreamItem]:
        """End of stream: nothing more to dispatch (a cut message stays :attr:`pending`)."""
        return []


def decode(pieces: Sequence[tuple[int, bytes]] | Sequence[bytes]) -> list[EventStreamItem]:
    """Decode a whole stream given as ``(at_ns, bytes)`` pieces or plain byte pieces."""
    d = EventStreamDecoder()
    out: list[EventStreamItem] = []
    for piece in pieces:
        if isinstance(piece, bytes | bytearray):
            out.extend(d.feed(bytes(piece)))
        else:
            out.extend(d.feed(piece[1], piece[0]))
    return out


# --------------------------------------------------------------------------- encoding


def _header_bytes(name: str, value: HeaderValue) -> bytes:
    nb = name.encode("utf-8")
    head = struct.pack("!B", len(nb)) + nb
    if isinstance(value, bool):
        return head + (b"\x00" if value else b"\x01")
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return head + struct.pack("!Bi", 4, value)
        return head + struct.pack("!Bq", 5, value)
    if isinstance(value, bytes):
        return head + struct.pack("!BH", 6, len(value)) + value
    vb = value.encode("utf-8")
    return head + struct.pack("!BH", 7, len(vb)) + vb


def encode_message(headers: Sequence[tuple[str, HeaderValue]], payload: bytes) -> bytes:
    """One message with its CRCs (strings as type 7, bytes 6, bools 0/1, ints 4 or 5)."""
    hb = b"".join(_header_bytes(k, v) for k, v in headers)
    total = PRELUDE + len(hb) + len(payload) + 4
    prelude = struct.pack("!II", total, len(hb))
    prelude += struct.pack("!I", crc32(prelude))
    body = prelude + hb + payload
    return body + struct.pack("!I", crc32(body))


def _json(v: object) -> bytes:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode()


def event_message(event_type: str, payload: object) -> bytes:
    """An ``event`` message with a JSON payload, as Bedrock sends one."""
    return encode_message(
        ((":event-type", event_type), (":content-type", "application/json"),
         (":message-type", "event")),
        _json(payload),
    )


def exception_message(exception_type: str, message: str) -> bytes:
    """An ``exception`` message (``throttlingException``, ``modelStreamErrorException``...)
    with its ``{"message": ...}`` payload, as Bedrock ends a stream that fails mid-way."""
    return encode_message(
        ((":exception-type", exception_type), (":content-type", "application/json"),
         (":message-type", "exception")),
        _json({"message": message}),
    )
