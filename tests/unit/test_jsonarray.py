"""The streamed JSON array parser (Gemini without ``alt=sse``): elements over many
lines, any split, strings that hold brackets, the closing ``]``, a cut."""

from __future__ import annotations

import itertools
import json

import pytest

from streamtape.check import check
from streamtape.shapes import analyze, event_spans
from streamtape.shapes.jsonarray import JSONArrayParser, parse_json_array
from tests.support.hosted import GEMINI_PATH, JSON, gemini_array, gemini_chunks, ix

TRICKY = [{"text": 'a ] } [ { " \\ inside', "n": [1, [2, {"x": "]"}]]}, {"k": "\\"}, {"e": "晴れ"}]


def _body(values: list[object]) -> bytes:
    return b"[" + b"\r\n,".join(json.dumps(v, indent=2, ensure_ascii=False).encode()
                                for v in values) + b"\n]"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_elements_come_back_whole_and_their_spans_cover_the_body_under_any_split(size):
    body = _body(TRICKY)
    p = JSONArrayParser()
    got = []
    for i in range(0, len(body), size):
        got.extend(p.feed(body[i : i + size]))
    assert [e.value for e in got] == TRICKY and all(e.valid for e in got)
    assert got[0].start == 0 and all(a.end == b.start for a, b in itertools.pairwise(got))
    assert p.closed and p.close_span == (got[-1].end, len(body)) and p.pending == b""


def test_a_cut_inside_an_element_is_pending_and_a_cut_between_elements_is_not():
    body = _body(TRICKY)
    inside = JSONArrayParser()
    inside.feed(body[:40])
    assert inside.pending and not inside.closed
    between = JSONArrayParser()
    (_, e2, _) = parse_json_array([body])
    between.feed(body[: e2.end] + b"\r\n,")
    assert between.pending == b""


def test_an_element_that_does_not_parse_is_reported_invalid():
    (e,) = parse_json_array([b'[{"a": tru}]'])
    assert not e.valid and e.raw == '{"a": tru}'


def test_a_body_that_is_not_an_array_is_said_to_be_so():
    p = JSONArrayParser()
    assert p.feed(b'{"a": 1}') == [] and p.error is not None and "not a JSON array" in p.error


def test_a_gemini_array_cut_between_elements_is_no_done_without_a_cut_event():
    pieces = gemini_array(gemini_chunks())[:-1]  # the closing ] never came
    codes = [f.code for f in check(ix(pieces, GEMINI_PATH, JSON))]
    assert "no-done" in codes and "cut-event" not in codes


def test_a_gemini_array_cut_inside_an_element_is_a_cut_event():
    body = b"".join(gemini_array(gemini_chunks()))
    a = analyze(ix([body[: len(body) // 2]], GEMINI_PATH, JSON))
    assert a.shape == "gemini" and a.wire == "jsonarray" and a.partial_tail
    assert "cut-event" in {f.code for f in check(ix([body[: len(body) // 2]], GEMINI_PATH, JSON))}


def test_event_spans_of_an_array_are_its_elements_then_the_closing_bracket():
    pieces = gemini_array(gemini_chunks())
    body = b"".join(pieces)
    spans = event_spans(body, "jsonarray")
    assert [body[s.start : s.end] for s in spans] == pieces
    assert [s.kind for s in spans][-1] == "done"


def test_an_element_starting_with_a_vertical_tab_moves_the_parser_on() -> None:
    # \x0b is white space to the scalar-end pattern (\s) but not to the skip between
    # elements: the parser once looped for ever on it (atheris, seed 1).
    elements = JSONArrayParser().feed(b"[1,\x0b,\x0c2,3]")
    assert [e.raw for e in elements] == ["1", "\x0b", "\x0c2", "3"]
    assert [e.valid for e in elements] == [True, False, False, True]  # JSON's white space has no \f
