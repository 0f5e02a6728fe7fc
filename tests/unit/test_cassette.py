"""The .tape format: round trips, compactness, crash recovery and every kind of bad file."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamtape
from streamtape import CassetteError, Interaction, Outcome, Piece, Request, Response
from streamtape.capture.recorder import Recorder, Redaction
from streamtape.cassette.frames import frame
from streamtape.cassette.reader import load_many
from streamtape.cassette.records import FORMAT_VERSION, NEWEST_VERSION, Record, record_kind
from streamtape.cassette.writer import BackgroundWriter, CassetteWriter
from streamtape.wire import Framing


def make_ix(n: int = 3, size: int = 20, gap_ns: int = 10_000_000, **kw) -> Interaction:
    chunks = tuple(Piece(1_000_000 + i * gap_ns, bytes([65 + i % 26]) * size) for i in range(n))
    return Interaction(
        Request("POST", "http://127.0.0.1:8080/v1/chat/completions", headers=(("A", "1"), ("A", "2")), body=b'{"x":1}', started_at=1.5),
        Response(200, "OK", headers=(("Content-Type", "text/event-stream"),), pieces=chunks, headers_at_ns=900_000),
        end_ns=chunks[-1].at_ns + 5 if chunks else 7,
        labels={"backend": "vllm"},
        **kw,
    )


def test_round_trip_keeps_every_field_and_duplicate_headers(tmp_path: Path) -> None:
    ix = make_ix()
    p = tmp_path / "a.tape"
    streamtape.save(p, [ix, make_ix(1, outcome="upstream_closed", error="incomplete chunked read")])
    cas = streamtape.load(p)
    assert len(cas) == 2 and cas.warnings == []
    assert cas[0] == ix
    assert cas[0].request.headers == (("A", "1"), ("A", "2"))
    assert cas[0].response is not None
    assert cas[0].response.body == b"".join(c.data for c in ix.pieces)
    assert cas[1].outcome == "upstream_closed" and cas[1].error == "incomplete chunked read"
    assert cas.header["format"] == "streamtape" and cas.header["version"] == FORMAT_VERSION
    assert cas.header["writer"] == streamtape.__version__ and cas.header["created"] > 0


def test_interaction_without_response_round_trips(tmp_path: Path) -> None:
    ix = Interaction(Request("GET", "http://h/x"), None, Outcome.UPSTREAM_ERROR, "connection refused", 3, {})
    p = tmp_path / "n.tape"
    streamtape.save(p, [ix])
    assert streamtape.load(p)[0] == ix


def test_outcomes_and_framings_are_stored_as_plain_strings_and_load_as_enum_members(tmp_path: Path) -> None:
    p = tmp_path / "v.tape"
    streamtape.save(p, [make_ix(1, outcome="upstream_closed", error="cut")])
    data = p.read_bytes()
    # msgpack fixstr headers: the same bytes every earlier streamtape wrote
    assert b"\xafupstream_closed" in data and b"\xa7chunked" in data
    ix = streamtape.load(p)[0]
    # An Outcome is a str enum: it equals its name as a string (mypy knows enums, not StrEnum equality).
    assert ix.outcome is Outcome.UPSTREAM_CLOSED and ix.outcome == "upstream_closed"  # type: ignore[comparison-overlap]
    assert ix.response is not None and ix.response.framing is Framing.CHUNKED
    assert f"{ix.outcome} {ix.response.framing}" == "upstream_closed chunked"


def test_an_unknown_outcome_is_refused_when_an_interaction_is_built() -> None:
    with pytest.raises(ValueError, match="finished_somehow"):
        Interaction(Request("GET", "http://h/"), None, "finished_somehow")  # type: ignore[arg-type]  # no Outcome, on purpose


def test_the_old_names_chunk_and_chunks_still_build_and_read_pieces_with_a_deprecation_warning() -> None:
    p = Piece(1, b"a")
    with pytest.warns(DeprecationWarning, match=r"Response\(chunks=\.\.\.\) is deprecated; use Response\(pieces=\.\.\.\)"):
        r = Response(200, chunks=(p,))
    with pytest.warns(DeprecationWarning, match="streamtape.Chunk is deprecated; use streamtape.cassette.Piece"):
        assert streamtape.Chunk is Piece
    with pytest.warns(DeprecationWarning, match="Response.chunks is deprecated"):
        assert r.pieces == r.chunks == (p,)
    with pytest.warns(DeprecationWarning):
        r2 = dataclasses.replace(r, chunks=(Piece(2, b"b"),))  # type: ignore[call-arg]  # the legacy name, on purpose
    assert r2.pieces == (Piece(2, b"b"),) and r2.status == 200
    assert dataclasses.replace(r2, pieces=()).pieces == ()
    ix = Interaction(Request("GET", "http://h/"), r)
    with pytest.warns(DeprecationWarning, match="Interaction.chunks is deprecated; use Interaction.pieces"):
        assert ix.pieces == ix.chunks == (p,)


@pytest.mark.parametrize(
    ("name", "value"),
    [("COMPLETE", Outcome.COMPLETE), ("UPSTREAM_CLOSED", Outcome.UPSTREAM_CLOSED),
     ("CLIENT_DISCONNECTED", Outcome.CLIENT_DISCONNECTED), ("UPSTREAM_ERROR", Outcome.UPSTREAM_ERROR),
     ("INTERRUPTED", Outcome.INTERRUPTED), ("OUTCOMES", tuple(Outcome)),
     ("CHUNKED", Framing.CHUNKED), ("CONTENT_LENGTH", Framing.CONTENT_LENGTH),
     ("CLOSE_DELIMITED", Framing.CLOSE_DELIMITED), ("FRAMES", Framing.FRAMES),
     ("FRAMINGS", (Framing.CHUNKED, Framing.CONTENT_LENGTH, Framing.CLOSE_DELIMITED, Framing.FRAMES)),
     ("Chunk", Piece)],
)
def test_the_old_module_constants_of_streamtape_cassette_keep_their_values_and_warn(name: str, value: object) -> None:
    import streamtape.cassette as cassette_module

    with pytest.warns(DeprecationWarning, match=f"streamtape.cassette.{name} is deprecated; use "):
        assert getattr(cassette_module, name) == value
    with pytest.raises(AttributeError, match="no attribute 'NOT_A_NAME'"):
        cassette_module.NOT_A_NAME  # noqa: B018


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10**10), st.binary(max_size=50)), max_size=40),
)
def test_any_timeline_round_trips_exactly(tmp_path_factory, pieces) -> None:
    at = 0
    chunks = []
    for gap, data in pieces:
        at += gap
        chunks.append(Piece(at, data))
    ix = Interaction(Request("GET", "http://h/"), Response(200, pieces=tuple(chunks)), end_ns=at)
    p = tmp_path_factory.mktemp("h") / "h.tape"
    streamtape.save(p, [ix])
    assert streamtape.load(p)[0].pieces == tuple(chunks)


@pytest.mark.parametrize("gap_ns", [100_000, 30_000_000, 300_000_000])
def test_ten_thousand_twenty_byte_pieces_cost_less_than_one_and_a_half_times_the_body(tmp_path: Path, gap_ns: int) -> None:
    # Written the way the recorder writes: batches of pieces as they age.
    p = tmp_path / "big.tape"
    w = BackgroundWriter(p)
    rec = Recorder(w.submit, w.new_id, flush_ns=100_000_000)
    rec.begin(1, Request("POST", "http://h/v1/chat/completions"), 0)
    rec.response_headers(1, 200, "OK", "HTTP/1.1", (("Content-Type", "text/event-stream"),), 1000)
    for i in range(10_000):
        rec.piece(1, b"data: %012d\n\n" % i, 2_000_000 + i * gap_ns)  # 20 bytes each
    rec.finish(1, Outcome.COMPLETE, None, 10**13)
    w.close()
    (ix,) = streamtape.load(p)
    assert len(ix.pieces) == 10_000 and all(len(c.data) == 20 for c in ix.pieces)
    # Each record carries a 14-byte checksummed frame (streamtape/cassette/frames.py): at
    # 300 ms apart every piece is a record of its own, 20 bytes of body and 14 of frame.
    assert os.path.getsize(p) < 1.6 * 200_000


def test_torn_last_record_is_dropped_and_reported(tmp_path: Path) -> None:
    p = tmp_path / "t.tape"
    streamtape.save(p, [make_ix(), make_ix()])
    whole = p.read_bytes()
    for cut in (1, 7, 40):
        p.write_bytes(whole[:-cut])
        cas = streamtape.load(p)
        assert len(cas) == 2
        # The last record was the second interaction's end: it loads as interrupted.
        assert cas[0].outcome == "complete" and cas[1].outcome == "interrupted"
        assert len(cas.warnings) == 1 and "torn last record" in cas.warnings[0] and str(p) in cas.warnings[0]


def test_every_prefix_of_a_cassette_loads_or_fails_cleanly(tmp_path: Path) -> None:
    p = tmp_path / "prefix.tape"
    streamtape.save(p, [make_ix(5), make_ix(2)])
    whole = p.read_bytes()
    for n in range(1, len(whole)):
        p.write_bytes(whole[:n])
        try:
            cas = streamtape.load(p)
        except CassetteError as e:
            assert "not a streamtape cassette" in str(e)  # only a torn header may fail
            continue
        assert len(cas) <= 2
        for ix in cas:
            assert ix.outcome in ("complete", "interrupted")


def test_appending_to_an_existing_cassette_keeps_what_was_there(tmp_path: Path) -> None:
    p = tmp_path / "ap.tape"
    streamtape.save(p, [make_ix(2)])
    with open(p, "ab") as f:  # a torn tail, as a killed recorder leaves: the start of a frame
        f.write(frame(msgpack.packb({"t": "data"}), 99)[:6])
    w = CassetteWriter(p)
    assert w.dropped_tail == 6
    w.add(make_ix(3))
    w.close()
    cas = streamtape.load(p)
    assert [len(ix.pieces) for ix in cas] == [2, 3]
    assert cas.warnings == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such cassette file"),
        (b"", "empty file"),
        (b"hello, I am a text file\n", "not a streamtape cassette"),
        (msgpack.packb({"format": "vcr", "version": 1}), "not a streamtape cassette"),
        (msgpack.packb({"format": "streamtape", "version": NEWEST_VERSION + 1}), f"format version {NEWEST_VERSION + 1} is newer"),
        (msgpack.packb({"format": "streamtape", "version": 1}) + msgpack.packb(["d", 9, b"", [], []]), "unknown interaction id 9"),
        (msgpack.packb({"format": "streamtape", "version": 1}) + msgpack.packb({"t": "begin", "id": 0}), "corrupt cassette: record at byte 28: missing field 'request'"),
        (msgpack.packb({"format": "streamtape", "version": 1}) + b"\xc1" * 8, "corrupt cassette"),
    ],
)
def test_bad_files_raise_one_error_naming_the_file_and_the_problem(tmp_path: Path, content: bytes | None, message: str) -> None:
    p = tmp_path / "bad.tape"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(CassetteError) as e:
        list(streamtape.load(p))  # structure is checked on load, a record's fields when it is read
    assert message in str(e.value)
    assert str(p) in str(e.value)
    assert "\n" not in str(e.value)


def test_data_in_the_middle_that_does_not_add_up_is_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "m.tape"
    recs = [
        {"format": "streamtape", "version": 1},
        {"t": "begin", "id": 0, "request": {"method": "GET", "url": "http://h/", "http_version": "HTTP/1.1", "headers": [], "body": b"", "started_at": 0.0},
         "response": {"status": 200, "reason": "OK", "http_version": "HTTP/1.1", "headers": [], "framing": "chunked", "headers_at_ns": 0}, "labels": {}},
        ["d", 0, b"abc", [5], [1]],
    ]
    p.write_bytes(b"".join(msgpack.packb(r, use_bin_type=True) for r in recs))
    cas = streamtape.load(p)  # a data record's contents are checked when its pieces are read
    with pytest.raises(CassetteError, match=r"record at byte \d+: piece sizes do not add up") as e:
        list(cas[0].pieces)
    assert str(p) in str(e.value)


def test_load_many_reads_folders_sorted_and_rejects_an_empty_folder(tmp_path: Path) -> None:
    streamtape.save(tmp_path / "b.tape", [make_ix(2)])
    streamtape.save(tmp_path / "a.tape", [make_ix(1)])
    cass = load_many([tmp_path])
    assert [c.path and c.path.name for c in cass] == ["a.tape", "b.tape"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CassetteError, match=r"holds no \.tape"):
        load_many([empty])


def test_recorder_redacts_before_anything_reaches_the_sink() -> None:
    records: list[Record] = []
    rec = Recorder(records.extend, iter(range(100)).__next__, redaction=Redaction.build(body_fields=["password"]))
    rec.begin(
        "f",
        Request("POST", "http://h/v1?api_key=s1&token=s2&keep=1", headers=(("Authorization", "s3"), ("Api-Key", "s4"), ("Content-Type", "application/json")), body=b'{"a": {"password": "s5"}}'),
        0,
    )
    rec.response_headers("f", 200, "OK", "HTTP/1.1", (("Set-Cookie", "s6"),), 10)
    rec.piece("f", b"data: x\n\n", 20)
    rec.finish("f", Outcome.COMPLETE, None, 30)
    blob = msgpack.packb(records, use_bin_type=True)
    for s in (b"s1", b"s2", b"s3", b"s4", b"s5", b"s6"):
        assert s not in blob
    assert b"keep=1" in blob


def test_recorder_hands_off_pieces_in_batches_no_older_than_the_longest_flush_interval() -> None:
    records: list[Record] = []
    kinds = lambda: [record_kind(r) for r in records]  # noqa: E731
    rec = Recorder(records.extend, iter(range(100)).__next__, flush_ns=100, max_flush_ns=1000, min_batch=3)
    rec.begin("f", Request("GET", "http://h/"), 0)
    rec.response_headers("f", 200, "OK", "HTTP/1.1", (), 1)
    rec.piece("f", b"a", 10)
    rec.piece("f", b"b", 20)
    rec.piece("f", b"c", 50)
    assert kinds() == ["begin"]  # 40 ns old: still batched
    rec.piece("f", b"d", 150)  # 140 ns old and 4 pieces: out it goes
    data = records[1]
    assert kinds() == ["begin", "data"] and isinstance(data, list) and data[3] == [1] * 4
    rec.piece("f", b"e", 300)
    rec.tick(900)
    assert kinds() == ["begin", "data"]  # a lone piece waits for company...
    rec.tick(1300)
    assert kinds() == ["begin", "data", "data"]  # ...but never longer than max_flush_ns
    rec.piece("f", b"y", 1400)
    out = rec.close(1500)
    assert out[0].outcome == "interrupted" and b"".join(c.data for c in out[0].pieces) == b"abcdey"
    assert kinds() == ["begin", "data", "data", "data", "end"]


def test_background_writer_keeps_the_failure_for_the_recorder_to_report(tmp_path: Path) -> None:
    w = BackgroundWriter(tmp_path / "w.tape")
    w.writer._f.close()  # as if the disk went away
    w.submit([{"t": "end", "id": 0, "outcome": "complete", "error": None, "end_ns": 1}])
    w.flush()
    assert isinstance(w.failure, ValueError)
