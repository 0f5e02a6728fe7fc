"""The pytest plugin records AG-UI and A2A streams once and replays them into the SDKs (pytester).

The upstream is the scripted agent server of tests/support/agent_streams.py
(AG-UI events from the ``ag-ui-protocol`` package's own encoder; A2A
``SendStreamingMessage`` results from a2a-sdk's types). The generated test
module reads the AG-UI run over ``streamtape.url`` with httpx and validates
every event with ag-ui's pydantic ``Event`` union, and runs a2a-sdk's
``JsonRpcTransport`` client in-process through ``streamtape.async_transport()``.
Recorded once with the server up, replayed with it gone, faithfully and
re-chunked (by event, byte by byte).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import streamtape
from streamtape.shapes import analyze
from tests.support import ROOT
from tests.support.agent_streams import agent_routes
from tests.support.pytester_runs import (  # imports mitmproxy once, before any run
    PLUGINS,
    asyncio_project,
)
from tests.support.servers import ScriptedServer

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.slow

AGENT_MODULE = '''
import asyncio

import httpx
import pytest
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import a2a_pb2
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.support.agent_streams import AGUI_RUN


def test_ag_ui_run(streamtape):
    adapter = TypeAdapter(Event)
    with httpx.stream("POST", streamtape.url + "/agui/run", json={"threadId": "t1", "runId": "r1"},
                      headers={"accept": "text/event-stream"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        body = r.read().decode()
    events = [adapter.validate_json(block.removeprefix("data: "))
              for block in body.split("\\n\\n") if block.strip()]
    assert events == AGUI_RUN


@pytest.mark.streamtape(ignore_fields=["id"])  # the SDK sends a fresh uuid as the JSON-RPC id
def test_a2a_task(streamtape):
    async def main():
        async with httpx.AsyncClient(transport=streamtape.async_transport()) as client:
            rpc = JsonRpcTransport(client, a2a_pb2.AgentCard(name="agent"), "http://agent.test/a2a")
            request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(
                message_id="u1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="what is the answer?")]))
            return [r async for r in rpc.send_message_streaming(request)]

    got = asyncio.run(asyncio.wait_for(main(), 30))
    assert [r.WhichOneof("payload") for r in got] == ["task", "status_update", "artifact_update", "status_update"]
    assert got[1].status_update.status.state == a2a_pb2.TASK_STATE_WORKING
    assert got[2].artifact_update.artifact.parts[0].text == "The answer is 42"
    assert got[3].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
'''


def test_ag_ui_and_a2a_streams_recorded_once_replay_offline_into_the_sdks(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # the generated module imports tests.support
    asyncio_project(pytester)
    pytester.makepyfile(test_agent=AGENT_MODULE)
    with ScriptedServer(agent_routes()) as up:
        recorded = pytester.runpytest(*PLUGINS, "--streamtape-record-mode=once", "--streamtape-upstream", up.url)
        recorded.assert_outcomes(passed=2)
    tapes = Path(pytester.path / "cassettes" / "test_agent")
    [agui] = streamtape.load(tapes / "test_ag_ui_run.tape")
    [task] = streamtape.load(tapes / "test_a2a_task.tape")
    assert analyze(agui).shape == "ag-ui" and analyze(agui).done
    a = analyze(task)
    assert a.shape == "a2a" and a.text == "The answer is 42"
    assert [s["state"] for s in a.states] == ["submitted", "working", "completed"]

    offline = pytester.runpytest(*PLUGINS)  # the server is gone
    offline.assert_outcomes(passed=2)
    rechunked = pytester.runpytest(*PLUGINS, "--streamtape-profile", "chunk=events",
                                   "--streamtape-profile", "chunk=bytes:1", "-v")
    rechunked.assert_outcomes(passed=4)
