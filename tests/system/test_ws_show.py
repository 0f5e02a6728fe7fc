"""WebSocket sessions shown, checked and diffed: ``show``, ``check`` and ``diff`` on sessions
recorded through ``streamtape record`` from the Realtime upstream of tests/support/ws_upstream.py, and on
built sessions for the event names that upstream does not send (audio transcripts)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from streamtape.cassette.model import (
    Direction,
    Interaction,
    Message,
    Request,
    Response,
    WebSocketSession,
)
from streamtape.cassette.reader import load
from streamtape.cassette.writer import save
from streamtape.shapes.realtime import analyze_session
from streamtape.wire import Framing
from tests.support.builders import MS, chat_ix
from tests.support.recording import recording, run_main
from tests.support.ws_upstream import realtime_turn, realtime_upstream

# The sessions of the recorded cassette, by index.
GA, BETA, CUT_1000, CUT_1011, DROPPED, CLEAN, SLOW = range(7)


async def cut_turn(url: str, proxy: str, fault: str) -> None:
    async with connect(url.replace("http://", "ws://") + f"/v1/realtime?model=m&fault={fault}&after=2",
                       proxy=proxy) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create"}))
        try:
            async for _ in ws:
                pass
        except ConnectionClosed:
            pass


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cassette: a GA turn, a beta turn, three cut responses, a turn without an error event,
    and a turn from a slower server with another answer. Regular mode, so one recorder takes
    the sessions of both upstreams."""
    out = tmp_path_factory.mktemp("ws") / "sessions.tape"

    async def run(proxy: str, fast: str, slow: str) -> None:
        await realtime_turn(fast, proxy=proxy)
        await realtime_turn(fast, proxy=proxy, beta=True)
        await cut_turn(fast, proxy, "close:1000")
        await cut_turn(fast, proxy, "close:1011")
        await cut_turn(fast, proxy, "drop")
        await realtime_turn(fast, proxy=proxy, bad_event=False)
        await realtime_turn(slow, proxy=proxy, bad_event=False,
                            path="/v1/realtime?model=gpt-realtime-mini&gap=0.08&words=Nine%20,point%20,eleven.")

    with realtime_upstream() as fast, realtime_upstream() as slow, recording(out, "--mode", "regular") as rec:
        asyncio.run(run(rec.url, fast.url, slow.url))
        rec.wait_lines(7)
    return out


