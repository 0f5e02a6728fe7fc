"""WebSocket replay: ``streamtape serve`` plays a recorded session to a real client.

The session is a Realtime API conversation in the event shapes of the public
reference, with realistic gaps, built with the cassette model
(tests/support/realtime_session.py) and saved.
It is replayed into a ``websockets`` client, a raw client on wsproto (to see
frames and pings on the wire), and the openai SDK's realtime client
(``client.realtime.connect`` with ``websocket_base_url=``), faithfully and
under the message profiles; then a mismatched client message and each fault.

The schedule itself (pure) is checked without sockets in tests/unit/test_ws_replay.py, so the
socket tests here only check that the server keeps it: lower bounds on timing (a server
message never arrives before its recorded delay after the client message it
answers), generous upper bounds only where a test needs to tell two things apart.
"""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Request,
    TextMessage,
)

import streamtape
from streamtape.cassette.model import (
    Direction,
    Message,
)
from streamtape.cassette.model import Request as HTTPRequest
from streamtape.cassette.reader import load
from streamtape.serve import ReplayServer
from tests.support.builders import MS, chat_ix
from tests.support.processes import STREAMTAPE, start
from tests.support.realtime_session import (
    CLIENT_EVENTS,
    ITEM_CREATE,
    MESSAGES,
    N_SERVER,
    PATH,
    RESPONSE_CREATE,
    SERVER_TYPES,
    SESSION_UPDATE,
    TEXT,
    URL,
    session_ix,
)
from tests.support.recording import recording
from tests.support.ws_upstream import WORDS as UPSTREAM_WORDS
from tests.support.ws_upstream import realtime_upstream

pytest_plugins = ["pytester"]


@pytest.fixture
def tape(tmp_path: Path) -> Path:
    """The session saved as a cassette (what ``streamtape serve`` and the plugin read)."""
    path = tmp_path / "realtime.tape"
    streamtape.save(path, [session_ix()])
    return path


# --------------------------------------------------------------------------
# A websockets client against the replay server


@dataclass
class Conversation:
    """What a client saw: the server messages (with arrival times), its sends, how it ended."""

    received: list[tuple[int, str]] = field(default_factory=list)
    sent_at: list[int] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    closed: ConnectionClosed | None = None

    @property
    def types(self) -> list[str]:
        return [json.loads(m)["type"] for _, m in self.received]

    @property
    def text(self) -> str:
        return "".join(json.loads(m)["delta"] for _, m in self.received
                       if json.loads(m)["type"] == "response.output_text.delta")

    def arrival(self, type_: str) -> int:
        return next(t for t, m in self.received if json.loads(m)["type"] == type_)


# How many server messages the recorded client saw before each of its messages.
_BEFORE_CLIENT = [1, 2, 3]


async def converse(
    url: str,
    *,
    pause_s: float = 0.0,
    events: Sequence[dict[str, Any]] = CLIENT_EVENTS,
    headers: dict[str, str] | None = None,
    until: str = "response.done",
    **connect: Any,
) -> Conversation:
    """Play the recorded client: each client event once the server messages recorded before it
    arrived (and ``pause_s`` more), then read until ``until`` and close with 1000.
    ``connect``: more of ``websockets.connect``'s options (a proxy, a TLS context)."""
    out = Conversation()
    async with websockets.connect(url + PATH, additional_headers=headers, compression=None,
                                  **connect) as ws:
        out.headers = dict(ws.response.headers) if ws.response is not None else {}

        async def receive() -> str:
            m = str(await ws.recv())
            out.received.append((time.perf_counter_ns(), m))
            return m

        try:
            for before, ev in zip(_BEFORE_CLIENT, events, strict=True):
                while len(out.received) < before:
                    await receive()
                await asyncio.sleep(pause_s)
                out.sent_at.append(time.perf_counter_ns())
                await ws.send(json.dumps({**ev, "event_id": f"evt_{time.time_ns()}"}))
            while json.loads(await receive())["type"] != until:
                pass
        except ConnectionClosed as e:
            out.closed = e
    return out


def _served(log: list[str]) -> str:
    return next(line for line in log if "/v1/realtime" in line)


