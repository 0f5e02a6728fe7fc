"""The ``.tape`` file format: its records, and the pure codec between them and the values.

Words: a *piece* is one part of a response body as the upstream delivered it
(one socket read, or one HTTP chunk of a chunked response, de-chunked), with
the time it arrived; "chunk" is kept for HTTP chunked framing alone (the
``chunked`` :class:`Framing`). An interaction's *outcome* (:class:`Outcome`)
says how it ended.

File layout: a header, then records, all msgpack. From format version 4 on
(the version every new cassette is written as) each record sits in a 14-byte
checksummed, numbered frame (:mod:`streamtape.cassette.frames`), so a reader
detects a damaged record, skips it and resumes at the next good one
(:mod:`streamtape.cassette.recovery`); the header stays a bare map, so an older
streamtape reads its version and says to upgrade. Versions 1 to 3 (below) have
bare records, one object after another, nothing else, and load as before (no
checksum to verify; a corrupt record refuses the file). A writer appending to
an older cassette keeps its version and its bare records. Inside the frames
the records are those of versions 1 to 3::

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

An end record may carry the response's ``"headers"``, which then replace those
of the begin record: the recorder writes the begin record when the response
head arrives, and a compressed token answer that it stores decoded and masked
(:mod:`streamtape.capture.response_secrets`) learns its true head only at the
end (``Content-Encoding`` gone, ``Content-Length`` the decoded length). A
streamtape from before this key ignores it, and would replay that one answer
with its compressed head: the format version stays.

A message's kind is ``0`` client text, ``1`` server text, ``2`` client binary,
``3`` server binary; gaps are deltas from the previous message of the same
session, as for pieces. The optional seventh element gives each message's
wire frame sizes (a fragmented message has several; ``[]`` where they are not
known); it is left out when no message of the batch has them.

Format versions: a reader needs version 2 for message records and WebSocket
begin/end records; an unframed cassette that holds only HTTP interactions stays
version 1, so an older streamtape reads it (new cassettes are version 4, which
a streamtape without checksums refuses with "upgrade streamtape"). The header is written first, before
anyone knows whether a session will follow, so the writer raises its version
byte in place (one byte, fsynced) before the first WebSocket record goes out.

An index record may end the file: where every interaction's records are, and
a digest of each request, so a reader opens a file of any size without
reading it through (:mod:`streamtape.cassette.index` describes it)::

    record  ["x", {"v": 1, "ids": bin, "starts": bin, "offsets": bin, ...}, start, crc32]

A writer appends one when it closes a cassette of 16 MiB or more, raising the
version to 3 first (an older streamtape would stop at the record it does not
know, and says to upgrade instead); smaller cassettes keep their version, and
an index is only ever a shortcut: without one, or with one that no longer ends
the file, the reader finds the records in one pass. Reading is lazy (see
:mod:`streamtape.cassette.reader`): :func:`load` finds the records,
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

import operator
import time
from collections.abc import Sequence
from itertools import chain
from typing import Any

from .._version import __version__
from .frames import CHECKSUM_VERSION
from .index import INDEX, INDEX_VERSION
from .model import (
    Direction,
    Headers,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    Setup,
    WebSocketSession,
)
from .pieces import Piece, PieceSequence

FORMAT_NAME = "streamtape"
PLAIN_VERSION = 1
"""The version an unframed cassette of HTTP interactions alone needs (every reader reads it)."""
WEBSOCKET_VERSION = 2
"""The version a reader needs for WebSocket sessions (message records)."""
FORMAT_VERSION = CHECKSUM_VERSION
"""The version new cassettes are written as: records in checksummed frames
(:mod:`streamtape.cassette.frames`)."""
NEWEST_VERSION = CHECKSUM_VERSION
"""The newest format version this streamtape reads and writes."""
SUFFIX = ".tape"




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
    rid: int, outcome: Outcome, error: str | None, end_ns: int | None, websocket: WebSocketSession | None = None,
    *, headers: Headers | None = None,
) -> dict[str, Any]:
    """An interaction's ``end`` record; a session's adds its close (code, reason, who).
    ``headers``: the response headers, when they are to replace those of the begin record."""
    rec: dict[str, Any] = {"t": "end", "id": rid, "outcome": outcome, "error": error, "end_ns": end_ns}
    if websocket is not None:
        rec["websocket"] = encode_close(websocket)
    if headers is not None:
        rec["headers"] = _headers_out(headers)
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
        return WEBSOCKET_VERSION if rec and rec[0] == MESSAGES else PLAIN_VERSION
    return WEBSOCKET_VERSION if isinstance(rec, dict) and "websocket" in rec else PLAIN_VERSION


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


def make_header(version: int = FORMAT_VERSION) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": version,
        "writer": __version__,
        "created": time.time(),
    }
