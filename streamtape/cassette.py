"""Cassettes: recorded interactions and the append-only ``.tape`` file format.

Words: a *piece* is one part of a response body as the upstream delivered it
(one socket read, or one HTTP chunk of a chunked response, de-chunked), with
the time it arrived; "chunk" is kept for HTTP chunked framing alone (the
``chunked`` :class:`Framing`). An interaction's *outcome* (:class:`Outcome`)
says how it ended.

File layout (all msgpack, one object after another, nothing else)::

    header  {"format": "streamtape", "version": 1, "writer": "0.1.0", "created": 1764500000.0}
    record  {"t": "begin", "id": 0, "request": {...}, "response": {...} | None, "labels": {...},
             "setup": {"wait_ns": ns, "tcp_ns": ns, "tls_ns": ns}}      ("setup" optional)
    record  ["d", 0, b"...", [size, ...], [gap_ns, ...]]      (a batch of pieces)
    ...     (data records of concurrent interactions interleave)
    record  {"t": "end",   "id": 0, "outcome": "complete", "error": None, "end_ns": ns}

A WebSocket connection is one interaction too (:class:`WebSocketSession`): its
begin record holds the upgrade request and the ``101`` head (framing ``none``)
and ``"websocket": 1``; the messages of both directions go in message records
beside (instead of) data records; its end record adds the close::

    record  {"t": "begin", "id": 1, "request": {...}, "response": {"status": 101, ...}, ..., "websocket": 1}
    record  ["m", 1, b"...", [size, ...], [gap_ns, ...], [kind, ...]]             (a batch of messages)
    record  ["m", 1, b"...", [size, ...], [gap_ns, ...], [kind, ...], [[frame size, ...], ...]]
    record  {"t": "end", "id": 1, ..., "websocket": {"code": 1000, "reason": "", "by": "client"}}

A message's kind is ``0`` client text, ``1`` server text, ``2`` client binary,
``3`` server binary; gaps are deltas from the previous message of the same
session, as for pieces. The optional seventh element gives each message's
wire frame sizes (a fragmented message has several; ``[]`` where they are not
known); it is left out when no message of the batch has them.

Format versions: a reader needs version 2 for message records and WebSocket
begin/end records; a cassette that holds only HTTP interactions stays version
1, so an older streamtape reads it. The header is written first, before
anyone knows whether a session will follow, so the writer raises its version
byte in place (one byte, fsynced) before the first WebSocket record goes out.

An index record may end the file: where every interaction's records are, and
a digest of each request, so a reader opens a file of any size without
reading it through (:mod:`streamtape.cassette_index` describes it)::

    record  ["x", {"v": 1, "ids": bin, "starts": bin, "offsets": bin, ...}, start, crc32]

A writer appends one when it closes a cassette of 16 MiB or more, raising the
version to 3 first (an older streamtape would stop at the record it does not
know, and says to upgrade instead); smaller cassettes keep their version, and
an index is only ever a shortcut: without one, or with one that no longer ends
the file, the reader finds the records in one pass. Reading is lazy (see
:mod:`streamtape.cassette_reader`): :func:`load` finds the records,
``cas[i]`` reads interaction ``i``, its pieces are read when first used.

Time: every offset (``headers_at_ns``, each piece's, ``end_ns``) counts from
t = 0, the moment the proxy handed the request to the upstream. The upstream
connection's setup is kept out of the offsets and stored beside them, in the
begin record's ``setup`` map (:class:`Setup`): how long the request waited in
the proxy (``wait_ns``) and, when it waited for a new connection, that
connection's TCP connect, an upstream proxy's CONNECT and the TLS handshake.
So a fresh connection and a reused one give the same first-byte offset for the
same server behaviour, and a diff of two backends compares the backends, not
their handshakes. A cassette without ``setup`` maps (written before they
existed, or by an importer that could not tell) keeps its meaning: t = 0 is
when the proxy had the whole request, setup included. Old readers ignore the
extra key, so the format version stays 1. An interaction whose request never
reached the upstream (the connection failed) has no setup, and its offsets
count from when the proxy had the request.

A data record carries a batch of pieces compactly, as an array rather than a
map (it is the one record that repeats): the interaction id, the joined bytes,
the piece sizes, and each piece's offset as a delta from the previous piece of
the same interaction (the first delta is from t = 0). Records are appended as they
happen and every ``end`` is fsynced, so a recorder killed at any point leaves
every finished interaction readable; an interaction whose ``end`` never made it
to disk loads with outcome ``interrupted``. A torn last record (the process
died inside a write) is dropped and reported in :attr:`Cassette.warnings`.

Outcomes and framings are stored as their plain string values (``"complete"``,
``"chunked"``); loading turns them back into :class:`Outcome` and
:class:`Framing` members, which compare equal to those strings.
"""