async def test_faithful_replay_into_a_websockets_client_keeps_messages_headers_and_close(tape: Path) -> None:
    log: list[str] = []
    async with ReplayServer(tape, log=log.append) as server:
        conv = await converse(server.ws_url)
        await asyncio.sleep(0.05)
    assert conv.types == SERVER_TYPES and conv.text == TEXT and conv.closed is None
    assert conv.headers["x-request-id"] == "req_7f3a"  # the recorded 101's own headers
    assert conv.headers["sec-websocket-accept"] != "recorded="  # computed for this client's key
    assert "outcome=complete: closed 1000 by the client" in _served(log)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["wss", "ws"])
async def test_a_recorded_session_replays_through_serve_proxy(tape: Path, tmp_path: Path, scheme: str) -> None:
    """Through ``serve --proxy`` (a CONNECT tunnel, TLS by mitmproxy's CA for wss): the
    upgrade is the tunnel's first request, so the replay server itself takes the session."""
    with start([*STREAMTAPE, "serve", "--proxy", "--port", "0", "--confdir", str(tmp_path), str(tape)],
               r"replay proxy on (\S+?:\d+)") as proc:
        tls = ssl.create_default_context(cafile=str(tmp_path / "mitmproxy-ca-cert.pem"))
        tls_option: dict[str, Any] = {"ssl": tls} if scheme == "wss" else {}
        conv = await converse(f"{scheme}://api.openai.com", proxy=proc.url, **tls_option)
        proc.stop(signal.SIGINT, timeout=15)
    out, err = proc.stdout, proc.stderr
    assert conv.types == SERVER_TYPES and conv.text == TEXT and conv.closed is None
    assert conv.headers["x-request-id"] == "req_7f3a"
    assert "outcome=complete: closed 1000 by the client" in out, out
    assert "replayed 1, passed upstream 0" in err


async def test_a_slower_client_gets_every_answer_its_recorded_delay_after_asking(tape: Path) -> None:
    """Answers are timed from the question: a client that waits 150 ms before each message
    gets each answer 15 / 15 / 40 ms after it, not at the recorded offsets from the start."""
    async with ReplayServer(tape) as server:
        conv = await converse(server.ws_url, pause_s=0.15)
    sent = conv.sent_at
    answer = {"session.updated": (0, 15), "conversation.item.added": (1, 15), "response.created": (2, 40),
              "response.output_text.done": (2, 170), "response.done": (2, 180)}
    for type_, (k, delay_ms) in answer.items():
        gap_ms = (conv.arrival(type_) - sent[k]) / MS
        assert gap_ms >= delay_ms - 0.5, f"{type_} came {gap_ms:.1f} ms after its question, recorded {delay_ms}"
        assert gap_ms < delay_ms + 400, f"{type_} came {gap_ms:.1f} ms after its question, recorded {delay_ms}"
    # The whole session took the client's pauses plus the recorded rhythm: not the recorded 280 ms.
    assert (conv.arrival("response.done") - sent[0]) / MS >= 2 * 150 + 180


@pytest.mark.parametrize(
    "profile",
    ["instant", "latency=scale:0.3", "latency=jitter:15", "instant;chunk=fragment:3", "chunk=coalesce",
     "latency=instant;chunk=coalesce:30;chunk=fragment:64", "fault=ping:0.1"],
)
async def test_every_message_profile_delivers_the_recorded_session(tape: Path, profile: str) -> None:
    async with ReplayServer(tape, profile=profile) as server:
        conv = await converse(server.ws_url)
    assert conv.types == SERVER_TYPES and conv.text == TEXT and conv.closed is None


async def test_instant_replay_sends_each_answer_at_once(tape: Path) -> None:
    async with ReplayServer(tape, profile="instant") as server:
        conv = await converse(server.ws_url)
    assert (conv.arrival("response.done") - conv.sent_at[2]) / MS < 150  # recorded: 180 ms


async def test_coalesce_writes_an_answer_at_once_when_its_last_message_was_recorded(tape: Path) -> None:
    async with ReplayServer(tape, profile="chunk=coalesce") as server:
        conv = await converse(server.ws_url)
    answer = [t for t, m in conv.received[3:]]
    assert (answer[0] - conv.sent_at[2]) / MS >= 180 - 0.5  # not before response.done was recorded
    assert (answer[-1] - answer[0]) / MS < 60  # together (recorded: 140 ms apart)


