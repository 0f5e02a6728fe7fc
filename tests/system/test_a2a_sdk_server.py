"""A real a2a-sdk server recorded through ``streamtape record``, read back as A2A, and
replayed, the server stopped, into the a2a-sdk's own client.

Real parts: the SDK's JSON-RPC Starlette routes and ``DefaultRequestHandler``
under uvicorn on 127.0.0.1 with a tiny streaming agent (tests/support/a2a_server.py),
``streamtape record`` (mitmproxy) as a reverse proxy in front of it, and the
SDK's ``JsonRpcTransport`` client streaming ``SendStreamingMessage`` through it.
Then the server is stopped and the one recording answers the same client, through
``streamtape serve`` and through the in-process ``AsyncReplayTransport`` (the client
takes any ``httpx.AsyncClient``), faithfully, event by event and byte by byte: the
client gets the Task, the status updates and the artifact chunks the live server
sent it. The client sends a fresh uuid4 as the JSON-RPC id of every request, so the
replays ignore the ``id`` field (``--ignore-field id``), as the agents guide says.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import a2a_pb2
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, VERSION_HEADER

import streamtape
from streamtape.check import check
from streamtape.shapes import analyze
from streamtape.wire import PROFILE_HEADER
from tests.support.a2a_server import ANSWER, RPC_PATH
from tests.support.processes import STREAMTAPE, Child, start
from tests.support.recording import recording

pytestmark = pytest.mark.slow

QUESTION = "what is the answer?"
PROFILES = ["faithful", "chunk=events", "chunk=bytes:1"]
NO_MATCH = "no recorded interaction matches POST {path}; closest is {name}#0 POST {path}"
"""The replay's no-match message; ``serve`` names the cassette of the closest recording."""