from __future__ import annotations

import contextlib
import io
import operator
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, ClassVar
from urllib.parse import urlsplit

import msgpack

from . import __version__
from .cassette_index import INDEX, INDEX_MIN_BYTES, INDEX_VERSION, Kind, TableBuilder, index_record
from .errors import CassetteError
from .lock import hold
from .pieces import Piece as Piece
from .pieces import Pieces as Pieces
from .pieces import PieceSequence as PieceSequence
from .wire import Framing as Framing
from .wire import header_value as header_value

FORMAT_NAME = "streamtape"
FORMAT_VERSION = 1
"""The version a cassette of HTTP interactions alone is written as (every reader reads it)."""
WEBSOCKET_VERSION = 2
"""The version a reader needs for WebSocket sessions (message records)."""
NEWEST_VERSION = INDEX_VERSION
"""The newest format version this streamtape reads and writes."""
SUFFIX = ".tape"

Headers = tuple[tuple[str, str], ...]


class Outcome(StrEnum):
    """How an interaction ended; the value is what a cassette stores.

    The first four are what the proxy saw. ``interrupted`` means the recording
    stopped (Ctrl-C, SIGKILL) before the response did: the reader gives it to
    an interaction whose ``end`` record never reached the disk.
    """

    COMPLETE = "complete"
    UPSTREAM_CLOSED = "upstream_closed"
    CLIENT_DISCONNECTED = "client_disconnected"
    UPSTREAM_ERROR = "upstream_error"
    INTERRUPTED = "interrupted"


# The members under their old module-level names.
COMPLETE = Outcome.COMPLETE
UPSTREAM_CLOSED = Outcome.UPSTREAM_CLOSED
CLIENT_DISCONNECTED = Outcome.CLIENT_DISCONNECTED
UPSTREAM_ERROR = Outcome.UPSTREAM_ERROR
INTERRUPTED = Outcome.INTERRUPTED
OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)

# Response framings (:class:`streamtape.wire.Framing`) a recording can have.
CHUNKED = Framing.CHUNKED
CONTENT_LENGTH = Framing.CONTENT_LENGTH
CLOSE_DELIMITED = Framing.CLOSE_DELIMITED
FRAMES = Framing.FRAMES  # HTTP/2 and HTTP/3: the body is carried in DATA frames
FRAMINGS: tuple[Framing, ...] = (CHUNKED, CONTENT_LENGTH, CLOSE_DELIMITED, FRAMES)


Chunk = Piece
"""The old name of :class:`Piece`, kept for existing callers."""


@dataclass(frozen=True, slots=True)
class Setup:
    """How a recorded request reached the upstream: the part of the wait that is the proxy's.

    Through a proxy, a request on a new upstream connection waits for that
    connection (a TCP connect, perhaps an upstream proxy's CONNECT, a TLS
    handshake: tens to hundreds of milliseconds to a remote API) before it can
    be sent. The client would have paid a handshake of its own without the
    proxy, but not this one, at this moment: so the marks are kept here and out
    of the offsets, which count from the moment the request was handed to the
    upstream. A mark is None when that step did not happen for this request.
    """

    wait_ns: int
    """From the proxy having the whole request to t = 0 (the request handed to the upstream)."""
    tcp_ns: int | None = None
    """TCP connect (name resolution included); None when the connection was already open."""
    proxy_connect_ns: int | None = None
    """An upstream proxy's CONNECT exchange; None without one."""
    tls_ns: int | None = None
    """The TLS handshake with the upstream; None for plain HTTP or an open connection."""

    @property
    def new_connection(self) -> bool:
        """Whether the request waited for a new upstream connection (False: one was open)."""
        return self.tcp_ns is not None or self.proxy_connect_ns is not None or self.tls_ns is not None

    @property
    def marks(self) -> dict[str, int]:
        """The connection's setup steps that happened, by name (``tcp``, ``proxy_connect``, ``tls``)."""
        steps = (("tcp", self.tcp_ns), ("proxy_connect", self.proxy_connect_ns), ("tls", self.tls_ns))
        return {name: ns for name, ns in steps if ns is not None}


