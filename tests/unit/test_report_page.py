"""The report page of ``show --html`` as values: what it draws and how it escapes (the page in
a real browser: tests/system/test_show_html.py)."""

from __future__ import annotations

from dataclasses import replace
from html.parser import HTMLParser

from streamtape.cassette.model import Setup
from streamtape.cassette.pieces import Piece
from streamtape.diff import compare, render_html
from streamtape.render.common import BASE_CSS, MONO, SANS
from streamtape.render.report import largest_gaps, render_report
from tests.support.builders import MS, chat_events, chat_ix


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(page: str) -> Tags:
    t = Tags()
    t.feed(page)
    return t


def with_times(ms: list[int]):
    ix = chat_ix()
    assert ix.response is not None
    pieces = [Piece(t * MS, p.data) for t, p in zip(ms, ix.pieces, strict=False)]
    return replace(ix, response=replace(ix.response, pieces=pieces))


def test_the_largest_gaps_are_the_longest_silences_between_pieces_largest_first() -> None:
    ix = with_times([10, 20, 90, 95, 135, 140, 141, 300])
    assert largest_gaps(ix) == [(7, 159 * MS), (2, 70 * MS), (4, 40 * MS)]
    assert largest_gaps(ix, 1) == [(7, 159 * MS)]


def test_recorded_markup_in_a_stream_is_text_in_the_page_never_an_element() -> None:
    words = ["<script>alert(1)</script>", "</textarea>", "<img src=x onerror=alert(2)>", "日本"]
    ix = chat_ix(events=chat_events(words))
    page = render_report([ix], name="<em>evil</em>.tape")
    dom = parsed(page)
    assert not {"script", "textarea", "img", "em"} & set(dom.tags)
    text = "".join(dom.text)
    assert "".join(words) in text
    assert "<em>evil</em>.tape" in text


def test_every_piece_is_one_tick_and_one_raw_span_and_the_setup_marks_are_shown() -> None:
    ix = replace(chat_ix(), setup=Setup(wait_ns=3 * MS, tcp_ns=1 * MS, tls_ns=2 * MS))
    page = render_report([ix], name="x.tape")
    n = len(ix.pieces)
    assert page.count('class="tick"') == n
    assert page.count('<span class="pc ') == n
    assert "new upstream connection: tcp 1.0 ms, tls 2.0 ms" in page


def test_both_pages_carry_a_cjk_capable_face_in_their_font_stacks() -> None:
    assert "Noto Sans CJK SC" in SANS and "Noto Sans Mono CJK SC" in MONO
    assert SANS in BASE_CSS and MONO in BASE_CSS
    ix = chat_ix()
    for page in (render_report([ix], name="x.tape"), render_html(compare(ix, ix))):
        assert BASE_CSS in page
        assert "default-src 'none'" in page
