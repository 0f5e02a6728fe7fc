"""Token fields of a recorded JSON answer are masked in place, whatever the piece boundaries."""

from __future__ import annotations

import base64
import gzip
import json
import random
import zlib
from collections.abc import Callable
from pathlib import Path

import brotli
import msgpack
import pytest

import streamtape
from streamtape.capture.recorder import WITHHELD_ERROR, Recorder, Redaction
from streamtape.capture.response_secrets import (
    DEFAULT_REDACT_RESPONSE_FIELDS,
    HOLD_BYTES,
    FieldMasker,
    masked_answer,
)
from streamtape.cassette.model import Outcome, Request
from streamtape.cassette.pieces import Piece
from streamtape.cassette.records import Record
from streamtape.cassette.writer import BackgroundWriter

SIGNATURE = b"c2lnbmF0dXJlX3NlY3JldA"
JWT = b"eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9." + SIGNATURE
BODY = (
    b'{"access_token": "' + JWT + b'", "refresh_token" : "OPAQUE-refresh-1234", '
    b'"token_type": "Bearer", "expires_in": 3600, "note": "a \\"access_token\\": \\"kept\\"", '
    b'"nested": {"id_token":"' + JWT + b'"}}'
)


def masked_whole(body: bytes) -> bytes:
    m = FieldMasker()
    m.feed(body)
    m.end()
    return bytes(m.body)


def test_a_jwt_keeps_its_header_and_payload_and_loses_its_signature() -> None:
    out = masked_whole(BODY)
    doc = json.loads(out)
    assert len(out) == len(BODY), "same length: the pieces and Content-Length stay true"
    _header, payload, sig = doc["access_token"].split(".")
    assert json.loads(base64.urlsafe_b64decode(payload + "==")) == {"exp": 4102444800}
    assert sig.encode() != SIGNATURE and set(sig) <= set("REDACT")
    assert doc["nested"]["id_token"].rsplit(".", 1)[0] == doc["access_token"].rsplit(".", 1)[0]
    assert doc["refresh_token"] == "REDACTEDREDACTEDRED"
    assert doc["note"] == 'a "access_token": "kept"', "a key inside a string is no key"
    assert doc["token_type"] == "Bearer" and doc["expires_in"] == 3600


def test_any_split_into_pieces_masks_the_same_and_never_takes_back_a_decided_byte() -> None:
    whole = masked_whole(BODY)
    rnd = random.Random(7)
    for _ in range(3000):
        cuts = sorted(rnd.sample(range(1, len(BODY)), rnd.randint(1, 20)))
        m = FieldMasker()
        prev, decided = 0, 0
        for c in [*cuts, len(BODY)]:
            m.feed(BODY[prev:c])
            prev = c
            assert m.decided >= decided
            decided = m.decided
            assert bytes(m.body[:decided]) == whole[:decided], cuts
            assert SIGNATURE not in bytes(m.body[:decided])
        m.end()
        assert bytes(m.body) == whole and m.decided == len(BODY)


def test_a_body_without_the_fields_is_decided_as_it_comes() -> None:
    m = FieldMasker()
    m.feed(b'[{"candidates": [{"content": "hi"}]},')
    assert m.decided == len(m.body) and not m.masked
    m.feed(b'{"access_to')  # could be a key: held
    assert m.decided == len(m.body) - len(b'"access_to')
    m.feed(b'ken_type": 1}]')  # it was not
    assert m.decided == len(m.body) and not m.masked


def record(tmp_path: Path, pieces: list[bytes], redaction: Redaction | None = None) -> tuple[list[Record], Path]:
    """A JSON answer whose first piece comes before the head's work (as mitmproxy may hand it)."""
    return record_answer(tmp_path, pieces, (("Content-Type", "application/json"),), redaction, before_head=1)


