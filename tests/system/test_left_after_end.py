"""A client that hangs up right after the end marker, recorded for real: the openai SDK in
front of ``streamtape record`` in front of a scripted upstream. ``check`` and a two-file
``diff`` count that stream as complete, and ``show`` keeps its recorded outcome; a client
that hangs up mid-stream still counts. The rule on built interactions is
tests/unit/test_left_after_end.py."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.cassette.model import Outcome
from tests.support.builders import CHAT_BODY, chat_events
from tests.support.recording import recording, run_main
from tests.support.servers import Conn, Received, ScriptedServer, by_scenario

pytestmark = pytest.mark.slow

EVENTS = chat_events(["Streaming", " is", " whole"])
"""role, three words, the finish, ``[DONE]``: one HTTP chunk each."""
LINGER = 5.0
"""Seconds the upstream waits after ``[DONE]`` before its last chunk (or, cut, after
the second word before the rest): the client is gone by then."""


def whole(req: Received, c: Conn) -> None:
    c.head(200, [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")])
    c.chunked(EVENTS)


def lingers(req: Received, c: Conn) -> str:
    """Every event and [DONE] at once, then the body's last chunk only later, as a
    server that closes its stream after a while."""
    c.head(200, [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")])
    for e in EVENTS:
        c.chunk(e)
    c.sleep(LINGER)
    c.end_chunks()
    return "close"


def pauses(req: Received, c: Conn) -> str:
    """The role and two words, a pause, then the rest."""
    c.head(200, [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")])
    for e in EVENTS[:3]:
        c.chunk(e)
    c.sleep(LINGER)
    c.chunked(EVENTS[3:])
    return "close"


UPSTREAM = by_scenario({"whole": whole, "lingers": lingers, "pauses": pauses})


def read_whole(url: str) -> None:
    """The stream read to the body's end by a plain httpx client: recorded complete."""
    with httpx.Client(timeout=10) as c, c.stream(
        "POST", url + "/v1/chat/completions", json=CHAT_BODY, headers={"X-Scenario": "whole"}
    ) as r:
        assert b"".join(r.iter_raw()) == b"".join(EVENTS)


def read_openai(url: str, scenario: str, chunks: int | None = None) -> str:
    """The stream read by the openai SDK (every chunk, or the first ``chunks`` and then
    closed); the text it assembled. The SDK is imported here: it needs httpx2, which the
    test extra leaves out on Python 3.11 (the tests using it are marked ``httpx2``)."""
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, timeout=10)
    stream = client.chat.completions.create(
        model="test-model", stream=True, messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Scenario": scenario},
    )
    got = []
    for n, chunk in enumerate(stream, 1):
        got.append(chunk.choices[0].delta.content or "")
        if n == chunks:
            break
    stream.close()
    return "".join(got)


@pytest.fixture(scope="module")
def tapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same stream recorded three ways by one ``streamtape record``: complete, left
    after [DONE], left mid-stream; each interaction then saved to a cassette of its own,
    for a two-file ``diff``."""
    folder = tmp_path_factory.mktemp("left")
    names = ("complete", "left_after", "left_mid")
    with ScriptedServer({"/v1/chat/completions": UPSTREAM}) as up, recording(
        folder / "all.tape", upstream=up.url
    ) as rec:
        read_whole(rec.url)
        rec.wait_lines(1)
        assert read_openai(rec.url, "lingers") == "Streaming is whole"
        rec.wait_lines(2)  # the SDK gone, LINGER s before the upstream's end
        assert read_openai(rec.url, "pauses", chunks=3) == "Streaming is"
        rec.wait_lines(3)
    recorded = streamtape.load(folder / "all.tape")
    assert len(recorded) == 3
    paths = {name: folder / f"{name}.tape" for name in names}
    for name, ix in zip(names, recorded, strict=True):
        streamtape.save(paths[name], [ix])
    return paths


@pytest.mark.httpx2
def test_the_openai_sdk_hangs_up_after_done_and_the_recording_says_so(tapes: dict[str, Path]) -> None:
    (complete,) = streamtape.load(tapes["complete"])
    (left,) = streamtape.load(tapes["left_after"])
    assert complete.outcome is Outcome.COMPLETE
    assert left.outcome is Outcome.CLIENT_DISCONNECTED, left.error
    assert left.response is not None and complete.response is not None
    assert left.response.body == complete.response.body == b"".join(EVENTS)


@pytest.mark.httpx2
def test_check_finds_nothing_in_a_stream_the_openai_sdk_left_after_done(
    tapes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("check", tapes["left_after"], capsys=capsys)
    assert code == 0, out
    (line, total) = out.splitlines()
    assert "  client_disconnected (Client disconnected.)  [openai-chat]  ok" in line
    assert total.startswith("0 findings") and "in 1 interaction;" in total
    code, out, _ = run_main("check", "--json", tapes["left_after"], capsys=capsys)
    doc = json.loads(out)
    assert code == 0 and doc["findings"] == 0
    assert doc["interactions"][0]["outcome"] == "client_disconnected"  # as recorded


@pytest.mark.httpx2
def test_show_keeps_the_recorded_outcome(tapes: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("show", tapes["left_after"], capsys=capsys)
    assert code == 0 and "client_disconnected" in out.splitlines()[1]


@pytest.mark.httpx2
def test_diff_of_the_stream_left_after_done_and_the_same_stream_complete_means_the_same(
    tapes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for a, b, tag in (("complete", "left_after", "B"), ("left_after", "complete", "A")):
        code, out, _ = run_main("diff", tapes[a], tapes[b], capsys=capsys)
        assert code == 0, out
        assert "Meaning  same" in out and "Result: meaning same" in out
        (row,) = [line for line in out.splitlines() if line.strip().startswith("outcome")]
        assert f"{tag}: client left after the end" in row
        code, out, _ = run_main("diff", "--json", tapes[a], tapes[b], capsys=capsys)
        doc = json.loads(out)
        assert code == 0 and doc["same"] is True


@pytest.mark.httpx2
def test_a_stream_the_openai_sdk_left_mid_answer_keeps_its_outcome_finding_and_differs(
    tapes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (cut,) = streamtape.load(tapes["left_mid"])
    assert cut.outcome is Outcome.CLIENT_DISCONNECTED and cut.response is not None
    assert cut.response.body == b"".join(EVENTS[:3])
    code, out, _ = run_main("check", tapes["left_mid"], capsys=capsys)
    assert code == 1
    assert "  error: outcome: outcome client_disconnected" in out and "  error: no-done:" in out
    code, out, _ = run_main("diff", tapes["complete"], tapes["left_mid"], capsys=capsys)
    assert code == 1
    (row,) = [line for line in out.splitlines() if line.strip().startswith("outcome")]
    assert row.split()[1:] == ["complete", "client_disconnected", "DIFFERS"]
