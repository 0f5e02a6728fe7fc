"""The incremental NDJSON parser: one JSON value per line, in any split."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtape.shapes import NDJSONParser, Span, event_spans, parse_ndjson


def values(lines):
    return [(ln.valid, ln.value if ln.valid else ln.raw) for ln in lines]


def feed_split(data: bytes, cuts: list[int]):
    p = NDJSONParser()
    out = []
    prev = 0
    for i, c in enumerate([*sorted(set(cuts)), len(data)]):
        out.extend(p.feed(data[prev:c], i))
        prev = c
    out.extend(p.close())
    return out


def reference(data: bytes):
    out = []
    for line in data.split(b"\n"):
        line = line.removesuffix(b"\r")
        if not line.strip():
            continue
        raw = line.decode("utf-8", "replace")
        try:
            out.append((True, json.loads(raw)))
        except ValueError:
            out.append((False, raw))
    return out


def test_lines_with_and_without_final_newline_blank_lines_skipped():
    assert values(parse_ndjson([b'{"a":1}\n\n  \n{"b":2}'])) == [(True, {"a": 1}), (True, {"b": 2})]
    assert values(parse_ndjson([b'{"a":1}\r\n{"b":2}\n'])) == [(True, {"a": 1}), (True, {"b": 2})]


def test_last_line_is_only_read_at_close():
    p = NDJSONParser()
    assert values(p.feed(b'{"a":1}\n{"b"', 5)) == [(True, {"a": 1})]
    assert p.feed(b":2}", 9) == []
    [last] = p.close()
    assert last.value == {"b": 2} and last.at_ns == 9 and not last.terminated


def test_invalid_json_line_is_reported_not_raised():
    lines = parse_ndjson([b'{"a":1}\nnot json\n{"b":\xff}\n'])
    assert values(lines) == [(True, {"a": 1}), (False, "not json"), (False, '{"b":\ufffd}')]


def test_each_line_carries_the_offset_of_the_piece_that_completed_it():
    p = NDJSONParser()
    assert p.feed(b'{"a":', 1) == []
    assert [ln.at_ns for ln in p.feed(b'1}\n{"b":2}\n', 2)] == [2, 2]


def test_spans_include_newline_and_leading_blank_lines():
    body = b'{"a":1}\n\n{"b":2}\r\n{"c"'
    assert event_spans(body, "ndjson") == [Span(0, 8, "event"), Span(8, 18, "event")]
    # a complete last line without newline is a span; a cut one is not
    assert event_spans(b'{"a":1}\n{"b":2}', "ndjson")[-1] == Span(8, 15, "event")


SMALL = [b'{"a":"\xe6\x97\xa5"}\n\n{"b":[1,2]}\r\nnull\n  \n{"c":', b'\n{"done":true}']


@pytest.mark.parametrize("body", SMALL)
def test_every_split_point_gives_the_same_lines(body):
    whole = values(parse_ndjson([body]))
    assert whole == reference(body)
    for i in range(len(body) + 1):
        for j in range(i, len(body) + 1):
            assert values(feed_split(body, [i, j])) == whole


TOKENS = [b"{", b"}", b'"k"', b":", b"1", b",", b"\n", b"\r\n", b" ", b"\xe6\x97\xa5", b"\xff",
          b"[", b"]", b"null", b"\xe6"]


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(st.binary(max_size=200), st.lists(st.sampled_from(TOKENS), max_size=50).map(b"".join)),
       cuts=st.lists(st.integers(0, 200), max_size=6))
def test_fuzz_any_bytes_any_split_never_raise_and_match_reference(body, cuts):
    assert values(feed_split(body, [c for c in cuts if c <= len(body)])) == reference(body)
    spans = event_spans(body, "ndjson")
    assert all(a.end == b.start for a, b in itertools.pairwise(spans))