class Direction(StrEnum):
    """Which side sent a WebSocket message (or closed the connection)."""

    CLIENT = "client"
    SERVER = "server"


@dataclass(frozen=True, slots=True)
class Message:
    """One WebSocket message, whole (reassembled from its frames), ``at_ns`` after t = 0.

    t = 0 of a session is the moment the upgrade request was handed to the
    upstream, as for HTTP; ``at_ns`` is when the proxy had the whole message.
    """

    at_ns: int
    direction: Direction
    text: bool
    """A text message (opcode 1; ``data`` is its UTF-8); False for binary (opcode 2)."""
    data: bytes
    fragments: tuple[int, ...] = ()
    """The payload size of each wire frame the message came in, when the
    capture exposed them (mitmproxy reassembles messages and does not);
    ``()`` when unknown. A message sent in one frame is ``(len(data),)``."""

    @property
    def from_client(self) -> bool:
        return self.direction == Direction.CLIENT


@dataclass(frozen=True)
class WebSocketSession:
    """The message timeline of a WebSocket interaction and how it closed.

    The interaction's ``request`` is the upgrade request and its ``response``
    the ``101 Switching Protocols`` head. ``close_code`` is None when no close
    frame was seen (the connection dropped, or the recording stopped);
    ``closed_by`` is the side that sent the first close frame.
    """

    messages: tuple[Message, ...] = ()
    close_code: int | None = None
    close_reason: str = ""
    closed_by: Direction | None = None

    @property
    def client_messages(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.direction == Direction.CLIENT)

    @property
    def server_messages(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.direction == Direction.SERVER)


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    http_version: str = "HTTP/1.1"
    headers: Headers = ()
    body: bytes = b""
    started_at: float = 0.0
    """Wall-clock time (seconds since the epoch) the request started."""

    @property
    def path(self) -> str:
        """Path with query, as sent on an HTTP/1.1 request line."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)


@dataclass(frozen=True, init=False)
class Response:
    """A recorded response head and its body pieces.

    ``chunks=`` is accepted as the old name of ``pieces=`` (and wins when both
    are given, which is what ``dataclasses.replace(r, chunks=...)`` does).
    ``framing`` may be given as its string value.
    """

    status: int
    reason: str = ""
    http_version: str = "HTTP/1.1"
    headers: Headers = ()
    framing: Framing = Framing.CHUNKED
    pieces: Sequence[Piece] = ()
    """A tuple, or compact :class:`~streamtape.pieces.Pieces` (what a loaded cassette gives)."""
    headers_at_ns: int = 0
    """When the response headers reached the proxy, after t = 0."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        http_version: str = "HTTP/1.1",
        headers: Headers = (),
        framing: Framing | str = Framing.CHUNKED,
        pieces: Sequence[Piece] = (),
        headers_at_ns: int = 0,
        *,
        chunks: Sequence[Piece] | None = None,
    ) -> None:
        init = object.__setattr__  # frozen: the one place fields are set
        init(self, "status", status)
        init(self, "reason", reason)
        init(self, "http_version", http_version)
        init(self, "headers", headers)
        init(self, "framing", Framing(framing))
        init(self, "pieces", pieces if chunks is None else chunks)
        init(self, "headers_at_ns", headers_at_ns)

    @property
    def chunks(self) -> Sequence[Piece]:
        """The old name of :attr:`pieces`."""
        return self.pieces

    @property
    def body(self) -> bytes:
        """All pieces joined: the body exactly as the upstream sent it (encoding kept).

        Compact pieces hold it joined already; a tuple's join is kept. A loaded
        cassette's body is not kept here, so an interaction held for matching
        does not pin the body it once played.
        """
        ps = self.pieces
        if isinstance(ps, PieceSequence):
            return ps.joined
        cached: bytes | None = self.__dict__.get("_body")
        if cached is None:
            cached = b"".join(p.data for p in ps)
            self.__dict__["_body"] = cached
        return cached

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()