async def test_the_profile_header_on_the_upgrade_overrides_the_servers_profile(tape: Path) -> None:
    async with ReplayServer(tape) as server:
        conv = await converse(server.ws_url, headers={"X-Streamtape-Profile": "instant;fault=close:5:4001"})
    assert conv.types == SERVER_TYPES[:5]
    assert conv.closed is not None and conv.closed.rcvd is not None and conv.closed.rcvd.code == 4001


# --------------------------------------------------------------------------
# Client messages that do not match


async def test_a_mismatched_client_message_closes_1008_naming_the_difference(tape: Path) -> None:
    log: list[str] = []
    wrong = {**ITEM_CREATE, "item": {**ITEM_CREATE["item"],
                                     "content": [{"type": "input_text", "text": "Insult me"}]}}
    async with ReplayServer(tape, profile="instant", log=log.append) as server:
        conv = await converse(server.ws_url, events=(SESSION_UPDATE, wrong, RESPONSE_CREATE))
        async with httpx.AsyncClient() as client:
            listed = (await client.get(server.url + "/_streamtape/requests")).json()
    assert conv.closed is not None and conv.closed.rcvd is not None
    assert conv.closed.rcvd.code == 1008
    reason = conv.closed.rcvd.reason
    assert reason.startswith("client message 2 (conversation.item.create): item.content[0].text is")
    assert "Insult me" in reason and len(reason.encode()) <= 123
    assert conv.types == SERVER_TYPES[:2]  # nothing recorded after the question it did not ask
    upgrade, message = listed
    assert (upgrade["method"], upgrade["matched"], upgrade["error"]) == ("GET", 0, None)
    assert message["method"] == "WS" and message["path"] == PATH and message["matched"] is None
    assert message["error"].startswith("client message 2") and "Insult me" in message["body"]
    assert "outcome=mismatch" in _served(log)


async def test_client_event_ids_are_ignored_and_ignore_field_applies_to_messages(tape: Path) -> None:
    other = {**SESSION_UPDATE, "session": {**SESSION_UPDATE["session"], "instructions": "Be terse."}}
    async with ReplayServer(tape, profile="instant", ignore_fields=["instructions"]) as server:
        conv = await converse(server.ws_url, events=(other, ITEM_CREATE, RESPONSE_CREATE))
    assert conv.closed is None and conv.text == TEXT  # event_id differs on every message too
    async with ReplayServer(tape, profile="instant") as server:
        conv = await converse(server.ws_url, events=(other, ITEM_CREATE, RESPONSE_CREATE))
    assert conv.closed is not None and conv.closed.rcvd is not None
    assert "session.instructions" in conv.closed.rcvd.reason


async def test_a_client_message_past_the_recording_closes_1008(tape: Path) -> None:
    async with ReplayServer(tape, profile="instant") as server, \
            websockets.connect(server.ws_url + PATH) as ws:
        for ev in CLIENT_EVENTS:
            await ws.send(json.dumps(ev))
        await ws.send(json.dumps({"type": "response.create"}))
        with pytest.raises(ConnectionClosedError) as info:
            while True:
                await ws.recv()
    assert info.value.rcvd is not None and info.value.rcvd.code == 1008
    assert "client message 4 is not in the recording (it has 3" in info.value.rcvd.reason


async def test_a_plain_request_for_a_session_gets_426_and_a_bad_profile_400(tape: Path) -> None:
    async with ReplayServer(tape) as server:
        async with httpx.AsyncClient() as client:
            plain = await client.get(server.url + PATH)
        with pytest.raises(InvalidStatus) as info:
            await websockets.connect(server.ws_url + PATH, additional_headers={
                "X-Streamtape-Profile": "fault=close:99:1011"})
    assert plain.status_code == 426 and "WebSocket session" in plain.json()["error"]["message"]
    assert info.value.response.status_code == 400
    assert f"only {N_SERVER} server messages".encode() in info.value.response.body


