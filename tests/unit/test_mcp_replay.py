"""MCP sessions in the matcher (streamtape.match.mcp) and resuming a stream (streamtape.mcp.resume)."""

from __future__ import annotations

import json
import pickle

import pytest

from streamtape import McpOrderError, NoMatchError
from streamtape.match import Matcher
from streamtape.mcp import resume_after, sessions_of
from tests.support.builders import MS, interaction

URL = "http://mcp.test/mcp"
SID = "s-1"
ACCEPT = ("Accept", "application/json, text/event-stream")


def rpc(method: str, id_: int | None = None, **params: object) -> dict[str, object]:
    body: dict[str, object] = {"jsonrpc": "2.0", "method": method}
    if params:
        body["params"] = params
    if id_ is not None:
        body["id"] = id_
    return body


def answer(id_: int, result: object) -> bytes:
    return f"event: message\r\nid: e{id_}\r\ndata: {json.dumps({'jsonrpc': '2.0', 'id': id_, 'result': result})}\r\n\r\n".encode()


def session_tape():
    hdr = (ACCEPT, ("Mcp-Session-Id", SID))
    init = interaction([answer(0, {"serverInfo": {"name": "srv", "version": "1"}, "protocolVersion": "x"})],
                       url=URL, request_headers=(ACCEPT,), body=rpc("initialize", 0),
                       extra_headers=(("Mcp-Session-Id", SID),))
    notified = interaction([], url=URL, status=202, content_type=None, request_headers=hdr,
                           body=rpc("notifications/initialized"))
    progress = b'event: message\r\nid: p1\r\ndata: {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 2, "progress": 1, "total": 2}}\r\n\r\n'
    call = interaction([progress, answer(2, {"content": [{"type": "text", "text": "done"}]})], url=URL,
                       request_headers=hdr, body=rpc("tools/call", 2, name="count", arguments={"n": 2}))
    listed = interaction([answer(1, {"tools": []})], url=URL, request_headers=hdr, body=rpc("tools/list", 1))
    end = interaction([], url=URL, method="DELETE", content_type=None, request_headers=hdr, body=b"")
    return [init, notified, listed, call, end], hdr


def test_a_session_reads_back_with_its_calls_in_order() -> None:
    ixs, _ = session_tape()
    [s] = sessions_of(ixs)
    assert s.id == SID and s.server == "srv 1" and s.protocol_version == "x"
    assert [c.label for c in s.calls] == ["initialize (id 0)", "notifications/initialized", "tools/list (id 1)",
                                          "tools/call count (id 2)", "DELETE (end of session)"]
    call = s.calls[3]
    assert [(p.progress, p.total) for p in call.progress] == [(1.0, 2.0)]
    assert call.result_text() == "done" and call.event_ids == ("p1", "e2")


def test_calls_out_of_their_recorded_order_are_refused_naming_the_call() -> None:
    ixs, hdr = session_tape()
    m = Matcher(ixs)
    m.match("POST", URL, (ACCEPT,), _b(rpc("initialize", 0)))
    with pytest.raises(McpOrderError) as e:
        m.match("POST", URL, hdr, _b(rpc("tools/call", 1, name="count", arguments={"n": 2})))
    assert str(e.value).startswith(
        f"MCP session {SID}: call 2 is tools/call count (id 1), recorded tools/list (id 1): ")
    assert (e.value.session, e.value.call) == (SID, 2)
    assert isinstance(e.value, NoMatchError)
    again = pickle.loads(pickle.dumps(e.value))  # crosses serve --workers processes
    assert (str(again), again.session, again.call) == (str(e.value), SID, 2)


def test_a_session_replays_in_order_and_initialize_starts_it_over() -> None:
    ixs, hdr = session_tape()
    m = Matcher(ixs)
    for _ in range(2):  # a second client replaying the same session starts from its first call
        assert m.match_indexed("POST", URL, (ACCEPT,), _b(rpc("initialize", 0)))[0] == 0
        assert m.match_indexed("POST", URL, hdr, _b(rpc("notifications/initialized")))[0] == 1
        assert m.match_indexed("POST", URL, hdr, _b(rpc("tools/list", 1)))[0] == 2
        assert m.match_indexed("POST", URL, hdr, _b(rpc("tools/call", 2, name="count", arguments={"n": 2})))[0] == 3
    with pytest.raises(McpOrderError, match="call 4 is tools/list \\(id 3\\), but the recorded session made 3 calls"):
        m.match("POST", URL, hdr, _b(rpc("tools/list", 3)))


def test_last_event_id_resumes_the_recorded_stream_after_that_event() -> None:
    ixs, hdr = session_tape()
    m = Matcher(ixs)
    index, ix = m.match_indexed("GET", URL, (*hdr, ("Last-Event-ID", "p1")))
    assert index == 3
    assert ix.response is not None and ix.response.body == answer(2, {"content": [{"type": "text", "text": "done"}]})
    assert ix.pieces[0].at_ns == 10 * MS  # the recorded gap after the named event
    with pytest.raises(NoMatchError, match="no recorded stream of MCP session s-1 has an event with that id"):
        m.match("GET", URL, (*hdr, ("Last-Event-ID", "nope")))
    assert resume_after(ixs[2], "nope") is None


def _b(v: object) -> bytes:
    return json.dumps(v).encode()