@dataclass(frozen=True)
class Interaction:
    request: Request
    response: Response | None
    """None when no response head arrived (for example the upstream refused)."""
    outcome: Outcome = Outcome.COMPLETE
    """May be given as its string value; always an :class:`Outcome` once built."""
    error: str | None = None
    """mitmproxy's message for any outcome but ``complete``."""
    end_ns: int | None = None
    """When the interaction ended (or the error happened), after t = 0."""
    labels: dict[str, str] = field(default_factory=dict)
    setup: Setup | None = None
    """The upstream connection's setup, kept out of the offsets; None when not
    recorded (an older cassette, or the request never reached the upstream)."""
    websocket: WebSocketSession | None = None
    """The messages and close of a WebSocket connection (the upgrade request in
    ``request``, the 101 head in ``response``); None for an HTTP interaction."""

    def __post_init__(self) -> None:
        if type(self.outcome) is not Outcome:
            object.__setattr__(self, "outcome", Outcome(self.outcome))

    @property
    def messages(self) -> tuple[Message, ...]:
        """A WebSocket session's messages (none for an HTTP interaction)."""
        return self.websocket.messages if self.websocket else ()

    @property
    def pieces(self) -> Sequence[Piece]:
        """The response's body pieces (none without a response)."""
        return self.response.pieces if self.response else ()

    @property
    def chunks(self) -> Sequence[Piece]:
        """The old name of :attr:`pieces`."""
        return self.pieces

    @property
    def first_byte_ns(self) -> int | None:
        """The first body piece's offset; for a WebSocket session, the first server message's."""
        ps = self.pieces
        if ps:
            return ps[0].at_ns
        if self.websocket is not None:
            return next((m.at_ns for m in self.websocket.messages if not m.from_client), None)
        return None

    @property
    def duration_ns(self) -> int | None:
        if self.end_ns is not None:
            return self.end_ns
        ps = self.pieces
        return ps[-1].at_ns if ps else None


# --------------------------------------------------------------------------
# Encoding: values <-> msgpack-ready dicts. Pure functions, shared by the
# writer and the reader.

Record = dict[str, Any] | list[Any]
"""One record as written: a map (``begin``, ``end``) or an array (a batch of pieces).
Records read back stay ``Any`` until :func:`load` has checked them."""


def _headers_out(headers: Headers) -> list[list[str]]:
    return [[k, v] for k, v in headers]


def _headers_in(raw: Any) -> Headers:
    return tuple((str(k), str(v)) for k, v in raw)


def encode_request(r: Request) -> dict[str, Any]:
    return {
        "method": r.method,
        "url": r.url,
        "http_version": r.http_version,
        "headers": _headers_out(r.headers),
        "body": r.body,
        "started_at": r.started_at,
    }


def decode_request(d: dict[str, Any]) -> Request:
    return Request(
        method=d["method"],
        url=d["url"],
        http_version=d["http_version"],
        headers=_headers_in(d["headers"]),
        body=bytes(d["body"]),
        started_at=float(d["started_at"]),
    )


def encode_response_head(r: Response) -> dict[str, Any]:
    return {
        "status": r.status,
        "reason": r.reason,
        "http_version": r.http_version,
        "headers": _headers_out(r.headers),
        "framing": r.framing,
        "headers_at_ns": r.headers_at_ns,
    }


def encode_setup(s: Setup) -> dict[str, int]:
    """The begin record's ``setup`` map: ``wait_ns`` and the marks that happened."""
    return {"wait_ns": s.wait_ns, **{f"{name}_ns": ns for name, ns in s.marks.items()}}


def decode_setup(d: dict[str, Any]) -> Setup:
    def mark(name: str) -> int | None:
        v = d.get(name)
        return None if v is None else int(v)

    return Setup(
        wait_ns=int(d["wait_ns"]),
        tcp_ns=mark("tcp_ns"),
        proxy_connect_ns=mark("proxy_connect_ns"),
        tls_ns=mark("tls_ns"),
    )


def begin_record(
    rid: int,
    request: Request,
    response: Response | None,
    labels: dict[str, str],
    setup: Setup | None,
    *,
    websocket: bool = False,
) -> dict[str, Any]:
    """An interaction's ``begin`` record (``setup`` only when known; ``websocket`` for a session)."""
    rec: dict[str, Any] = {
        "t": "begin",
        "id": rid,
        "request": encode_request(request),
        "response": encode_response_head(response) if response is not None else None,
        "labels": labels,
    }
    if setup is not None:
        rec["setup"] = encode_setup(setup)
    if websocket:
        rec["websocket"] = 1
    return rec


