"""``streamtape show CASSETTE --html PAGE``: the report page of streams recorded through the real
``streamtape record`` (a scripted upstream whose answer carries ``<script>``, ``</textarea>``
and CJK text, a tool call in fragments, a Realtime WebSocket session), opened in real headless
Chromium driven over the DevTools protocol: nothing logged, nothing fetched, nothing run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

import streamtape
from tests.support.builders import chat_events
from tests.support.chromium import ARTIFACTS, chromium, load_page, needs_chromium
from tests.support.diff_backends import tool_events
from tests.support.recording import record_scenarios, recording, run_main
from tests.support.servers import ScriptedServer, by_scenario, sse_events
from tests.support.ws_upstream import realtime_turn, realtime_upstream

HOSTILE = ["Hi ", "<script>alert(1)</script>", " </textarea> ", "日本語の", "テキスト", " & done"]
ANSWER = "".join(HOSTILE)
FRAGMENTS = ['{"ci', 'ty": "Pa', 'ris"}']
WS_WORDS = ("Nine <b>point</b>", " eight", " </textarea>")


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two HTTP streams (the hostile answer, a fragmented tool call) and one Realtime session,
    each recorded through ``streamtape record`` in front of its upstream, in one cassette."""
    folder = tmp_path_factory.mktemp("report")
    handlers = {"hostile": sse_events(chat_events(HOSTILE), 0.03),
                "tools": sse_events(tool_events("call_1", FRAGMENTS), 0.02)}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}

    def send(url: str, name: str) -> None:
        with httpx.Client(timeout=30) as c:
            r = c.post(url + "/v1/chat/completions", json=body, headers={"X-Scenario": name})
            assert r.status_code == 200

    with ScriptedServer({"/v1/chat/completions": by_scenario(handlers)}) as up:
        http = record_scenarios(folder / "http.tape", up.url, list(handlers), send)
    with realtime_upstream(words=WS_WORDS) as rt, recording(folder / "ws.tape", upstream=f"http://127.0.0.1:{rt.port}") as rec:
        asyncio.run(realtime_turn(rec.url))
        rec.wait_lines(1)
    out = folder / "all.tape"
    streamtape.save(out, [*http.interactions.values(), *streamtape.load(folder / "ws.tape")])
    return out


QUERIES = {
    "scripts": "document.scripts.length",
    "textareas": "document.querySelectorAll('textarea').length",
    "sections": "document.querySelectorAll('section.ix[id]').length",
    "ticks": "[...document.querySelectorAll('svg.timeline')].map(s => s.querySelectorAll('rect.tick').length)",
    "pieces_attr": "[...document.querySelectorAll('svg.timeline')].map(s => +s.dataset.pieces)",
    "markers": "[...document.querySelectorAll('svg.timeline')].map(s => [...s.querySelectorAll('g.marker')].map(g => g.classList[1]))",
    "gaps": "[...document.querySelectorAll('svg.timeline')].map(s => s.querySelectorAll('g.gap').length)",
    "answers": "[...document.querySelectorAll('pre.answer')].map(p => p.textContent)",
    "raw_pieces": "[...document.querySelectorAll('pre.raw')].map(p => p.querySelectorAll('span.pc').length)",
    "raw_text": "[...document.querySelectorAll('pre.raw')].map(p => p.textContent)",
    "tools": "[...document.querySelectorAll('table.tools td.val')].map(td => td.textContent)",
    "client_msgs": "document.querySelectorAll('table.ladder td.client details.msg.client').length",
    "server_msgs": "document.querySelectorAll('table.ladder td.server details.msg.server').length",
    "font": "getComputedStyle(document.body).fontFamily",
}


@needs_chromium
@pytest.mark.slow
def test_the_report_page_opens_in_chromium_with_no_error_and_no_request_and_shows_recorded_markup_as_text(
        cassette, tmp_path, capsys) -> None:
    page = tmp_path / "report.html"
    code, _, err = run_main("show", cassette, "--html", page, capsys=capsys)
    assert code == 0, err
    assert err.startswith(f"wrote {page} (3 interactions")
    got = load_page(page, tmp_path / "profile", QUERIES)
    assert got.console == [] and got.exceptions == [] and got.log_errors == [], got
    assert got.requests == []
    v = got.values
    assert v["scripts"] == 0 and v["textareas"] == 0
    assert v["sections"] == 3
    hostile, tools, session = streamtape.load(cassette)
    # One timeline per HTTP interaction, one tick per piece, the first byte, first token and finish marked.
    assert v["ticks"] == v["pieces_attr"] == [len(hostile.pieces), len(tools.pieces)]
    for marks in v["markers"]:
        assert {"first-byte", "first-token", "finish"} <= set(marks)
    assert all(n >= 1 for n in v["gaps"])
    # The recorded markup is text in the page: the answer and the raw bytes read as sent.
    assert v["answers"][0] == ANSWER
    assert v["raw_pieces"] == [len(hostile.pieces), len(tools.pieces)]
    assert "<script>alert(1)</script>" in v["raw_text"][0] and "</textarea>" in v["raw_text"][0]
    assert v["tools"] == ["get_weather", "".join(FRAGMENTS)]
    # The session's ladder: its messages on their sides, its text assembled.
    ws = session.websocket
    assert ws is not None
    assert v["client_msgs"] == len(ws.client_messages) and v["server_msgs"] == len(ws.server_messages)
    assert "".join(WS_WORDS) in v["answers"]
    assert "Noto Sans CJK" in v["font"]

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "show-report.png"
    shot.unlink(missing_ok=True)
    r = chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1400,2000", "--hide-scrollbars")
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_chromium
@pytest.mark.slow
def test_the_diff_page_opens_in_chromium_with_no_error_and_no_request(cassette, tmp_path, capsys) -> None:
    page = tmp_path / "diff.html"
    code, _, err = run_main("diff", f"{cassette}#0", f"{cassette}#1", "--html", page, capsys=capsys)
    assert code == 1, err  # the hostile answer against the tool call: the meaning differs
    got = load_page(page, tmp_path / "profile", {"scripts": "document.scripts.length",
                                                  "font": "getComputedStyle(document.body).fontFamily"})
    assert got.console == [] and got.exceptions == [] and got.log_errors == [] and got.requests == [], got
    assert got.values["scripts"] == 0
    assert "Noto Sans CJK" in got.values["font"]


def test_show_html_of_one_interaction_writes_only_that_one(cassette, tmp_path, capsys) -> None:
    page = tmp_path / "one.html"
    code, _, err = run_main("show", cassette, "-i", 1, "--html", page, capsys=capsys)
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert 'id="ix-1"' in text and 'id="ix-0"' not in text and 'id="ix-2"' not in text


def test_show_html_to_a_path_it_cannot_write_is_one_line_and_status_2(cassette, tmp_path, capsys) -> None:
    page = tmp_path / "no" / "such" / "dir" / "page.html"
    code, _, err = run_main("show", cassette, "--html", page, capsys=capsys)
    assert code == 2
    assert err.strip().count("\n") == 0 and "cannot write" in err and "Traceback" not in err


def test_show_html_with_an_index_past_the_end_is_one_line_and_status_2(cassette, tmp_path, capsys) -> None:
    code, _, err = run_main("show", cassette, "-i", 9, "--html", tmp_path / "x.html", capsys=capsys)
    assert code == 2
    assert "no interaction 9" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "x.html").exists()