def test_the_recorder_writes_a_token_answer_masked_with_its_piece_boundaries(tmp_path: Path) -> None:
    pieces = [BODY[:30], BODY[30:31], BODY[31:90], BODY[90:]]
    records, path = record(tmp_path, pieces)
    assert SIGNATURE not in msgpack.packb(records, use_bin_type=True)
    assert b"OPAQUE-refresh" not in path.read_bytes()
    (ix,) = streamtape.load(path)
    assert [len(p.data) for p in ix.pieces] == [len(p) for p in pieces]
    assert b"".join(p.data for p in ix.pieces) == masked_whole(BODY)


def test_no_redact_keeps_the_token_answer_as_sent(tmp_path: Path) -> None:
    _, path = record(tmp_path, [BODY], Redaction(enabled=False))
    (ix,) = streamtape.load(path)
    assert b"".join(p.data for p in ix.pieces) == BODY


def test_a_masker_that_hands_on_as_it_goes_keeps_only_the_undecided_tail() -> None:
    whole = masked_whole(BODY)
    rnd = random.Random(11)
    for _ in range(1000):
        cuts = sorted(rnd.sample(range(1, len(BODY)), rnd.randint(1, 20)))
        m, out, prev = FieldMasker(), b"", 0
        for c in [*cuts, len(BODY)]:
            m.feed(BODY[prev:c])
            prev = c
            out += m.take(m.decided - m.base)
            assert len(m.body) == c - m.base <= c
        m.end()
        out += m.take(m.decided - m.base)
        assert out == whole and not m.body, cuts


def record_answer(
    tmp_path: Path, pieces: list[bytes], headers: tuple[tuple[str, str], ...],
    redaction: Redaction | None = None, *, finish: bool = True, before_head: int = 0,
) -> tuple[list[Record], Path]:
    """Record one answer with this head through the Recorder and a real writer (the first
    ``before_head`` pieces come before the head's work)."""
    records: list[Record] = []
    p = tmp_path / "t.tape"
    w = BackgroundWriter(p)

    def sink(rs: list[Record]) -> None:
        records.extend(rs)
        w.submit(rs)

    rec = Recorder(sink, w.new_id, redaction=redaction, flush_ns=1, max_flush_ns=1, min_batch=1)
    rec.begin("f", Request("POST", "https://iam.example/identity/token", body=b"grant_type=x"), 0)
    for data in pieces[:before_head]:
        rec.piece("f", data, 5)
    rec.response_headers("f", 200, "OK", "HTTP/1.1", headers, 1)
    for i, data in enumerate(pieces[before_head:]):
        rec.piece("f", data, 10 + i)
    if finish:
        rec.finish("f", Outcome.COMPLETE, None, 100)
    w.close()
    return records, p


def split(data: bytes, n: int) -> list[bytes]:
    step = -(-len(data) // n)
    return [data[i : i + step] for i in range(0, len(data), step)]


def _zstd_compress() -> Callable[[bytes], bytes]:
    """zstd as what mitmproxy installs offers it: backports.zstd (mitmproxy 12) or zstandard (11)."""
    try:
        from backports import zstd

        return zstd.compress
    except ImportError:
        import zstandard

        return zstandard.ZstdCompressor().compress


CODINGS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": _zstd_compress(),
}


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_a_compressed_token_answer_is_stored_decoded_and_masked_with_a_true_head(tmp_path: Path, coding: str) -> None:
    wire = CODINGS[coding](BODY)
    head = (("Content-Type", "application/json"), ("Content-Encoding", coding), ("Content-Length", str(len(wire))))
    records, path = record_answer(tmp_path, split(wire, 4), head)
    assert SIGNATURE not in msgpack.packb(records, use_bin_type=True)
    (ix,) = streamtape.load(path)
    assert ix.outcome == Outcome.COMPLETE and ix.response is not None
    assert ix.response.body == masked_whole(BODY)
    assert ix.response.header("content-encoding") is None
    assert ix.response.header("content-length") == str(len(BODY))
    assert all(p.at_ns >= 10 for p in ix.response.pieces), "each decoded part keeps its piece's time"