def end_record(
    rid: int, outcome: Outcome, error: str | None, end_ns: int | None, websocket: WebSocketSession | None = None
) -> dict[str, Any]:
    """An interaction's ``end`` record; a session's adds its close (code, reason, who)."""
    rec: dict[str, Any] = {"t": "end", "id": rid, "outcome": outcome, "error": error, "end_ns": end_ns}
    if websocket is not None:
        rec["websocket"] = encode_close(websocket)
    return rec


def encode_close(ws: WebSocketSession) -> dict[str, Any]:
    return {"code": ws.close_code, "reason": ws.close_reason, "by": ws.closed_by}


def decode_close(d: dict[str, Any]) -> tuple[int | None, str, Direction | None]:
    code, by = d.get("code"), d.get("by")
    return (
        None if code is None else int(code),
        str(d.get("reason") or ""),
        None if by is None else Direction(by),
    )


DATA = "d"


def data_record(rid: int, pieces: Sequence[Piece], previous_at_ns: int = 0) -> list[Any]:
    """A batch of pieces: ``["d", id, joined bytes, sizes, gaps]`` (gaps are delta offsets)."""
    if isinstance(pieces, PieceSequence):
        return [DATA, rid, pieces.joined, pieces.sizes, pieces.gaps(previous_at_ns)]
    # The recorder's hot path: two passes over the pieces, the rest at C speed.
    datas = [p.data for p in pieces]
    ats = [p.at_ns for p in pieces]
    gaps = list(map(operator.sub, ats, chain((previous_at_ns,), ats)))
    return [DATA, rid, b"".join(datas), list(map(len, datas)), gaps]


MESSAGES = "m"

# A message's kind in a message record: bit 0 the direction, bit 1 binary.
_KIND_SERVER = 1
_KIND_BINARY = 2


def message_kind(m: Message) -> int:
    """``0`` client text, ``1`` server text, ``2`` client binary, ``3`` server binary."""
    return (_KIND_SERVER if m.direction == Direction.SERVER else 0) | (0 if m.text else _KIND_BINARY)


def message_record(rid: int, messages: Sequence[Message], previous_at_ns: int = 0) -> list[Any]:
    """A batch of messages: ``["m", id, joined bytes, sizes, gaps, kinds]`` and, when
    any message's frames are known, ``[frame sizes, ...]`` (``[]`` for the others)."""
    gaps = []
    last = previous_at_ns
    for m in messages:
        gaps.append(m.at_ns - last)
        last = m.at_ns
    rec: list[Any] = [
        MESSAGES,
        rid,
        b"".join(m.data for m in messages),
        [len(m.data) for m in messages],
        gaps,
        [message_kind(m) for m in messages],
    ]
    if any(m.fragments for m in messages):
        rec.append([list(m.fragments) for m in messages])
    return rec


def decode_messages(rec: list[Any], previous_at_ns: int = 0) -> list[Message]:
    if len(rec) not in (6, 7):
        raise ValueError("malformed message record")
    _, _, body, sizes, gaps, kinds = rec[:6]
    frames: list[Any] = rec[6] if len(rec) == 7 else [()] * len(sizes)
    if not (len(sizes) == len(gaps) == len(kinds) == len(frames)) or sum(sizes) != len(body):
        raise ValueError("message sizes do not add up to the data")
    out: list[Message] = []
    pos, at = 0, previous_at_ns
    view = memoryview(body)
    for size, gap, kind, frag in zip(sizes, gaps, kinds, frames, strict=True):
        if not isinstance(kind, int) or not 0 <= kind <= 3:
            raise ValueError(f"unknown message kind {kind!r}")
        at += gap
        out.append(
            Message(
                at,
                Direction.SERVER if kind & _KIND_SERVER else Direction.CLIENT,
                not kind & _KIND_BINARY,
                bytes(view[pos : pos + size]),
                tuple(int(f) for f in frag),
            )
        )
        pos += size
    return out


def record_kind(rec: Any) -> str:
    """``begin``, ``data``, ``messages``, ``end`` or ``index`` (``?`` for anything else)."""
    if isinstance(rec, list) and rec:
        if rec[0] == DATA:
            return "data"
        if rec[0] == MESSAGES:
            return "messages"
        if rec[0] == INDEX:
            return "index"
        return "?"
    if isinstance(rec, dict):
        return str(rec.get("t", "?"))
    return "?"