async def _ask(url: str, *, text: str = QUESTION, transport: httpx.AsyncBaseTransport | None = None,
               profile: str | None = None) -> list[a2a_pb2.StreamResponse]:
    # the header a2a-sdk's ClientFactory puts on its httpx client (without it the server reads 0.3)
    headers = {VERSION_HEADER: PROTOCOL_VERSION_CURRENT, **({PROFILE_HEADER: profile} if profile else {})}
    async with httpx.AsyncClient(timeout=30, headers=headers, transport=transport) as client:
        rpc = JsonRpcTransport(client, a2a_pb2.AgentCard(name="answerer"), url)
        request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(
            message_id="u1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)]))
        return [r async for r in rpc.send_message_streaming(request)]


def ask(url: str, **kw: object) -> list[a2a_pb2.StreamResponse]:
    return asyncio.run(asyncio.wait_for(_ask(url, **kw), 60))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Live:
    tape: Path
    answers: list[a2a_pb2.StreamResponse]
    """What the client got from the live server (through the recorder)."""
    server: str
    """The live server's address, stopped once the recording is made."""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    out = tmp_path_factory.mktemp("a2a") / "a2a.tape"
    with (start([sys.executable, "-m", "tests.support.a2a_server"], r"a2a server on (http://\S+)") as server,
          recording(out, upstream=server.address) as rec):
        got = ask(rec.url + RPC_PATH)
        rec.wait_lines(1)
    return Live(out, got, server.address)


@pytest.fixture(scope="module")
def served(live: Live) -> Iterator[Child]:
    with start([*STREAMTAPE, "serve", str(live.tape), "--port", "0", "--ignore-field", "id"],
               r"on (http://\S+) \(profile") as proc:
        yield proc


def _no_match(e: pytest.ExceptionInfo[A2AClientError]) -> str:
    """The replay's explanation: the a2a client shows only the status (``HTTP Error 422``);
    the answer's body, read before it raised, is on the ``httpx.HTTPStatusError`` it chains."""
    assert str(e.value).startswith("HTTP Error 422")
    cause = e.value.__cause__
    assert isinstance(cause, httpx.HTTPStatusError)
    message: str = cause.response.json()["error"]["message"]
    return message


def test_an_a2a_sdk_server_stream_recorded_through_record_parses_as_an_a2a_task(live: Live) -> None:
    kinds = [r.WhichOneof("payload") for r in live.answers]
    assert kinds == ["task", "status_update", *["artifact_update"] * len(ANSWER), "status_update"]
    assert live.answers[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    [ix] = streamtape.load(live.tape)
    assert ix.response is not None and (ix.response.header("content-type") or "").startswith("text/event-stream")
    a = analyze(ix)
    assert a.shape == "a2a", a
    assert a.text == "".join(ANSWER)
    states = [s["state"] for s in a.states]
    assert states[0] == "submitted" and "working" in states and states[-1] == "completed", states
    assert a.finish is not None and a.done
    assert check(ix) == []


def test_the_live_server_is_stopped_before_anything_is_replayed(live: Live) -> None:
    with pytest.raises(httpx.ConnectError):
        httpx.post(live.server + RPC_PATH, json={}, timeout=5)


def _same_task(got: list[a2a_pb2.StreamResponse], live: Live) -> None:
    assert got == live.answers  # protobuf equality: every id, state, message and artifact chunk
    task = got[0].task
    assert got[1].status_update.status.state == a2a_pb2.TASK_STATE_WORKING
    assert [r.artifact_update.artifact.parts[0].text for r in got[2:-1]] == ANSWER
    assert [r.artifact_update.append for r in got[2:-1]] == [False, True]
    updates = [getattr(r, str(r.WhichOneof("payload"))) for r in got[1:]]
    assert {u.task_id for u in updates} == {task.id}
    assert got[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize("profile", PROFILES)
def test_serve_replays_the_real_recording_into_the_a2a_sdk_client_as_the_live_server_answered(
    served: Child, live: Live, profile: str
) -> None:
    _same_task(ask(served.url + RPC_PATH, profile=profile), live)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_in_process_transport_replays_it_into_the_a2a_sdk_client_as_the_live_server_answered(
    live: Live, profile: str
) -> None:
    transport = streamtape.AsyncReplayTransport(live.tape, profile, realtime=False, ignore_fields=["id"])
    _same_task(ask("http://agent.test" + RPC_PATH, transport=transport), live)


def test_under_bytes_1_the_client_is_handed_the_stream_one_byte_at_a_time(live: Live) -> None:
    """What ``chunk=bytes:1`` puts the client's SSE parser through, seen from its httpx client."""
    async def pieces() -> list[bytes]:
        transport = streamtape.AsyncReplayTransport(live.tape, "chunk=bytes:1", realtime=False,
                                                    ignore_fields=["id"])
        [ix] = streamtape.load(live.tape)
        async with (httpx.AsyncClient(transport=transport) as client,
                    client.stream("POST", "http://agent.test" + RPC_PATH, content=ix.request.body,
                                  headers={"Content-Type": "application/json"}) as r):
            return [p async for p in r.aiter_raw()]

    got = asyncio.run(pieces())
    [ix] = streamtape.load(live.tape)
    assert ix.response is not None and b"".join(got) == ix.response.body
    assert {len(p) for p in got} == {1}


def test_a_client_asking_something_else_gets_the_replays_no_match_answer(served: Child, live: Live) -> None:
    for url, transport, name in ((served.url + RPC_PATH, None, live.tape.name),
                                 ("http://agent.test" + RPC_PATH,
                                  streamtape.AsyncReplayTransport(live.tape, "faithful", realtime=False,
                                                                  ignore_fields=["id"]), "")):
        with pytest.raises(A2AClientError) as e:
            ask(url, text="what is the question?", transport=transport)
        assert _no_match(e) == (NO_MATCH.format(path=RPC_PATH, name=name)
                                + f': body params.message.parts[0].text is "what is the question?", '
                                  f'recorded "{QUESTION}"')


def test_without_ignoring_the_json_rpc_id_the_no_match_names_the_fresh_id(live: Live) -> None:
    transport = streamtape.AsyncReplayTransport(live.tape, "faithful", realtime=False)
    with pytest.raises(A2AClientError) as e:
        ask("http://agent.test" + RPC_PATH, transport=transport)
    message = _no_match(e)
    assert message.startswith(NO_MATCH.format(path=RPC_PATH, name="") + ": body id is "), message