def test_a_recorder_killed_inside_a_compressed_token_answer_leaves_no_token(tmp_path: Path) -> None:
    wire = gzip.compress(BODY)
    head = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"))
    _, path = record_answer(tmp_path, split(wire, 3)[:2], head, finish=False)
    (ix,) = streamtape.load(path)
    assert ix.outcome == Outcome.INTERRUPTED and ix.response is not None and ix.response.body == b""
    assert SIGNATURE not in path.read_bytes() and b"OPAQUE" not in path.read_bytes()


def test_a_compressed_json_answer_without_tokens_is_stored_as_it_came(tmp_path: Path) -> None:
    plain = json.dumps({"models": [{"id": f"m{i}"} for i in range(50)]}).encode()
    wire = gzip.compress(plain)
    head = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Content-Length", str(len(wire))))
    pieces = split(wire, 5)
    _, path = record_answer(tmp_path, pieces, head)
    (ix,) = streamtape.load(path)
    assert ix.response is not None and [p.data for p in ix.response.pieces] == pieces
    assert ix.response.headers == head


def big_json_array(n: int) -> bytes:
    return b"[" + b",".join(json.dumps({"candidates": [{"text": f"word {i} " * 8}]}).encode() for i in range(n)) + b"]"


def test_a_long_compressed_json_stream_goes_to_the_file_before_it_ends(tmp_path: Path) -> None:
    plain = big_json_array(2000)
    assert len(plain) > 2 * HOLD_BYTES
    c = zlib.compressobj(wbits=31)
    pieces = [c.compress(part) + c.flush(zlib.Z_SYNC_FLUSH) for part in split(plain, 40)] + [c.flush()]
    head = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked"))
    records, path = record_answer(tmp_path, pieces[:30], head, finish=False)
    held = sum(len(r[3]) for r in records if isinstance(r, list))
    assert held >= 20, "past the hold, pieces go on as they came"
    (ix,) = streamtape.load(path)
    assert ix.response is not None and [p.data for p in ix.response.pieces] == pieces[:held]


def test_a_token_after_the_hold_of_a_compressed_answer_leaves_the_rest_out(tmp_path: Path) -> None:
    plain = big_json_array(2000)[:-1] + b',{"access_token": "' + JWT + b'"}]'
    c = zlib.compressobj(wbits=31)
    pieces = [c.compress(part) + c.flush(zlib.Z_SYNC_FLUSH) for part in split(plain, 40)] + [c.flush()]
    head = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked"))
    _, path = record_answer(tmp_path, pieces, head)
    (ix,) = streamtape.load(path)
    assert ix.outcome == Outcome.INTERRUPTED and ix.error == WITHHELD_ERROR
    assert ix.response is not None and 0 < len(ix.response.pieces) < len(pieces)
    assert b"access_token" not in zlib.decompressobj(wbits=31).decompress(ix.response.body)


def test_a_field_named_with_redact_field_is_masked_in_the_answer_too(tmp_path: Path) -> None:
    body = b'{"session_secret": "s3cr3t-value", "user": "ann"}'
    redaction = Redaction.build(body_fields=["session_secret"])
    _, path = record_answer(tmp_path, [body], (("Content-Type", "application/json"),), redaction)
    (ix,) = streamtape.load(path)
    assert ix.response is not None
    assert json.loads(ix.response.body) == {"session_secret": "REDACTEDREDA", "user": "ann"}


def test_a_whole_answer_is_masked_as_the_recorder_masks_it() -> None:
    wire = gzip.compress(BODY)
    head = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Content-Length", str(len(wire))))
    out = masked_answer([Piece(3, wire)], head, DEFAULT_REDACT_RESPONSE_FIELDS)
    assert out is not None
    pieces, headers = out
    assert b"".join(p.data for p in pieces) == masked_whole(BODY) and pieces[0].at_ns == 3
    assert dict(headers) == {"Content-Type": "application/json", "Content-Length": str(len(BODY))}
    assert masked_answer([Piece(3, b'{"a": 1}')], head[:1], DEFAULT_REDACT_RESPONSE_FIELDS) is None