def record_version(rec: Any) -> int:
    """The format version a reader needs for this record."""
    if isinstance(rec, list):
        if rec and rec[0] == INDEX:
            return INDEX_VERSION
        return WEBSOCKET_VERSION if rec and rec[0] == MESSAGES else FORMAT_VERSION
    return WEBSOCKET_VERSION if isinstance(rec, dict) and "websocket" in rec else FORMAT_VERSION


def record_id(rec: Any) -> Any:
    return rec[1] if isinstance(rec, list) else rec["id"]


def decode_pieces(rec: list[Any], previous_at_ns: int = 0) -> list[Piece]:
    if len(rec) != 5:
        raise ValueError("malformed data record")
    _, _, body, sizes, gaps = rec
    if len(sizes) != len(gaps) or sum(sizes) != len(body):
        raise ValueError("piece sizes do not add up to the data")
    out: list[Piece] = []
    pos, at = 0, previous_at_ns
    view = memoryview(body)
    for size, gap in zip(sizes, gaps, strict=True):
        at += gap
        out.append(Piece(at, bytes(view[pos : pos + size])))
        pos += size
    return out


def interaction_records(ix: Interaction, rid: int) -> list[Record]:
    """The records that store a finished interaction (used to write whole cassettes)."""
    ws = ix.websocket
    recs: list[Record] = [
        begin_record(rid, ix.request, ix.response, dict(ix.labels), ix.setup, websocket=ws is not None)
    ]
    if ix.pieces:
        recs.append(data_record(rid, ix.pieces))
    if ws is not None and ws.messages:
        recs.append(message_record(rid, ws.messages))
    recs.append(end_record(rid, ix.outcome, ix.error, ix.end_ns, ws))
    return recs


def make_header() -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "writer": __version__,
        "created": time.time(),
    }


# --------------------------------------------------------------------------
# Writing


