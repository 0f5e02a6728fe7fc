"""AG-UI and A2A streams: recorded through ``streamtape record``, shown, checked, replayed.

The streams come from the protocols' own packages (tests/support/agent_streams.py:
ag-ui-protocol's encoder, a2a-sdk's types and JSON), served by a scripted upstream;
the replays go into those packages' readers: AG-UI's event models, and a2a-sdk's
own JSON-RPC client transport.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import a2a_pb2
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

import streamtape
from streamtape.check import check
from streamtape.shapes import analyze
from tests.support.agent_streams import AGUI_RUN, agent_routes
from tests.support.processes import STREAMTAPE, start
from tests.support.recording import recording, run_main
from tests.support.servers import ScriptedServer

pytestmark = pytest.mark.slow

PATHS = ["/agui/run", "/agui/cut", "/a2a", "/a2a/stuck"]
A2A_REQUEST = {"jsonrpc": "2.0", "id": "req-1", "method": "SendStreamingMessage",
               "params": {"message": {"messageId": "u1", "role": "ROLE_USER",
                                      "parts": [{"text": "what is the answer?"}]}}}


@pytest.fixture(scope="module")
def tape(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agents") / "agents.tape"
    with ScriptedServer(agent_routes()) as up, recording(out, upstream=up.url) as rec:
        for path in PATHS:
            body = A2A_REQUEST if path.startswith("/a2a") else {"threadId": "t1", "runId": "r1"}
            httpx.post(rec.url + path, json=body, headers={"accept": "text/event-stream"}).read()
        rec.wait_lines(len(PATHS))
    return out


def _ix(tape: Path, path: str) -> streamtape.Interaction:
    return next(ix for ix in streamtape.load(tape) if ix.request.path == path)


def test_an_ag_ui_run_is_detected_and_normalized(tape: Path) -> None:
    a = analyze(_ix(tape, "/agui/run"))
    assert a.shape == "ag-ui"
    assert a.text == "Looking up the café"
    [call] = a.tool_calls
    assert (call.id, call.name, call.parsed) == ("c1", "search", {"q": "café 5€"})
    assert a.states == [{"snapshot": {"step": "plan", "items": []}},
                        {"delta": [{"op": "replace", "path": "/step", "value": "done"}]}]
    assert a.finish is not None and a.finish.raw == "RUN_FINISHED" and a.done
    assert check(_ix(tape, "/agui/run")) == []


def test_an_ag_ui_run_with_no_run_finished_and_an_open_tool_call_is_found_by_check(tape: Path) -> None:
    codes = {f.code: f.message for f in check(_ix(tape, "/agui/cut"))}
    assert "no final marker (RUN_FINISHED or RUN_ERROR)" in codes["no-done"]
    assert codes["tool-call-open"].startswith("tool call c1 (search) started at event 6 and never ended")


def test_an_a2a_task_is_detected_and_normalized(tape: Path) -> None:
    a = analyze(_ix(tape, "/a2a"))
    assert a.shape == "a2a"
    assert a.text == "The answer is 42"
    assert [s["state"] for s in a.states] == ["submitted", "working", "completed"]
    assert a.states[1]["message"] == "looking it up"
    assert a.finish is not None and a.finish.reason == "stop" and a.done
    assert check(_ix(tape, "/a2a")) == []


def test_an_a2a_task_left_in_working_is_found_by_check(tape: Path) -> None:
    codes = {f.code: f.message for f in check(_ix(tape, "/a2a/stuck"))}
    assert codes["task-not-final"].startswith("task task-1 left in working")


def test_show_and_check_print_the_agent_streams(tape: Path, capsys) -> None:
    index = [ix.request.path for ix in streamtape.load(tape)].index("/agui/run")
    code, out, _ = run_main("show", tape, "-i", index, "--events", capsys=capsys)
    assert code == 0 and "shape: ag-ui" in out
    assert 'state      {"snapshot": {"step": "plan", "items": []}}' in out
    assert "name=search" in out
    code, out, _ = run_main("check", tape, capsys=capsys)
    assert "[ag-ui]" in out and "[a2a]" in out and "task-not-final" in out and "tool-call-open" in out


def test_an_ag_ui_run_replays_event_by_event_into_the_ag_ui_models(tape: Path) -> None:
    adapter: TypeAdapter[AguiEvent] = TypeAdapter(AguiEvent)
    with start([*STREAMTAPE, "serve", str(tape), "--port", "0", "--profile", "chunk=bytes:3"],
               r"on http://(\S+?:\d+)") as served:
        with httpx.stream("POST", f"{served.url}/agui/run", json={"threadId": "t1", "runId": "r1"}) as r:
            pieces = list(r.iter_raw())
        served.stop()
    assert max(len(p) for p in pieces) <= 3
    body = b"".join(pieces).decode()
    events = [adapter.validate_json(block.removeprefix("data: "))
              for block in body.split("\n\n") if block.strip()]
    assert [e.type for e in events] == [e.type for e in AGUI_RUN]
    assert events == AGUI_RUN


@pytest.mark.parametrize("profile", ["faithful", "chunk=events", "chunk=bytes:1"])
def test_an_a2a_stream_replays_into_the_a2a_sdk_client(tape: Path, profile: str) -> None:
    async def main() -> list[a2a_pb2.StreamResponse]:
        # the SDK's client sends a fresh uuid as the JSON-RPC id: it may differ
        transport = streamtape.AsyncReplayTransport(tape, profile, realtime=False, ignore_fields=["id"])
        async with httpx.AsyncClient(transport=transport) as client:
            rpc = JsonRpcTransport(client, a2a_pb2.AgentCard(name="replayed"), "http://agent.test/a2a")
            request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(
                message_id="u1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="what is the answer?")]))
            return [r async for r in rpc.send_message_streaming(request)]

    got = asyncio.run(asyncio.wait_for(main(), 30))
    assert [r.WhichOneof("payload") for r in got] == ["task", "status_update", "artifact_update", "status_update"]
    assert got[2].artifact_update.artifact.parts[0].text == "The answer is 42"
    assert got[3].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


def test_diff_compares_a_finished_run_with_a_cut_one(tape: Path, capsys) -> None:
    ixs = [ix.request.path for ix in streamtape.load(tape)]
    a, b = f"{tape}#{ixs.index('/agui/run')}", f"{tape}#{ixs.index('/agui/cut')}"
    code, out, _ = run_main("diff", a, b, capsys=capsys)
    assert code != 0  # they differ in meaning
    assert "search" in out and "RUN_FINISHED" in out
    code, out, _ = run_main("diff", a, a, capsys=capsys)
    assert code == 0
