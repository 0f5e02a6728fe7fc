"""A real a2a-sdk server recorded through ``streamtape record``, read back as A2A.

Real parts: the SDK's JSON-RPC Starlette routes and ``DefaultRequestHandler``
under uvicorn on 127.0.0.1 with a tiny streaming agent (tests/support/a2a_server.py),
``streamtape record`` (mitmproxy) as a reverse proxy in front of it, and the
SDK's ``JsonRpcTransport`` client streaming ``SendStreamingMessage`` through it.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import a2a_pb2
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, VERSION_HEADER

import streamtape
from streamtape.check import check
from streamtape.shapes import analyze
from tests.support.processes import start
from tests.support.recording import recording

pytestmark = pytest.mark.slow


async def _ask(url: str) -> list[a2a_pb2.StreamResponse]:
    # the header a2a-sdk's ClientFactory puts on its httpx client (without it the server reads 0.3)
    async with httpx.AsyncClient(timeout=30, headers={VERSION_HEADER: PROTOCOL_VERSION_CURRENT}) as client:
        rpc = JsonRpcTransport(client, a2a_pb2.AgentCard(name="answerer"), url)
        request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(
            message_id="u1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="what is the answer?")]))
        return [r async for r in rpc.send_message_streaming(request)]


def test_an_a2a_sdk_server_stream_recorded_through_record_parses_as_an_a2a_task(tmp_path: Path) -> None:
    out = tmp_path / "a2a.tape"
    with (start([sys.executable, "-m", "tests.support.a2a_server"], r"a2a server on (http://\S+)") as server,
          recording(out, upstream=server.address) as rec):
        got = asyncio.run(asyncio.wait_for(_ask(rec.url + "/a2a"), 60))
        rec.wait_lines(1)
    kinds = [r.WhichOneof("payload") for r in got]
    assert kinds[0] == "task" and kinds[-1] == "status_update"
    assert got[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    [ix] = streamtape.load(out)
    assert ix.response is not None and (ix.response.header("content-type") or "").startswith("text/event-stream")
    a = analyze(ix)
    assert a.shape == "a2a", a
    assert a.text == "The answer is 42"
    states = [s["state"] for s in a.states]
    assert states[0] == "submitted" and "working" in states and states[-1] == "completed", states
    assert a.finish is not None and a.done
    assert check(ix) == []
