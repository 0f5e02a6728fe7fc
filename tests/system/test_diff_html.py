"""``streamtape diff --html``: the page opened in real headless Chromium, and its SVG timelines.

The pairs are recorded through ``streamtape record`` from scripted upstreams on
127.0.0.1 (the ``recorded`` fixture of tests/conftest.py). Screenshots are
kept under ``test-artifacts/`` (gitignored).
"""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

import pytest

import streamtape
from streamtape.cassette.model import Outcome
from streamtape.cassette.pieces import Piece
from streamtape.diff import compare, diff_many, render_html
from streamtape.diff.render_html import piece_text
from tests.support.chromium import ARTIFACTS, chromium, needs_chromium
from tests.support.diff_backends import one
from tests.support.recording import run_main as run


class Dom(HTMLParser):
    """The few things the tests read from a page: lanes, their ticks, markers, titles."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lanes: dict[str, dict[str, Any]] = {}
        self.svgs: list[dict[str, str]] = []
        self.tags: list[str] = []
        self.sections: list[str] = []
        self._lane: str | None = None
        self._depth = 0
        self._title: list[str] | None = None
        self._last_tick: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        classes = a.get("class", "").split()
        if tag == "svg":
            self.svgs.append(a)
        if tag == "section":
            self.sections.extend(classes)
        if tag == "g" and "lane" in classes:
            side = a["data-side"]
            self.lanes[f"{len(self.svgs)}{side}"] = {"attrs": a, "ticks": [], "markers": []}
            self._lane, self._depth = f"{len(self.svgs)}{side}", 0
        elif self._lane and tag == "g":
            self._depth += 1
            if "marker" in classes:
                self.lanes[self._lane]["markers"].append(classes[1])
        if self._lane and tag == "rect" and "tick" in classes:
            self._last_tick = {**a, "title": ""}
            self.lanes[self._lane]["ticks"].append(self._last_tick)
        if tag == "title" and self._last_tick is not None:
            self._title = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._title is not None and self._last_tick is not None:
            self._last_tick["title"] = "".join(self._title)
            self._title = None
        if tag == "rect":
            self._last_tick = None
        if tag == "g" and self._lane:
            if self._depth == 0:
                self._lane = None
            else:
                self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)


def parse(html_text: str) -> Dom:
    d = Dom()
    d.feed(html_text)
    return d


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize(("a", "b"), [("hello", "ollama"), ("hello", "hello_rechunked")])
def test_page_renders_in_chromium_with_two_timelines_and_one_tick_per_piece(recorded, tmp_path, capsys, a, b) -> None:
    page = tmp_path / f"{a}-vs-{b}.html"
    code, _, err = run("diff", recorded[a], recorded[b], "--html", page, capsys=capsys)
    assert code == 0, err
    dumped = chromium(page, tmp_path, "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = parse(dumped.stdout)
    assert {"meaning", "timing", "wire"} <= set(dom.sections)
    assert len(dom.svgs) == 1
    lanes = {k[-1]: v for k, v in dom.lanes.items()}
    assert sorted(lanes) == ["A", "B"]
    for side, name in (("A", a), ("B", b)):
        pieces = one(recorded[name]).pieces
        ticks = lanes[side]["ticks"]
        assert len(ticks) == len(pieces) == int(lanes[side]["attrs"]["data-pieces"])
        assert [int(t["data-bytes"]) for t in ticks] == [len(c.data) for c in pieces]
        assert set(lanes[side]["markers"]) >= {"first-token", "finish"}
        # Hover text: the piece's bytes as text (the browser unescaped the entities).
        for t, c in zip(ticks, pieces, strict=True):
            assert piece_text(c.data) in t["title"]
    # "<friends>" is in the streamed text: it must be text in the page, never an element.
    assert "friends" not in dom.tags
    assert any("<friends>" in t["title"] for t in lanes["A"]["ticks"])

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"diff-{a}-vs-{b}.png"
    shot.unlink(missing_ok=True)
    r = chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", "--hide-scrollbars")
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000  # a blank 1400x1000 page is a few KB


def test_page_is_self_contained(recorded, tmp_path, capsys) -> None:
    a, b = tmp_path / "a.tape", tmp_path / "b.tape"
    streamtape.save(a, [one(recorded["hello"]), one(recorded["tools"])])
    streamtape.save(b, [one(recorded["tools_reordered"]), one(recorded["hello_moon"])])
    page = tmp_path / "p.html"
    run("diff", a, b, "--html", page, capsys=capsys)
    text = page.read_text()
    assert "<script" not in text and "<link" not in text and "<img" not in text
    assert not re.search(r"\bsrc\s*=", text)
    assert set(re.findall(r'\bhref="([^"]*)"', text)) == {"#pair-0", "#pair-1"}  # in-page links only
    assert "@import" not in text and "url(" not in text
    urls = set(re.findall(r"https?://[^\s\"'<>]+", text))
    assert urls <= {"http://www.w3.org/2000/svg"}
    assert "default-src 'none'" in text  # and the browser would refuse a fetch anyway


def test_both_timelines_share_one_time_axis(recorded) -> None:
    a, b = one(recorded["hello"]), one(recorded["hello_slow"])
    dom = parse(render_html(compare(a, b)))
    (svg,) = dom.svgs
    t_max, x0, width = (float(svg[k]) for k in ("data-t-max-ns", "data-plot-x", "data-plot-width"))
    assert a.end_ns is not None and b.end_ns is not None
    assert t_max >= max(a.end_ns, b.end_ns)
    for side, ix in (("A", a), ("B", b)):
        ticks = dom.lanes[f"1{side}"]["ticks"]
        for t, c in zip(ticks, ix.pieces, strict=True):
            centre = float(t["x"]) + float(t["width"]) / 2
            assert (centre - x0) / width * t_max == pytest.approx(c.at_ns, abs=t_max / 10_000)
    # B started 300 ms late: its first tick sits to the right of A's on the same axis.
    first_a = float(dom.lanes["1A"]["ticks"][1]["x"])
    first_b = float(dom.lanes["1B"]["ticks"][1]["x"])
    assert first_b - first_a > width * 0.25e9 / t_max


def test_tick_height_grows_with_piece_size(recorded) -> None:
    a = one(recorded["hello"])
    big = a.pieces[1]
    assert a.response is not None
    b = streamtape.Interaction(
        a.request,
        streamtape.Response(
            200,
            headers=a.response.headers,
            pieces=(Piece(1_000_000, big.data * 8), *(Piece(2_000_000 + i, c.data) for i, c in enumerate(a.pieces))),
        ),
        end_ns=3_000_000,
    )
    dom = parse(render_html(compare(a, b)))
    ticks = dom.lanes["1A"]["ticks"] + dom.lanes["1B"]["ticks"]
    by_size = sorted((int(t["data-bytes"]), float(t["height"])) for t in ticks)
    heights = [h for _, h in by_size]
    assert heights == sorted(heights)
    assert by_size[0][1] >= 3  # the smallest piece is still visible
    assert by_size[-1][0] == len(big.data) * 8 and by_size[-1][1] > 3 * by_size[0][1]


def test_hover_text_escapes_control_bytes_and_invalid_utf8_and_html() -> None:
    text = piece_text(b'data: {"t":"<b>&amp;"}\r\n\r\n\xe2\x82')
    assert text == 'data: {"t":"<b>&amp;"}\\r\\n\\r\\n\\xe2\\x82'
    long = piece_text(b"x" * 1000, limit=10)
    assert long.startswith("x" * 10) and "990 more bytes" in long


def test_whole_cassette_page_has_a_section_per_pair_and_lists_unpaired(recorded) -> None:
    a = [one(recorded["hello"]), one(recorded["tools"])]
    b = [one(recorded["tools_reordered"]), one(recorded["ollama"]), one(recorded["hello_rechunked"])]
    html_text = render_html(diff_many(a, b, name_a="a.tape", name_b="b.tape"))
    dom = parse(html_text)
    assert len(dom.svgs) == 2 and len(dom.lanes) == 4
    assert "Unpaired (1)" in html_text and "only in B: b.tape#1 POST /api/chat" in html_text
    assert "unpaired requests</span>" in html_text and "meaning differs</span>" not in html_text
    assert html_text.count('<a href="#pair-') == 2


def test_a_side_without_response_draws_an_empty_timeline_that_says_why(recorded) -> None:
    ok = one(recorded["hello"])
    refused = replace(ok, response=None, outcome=Outcome.UPSTREAM_ERROR, error="connection refused", end_ns=5)
    html_text = render_html(compare(ok, refused))
    dom = parse(html_text)
    assert len(dom.lanes["1A"]["ticks"]) == len(ok.pieces) and dom.lanes["1B"]["ticks"] == []
    assert "no response (upstream_error: connection refused)" in html_text