async def test_a_status_fault_refuses_the_upgrade_with_that_status(tape: Path) -> None:
    async with ReplayServer(tape, profile="fault=status:503") as server:
        with pytest.raises(InvalidStatus) as info:
            await websockets.connect(server.ws_url + PATH)
    assert info.value.response.status_code == 503


# --------------------------------------------------------------------------
# Faults and recorded endings


@pytest.mark.parametrize("code", [1000, 1011, 4000])
async def test_close_fault_closes_with_its_code_after_server_message_n(tape: Path, code: int) -> None:
    log: list[str] = []
    async with ReplayServer(tape, profile=f"instant;fault=close:7:{code}", log=log.append) as server:
        conv = await converse(server.ws_url)
        await asyncio.sleep(0.05)
    assert conv.types == SERVER_TYPES[:7]
    assert conv.closed is not None and conv.closed.rcvd is not None
    assert (conv.closed.rcvd.code, conv.closed.rcvd.reason) == (code, f"streamtape fault: close:7:{code}")
    assert f"outcome=cut: closed {code} by the server (fault)" in _served(log)


async def test_drop_fault_ends_the_connection_without_a_close_frame(tape: Path) -> None:
    async with ReplayServer(tape, profile="instant;fault=drop:8") as server:
        conv = await converse(server.ws_url)
    assert conv.types == SERVER_TYPES[:8]
    assert isinstance(conv.closed, ConnectionClosedError) and conv.closed.rcvd is None


async def test_a_recorded_server_close_and_a_recorded_drop_replay_as_recorded(tmp_path: Path) -> None:
    closed = session_ix(MESSAGES[:7], close=(1011, "upstream overloaded", Direction.SERVER), end_ms=160)
    dropped = replace(session_ix(MESSAGES[:7], close=(None, "", None), end_ms=160),
                      request=HTTPRequest("GET", URL.replace("gpt-realtime", "other")))
    async with ReplayServer([closed], profile="instant") as server:
        conv = await converse(server.ws_url)
    assert conv.types == SERVER_TYPES[:4]
    assert conv.closed is not None and conv.closed.rcvd is not None
    assert (conv.closed.rcvd.code, conv.closed.rcvd.reason) == (1011, "upstream overloaded")
    async with ReplayServer([dropped], profile="instant") as server, \
            websockets.connect(server.ws_url + PATH.replace("gpt-realtime", "other")) as ws:
        for ev in CLIENT_EVENTS:
            await ws.send(json.dumps(ev))
        got = []
        with pytest.raises(ConnectionClosedError) as info:
            while True:
                got.append(await ws.recv())
    assert len(got) == 4 and info.value.rcvd is None


async def test_binary_messages_replay_as_binary(tmp_path: Path) -> None:
    audio = bytes(range(256)) * 40
    msgs = (Message(10 * MS, Direction.SERVER, False, audio), Message(20 * MS, Direction.CLIENT, False, b"\x00\x01"),
            Message(30 * MS, Direction.SERVER, False, audio[::-1]))
    async with ReplayServer([session_ix(msgs)], profile="instant;chunk=fragment:1000") as server, \
            websockets.connect(server.ws_url + PATH) as ws:
        first = await ws.recv()
        await ws.send(b"\x00\x01")
        second = await ws.recv()
    assert (first, second) == (audio, audio[::-1])


async def test_a_server_shutdown_mid_session_ends_it_as_interrupted(tape: Path) -> None:
    log: list[str] = []
    server = ReplayServer(tape, profile="instant", log=log.append)
    await server.start()
    async with websockets.connect(server.ws_url + PATH) as ws:
        await ws.recv()  # session.created; the server now waits for the client's messages
        await server.close()
        with pytest.raises(ConnectionClosedError):
            await ws.recv()
    assert "outcome=interrupted" in _served(log)


# --------------------------------------------------------------------------
# The wire, seen by a raw client on wsproto: frames and pings


@dataclass
class RawSession:
    frames: list[TextMessage | BytesMessage]
    pings: int
    close: CloseConnection | None


