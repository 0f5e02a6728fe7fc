"""Cassettes read through their record table: the index record, lazy interactions and
pieces, compact pieces (the replay server of a large cassette: tests/system/test_cassette_index.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import random
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamtape
from streamtape import CassetteError, DamagedRecordError, Interaction, Piece, Request, Response
from streamtape.cassette import reader as reader
from streamtape.cassette.digest import request_digest
from streamtape.cassette.frames import FRAME, frame
from streamtape.cassette.index import Kind, index_record
from streamtape.cassette.pieces import Pieces
from streamtape.cassette.reader import open_layout, read_records
from streamtape.cassette.records import FORMAT_VERSION, interaction_records
from streamtape.cassette.writer import CassetteWriter
from streamtape.errors import NoMatchError
from streamtape.match.indexed import CassetteChain, IndexedMatcher, interactions_of, matcher_for
from streamtape.match.matcher import Matcher
from tests.support import ROOT
from tests.support.builders import MS, chat_ix, interaction, sse
from tests.support.streams import numbered, write


def header_version(path: Path) -> int:
    return int(next(iter(msgpack.Unpacker(open(path, "rb"), raw=False)))["version"])


def test_a_closed_writer_leaves_an_index_that_load_uses_and_that_agrees_with_a_scan(tmp_path: Path) -> None:
    p = tmp_path / "i.tape"
    ixs = [numbered(k) for k in range(30)]
    write(p, ixs)
    assert header_version(p) == FORMAT_VERSION
    cas = streamtape.load(p)
    assert cas.file is not None and cas.file.layout.indexed and cas.warnings == []
    layout, _, fd = open_layout(p, use_index=False)
    os.close(fd)
    assert not layout.indexed
    t, s = cas.file.table, layout.table
    assert (t.ids, t.starts, t.offsets, list(t.lengths), t.kinds) == (s.ids, s.starts, s.offsets, list(s.lengths), s.kinds)
    assert list(cas) == ixs
    # The stored request digests are what matching computes.
    assert t.digests is not None
    assert list(t.digests) == [request_digest(ix.request.method, ix.request.url, ix.request.body) for ix in ixs]


def test_a_cassette_below_the_size_gets_no_index(tmp_path: Path) -> None:
    p = tmp_path / "small.tape"
    streamtape.save(p, [numbered(1)])
    assert header_version(p) == FORMAT_VERSION
    assert b"\x94\xa1x" not in p.read_bytes()
    cas = streamtape.load(p)
    assert cas.file is not None and not cas.file.layout.indexed


def test_an_index_that_no_longer_ends_the_file_is_passed_over_and_the_records_scanned(tmp_path: Path) -> None:
    p = tmp_path / "grown.tape"
    write(p, [numbered(k) for k in range(3)])
    # Appended after the index without cutting it (as a writer that does not know indexes would),
    # numbered on from the index's frame (which takes the number the next record gets).
    layout, _, fd = open_layout(p)
    os.close(fd)
    extra = numbered(99)
    with open(p, "ab") as f:
        for k, rec in enumerate(interaction_records(extra, 3)):
            f.write(frame(msgpack.packb(rec, use_bin_type=True), layout.next_seq + k))
    cas = streamtape.load(p)
    assert cas.file is not None and not cas.file.layout.indexed
    assert len(cas) == 4 and cas[3] == extra and cas.warnings == []


def test_appending_cuts_the_index_and_closing_writes_one_for_everything(tmp_path: Path) -> None:
    p = tmp_path / "ap.tape"
    write(p, [numbered(k) for k in range(3)])
    with CassetteWriter(p, index_min_bytes=0) as w:
        assert w.next_id == 3 and w.dropped_tail == 0
        w.add(numbered(3))
    data = p.read_bytes()
    assert data.count(b"\x94\xa1x") == 1  # the old index is gone, the new one ends the file
    cas = streamtape.load(p)
    assert cas.file is not None and cas.file.layout.indexed
    assert [ix.labels["k"] for ix in cas] == ["0", "1", "2", "3"]


def test_a_damaged_index_is_ignored_and_nothing_recorded_is_lost(tmp_path: Path) -> None:
    p = tmp_path / "dmg.tape"
    ixs = [numbered(k) for k in range(5)]
    write(p, ixs)
    data = bytearray(p.read_bytes())
    start = data.rindex(b"\x94\xa1x")
    data[start + 40] ^= 0x01  # inside the index's arrays: the CRC no longer holds
    p.write_bytes(bytes(data))
    cas = streamtape.load(p)
    assert cas.file is not None and not cas.file.layout.indexed
    assert list(cas) == ixs


def test_an_index_whose_offsets_are_wrong_gives_an_error_not_another_interaction(tmp_path: Path) -> None:
    p = tmp_path / "lie.tape"
    write(p, [numbered(k) for k in range(4)], index=False)
    layout, _, fd = open_layout(p)
    os.close(fd)
    t = layout.table
    swapped = dataclasses.replace(t, ids=type(t.ids)(t.ids.typecode, [t.ids[1], t.ids[0], *t.ids[2:]]))
    size = p.stat().st_size
    with open(p, "r+b") as f:  # an index, checksummed as a writer's, that mixes up interactions 0 and 1
        f.seek(size)
        f.write(frame(index_record(swapped, size + FRAME.size), layout.next_seq))
    cas = streamtape.load(p)
    assert cas.file is not None and cas.file.layout.indexed
    with pytest.raises(CassetteError, match=r"record at byte \d+: expected a record of interaction 1"):
        cas[0]
    assert cas[2].labels == {"k": "2"}


def test_len_and_one_interaction_never_decode_the_others(tmp_path: Path) -> None:
    # Through the index, records are checked when read: a damaged data record of
    # interaction 0 costs its pieces only, named by byte, when they are used.
    p = tmp_path / "lazy.tape"
    write(p, [numbered(k) for k in range(3)], index=True)
    layout, _, fd = open_layout(p)
    os.close(fd)
    assert layout.indexed
    t = layout.table
    data_rec = next(k for k in range(t.starts[0], t.starts[1]) if t.kinds[k] == Kind.DATA)
    raw = bytearray(p.read_bytes())
    off = t.offsets[data_rec]
    rec = msgpack.unpackb(bytes(raw[off + FRAME.size : off + t.lengths[data_rec]]))
    rec[3][0] += 1  # interaction 0's piece sizes no longer add up (same length on disk)
    patched = msgpack.packb(rec, use_bin_type=True)
    assert len(patched) == t.lengths[data_rec] - FRAME.size
    raw[off + FRAME.size : off + t.lengths[data_rec]] = patched
    p.write_bytes(bytes(raw))
    cas = streamtape.load(p)
    assert len(cas) == 3
    assert [p.data for p in cas[2].pieces] == [sse({"k": 2, "i": i}) for i in range(5)]
    first = cas[0]  # its head reads fine
    assert first.request.body.count(b"question 0") == 1
    with pytest.raises(DamagedRecordError, match=rf"{p}: damaged record at byte {off} \(interaction #0\): record fails its checksum"):
        list(first.pieces)
    # A full check (what show, check and verify do) finds it at once and leaves interaction 0 out.
    checked = streamtape.load(p, verify=True)
    assert [ix.labels["k"] for ix in checked] == ["1", "2"]
    assert [(d.offset, d.interactions) for d in checked.damage] == [(off, (0,))]


def test_a_loaded_interaction_keeps_its_pieces_on_disk_until_they_are_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "cache.tape"
    ixs = [numbered(k, pieces=40) for k in range(30)]
    write(p, ixs)
    monkeypatch.setattr(reader, "PIECE_CACHE_BYTES", 16 * 1024)  # room for a few interactions' pieces
    cas = streamtape.load(p)
    assert cas.file is not None
    held = list(cas)  # every head, as a replay server's matcher would hold them
    assert len(cas.file._cache) == 0
    for ix, want in zip(held, ixs, strict=True):
        assert ix.response is not None and isinstance(ix.response.pieces, reader.FilePieces)
        assert ix.response.body == want.response.body  # type: ignore[union-attr]
    assert 0 < cas.file._cache_bytes <= 16 * 1024
    assert len(cas.file._cache) < 30
    assert held[0] == ixs[0]  # read again after it left the cache


def test_a_file_replaced_or_cut_short_after_loading_is_an_error_not_other_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader._FILES, "limit", 0)  # nothing kept open: every read reopens
    p = tmp_path / "moved.tape"
    write(p, [numbered(k) for k in range(3)], index=False)
    cas = streamtape.load(p)
    assert cas[1].labels == {"k": "1"}
    other = tmp_path / "other.tape"
    write(other, [numbered(k + 10) for k in range(3)], index=False)
    os.replace(other, p)
    with pytest.raises(CassetteError, match="replaced since it was loaded"):
        cas[1]
    fresh = streamtape.load(p)
    with open(p, "r+b") as f:
        f.truncate(p.stat().st_size // 2)
    with pytest.raises(CassetteError, match="cut short since it was loaded"):
        list(fresh)


def test_read_records_still_gives_every_record_in_file_order(tmp_path: Path) -> None:
    p = tmp_path / "rr.tape"
    write(p, [numbered(0), numbered(1)])
    header, records, good_end, size = read_records(p)
    assert header["version"] == FORMAT_VERSION
    assert [r["t"] if isinstance(r, dict) else r[0] for r in records] == ["begin", "d", "end"] * 2
    assert good_end == size


def test_shipped_cassettes_load_as_a_full_decode_of_their_records_says() -> None:
    for path in sorted((ROOT / "cassettes").glob("*.tape")):
        cas = streamtape.load(path)
        _, records, _, _ = read_records(path)
        begins = [r for r in records if isinstance(r, dict) and r.get("t") == "begin"]
        assert len(cas) == len(begins)
        for ix, b in zip(cas, begins, strict=True):
            assert ix.request.url == b["request"]["url"] and ix.request.body == b["request"]["body"]
            pieces = [p for r in records if isinstance(r, list) and r[0] == "d" and r[1] == b["id"]
                      for p in streamtape.cassette.records.decode_pieces(r)]
            assert sum(len(p.data) for p in pieces) == len(ix.response.body if ix.response else b"")


# --------------------------------------------------------------------------
# Compact pieces


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-(10**12), 10**12), st.binary(max_size=20)), max_size=30), st.data())
def test_compact_pieces_behave_as_the_tuple_of_the_same_pieces(items: list[tuple[int, bytes]], data: st.DataObject) -> None:
    tup = tuple(Piece(at, b) for at, b in items)
    comp = Pieces.of(tup)
    assert comp == tup and tup == comp and list(comp) == list(tup) and len(comp) == len(tup)
    assert comp.joined == b"".join(b for _, b in items) and hash(comp) == hash(tup)
    if tup:
        i = data.draw(st.integers(-len(tup), len(tup) - 1))
        assert comp[i] == tup[i]
    lo, hi, step = (data.draw(st.integers(-35, 35)) for _ in range(3))
    sl = slice(lo, hi, step or None)
    assert list(comp[sl]) == list(tup[sl])
    assert pickle.loads(pickle.dumps(comp)) == tup
    assert Response(200, pieces=comp) == Response(200, pieces=tup)
    assert Response(200, pieces=comp).body == Response(200, pieces=tup).body
    assert comp.gaps(7) == [b.at_ns - a for a, b in zip([7, *(p.at_ns for p in tup)][: len(tup)], tup, strict=True)]


def test_file_pieces_pickle_as_their_values(tmp_path: Path) -> None:
    p = tmp_path / "pk.tape"
    write(p, [numbered(0)])
    ix = streamtape.load(p)[0]
    again = pickle.loads(pickle.dumps(ix))
    assert again == ix and isinstance(again.response.pieces, Pieces)


# --------------------------------------------------------------------------
# Matching through digests


_values = st.one_of(st.integers(-3, 3), st.sampled_from([1.0, 2.0, 0.5, -0.0, True, False, None, "x", "REDACTED"]))
_bodies = st.one_of(
    st.dictionaries(st.sampled_from(["model", "n", "user", "stream"]), _values, max_size=3).map(
        lambda d: json.dumps(d).encode()),
    st.sampled_from([b"", b"plain text", b"[1, 2.0]", b"[1, 2]", b"{not json"]),
)
_requests = st.tuples(
    st.sampled_from(["GET", "POST"]),
    st.sampled_from(["/v1/a", "/v1/b"]),
    st.sampled_from(["", "?q=1", "?q=1&r=2", "?r=2&q=1", "?q=REDACTED", "?q=2"]),
    _bodies,
)


def _ix(req: tuple[str, str, str, bytes], k: int) -> Interaction:
    method, path, query, body = req
    return interaction([sse({"k": k})], method=method, url=f"https://h.test{path}{query}", body=body,
                       labels={"k": str(k)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_requests, min_size=1, max_size=12), st.lists(_requests, min_size=1, max_size=8),
       st.sampled_from([(), ("user",), ("n",)]), st.booleans(), st.booleans())
def test_the_indexed_matcher_answers_every_request_as_the_matcher_does(
    tmp_path: Path, recorded: list[tuple[str, str, str, bytes]], incoming: list[tuple[str, str, str, bytes]],
    ignore: tuple[str, ...], strict: bool, strict_nulls: bool,
) -> None:
    p = tmp_path / f"m{random.random()}.tape"
    write(p, [_ix(r, k) for k, r in enumerate(recorded)])
    cas = streamtape.load(p)
    plain = Matcher(list(cas), ignore_fields=ignore, strict=strict, strict_nulls=strict_nulls)
    chain, _ = interactions_of([cas])
    assert isinstance(chain, CassetteChain)
    indexed = matcher_for(chain, indexed_min=0, ignore_fields=ignore, strict=strict, strict_nulls=strict_nulls)
    assert isinstance(indexed, IndexedMatcher)
    for method, path, query, body in incoming * 2:  # twice: repeats and strict run-outs too
        url = f"http://127.0.0.1:1{path}{query}"
        outcomes: list[tuple[str, object, object]] = []
        for m in (plain, indexed):
            try:
                i, ix = m.match_indexed(method, url, (), body)
                outcomes.append(("match", i, ix))
            except NoMatchError as e:
                outcomes.append(("miss", str(e), e.closest.index if e.closest else None))
        assert outcomes[0] == outcomes[1], (method, url, body)
    assert plain.used == indexed.used and plain.received == indexed.received


def test_request_digests_follow_matching_not_the_bytes() -> None:
    d = request_digest
    assert d("post", "http://a/x?b=2&a=1", b'{"a": 1, "b": [true, 2.0]}') == d(
        "POST", "http://z:9/x?a=1&b=2", b'{"b":[true,2],"a":1.0}')
    assert d("POST", "http://a/x", b'{"a": true}') != d("POST", "http://a/x", b'{"a": 1}')
    assert d("POST", "http://a/x", b"[1, 2]") != d("POST", "http://a/x", b"[2, 1]")
    assert d("POST", "http://a/x", b"not json") != d("POST", "http://a/x", b"not  json")
    assert d("POST", "http://a/x?k=REDACTED", b"") == 0 and d("POST", "http://a/x", b'{"k": "REDACTED"}') == 0
    assert d("POST", "http://a/x", b'{"k": "REDACTED"}', recorded=False) != 0


def test_an_in_memory_cassette_and_loose_interactions_are_still_held_as_before() -> None:
    ixs = [chat_ix(tag=str(k)) for k in range(3)]
    items, names = interactions_of([streamtape.Cassette(ixs), ixs[0]])
    assert isinstance(items, list) and items == [*ixs, ixs[0]] and names == [None] * 4


def test_the_compact_writer_path_writes_what_the_piece_path_writes() -> None:
    ps = tuple(Piece(5 * MS + i * MS, b"x" * i) for i in range(6))
    from streamtape.cassette.records import data_record

    assert data_record(3, ps, 2 * MS) == data_record(3, Pieces.of(ps), 2 * MS)


def test_a_cassette_written_by_the_previous_streamtape_loads_unchanged(tmp_path: Path) -> None:
    """A v1 cassette byte for byte as the writer before the index wrote it."""
    p = tmp_path / "old.tape"
    recs = [
        {"format": "streamtape", "version": 1, "writer": "0.1.0", "created": 1.0},
        {"t": "begin", "id": 0, "request": {"method": "POST", "url": "http://h/v1", "http_version": "HTTP/1.1",
                                            "headers": [["A", "1"]], "body": b"{}", "started_at": 2.0},
         "response": {"status": 200, "reason": "OK", "http_version": "HTTP/1.1", "headers": [],
                      "framing": "chunked", "headers_at_ns": 5}, "labels": {"x": "y"}},
        ["d", 0, b"abcdef", [2, 4], [10, 5]],
        {"t": "end", "id": 0, "outcome": "complete", "error": None, "end_ns": 20},
    ]
    p.write_bytes(b"".join(msgpack.packb(r, use_bin_type=True) for r in recs))
    (ix,) = streamtape.load(p)
    assert ix == Interaction(
        Request("POST", "http://h/v1", headers=(("A", "1"),), body=b"{}", started_at=2.0),
        Response(200, "OK", pieces=(Piece(10, b"ab"), Piece(15, b"cdef")), headers_at_ns=5),
        end_ns=20, labels={"x": "y"},
    )
