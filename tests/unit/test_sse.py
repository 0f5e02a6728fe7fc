"""The incremental SSE parser against the WHATWG rules, under every split of the input."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtape import Interaction, Piece, Request, Response
from streamtape.shapes import Span, SSEEvent, SSEIgnored, SSEParser, event_spans, parse_sse, wire_of
from tests.support.sse_reference import reference_events


def events(items):
    return [(e.event, e.data, e.id, e.retry) for e in items if isinstance(e, SSEEvent)]


def feed_split(data: bytes, cuts: list[int]):
    p = SSEParser()
    out = []
    prev = 0
    for i, c in enumerate([*sorted(set(cuts)), len(data)]):
        out.extend(p.feed(data[prev:c], i))
        prev = c
    out.extend(p.close())
    return out, p


def test_basic_events_multiline_data_and_fields():
    body = b"event: add\ndata: 1\ndata:2\nid: 7\nretry: 1500\n\ndata: x\n\n"
    assert events(parse_sse([body])) == [("add", "1\n2", "7", 1500), ("message", "x", "7", None)]


def test_all_three_line_endings_give_the_same_events():
    lf = b"data: a\ndata: b\n\nevent: e\ndata: c\n\n"
    for ending in (b"\r\n", b"\r"):
        p = SSEParser()
        assert events(p.feed(lf.replace(b"\n", ending))) == events(parse_sse([lf]))
    assert SSEParser().feed(b"x") == []


def test_cr_at_end_of_one_piece_and_lf_at_start_of_next_is_one_line_ending():
    p = SSEParser()
    out = p.feed(b"data: a\r") + p.feed(b"\ndata: b\r") + p.feed(b"\n\r") + p.feed(b"\n")
    assert events(out) == [("message", "a\nb", "", None)]
    assert p.line_endings == {"\r\n"}


def test_lone_cr_then_blank_line_in_next_piece_dispatches():
    p = SSEParser()
    assert p.feed(b"data: a\r", 1) == []
    out = p.feed(b"\r", 2)
    assert events(out) == [("message", "a", "", None)]
    assert out[0].at_ns == 2


def test_comments_are_not_events_but_are_reported():
    items = parse_sse([b": keep-alive\n\ndata: x\n: inside\n\n"])
    assert isinstance(items[0], SSEIgnored) and items[0].comments == ("keep-alive",)
    assert items[0].is_comment
    assert isinstance(items[1], SSEEvent) and items[1].comments == ("inside",)


def test_block_without_data_is_not_dispatched():
    items = parse_sse([b"event: ping\n\nretry: 10\n\ndata: y\n\n"])
    assert events(items) == [("message", "y", "", None)]
    assert [i.fields for i in items if isinstance(i, SSEIgnored)] == [("event",), ("retry",)]


def test_leading_bom_is_dropped_even_when_split():
    body = b"\xef\xbb\xbfdata: a\n\n"
    for cut in range(1, 4):
        out, _ = feed_split(body, [cut])
        assert events(out) == [("message", "a", "", None)]
    # only one BOM is dropped, and only at the start
    assert events(parse_sse([b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n"])) == []


def test_final_event_without_blank_line_is_not_dispatched():
    p = SSEParser()
    assert events(p.feed(b"data: a\n\ndata: b\n")) == [("message", "a", "", None)]
    assert p.close() == []
    assert p.in_event


def test_invalid_utf8_is_replaced_not_raised():
    items = parse_sse([b"data: \xff\xfe ok \xe6\x97\n\n"])
    assert events(items) == [("message", "\ufffd\ufffd ok \ufffd", "", None)]


def test_id_with_nul_is_ignored_and_id_persists():
    items = parse_sse([b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\ndata: c\n\n"])
    assert [e[2] for e in events(items)] == ["1", "1", "1"]


def test_field_without_colon_and_unknown_fields():
    items = parse_sse([b"data\ndata\nfoo: bar\n\n"])
    assert events(items) == [("message", "\n", "", None)]


def test_retry_needs_ascii_digits():
    items = parse_sse([b"retry: 12a\ndata: a\n\nretry: \xd9\xa3\ndata: b\n\nretry:5\ndata: c\n\n"])
    assert [e[3] for e in events(items)] == [None, None, 5]


def test_each_event_carries_the_offset_of_the_piece_that_completed_it():
    p = SSEParser()
    assert p.feed(b"data: a\n", 10) == []
    out = p.feed(b"\ndata: b\n\ndata:", 20)
    assert [(e.data, e.at_ns) if isinstance(e, SSEEvent) else e for e in out] == [("a", 20), ("b", 20)]
    assert [(e.data, e.at_ns) if isinstance(e, SSEEvent) else e for e in p.feed(b" c\n\n", 30)] == [("c", 30)]


SMALL = [
    b"\xef\xbb\xbfdata: a\r\n\r\n: c\r\r\nevent: x\rdata: \xe6\x97\xa5\r\r",
    b'data: {"a": "\xf0\x9f\x98\x80"}\n\n: keep-alive\n\nid: 5\nretry: 30\ndata: [DONE]\n\ndata: tail',
    b"data\r\ndata:\r\n\r\n\n\n\r\revent:e\nid:\x00\ndata: z\n\n",
]


@pytest.mark.parametrize("body", SMALL)
def test_every_split_point_gives_the_same_events(body):
    whole = events(parse_sse([body]))
    assert whole == reference_events(body)
    for i in range(len(body) + 1):
        out, _ = feed_split(body, [i])
        assert events(out) == whole, i
        for j in range(i, len(body) + 1, 3):
            out, _ = feed_split(body, [i, j])
            assert events(out) == whole, (i, j)


@pytest.mark.parametrize("body", SMALL)
def test_byte_by_byte_gives_the_same_events_and_line_endings(body):
    p = SSEParser()
    out = []
    for i in range(len(body)):
        out.extend(p.feed(body[i : i + 1]))
    p.close()
    q = SSEParser()
    q.feed(body)
    q.close()
    assert events(out) == events(parse_sse([body]))
    assert p.line_endings == q.line_endings


TOKENS = [
    b"data:", b"data: ", b"data", b"event:", b"event: x", b"id:", b"id: 1", b"retry:",
    b"retry: 15", b":", b": keep-alive", b"\n", b"\r", b"\r\n", b"\n\n", b"a", b" ",
    b"\xe6\x97\xa5", b"\xff", b"\x00", b"[DONE]", b"{}", b"\xef\xbb\xbf", b"\xe6",
]
streams = st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(body=streams, cuts=st.lists(st.integers(0, 400), max_size=8))
def test_hypothesis_any_split_matches_the_reference(body, cuts):
    out, _ = feed_split(body, [c for c in cuts if c <= len(body)])
    assert events(out) == reference_events(body)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=6))
def test_fuzz_arbitrary_bytes_never_raise_and_match_the_reference(body, cuts):
    out, _ = feed_split(body, [c for c in cuts if c <= len(body)])
    assert events(out) == reference_events(body)
    spans = event_spans(body, "sse")
    assert all(a.end == b.start for a, b in itertools.pairwise(spans))


# ---- spans


def test_spans_cover_events_contiguously_with_kinds():
    body = b": ping\n\ndata: a\n\n\n\ndata: [DONE]\n\ndata: part"
    spans = event_spans(body, "sse")
    assert spans == [Span(0, 8, "comment"), Span(8, 17, "event"), Span(17, 33, "done")]
    assert body[spans[1].start : spans[1].end] == b"data: a\n\n"
    assert body[spans[-1].end :] == b"data: part"


def test_spans_with_crlf_and_bom():
    body = b"\xef\xbb\xbfdata: a\r\n\r\ndata: [DONE]\r\n\r\n"
    assert event_spans(body, "sse") == [Span(0, 14, "event"), Span(14, 30, "done")]


@settings(max_examples=200, deadline=None)
@given(body=streams)
def test_spans_rejoined_reparse_to_the_same_events(body):
    spans = event_spans(body, "sse")
    joined = b"".join(body[s.start : s.end] for s in spans)
    assert joined == body[: spans[-1].end] if spans else True
    # feeding the spans one by one gives one dispatched-or-ignored block per span
    p = SSEParser()
    per_span = [p.feed(body[s.start : s.end]) for s in spans]
    assert all(len(x) == 1 for x in per_span)
    assert events([x[0] for x in per_span]) == events(parse_sse([body]))


def test_unknown_wire_is_a_value_error():
    with pytest.raises(ValueError, match="unknown wire"):
        event_spans(b"", "xml")


# ---- wire_of


def ix(ct: str | None, body: bytes, path: str = "/x") -> Interaction:
    headers = (("Content-Type", ct),) if ct else ()
    return Interaction(
        Request("POST", f"http://127.0.0.1{path}"),
        Response(200, headers=headers, pieces=(Piece(1, body),)),
    )


def test_wire_of_from_content_type_and_sniffing():
    assert wire_of(ix("text/event-stream; charset=utf-8", b"")) == "sse"
    assert wire_of(ix("application/x-ndjson", b"")) == "ndjson"
    assert wire_of(ix(None, b": hi\n\ndata: 1\n\n")) == "sse"
    assert wire_of(ix("text/plain", b'{"a":1}\n{"a":2}\n')) == "ndjson"
    assert wire_of(ix("application/json", b'{"a": 1}')) is None
    assert wire_of(Interaction(Request("GET", "http://127.0.0.1/"), None)) is None