class CassetteWriter:
    """Appends records to a ``.tape`` file. Not thread-safe; see :class:`BackgroundWriter`.

    Opening an existing cassette appends to it (nothing recorded is ever
    overwritten); a torn tail left by a killed recorder is cut off first, since
    the reader would drop it anyway and new records must follow valid data.

    The writer holds the cassette's lock (:func:`streamtape.lock.hold`) while it
    is open: a second writer of the same file waits up to ``lock_timeout``
    seconds (``0``, the default: it is refused at once with a message naming
    the holder's pid), so two recorders never interleave their records. A
    write that fails (disk full, I/O error) cuts the file back to its last
    whole record and ends the writing (:attr:`failed`): the file stays readable
    up to what was written before.

    The writer notes where each record goes; :meth:`close` appends an index
    record (:mod:`streamtape.cassette_index`) when the file has reached
    ``index_min_bytes``, so it reopens without a scan. Appending to a cassette
    that ends in an index cuts that index off first (it is rewritten on close).
    """

    def __init__(
        self, path: str | os.PathLike[str], lock_timeout: float = 0.0, index_min_bytes: int = INDEX_MIN_BYTES
    ) -> None:
        self.path = Path(path)
        self.next_id = 0
        self.dropped_tail = 0
        self.index_min_bytes = index_min_bytes
        self._table = TableBuilder()
        self.failed = False
        """A write failed: the file was cut back to its last whole record and is closed."""
        # Ids are taken from more than one thread (the proxy's loop, the shadow
        # sender's): a lock keeps two interactions from getting one id.
        self._id_lock = threading.Lock()
        self._good_end = 0
        if not self.path.parent.is_dir():  # before the lock file, which lives there
            raise CassetteError(f"{self.path}: folder {self.path.parent} does not exist")
        self._lock = hold(self.path, lock_timeout)
        try:
            self._open()
        except BaseException:
            self._lock.release()
            raise
        self._good_end = self._f.tell()

    def _open(self) -> None:
        """Open the file under the lock: append to a cassette, or create one."""
        if self.path.exists() and self.path.stat().st_size > 0:
            layout, _identity, fd = open_layout(self.path)
            os.close(fd)
            self.version: int = layout.header["version"]
            self.next_id = max(layout.table.ids, default=-1) + 1
            self._table = TableBuilder.of(layout.table)
            self._f: BinaryIO = open(self.path, "r+b")  # noqa: SIM115
            if layout.index_start is not None:  # derived data: rewritten on close
                self._f.truncate(layout.index_start)
            elif layout.good_end < layout.size:
                self._f.truncate(layout.good_end)
                self.dropped_tail = layout.size - layout.good_end
            self._f.seek(0, os.SEEK_END)
        else:
            if self.path.parent and not self.path.parent.exists():
                raise CassetteError(f"{self.path}: folder {self.path.parent} does not exist")
            try:
                self._f = open(self.path, "w+b")  # noqa: SIM115  (read back by _raise_version)
            except OSError as e:
                raise CassetteError(f"{self.path}: cannot create: {e.strerror or e}") from None
            self.version = FORMAT_VERSION
            self._write([make_header()], sync=True)

    def new_id(self) -> int:
        with self._id_lock:
            rid = self.next_id
            self.next_id += 1
        return rid

    def _write(self, records: Sequence[Record], sync: bool) -> None:
        needed = max(map(record_version, records), default=FORMAT_VERSION)
        if needed > self.version:
            self._raise_version(needed)
        packer = msgpack.Packer(use_bin_type=True)
        packed = [packer.pack(r) for r in records]
        data = b"".join(packed)
        try:
            self._f.write(data)
            self._f.flush()
            if sync:
                os.fsync(self._f.fileno())
        except OSError:
            self._abandon()
            raise
        self._note(records, packed, self._good_end)
        self._good_end += len(data)

    _ARRAY_KINDS: ClassVar[dict[str, Kind]] = {DATA: Kind.DATA, MESSAGES: Kind.MESSAGES}

    def _note(self, records: Sequence[Record], packed: Sequence[bytes], offset: int) -> None:
        """Where each interaction's records went, for the index written on close.

        Once per record on the writer's hot path, so it looks at the tag alone.
        """
        table = self._table
        array_kinds = self._ARRAY_KINDS
        for rec, blob in zip(records, packed, strict=True):
            n = len(blob)
            if isinstance(rec, list):
                kind = array_kinds.get(rec[0]) if rec else None
                if kind is not None:
                    table.add(rec[1], offset, n, kind)
            else:
                t = rec.get("t")
                if t == "begin":
                    rid = rec["id"]
                    table.begin(rid, offset, n)
                    digest = digest_of_begin(rec)  # lets a replay server match without reading it
                    table.digest(rid, WILDCARD if digest is None else digest)
                elif t == "end":
                    table.add(rec["id"], offset, n, Kind.END)
            offset += n

    def _write_index(self) -> None:
        """Append the index record, if the file is large enough to want one.

        It needs format version 3, raised in the header first (fsynced); an
        older streamtape refuses such a file with a message to upgrade. An
        index that cannot be written (disk full) is cut off again: it is only
        a shortcut, and the reader finds the records without it.
        """
        if self.failed or self._good_end < self.index_min_bytes:
            return
        table = self._table.table()
        if not len(table):
            return
        try:
            if self.version < INDEX_VERSION:
                self._raise_version(INDEX_VERSION)
            self._f.seek(self._good_end)
            self._f.write(index_record(table, self._good_end))
            self._f.flush()
            os.fsync(self._f.fileno())
        except (OSError, CassetteError):
            with contextlib.suppress(OSError, ValueError):
                self._f.seek(self._good_end)
                self._f.truncate(self._good_end)

    def _abandon(self) -> None:
        """After a failed write: cut the file back to its last whole record, stop writing.

        A failed write (disk full, I/O error) may have left part of a record on
        disk, and the buffer still holds the rest. Records appended after it
        (had space come back) would follow garbage, and a reader stops at the
        first undecodable byte: everything after would be lost. So the file is
        cut back to where the last good write ended (``ftruncate`` needs no free
        space) and its descriptor is closed without flushing the buffer.
        """
        self.failed = True
        with contextlib.suppress(OSError, ValueError):
            os.ftruncate(self._f.fileno(), self._good_end)
        f = self._f
        if isinstance(f, io.BufferedRandom | io.BufferedWriter):
            with contextlib.suppress(OSError, ValueError):
                f.raw.close()  # the buffered file's own close would retry the failed flush

    def _raise_version(self, version: int) -> None:
        """Raise the header's format version in place, before records that need it.

        The version is one positive fixint byte after the ``version`` key, so
        the header keeps its size and nothing after it moves. It is fsynced
        before the records that need it are written: a reader never meets a
        record its version does not announce.
        """
        self._f.flush()
        self._f.seek(0)
        head = self._f.read(512)
        key = msgpack.packb("version")
        at = head.find(key) + len(key)
        ok = at >= len(key) and at < len(head) and head[at] == self.version and version < 0x80
        if ok:  # check on a copy that the byte is the header's version and nothing else
            unpacker = msgpack.Unpacker(raw=False)
            unpacker.feed(head[:at] + bytes([version]) + head[at + 1 :])
            try:
                patched = next(unpacker)
            except Exception:
                patched = None
            ok = isinstance(patched, dict) and patched.get("version") == version
        if not ok:
            self._f.seek(0, os.SEEK_END)
            raise CassetteError(f"{self.path}: cannot raise the cassette's format version to {version}")
        self._f.seek(at)
        self._f.write(bytes([version]))
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.seek(0, os.SEEK_END)
        self.version = version

    def write(self, records: Sequence[Record], sync: bool = False) -> None:
        """Append records in one write; fsync when ``sync`` (always for an ``end``)."""
        self._write(records, sync or any(record_kind(r) == "end" for r in records))

    def add(self, ix: Interaction) -> None:
        """Append a whole finished interaction."""
        self.write(interaction_records(ix, self.new_id()), sync=True)

    def close(self) -> None:
        try:
            if not self._f.closed:
                self._write_index()
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
        finally:
            self._lock.release()

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SAVE_LOCK_WAIT_S = 120.0
"""How long :func:`save` waits for a cassette another process is writing."""