async def raw_session(url: str, *, answer_pings: bool, events: Sequence[dict[str, Any]] = CLIENT_EVENTS,
                      timeout: float = 5.0) -> RawSession:
    """A client that sends the recorded events at once and reads every frame until the close."""
    host, port = url.removeprefix("ws://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    ws = WSConnection(ConnectionType.CLIENT)
    writer.write(ws.send(Request(host=host, target=PATH)))
    out = RawSession([], 0, None)
    accepted = done = False
    message = ""
    deadline = time.monotonic() + timeout
    try:
        while out.close is None and time.monotonic() < deadline:
            data = await asyncio.wait_for(reader.read(65536), deadline - time.monotonic())
            if not data:
                break
            ws.receive_data(data)
            for ev in ws.events():
                if isinstance(ev, AcceptConnection) and not accepted:
                    accepted = True
                    for e in events:
                        writer.write(ws.send(TextMessage(json.dumps(e))))
                elif isinstance(ev, TextMessage | BytesMessage):
                    out.frames.append(ev)
                    message += ev.data if isinstance(ev, TextMessage) else ""
                    if ev.message_finished:
                        done = done or '"response.done"' in message
                        message = ""
                elif isinstance(ev, Ping):
                    out.pings += 1
                    if answer_pings:
                        writer.write(ws.send(ev.response()))
                elif isinstance(ev, CloseConnection):
                    out.close = ev
                    if ws.state is ConnectionState.REMOTE_CLOSING:
                        writer.write(ws.send(ev.response()))
                if done and ws.state is ConnectionState.OPEN:
                    writer.write(ws.send(CloseConnection(1000)))  # the recorded client closed here
    finally:
        writer.close()
    return out


async def test_fragment_puts_each_message_on_the_wire_in_frames_of_n_bytes(tape: Path) -> None:
    async with ReplayServer(tape, profile="instant;chunk=fragment:16") as server:
        raw = await raw_session(server.ws_url, answer_pings=True)
    messages: list[bytes] = []
    current = b""
    for f in raw.frames:
        assert isinstance(f, TextMessage)
        current += f.data.encode()
        if f.message_finished:
            messages.append(current)
            current = b""
    assert [json.loads(m)["type"] for m in messages] == SERVER_TYPES
    assert len(raw.frames) == sum(-(-len(m) // 16) for m in messages)  # ceil(len / 16) frames each


async def test_ping_fault_pings_a_client_that_answers_and_closes_1011_on_one_that_does_not(tape: Path) -> None:
    log: list[str] = []
    async with ReplayServer(tape, profile="latency=scale:2;fault=ping:0.1", log=log.append) as server:
        answered = await raw_session(server.ws_url, answer_pings=True)  # a session of ~0.5 s
        silent = await raw_session(server.ws_url, answer_pings=False)
        await asyncio.sleep(0.05)
    assert answered.pings >= 2 and answered.close is not None and answered.close.code == 1000
    assert silent.close is not None and silent.close.code == 1011
    assert silent.close.reason == "ping 1 not answered within 0.1 s" and silent.pings == 1
    assert "outcome=cut: ping 1 not answered" in log[-1]


async def test_a_client_that_blocks_its_event_loop_misses_pings_and_is_closed_1011(tape: Path) -> None:
    """What ``ping:S`` is for: a client whose loop is blocked (a sync call in a handler) cannot
    answer pings; the server gives up on it, as a real server's keep-alive does."""
    async with ReplayServer(tape, profile="fault=ping:0.1") as server, \
            websockets.connect(server.ws_url + PATH, ping_interval=None) as ws:
        await ws.recv()  # session.created
        time.sleep(0.5)  # the bug under test: a blocking call on the event loop
        with pytest.raises(ConnectionClosedError) as info:
            for ev in CLIENT_EVENTS:
                await ws.send(json.dumps(ev))
            while True:
                await ws.recv()
    assert info.value.rcvd is not None and info.value.rcvd.code == 1011


# --------------------------------------------------------------------------
# One server for HTTP and WebSocket; the pytest plugin's ws_url


async def test_one_server_and_one_profile_serve_http_responses_and_sessions(tape: Path) -> None:
    chat = chat_ix(5)
    async with ReplayServer([chat, *load(tape)], profile="instant;chunk=fragment:8") as server:
        conv = await converse(server.ws_url)
        async with httpx.AsyncClient() as client:
            r = await client.post(server.url + "/v1/chat/completions", content=chat.request.body,
                                  headers={"content-type": "application/json"})
    assert conv.text == TEXT and r.status_code == 200 and r.content == chat.response.body  # type: ignore[union-attr]


def test_the_pytest_plugins_ws_url_replays_the_tests_session(pytester: pytest.Pytester, tape: Path) -> None:
    (pytester.path / "cassettes").mkdir()
    (pytester.path / "cassettes" / "realtime.tape").write_bytes(tape.read_bytes())
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nasyncio_mode = auto\n")
    pytester.makepyfile(f"""
        import json, pytest, websockets

        @pytest.mark.streamtape(cassette="cassettes/realtime.tape")
        async def test_realtime(streamtape):
            assert streamtape.ws_url.startswith("ws://127.0.0.1:")
            async with websockets.connect(streamtape.ws_url + {PATH!r}) as ws:
                first = json.loads(await ws.recv())
            assert first["type"] == "session.created"
            assert [r.path for r in streamtape.requests] == [{PATH!r}]
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--streamtape-profile", "instant")
    result.assert_outcomes(passed=1)


# --------------------------------------------------------------------------
# The openai SDK's realtime client (client.realtime.connect, websocket_base_url=)
#
# Its realtime client runs on websockets. Findings, pinned below as strict xfails
# (each passes the day the SDK changes):
SILENT_ON_1000 = (
    "openai realtime: a 1000 close in the middle of a response ends 'async for event in conn' "
    "silently (ConnectionClosedOK is treated as the end), so a truncated answer looks finished"
)
RAW_WEBSOCKETS_ERROR = (
    "openai realtime: a 1011 close or a dropped connection escapes iteration as a raw "
    "websockets.exceptions.ConnectionClosedError, not an openai error: 'except openai.OpenAIError' "
    "misses it (openai.WebSocketConnectionClosedError is raised only when sends were left unsent)"
)


async def realtime_answer(ws_url: str, *, session: dict[str, Any] | None = None) -> tuple[list[str], str]:
    """What an app on the openai SDK does: update the session, add the user item, ask for a
    response, read events until response.done. Returns the event types and the text."""
    import openai

    client = openai.AsyncOpenAI(api_key="sk-test", websocket_base_url=ws_url + "/v1")
    types: list[str] = []
    text: list[str] = []
    async with client.realtime.connect(model="gpt-realtime") as conn:
        await conn.session.update(session=session or SESSION_UPDATE["session"])  # type: ignore[arg-type]
        await conn.conversation.item.create(item=ITEM_CREATE["item"])
        await conn.response.create()
        async for event in conn:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                text.append(event.delta)
            if event.type == "response.done":
                break
    return types, "".join(text)


@pytest.mark.httpx2
@pytest.mark.parametrize(
    "profile",
    ["faithful", "instant", "latency=scale:0.5", "latency=jitter:10", "instant;chunk=fragment:5",
     "chunk=coalesce", "chunk=fragment:1;fault=ping:0.1"],
)
async def test_the_openai_realtime_client_assembles_the_recorded_answer(tape: Path, profile: str) -> None:
    log: list[str] = []
    async with ReplayServer(tape, profile=profile, log=log.append) as server:
        types, text = await realtime_answer(server.ws_url)
        await asyncio.sleep(0.05)
    assert types == SERVER_TYPES and text == TEXT
    assert "outcome=complete" in _served(log)


@pytest.mark.httpx2
def test_the_sync_openai_realtime_client_assembles_the_recorded_answer(tape: Path) -> None:
    import openai

    with ReplayServer(tape, profile="instant;chunk=fragment:3") as server:
        client = openai.OpenAI(api_key="sk-test", websocket_base_url=server.ws_url + "/v1")
        with client.realtime.connect(model="gpt-realtime") as conn:
            conn.session.update(session=SESSION_UPDATE["session"])
            conn.conversation.item.create(item=ITEM_CREATE["item"])
            conn.response.create()
            text = []
            for event in conn:
                if event.type == "response.output_text.delta":
                    text.append(event.delta)
                if event.type == "response.done":
                    break
    assert "".join(text) == TEXT


@pytest.mark.httpx2
async def test_the_openai_realtime_client_is_closed_1008_when_it_asks_something_else(tape: Path) -> None:
    log: list[str] = []
    async with ReplayServer(tape, log=log.append) as server:
        with pytest.raises(ConnectionClosedError) as info:
            await realtime_answer(server.ws_url, session={"type": "realtime", "instructions": "Shout."})
    assert info.value.rcvd is not None and info.value.rcvd.code == 1008
    assert info.value.rcvd.reason.startswith("client message 1 (session.update): session.")
    assert "outcome=mismatch" in _served(log)


@pytest.mark.httpx2
async def test_a_1000_close_mid_response_is_never_a_finished_answer_for_the_realtime_client(tape: Path) -> None:
    """Whatever the SDK does with it, the app must be able to tell: no response.done, a shorter text."""
    async with ReplayServer(tape, profile="instant;fault=close:7:1000") as server:
        try:
            types, text = await realtime_answer(server.ws_url)
        except Exception:
            return
    assert "response.done" not in types and types == SERVER_TYPES[:7]
    assert TEXT.startswith(text) and text != TEXT


@pytest.mark.httpx2
@pytest.mark.xfail(strict=True, reason=SILENT_ON_1000)
async def test_the_realtime_client_raises_when_the_server_closes_1000_mid_response(tape: Path) -> None:
    async with ReplayServer(tape, profile="instant;fault=close:7:1000") as server:
        with pytest.raises(Exception):  # noqa: B017 - any error at all: today there is none
            await realtime_answer(server.ws_url)


@pytest.mark.httpx2
@pytest.mark.parametrize("fault", ["close:7:1011", "drop:7"])
async def test_a_cut_session_raises_out_of_the_realtime_client(tape: Path, fault: str) -> None:
    """A 1011 close or a drop in the middle of a response does raise: a websockets error today."""
    async with ReplayServer(tape, profile=f"instant;fault={fault}") as server:
        with pytest.raises(ConnectionClosedError) as info:
            await realtime_answer(server.ws_url)
    assert (info.value.rcvd.code if info.value.rcvd else None) == (1011 if fault.startswith("close") else None)


@pytest.mark.httpx2
@pytest.mark.xfail(strict=True, reason=RAW_WEBSOCKETS_ERROR)
@pytest.mark.parametrize("fault", ["close:7:1011", "drop:7"])
async def test_the_realtime_client_raises_an_openai_error_when_a_session_is_cut(tape: Path, fault: str) -> None:
    import openai

    async with ReplayServer(tape, profile=f"instant;fault={fault}") as server:
        with pytest.raises(openai.OpenAIError):
            await realtime_answer(server.ws_url)


# --------------------------------------------------------------------------
# A session recorded through `streamtape record`, replayed


@pytest.mark.slow
@pytest.mark.httpx2
async def test_a_session_recorded_through_streamtape_record_replays_into_the_same_client(tmp_path: Path) -> None:
    """The openai SDK talks to the Realtime upstream of tests/support/ws_upstream.py through
    ``streamtape record``; the cassette then answers the same code from ``streamtape``'s
    replay server, faithfully and under a message profile, with what the upstream said."""
    out = tmp_path / "recorded.tape"
    with realtime_upstream() as up, recording(out, upstream=up.url) as rec:
        live = await realtime_answer(rec.url.replace("http://", "ws://"))
        await asyncio.to_thread(rec.wait_lines, 1)
    (ix,) = load(out)
    assert ix.websocket is not None and live[1] == "".join(UPSTREAM_WORDS)
    recorded = [s.type for s in up.sessions[0].sent]
    assert live[0] == recorded[: recorded.index("response.done") + 1]
    for profile in ("faithful", "instant;chunk=fragment:7;latency=jitter:5"):
        log: list[str] = []
        async with ReplayServer(out, profile=profile, log=log.append) as server:
            replayed = await realtime_answer(server.ws_url)
        assert replayed == live, profile
        assert "outcome=mismatch" not in _served(log)
