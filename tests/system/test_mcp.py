"""MCP Streamable HTTP sessions, recorded through ``streamtape record`` and replayed.

A real MCP server (the ``mcp`` package's FastMCP, tests/support/mcp_server.py)
and the ``mcp`` package's own client (``streamable_http_client`` and
``ClientSession``, tests/support/mcp_client.py) run one session through the
recorder; then, with the server stopped, the same client runs the same session
against ``streamtape serve`` and the in-process transport.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.mcp import sessions_of
from tests.support.mcp_client import MCP_MAJOR, SessionSeen, mcp_http_client, run_session, session
from tests.support.processes import STREAMTAPE, Child, start
from tests.support.recording import recording, run_main

pytestmark = pytest.mark.slow

SERVER = [sys.executable, "-m", "tests.support.mcp_server"]
ID0 = 1 if MCP_MAJOR >= 2 else 0
"""The JSON-RPC id of the client's first request (``initialize``): mcp 2's client counts from 1."""
INIT, LIST, CALL, READ = (f"(id {ID0 + n})" for n in range(4))


@dataclass(frozen=True)
class Recorded:
    tape: Path
    seen: SessionSeen
    lines: list[str]


def _record(tmp: Path, *server_args: str) -> Recorded:
    tape = tmp / "mcp.tape"
    with (
        start([*SERVER, *server_args], r"mcp server on (http://\S+?)/mcp") as server,
        recording(tape, upstream=server.address) as rec,
    ):
        seen = run_session(f"{rec.url}/mcp")
        rec.wait_lines(7, timeout=20)  # the GET stream ends when the client goes
    return Recorded(tape, seen, rec.lines)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return _record(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(scope="module")
def resumable(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return _record(tmp_path_factory.mktemp("mcp-resumable"), "--resumable")


def _serve(tape: Path, *args: str) -> Child:
    return start([*STREAMTAPE, "serve", str(tape), "--port", "0", *args], r"on http://(\S+?:\d+)")


def test_the_client_saw_the_server_through_the_recorder(recorded: Recorded) -> None:
    s = recorded.seen
    assert (s.server, s.tools, s.result, s.resource) == (
        "streamtape-test", ("count", "add"), "counted to 3", "buy milk; café at 5€")
    assert [p for p, _, _ in s.progress] == [1.0, 2.0, 3.0]


def test_record_keeps_every_exchange_of_a_session_without_all(recorded: Recorded) -> None:
    ixs = streamtape.load(recorded.tape)
    methods = sorted(ix.request.method for ix in ixs)
    assert methods == ["DELETE", "GET", "POST", "POST", "POST", "POST", "POST"]
    assert sorted(ix.response.status for ix in ixs if ix.response) == [200, 200, 200, 200, 200, 200, 202]
    [mcp] = sessions_of(ixs)
    assert mcp.id == recorded.seen.session_id
    assert len(mcp.calls) == 7


def test_a_session_reads_back_as_its_calls_with_progress_and_results(recorded: Recorded) -> None:
    [mcp] = sessions_of(streamtape.load(recorded.tape))
    assert [c.label for c in mcp.requests] == [
        f"initialize {INIT}", f"tools/list {LIST}", f"tools/call count {CALL}",
        f"resources/read notes://today {READ}"]
    call = mcp.requests[2]
    assert [(p.progress, p.total, p.message) for p in call.progress] == [
        (1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert call.result_text() == "counted to 3" and call.outcome == "result"
    # the progress came on the recorded stream, 20 ms apart, before the result
    gaps = [b.at_ns - a.at_ns for a, b in zip(call.progress, call.progress[1:], strict=False)]
    assert all(g > 10_000_000 for g in gaps)
    assert mcp.server is not None and mcp.server.startswith("streamtape-test")


@pytest.mark.parametrize("profile", ["faithful", "chunk=events", "chunk=bytes:1"])
def test_the_same_session_replays_against_serve_with_the_server_gone(recorded: Recorded, profile: str) -> None:
    with _serve(recorded.tape, "--profile", profile) as served:
        seen = run_session(f"{served.url}/mcp")
        served.stop()
    assert seen == recorded.seen  # the recorded session id handed out again, progress included
    assert "Traceback" not in served.stderr


def test_the_same_session_replays_through_the_in_process_transport(recorded: Recorded) -> None:
    async def main() -> SessionSeen:
        transport = streamtape.AsyncReplayTransport(recorded.tape, "chunk=events", realtime=False)
        async with mcp_http_client(transport) as client:
            return await session("http://mcp.test/mcp", http_client=client)

    assert asyncio.run(asyncio.wait_for(main(), 30)) == recorded.seen


def test_a_session_calling_another_tool_fails_naming_the_call_that_differs(recorded: Recorded) -> None:
    with _serve(recorded.tape) as served:
        with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the HTTP error its own way
            run_session(f"{served.url}/mcp", tool="add", timeout=15)
        served.stop()
    expected = (f"MCP session {recorded.seen.session_id}: call 3 is tools/call add {CALL}, "
                f"recorded tools/call count {CALL}")
    assert expected in served.stdout + served.stderr


def test_a_client_resuming_with_last_event_id_gets_the_events_after_it(resumable: Recorded) -> None:
    [mcp] = sessions_of(streamtape.load(resumable.tape))
    call = next(c for c in mcp.requests if c.name == "count")
    assert len(call.event_ids) >= 4  # three progress events and the result, each with an id
    first = call.event_ids[0]
    with _serve(resumable.tape, "--profile", "latency=instant") as served:
        r = httpx.get(f"{served.url}/mcp", headers={
            "mcp-session-id": mcp.id or "", "last-event-id": first, "accept": "text/event-stream"})
        missing = httpx.get(f"{served.url}/mcp", headers={
            "mcp-session-id": mcp.id or "", "last-event-id": "nope", "accept": "text/event-stream"})
        served.stop()
    assert r.status_code == 200
    ids = [line.split(":", 1)[1].strip() for line in r.text.splitlines() if line.startswith("id:")]
    assert ids == list(call.event_ids[1:])
    sent = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
    # progress 2.0 (mcp 1.x writes the float as 2.0, 2.x as 2) and 3, then the result
    assert [m["params"]["progress"] for m in sent if m.get("method") == "notifications/progress"] == [2, 3]
    assert sent[-1]["result"]["content"][0]["text"] == "counted to 3"
    assert missing.status_code >= 400
    assert "no recorded stream of MCP session" in missing.text


def test_show_mcp_lists_the_session_as_one_entry_with_its_calls(recorded: Recorded, capsys) -> None:
    code, out, _ = run_main("show", recorded.tape, "--mcp", capsys=capsys)
    assert code == 0
    head, *rows = out.splitlines()
    assert head.startswith(f"MCP session {recorded.seen.session_id}: 4 calls, 7 exchanges (#0-#6)")
    assert "server streamtape-test" in head
    call = next(r for r in rows if f"tools/call count {CALL}" in r)
    assert "3 (3/3)" in call and call.rstrip().endswith("result")
    assert any("DELETE (end of session)" in r for r in rows)
    assert any("GET stream" in r for r in rows)
    code, listing, _ = run_main("show", recorded.tape, capsys=capsys)
    assert "7 of these are MCP exchanges" in listing and "--mcp lists them by session" in listing


def test_show_mcp_text_and_json_give_the_tool_results(recorded: Recorded, capsys) -> None:
    code, out, _ = run_main("show", recorded.tape, "--mcp", "--text", capsys=capsys)
    assert code == 0
    assert out.splitlines() == [f"[tools/call count {CALL}] result", "counted to 3",
                                f"[resources/read notes://today {READ}] result", "buy milk; café at 5€"]
    code, out, _ = run_main("show", recorded.tape, "--mcp", "--json", capsys=capsys)
    [doc] = json.loads(out)
    call = next(c for c in doc["calls"] if c["name"] == "count")
    assert call["text"] == "counted to 3" and call["arguments"] == {"n": 3}
    assert [p["message"] for p in call["progress"]] == ["step 1", "step 2", "step 3"]


def test_show_mcp_refuses_an_interaction_index_in_one_line(recorded: Recorded, capsys) -> None:
    code, _, err = run_main("show", recorded.tape, "--mcp", "-i", "2", capsys=capsys)
    assert code != 0 and "--mcp lists whole sessions" in err and "Traceback" not in err


def test_check_finds_nothing_wrong_in_a_whole_session(recorded: Recorded, capsys) -> None:
    code, out, _ = run_main("check", recorded.tape, capsys=capsys)
    last = out.rstrip().splitlines()[-1]
    assert code == 0 and last.startswith("0 findings") and "in 7 interactions;" in last
