"""Damaged and hostile cassette files: a CassetteError or a recovered prefix, never any other
exception, and never memory beyond a small multiple of the file's size.

Every file is read all the way through (:func:`read_everything`: every interaction,
its body and pieces, a session's messages) under ``tracemalloc``, whose peak counts
what Python and msgpack allocate (a list msgpack presizes for a claimed length
included). The bound is :data:`MEMORY_FACTOR` times the file's size plus
:data:`MEMORY_FIXED`: decoded values cost more than their msgpack bytes (an empty
map is one byte on disk and a 64-byte dict in memory), never more than that.

Hypothesis drives random files, truncated and bit-flipped cassettes (with and
without an index, with WebSocket sessions) and length fields that claim gigabytes
anywhere a length can be; ``tests/corpus/fuzz_cassette.py`` runs the same checks
under atheris, coverage-guided (tests/system/test_fuzz_harnesses.py runs it a bounded
number of times, so CI runs it).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamtape
from streamtape import CassetteError
from streamtape.cassette.records import interaction_records
from tests.support.builders import chat_ix
from tests.support.cassette_reading import (
    MEMORY_FACTOR,
    MEMORY_FIXED,
    cassette_bytes,
    originals,
    read_everything,
)

HEADER = msgpack.packb({"format": "streamtape", "version": 1, "writer": "0.1.0", "created": 1.0})


def outcome(path: Path) -> tuple[streamtape.Cassette | None, int]:
    """The cassette read through (None: a CassetteError), and the peak memory it took."""
    tracemalloc.start()
    try:
        try:
            cas: streamtape.Cassette | None = read_everything(path)
        except CassetteError as e:
            assert str(path) in str(e) and "\n" not in str(e)
            cas = None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = path.stat().st_size
    assert peak <= MEMORY_FACTOR * size + MEMORY_FIXED, f"{peak} bytes for a {size}-byte file"
    return cas, peak


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(st.binary(max_size=3000), st.booleans())
def test_random_bytes_are_an_error_or_a_cassette_and_never_more_memory(tmp: Path, data: bytes, after_header: bool) -> None:
    p = tmp / "random.tape"
    p.write_bytes(HEADER + data if after_header else data)
    outcome(p)


@FUZZ
@given(st.booleans(), st.integers(min_value=0), st.data())
def test_a_cassette_cut_anywhere_gives_a_prefix_of_what_was_recorded(tmp: Path, index: bool, cut: int, data: st.DataObject) -> None:
    whole = cassette_bytes(tmp, index)
    n = cut % (len(whole) + 1)
    p = tmp / "cut.tape"
    p.write_bytes(whole[:n])
    cas, _ = outcome(p)
    if cas is None:
        return
    recorded = originals()
    assert len(cas) <= len(recorded)
    for got, want in zip(cas, recorded, strict=False):
        assert got.request == want.request
        assert list(got.pieces) == list(want.pieces)[: len(got.pieces)]
        assert list(got.messages) == list(want.messages)[: len(got.messages)]
        assert got.outcome in (want.outcome, "interrupted")


@FUZZ
@given(st.booleans(), st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 7)), min_size=1, max_size=8))
def test_flipped_bits_give_an_error_or_a_cassette_never_another_exception(tmp: Path, index: bool, flips: list[tuple[int, int]]) -> None:
    data = bytearray(cassette_bytes(tmp, index))
    for pos, bit in flips:
        data[pos % len(data)] ^= 1 << bit
    p = tmp / "flipped.tape"
    p.write_bytes(bytes(data))
    outcome(p)


@FUZZ
@given(st.booleans(), st.integers(min_value=0), st.binary(min_size=1, max_size=40))
def test_overwritten_bytes_give_an_error_or_a_cassette(tmp: Path, index: bool, pos: int, junk: bytes) -> None:
    data = bytearray(cassette_bytes(tmp, index))
    at = pos % len(data)
    data[at : at + len(junk)] = junk
    p = tmp / "junk.tape"
    p.write_bytes(bytes(data))
    outcome(p)


# Every msgpack length field at its widest, claiming about 4 GiB.
CLAIMS = {
    "bin32": b"\xc6\xff\xff\xff\xf0",
    "str32": b"\xdb\xff\xff\xff\xf0",
    "array32": b"\xdd\xff\xff\xff\xf0",
    "map32": b"\xdf\xff\xff\xff\xf0",
    "ext32": b"\xc9\xff\xff\xff\xf0\x01",
}


def _places(claim: bytes) -> dict[str, bytes]:
    begin = interaction_records(chat_ix(), 0)[0]
    assert isinstance(begin, dict)
    packed_begin = msgpack.packb(begin, use_bin_type=True)
    body = begin["request"]["body"]
    at_body = packed_begin.index(msgpack.packb(body, use_bin_type=True))
    return {
        "as the header": claim + b"\x00" * 64,
        "inside the header": b"\x82\xa6format" + claim + b"\x00" * 64,
        "as a record": HEADER + claim + b"\x00" * 64,
        "as a record, then records": HEADER + claim + packed_begin * 3,
        "as a request body": HEADER + packed_begin[:at_body] + claim + packed_begin[at_body + 1 :],
        "as a data record's sizes": HEADER + packed_begin + b"\x95\xa1d\x00\xc4\x01x" + claim + b"\x91\x01",
        "as an index": HEADER.replace(b"\xa7version\x01", b"\xa7version\x03") + packed_begin
        + b"\x94\xa1x" + claim + b"\xcf" + (len(HEADER) + len(packed_begin)).to_bytes(8, "big") + b"\xce\x00\x00\x00\x00",
    }


@pytest.mark.parametrize("kind", sorted(CLAIMS))
def test_a_length_claiming_gigabytes_is_refused_before_anything_is_allocated(tmp: Path, kind: str) -> None:
    for place, content in _places(CLAIMS[kind]).items():
        p = tmp / "claim.tape"
        p.write_bytes(content)
        cas, peak = outcome(p)
        assert peak < 1024 * 1024, (kind, place, peak)
        if cas is not None:  # read as a torn last record: what came before it, and a warning
            assert cas.warnings and "torn last record" in cas.warnings[0], (kind, place)