def test_show_lists_sessions_with_their_message_counts(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("show", recorded, capsys=capsys)
    assert code == 0
    rows = out.splitlines()[1:]
    cas = load(recorded)
    assert len(rows) == len(cas) == 7
    for row, ix in zip(rows, cas, strict=True):
        cells = row.split()
        assert cells[1:4] == ["GET", ix.request.path, "101"]
        assert int(cells[4]) == len(ix.messages)


def test_show_lists_every_message_with_direction_offset_size_and_type(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("show", recorded, "-i", GA, capsys=capsys)
    assert code == 0
    ix = load(recorded)[GA]
    head, _, table = out.partition("\n\n")
    assert "HTTP/1.1 101 Switching Protocols  websocket" in head
    assert "close: 1000 by client" in head
    assert "session: realtime, 4 client + 18 server messages, 1 response (1 done), 1 error event" in head
    assert "text: 'Nine point eight is larger.'" in head
    rows = table.splitlines()[1:]
    assert len(rows) == len(ix.messages)
    prev = 0
    for row, m in zip(rows, ix.messages, strict=True):
        offset, gap, direction, size, kind = row.split()
        assert float(offset) == pytest.approx(m.at_ns / 1e6, abs=0.001)
        assert float(gap) == pytest.approx((m.at_ns - prev) / 1e6, abs=0.001)
        assert (direction, int(size), kind) == (m.direction, len(m.data), json.loads(m.data)["type"])
        prev = m.at_ns


@pytest.mark.parametrize("index", [GA, BETA])
def test_show_text_assembles_the_realtime_text_deltas_of_ga_and_beta(
    recorded: Path, index: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("show", recorded, "-i", index, "--text", capsys=capsys)
    assert code == 0 and out == "Nine point eight is larger.\n"
    kinds = {json.loads(m.data)["type"] for m in load(recorded)[index].messages}
    assert ("response.text.delta" in kinds) == (index == BETA)


def built_session(events: list[dict[str, object]], close: int | None = 1000) -> Interaction:
    msgs = tuple(Message((n + 1) * 10 * MS, Direction.SERVER, True, json.dumps(e).encode())
                 for n, e in enumerate(events))
    return Interaction(
        Request("GET", "http://api.test/v1/realtime?model=m"),
        Response(101, "Switching Protocols", framing=Framing.NONE),
        end_ns=(len(events) + 2) * 10 * MS,
        websocket=WebSocketSession(msgs, close, "", Direction.CLIENT if close else None),
    )


def test_show_text_takes_audio_transcripts_of_both_apis_and_leaves_the_audio_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = {"item_id": "i1", "output_index": 0, "content_index": 0}
    events: list[dict[str, object]] = [
        {"type": "session.created", "session": {}},
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}},
        {"type": "response.audio.delta", "response_id": "r1", **ids, "delta": "UklGRiQAAABXQVZF"},
        {"type": "response.audio_transcript.delta", "response_id": "r1", **ids, "delta": "Nine point "},
        {"type": "response.audio_transcript.delta", "response_id": "r1", **ids, "delta": "eight."},
        {"type": "response.done", "response": {"id": "r1", "status": "completed"}},
        {"type": "response.created", "response": {"id": "r2", "status": "in_progress"}},
        {"type": "response.output_audio.delta", "response_id": "r2", **ids, "delta": "UklGRiQAAABXQVZF"},
        {"type": "response.output_audio_transcript.delta", "response_id": "r2", **ids, "delta": "Yes."},
        {"type": "response.done", "response": {"id": "r2", "status": "completed"}},
    ]
    save(tmp_path / "audio.tape", [built_session(events)])
    code, out, _ = run_main("show", tmp_path / "audio.tape", "-i", 0, "--text", capsys=capsys)
    assert code == 0 and out == "[response r1]\nNine point eight.\n[response r2]\nYes.\n"


def test_show_json_gives_messages_responses_and_the_close(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("show", recorded, "-i", CUT_1011, "--json", capsys=capsys)
    assert code == 0
    doc = json.loads(out)
    ix = load(recorded)[CUT_1011]
    assert doc["close"] == {"code": 1011, "reason": "cut by the test server", "by": "server"}
    assert [m["type"] for m in doc["messages"]] == [json.loads(m.data)["type"] for m in ix.messages]
    assert [m["offset_ms"] for m in doc["messages"]] == [m.at_ns / 1e6 for m in ix.messages]
    assert doc["messages"][0]["text"] == ix.messages[0].data.decode()
    (resp,) = doc["responses"]
    assert resp["status"] is None and resp["done_ms"] is None and resp["text"] == "Nine point "


def test_show_refuses_reasoning_and_shape_for_a_session(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main("show", recorded, "-i", GA, "--reasoning", capsys=capsys)
    assert code == 2 and "WebSocket session" in err and "reasoning" in err


def test_check_flags_cut_responses_abnormal_closes_and_error_events(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("check", recorded, "--json", capsys=capsys)
    assert code == 1
    found = {x["index"]: [f["code"] for f in x["findings"]] for x in json.loads(out)["interactions"]}
    assert {x["shape"] for x in json.loads(out)["interactions"]} == {"realtime"}
    assert found[GA] == found[BETA] == ["error-event"]  # the bad event; the socket stayed open
    assert found[CUT_1000] == ["no-response-done"]  # a clean-looking close in mid-answer
    assert found[CUT_1011] == ["close-abnormal", "no-response-done"]
    assert found[DROPPED] == ["outcome", "close-abnormal", "no-response-done"]
    assert found[CLEAN] == found[SLOW] == []


def test_check_text_names_the_response_and_its_text_so_far(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("check", f"{recorded}", capsys=capsys)
    assert code == 1
    assert "no-response-done: response resp_001 ended without response.done (2 text deltas; its text so far: 'Nine point ')" in out
    assert "close-abnormal: closed with code 1011 (cut by the test server) by the server" in out
    assert "error-event: error event: unknown_event: Invalid value: 'session.frobnicate'." in out


def test_diff_of_two_runs_of_one_server_agrees_in_meaning(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("diff", f"{recorded}#{CLEAN}", f"{recorded}#{GA}", capsys=capsys)
    # GA sent the bad event and got an error event: the server events differ, the text does not.
    assert code == 1
    assert "meaning: differs (server events)" in out and "  + error  (B only)" in out
    assert "text: same 'Nine point eight is larger.'" in out
    code, out, _ = run_main("diff", f"{recorded}#{CLEAN}", f"{recorded}#{CLEAN}", capsys=capsys)
    assert code == 0 and "meaning: same" in out


def test_diff_reads_text_timing_and_gates_like_an_http_diff(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("diff", f"{recorded}#{CLEAN}", f"{recorded}#{SLOW}", "--json",
                            "--fail-on", "p50_gap>1.5x", capsys=capsys)
    assert code == 1
    (pair,) = json.loads(out)["pairs"]
    assert pair["differences"] == ["text"]  # 3 deltas against 5: a run of one type reads as one
    assert pair["text"]["a"] == "Nine point eight is larger." and pair["text"]["b"] == "Nine point eleven."
    timing = {r["metric"]: r for r in pair["timing"]}
    cas = load(recorded)
    for idx, side in ((CLEAN, "a"), (SLOW, "b")):
        a = analyze_session(cas[idx])
        (r,) = a.responses
        gaps = sorted(y - x for x, y in zip(r.delta_ns, r.delta_ns[1:], strict=False))
        assert timing["max_gap"][side] == gaps[-1]
        asked = next(e.at_ns for e in a.events if e.type == "response.create")
        assert timing["ttft"][side] == r.first_text_ns - asked  # type: ignore[operator]
        assert timing["ttfb"][side] == cas[idx].messages[0].at_ns
    assert timing["p50_gap"]["b"] > 1.5 * timing["p50_gap"]["a"]  # 80 ms against 30 ms deltas
    (gate,) = pair["gates"]
    assert gate["ok"] is False


def test_diff_of_a_cut_session_names_the_missing_events_and_the_close(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("diff", f"{recorded}#{CLEAN}", f"{recorded}#{CUT_1011}", capsys=capsys)
    assert code == 1
    assert "meaning: differs (server events, text, response status, close)" in out
    assert "  - response.done  (A only)" in out
    assert "close: A 1000 by client  B 1011 by server  (differs)" in out


def test_diff_refuses_a_side_with_http_and_sessions_and_http_only_options(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = tmp_path / "mixed.tape"
    save(mixed, [chat_ix(20), load(recorded)[GA]])
    code, _, err = run_main("diff", mixed, f"{recorded}#{GA}", capsys=capsys)
    assert code == 2 and "holds WebSocket sessions and HTTP interactions (#0 is HTTP)" in err
    code, _, err = run_main("diff", f"{recorded}#{GA}", f"{recorded}#{BETA}", "--ignore", "usage", capsys=capsys)
    assert code == 2 and "--ignore: not for WebSocket sessions" in err