def save(path: str | os.PathLike[str], interactions: Iterable[Interaction]) -> None:
    """Write (or append) interactions to a cassette file (waiting for another writer's lock)."""
    with CassetteWriter(path, lock_timeout=SAVE_LOCK_WAIT_S) as w:
        for ix in interactions:
            w.add(ix)


class BackgroundWriter:
    """A :class:`CassetteWriter` driven by its own thread, so callers never block on disk.

    ``submit`` takes records from any thread (the proxy's event loop) and
    returns at once; the thread drains everything queued, writes it in one
    ``write`` and fsyncs when an interaction ended. A submit's ``on_written``
    is called on the writer thread once its records are on disk (True; fsynced
    when they hold an ``end``) or will never be (False): a recorder reports an
    interaction as saved only when it is. After the first failed write nothing
    more is written (:attr:`failure`; see :meth:`CassetteWriter._abandon`).
    """

    def __init__(self, path: str | os.PathLike[str], lock_timeout: float = 0.0) -> None:
        self.writer = CassetteWriter(path, lock_timeout)
        self._cond = threading.Condition()
        self._pending: list[Record] = []
        self._waiting: list[Callable[[bool], None]] = []
        self._closing = False
        self._submitted = 0
        self._written = 0
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamtape-writer", daemon=True)
        self._thread.start()

    @property
    def path(self) -> Path:
        return self.writer.path

    def new_id(self) -> int:
        return self.writer.new_id()

    def submit(self, records: Sequence[Record], on_written: Callable[[bool], None] | None = None) -> None:
        with self._cond:
            self._pending.extend(records)
            self._submitted += len(records)
            if on_written is not None:
                self._waiting.append(on_written)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                batch, self._pending = self._pending, []
                waiting, self._waiting = self._waiting, []
                closing = self._closing
            if batch:
                if self.failure is None:
                    try:
                        self.writer.write(batch)
                    except BaseException as e:  # disk full, file removed: keep the proxy alive
                        self.failure = e
                ok = self.failure is None
                for done in waiting:
                    with contextlib.suppress(Exception):  # a caller's callback must not stop the writing
                        done(ok)
                with self._cond:
                    self._written += len(batch)
                    self._cond.notify_all()
            if closing and not batch:
                return

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until everything submitted so far is on disk."""
        with self._cond:
            target = self._submitted
            self._cond.wait_for(lambda: self._written >= target, timeout)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self.writer.close()


# The reading side (it builds on the model and format above) lives in its own
# module; its names are this module's too. The writer's request digests come
# from matching (streamtape.match_index), which builds on this module as well.
from .cassette_reader import Cassette as Cassette  # noqa: E402
from .cassette_reader import load as load  # noqa: E402
from .cassette_reader import load_many as load_many  # noqa: E402
from .cassette_reader import open_layout as open_layout  # noqa: E402
from .cassette_reader import read_records as read_records  # noqa: E402
from .match_index import WILDCARD, digest_of_begin  # noqa: E402
