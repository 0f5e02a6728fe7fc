"""Token fields of a recorded JSON answer are masked in place, whatever the piece boundaries."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import msgpack

import streamtape
from streamtape.capture.recorder import Recorder, Redaction
from streamtape.capture.response_secrets import FieldMasker
from streamtape.cassette.model import Outcome, Request
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
    records: list[Record] = []
    p = tmp_path / "t.tape"
    w = BackgroundWriter(p)

    def sink(rs: list[Record]) -> None:
        records.extend(rs)
        w.submit(rs)

    rec = Recorder(sink, w.new_id, redaction=redaction, flush_ns=1, max_flush_ns=1, min_batch=1)
    rec.begin("f", Request("POST", "https://iam.example/identity/token", body=b"grant_type=x"), 0)
    rec.piece("f", pieces[0], 5)  # the head's work comes after the first piece
    rec.response_headers("f", 200, "OK", "HTTP/1.1", (("Content-Type", "application/json"),), 1)
    for i, data in enumerate(pieces[1:]):
        rec.piece("f", data, 10 + i)
    rec.finish("f", Outcome.COMPLETE, None, 100)
    w.close()
    return records, p


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
