"""WebSocket sessions recorded: a Realtime upstream on 127.0.0.1, a ``websockets`` client, and
``streamtape record`` (reverse and regular mode) or ``mitmdump -s addons/record.py`` between them.

Each session is one interaction: the upgrade request (redacted) and the 101 head,
every message in both directions with its offset, then the close or the failure.
The cassette format part (message records, the format version) is checked on
values written and read back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import msgpack
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as sync_connect
from websockets.sync.server import ServerConnection, serve

import streamtape
from streamtape.capture.recorder import Begun, Redaction
from streamtape.capture.websocket import SessionRecorder
from streamtape.cassette.model import (
    Direction,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    WebSocketSession,
)
from streamtape.cassette.reader import load
from streamtape.cassette.records import (
    NEWEST_VERSION,
    PLAIN_VERSION,
    WEBSOCKET_VERSION,
    Record,
    interaction_records,
    make_header,
)
from streamtape.cassette.writer import BackgroundWriter, CassetteWriter, save
from streamtape.errors import CassetteError
from streamtape.wire import Framing
from tests.support import ROOT
from tests.support.builders import MS, chat_ix, wait_until
from tests.support.processes import start
from tests.support.recording import recording
from tests.support.servers import ScriptedServer
from tests.support.ws_upstream import (
    FIRST_TOKEN_GAP,
    KEY,
    WORDS,
    RealtimeUpstream,
    realtime_turn,
    realtime_upstream,
)


def on_disk(path: Path) -> streamtape.Cassette | None:
    try:
        return load(path)
    except CassetteError:
        return None


def types(messages: Sequence[Message], direction: Direction) -> list[str]:
    return [json.loads(m.data)["type"] for m in messages if m.direction == direction]


def check_turn(ix: Interaction, up: RealtimeUpstream, got: list[str]) -> None:
    """The session as the client and the upstream saw it, and nothing secret on disk."""
    ws = ix.websocket
    assert ws is not None
    assert ix.response is not None and ix.response.status == 101 and ix.response.framing == Framing.NONE
    (s,) = up.sessions
    # Every message, in order, each direction as its sender sent it.
    assert types(ws.messages, Direction.SERVER) == [x.type for x in s.sent] == got
    assert types(ws.messages, Direction.CLIENT) == [e["type"] for e in s.received]
    assert "error" in got  # the bad event got an error event; the socket stayed open
    assert all(m.text for m in ws.messages) and all(m.fragments == () for m in ws.messages)
    assert [m.at_ns for m in ws.messages] == sorted(m.at_ns for m in ws.messages)
    # The close: the client's 1000, after the last message.
    assert (ws.close_code, ws.closed_by, ix.outcome) == (1000, Direction.CLIENT, Outcome.COMPLETE)
    assert ix.end_ns is not None and ix.end_ns >= ws.messages[-1].at_ns
    # Timing: each server message's offset from the session's first one is the upstream's own
    # (a loaded machine only delays a message, so the bound below is generous on one side).
    first = next(m.at_ns for m in ws.messages if m.direction == Direction.SERVER)
    recorded = [(m.at_ns - first) / 1e9 for m in ws.messages if m.direction == Direction.SERVER]
    sent = [x.at - s.sent[0].at for x in s.sent]
    for r, w in zip(recorded, sent, strict=True):
        assert w - 0.03 <= r <= w + 0.15
    deltas = [m for m in ws.messages if b"output_text.delta" in m.data]
    assert len(deltas) == len(WORDS)
    assert (deltas[0].at_ns - first) / 1e9 >= FIRST_TOKEN_GAP
    # Redaction: the upstream got the key everywhere; the cassette nowhere.
    assert s.headers["authorization"] == f"Bearer {KEY}"
    assert KEY in s.headers["sec-websocket-protocol"] and s.received[0]["session"]["api_key"] == KEY
    assert ix.request.header("authorization") == "REDACTED"
    assert ix.request.header("sec-websocket-protocol") == "realtime, openai-insecure-api-key.REDACTED"
    assert json.loads(ws.client_messages[0].data)["session"]["api_key"] == "REDACTED"
    assert "key=REDACTED" in ix.request.url


@pytest.mark.slow
async def test_record_keeps_a_realtime_session_message_by_message_with_its_timing_and_close(
    tmp_path: Path,
) -> None:
    out = tmp_path / "rt.tape"
    with realtime_upstream() as up, recording(out, "--redact-field", "api_key", upstream=up.url) as rec:
        got = await realtime_turn(rec.url, path=f"/v1/realtime?model=gpt-realtime&key={KEY}")
        await asyncio.to_thread(rec.wait_lines, 1)
    assert rec.lines[0].startswith("GET /v1/realtime?model=gpt-realtime&key=REDACTED 101  websocket 4 client + 18 server messages")
    assert "closed 1000 by client  complete" in rec.lines[0]
    assert KEY.encode() not in out.read_bytes()
    cas = load(out)
    assert cas.header["version"] >= WEBSOCKET_VERSION
    (ix,) = cas
    check_turn(ix, up, got)
    assert ix.setup is not None and ix.setup.new_connection  # t = 0 after the TCP connect


@pytest.mark.slow
async def test_regular_mode_records_a_session_the_client_opens_through_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "rt.tape"
    with realtime_upstream() as up, recording(out, "--mode", "regular", "--redact-field", "api_key") as rec:
        got = await realtime_turn(up.url, proxy=rec.url, path=f"/v1/realtime?model=gpt-realtime&key={KEY}")
        await asyncio.to_thread(rec.wait_lines, 1)
    (ix,) = load(out)
    check_turn(ix, up, got)
    assert ix.request.url.startswith(up.url + "/v1/realtime")


async def turn_through_mitmdump(tmp_path: Path, up_url: str, out: Path, *args: str,
                                path: str = "/v1/realtime?model=gpt-realtime") -> list[str]:
    """One Realtime turn through ``mitmdump -s addons/record.py`` (more ``args`` for it) in
    reverse mode to ``up_url``, once the cassette holds the finished session."""
    mitmdump = Path(sys.executable).parent / "mitmdump"
    addon = ROOT / "addons" / "record.py"
    with start(
        [str(mitmdump), "-s", str(addon), *args, "--mode", f"reverse:{up_url}", "--listen-host", "127.0.0.1",
         "-p", "0", "--set", f"streamtape_out={out}"],
        r"listening at (\S+?:\d+)", cwd=tmp_path,
    ) as proxy:
        got = await realtime_turn(proxy.url, path=path)
        await asyncio.to_thread(
            wait_until, lambda: (cas := on_disk(out)) is not None and len(cas) == 1 and cas[0].end_ns is not None
        )
    return got


@pytest.mark.slow
async def test_mitmdump_with_the_addon_script_records_a_session(tmp_path: Path) -> None:
    out = tmp_path / "m.tape"
    with realtime_upstream() as up:
        got = await turn_through_mitmdump(
            tmp_path, up.url, out, "--set", "streamtape_redact_fields=api_key",
            "--set", "streamtape_label=via=mitmdump", path=f"/v1/realtime?model=gpt-realtime&key={KEY}")
    (ix,) = load(out)
    check_turn(ix, up, got)
    assert ix.labels == {"via": "mitmdump"}


DROPPER = """
from mitmproxy import http


class Drop:
    def websocket_message(self, flow: http.HTTPFlow) -> None:
        m = flow.websocket.messages[-1]
        if m.from_client and b"frobnicate" in m.content:
            m.drop()


addons = [Drop()]
"""


@pytest.mark.slow
async def test_a_message_another_addon_drops_is_not_recorded(tmp_path: Path) -> None:
    """The recording is what went on the wire: an addon after streamtape's drops the bad event,
    so the upstream never answers it with an error, and the cassette never has it."""
    dropper = tmp_path / "drop.py"
    dropper.write_text(DROPPER)
    out = tmp_path / "d.tape"
    with realtime_upstream() as up:
        got = await turn_through_mitmdump(tmp_path, up.url, out, "-s", str(dropper))
    (ix,) = load(out)
    assert "error" not in got and [e["type"] for e in up.sessions[0].received] == [
        "session.update", "conversation.item.create", "response.create"]
    assert types(ix.messages, Direction.CLIENT) == [e["type"] for e in up.sessions[0].received]
    assert types(ix.messages, Direction.SERVER) == got


async def open_and_ask(url: str, path: str) -> ClientConnection:
    ws = await connect(url.replace("http://", "ws://") + path, proxy=None)
    await ws.recv()
    await ws.send(json.dumps({"type": "response.create"}))
    return ws


async def read_until_closed(ws: ClientConnection) -> tuple[list[str], int | None]:
    """The event types the client read until the connection closed, and the close code it saw."""
    got = []
    try:
        async for raw in ws:
            got.append(json.loads(raw)["type"])
    except ConnectionClosed:
        pass
    return got, ws.close_code


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "code", "outcome"),
    [
        ("close:1011", 1011, Outcome.COMPLETE),  # a close frame: the code tells, check reads it
        ("close:1000", 1000, Outcome.COMPLETE),  # 1000 mid-response: the truncation the SDK hides
        ("drop", None, Outcome.UPSTREAM_CLOSED),  # no close frame at all
    ],
)
async def test_a_server_that_cuts_a_response_is_recorded_with_who_closed_and_how(
    tmp_path: Path, fault: str, code: int | None, outcome: Outcome
) -> None:
    out = tmp_path / "cut.tape"
    with realtime_upstream() as up, recording(out, upstream=up.url) as rec:
        ws = await open_and_ask(rec.url, f"/v1/realtime?model=m&fault={fault}&after=2")
        got, client_saw = await read_until_closed(ws)
        await asyncio.to_thread(rec.wait_lines, 1)
    assert got.count("response.output_text.delta") == 2 and "response.done" not in got
    (ix,) = load(out)
    ws_ = ix.websocket
    assert ws_ is not None
    assert types(ws_.messages, Direction.SERVER) == ["session.created", *got]
    assert ws_.close_code == code and ix.outcome == outcome
    if code is not None:
        assert ws_.closed_by == Direction.SERVER and ws_.close_reason == "cut by the test server"
        assert client_saw == code  # the client got the same close
    else:
        assert ws_.closed_by == Direction.SERVER and ix.error and "without a close frame" in ix.error
        assert ws_.close_reason == ""
        # mitmproxy (11 and 12) closes the client's side with a clean 1000 when the server's
        # connection drops: through the proxy the client cannot tell; the recording can.
        assert client_saw == 1000
    assert f"closed {code}" in rec.lines[0] if code else "no close frame" in rec.lines[0]


@pytest.mark.slow
async def test_a_client_that_drops_its_connection_is_recorded_as_client_disconnected(tmp_path: Path) -> None:
    out = tmp_path / "drop.tape"
    with realtime_upstream(gap=0.2) as up, recording(out, upstream=up.url) as rec:
        ws = await open_and_ask(rec.url, "/v1/realtime?model=m")
        while json.loads(await ws.recv())["type"] != "response.output_text.delta":
            pass
        sock = ws.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        ws.transport.abort()  # a TCP reset: no close frame
        await asyncio.to_thread(rec.wait_lines, 1)
    (ix,) = load(out)
    assert ix.outcome == Outcome.CLIENT_DISCONNECTED and ix.websocket is not None
    assert ix.websocket.close_code is None and ix.websocket.closed_by == Direction.CLIENT
    assert "response.output_text.delta" in types(ix.websocket.messages, Direction.SERVER)


@pytest.mark.slow
async def test_stopping_the_recorder_mid_session_keeps_the_messages_so_far_as_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "stop.tape"
    with realtime_upstream(gap=0.5, words=("a ",) * 40) as up, recording(out, upstream=up.url) as rec:
        ws = await open_and_ask(rec.url, "/v1/realtime?model=m")
        for _ in range(4):
            await ws.recv()
        assert await asyncio.to_thread(rec.stop) == 0
        await ws.close()
    (ix,) = load(out)
    assert ix.outcome == Outcome.INTERRUPTED and ix.websocket is not None
    assert ix.websocket.close_code is None
    assert len(ix.websocket.server_messages) >= 4 and len(ix.websocket.client_messages) == 1


@pytest.mark.slow
async def test_a_refused_upgrade_is_recorded_as_the_http_answer_it_got(tmp_path: Path) -> None:
    out = tmp_path / "refused.tape"
    with realtime_upstream() as up, recording(out, upstream=up.url) as rec:
        with pytest.raises(Exception, match="401"):
            await connect(rec.url.replace("http://", "ws://") + "/v1/realtime?model=m&reject=401", proxy=None)
        await asyncio.to_thread(rec.wait_lines, 1)
    (ix,) = load(out)
    assert ix.websocket is None and ix.response is not None and ix.response.status == 401
    assert json.loads(ix.response.body)["error"]["code"] == "invalid_api_key"


@pytest.mark.slow
async def test_a_credential_in_a_client_message_is_warned_about_once_naming_the_option(tmp_path: Path) -> None:
    out = tmp_path / "cred.tape"
    with realtime_upstream() as up, recording(out, upstream=up.url) as rec:
        async with connect(rec.url.replace("http://", "ws://") + "/v1/realtime?model=m", proxy=None) as ws:
            await ws.recv()
            for _ in range(2):
                await ws.send(json.dumps({"type": "session.update", "session": {"client_secret": KEY}}))
                await ws.recv()
        await asyncio.to_thread(rec.wait_lines, 1)
        await asyncio.to_thread(rec.stop)
    assert rec.stderr.count("session.client_secret looks like a credential") == 1
    assert "--redact-field client_secret" in rec.stderr


@pytest.mark.slow
async def test_a_fragmented_message_is_recorded_whole_as_mitmproxy_hands_it_over(tmp_path: Path) -> None:
    """mitmproxy reassembles a message before its hook and keeps its frame sizes to itself
    (it forwards the message in the same frames): the recording has the whole message and no
    frame sizes, never a part."""
    out = tmp_path / "frag.tape"
    with realtime_upstream() as up, recording(out, upstream=up.url) as rec:
        ws = await connect(rec.url.replace("http://", "ws://") + "/v1/realtime?model=m&fragment=7", proxy=None)
        first = await ws.recv()
        assert isinstance(first, str)
        await ws.close()
        await asyncio.to_thread(rec.wait_lines, 1)
    (ix,) = load(out)
    assert len(first) > 100 and json.loads(first)["type"] == "session.created"
    (m,) = ix.messages
    assert m.data == first.encode() and m.fragments == () and m.text


@pytest.mark.slow
async def test_record_shadow_leaves_a_websocket_session_unmirrored_and_unpaired(tmp_path: Path) -> None:
    out = tmp_path / "shadow.tape"
    with realtime_upstream() as up, ScriptedServer({}) as shadow, \
            recording(out, "--shadow", shadow.url, upstream=up.url) as rec:
        got = await realtime_turn(rec.url)
        await asyncio.to_thread(rec.wait_lines, 1)
    (ix,) = load(out)
    assert ix.websocket is not None and types(ix.messages, Direction.SERVER) == got
    assert shadow.received == [] and ix.labels == {}  # a shadow sender speaks HTTP, not sessions


# -- the cassette format -----------------------------------------------------------


def session_ix(messages: Sequence[Message], close: int | None = 1000, by: Direction | None = Direction.CLIENT) -> Interaction:
    return Interaction(
        Request("GET", "http://api.test/v1/realtime?model=m", headers=(("Upgrade", "websocket"),)),
        Response(101, "Switching Protocols", framing=Framing.NONE, headers_at_ns=3 * MS),
        end_ns=900 * MS,
        websocket=WebSocketSession(tuple(messages), close, "done" if close else "", by),
    )


MESSAGES = (
    Message(10 * MS, Direction.SERVER, True, b'{"type":"session.created"}'),
    Message(12 * MS, Direction.CLIENT, True, b'{"type":"response.create"}'),
    Message(80 * MS, Direction.SERVER, False, b"\x00\xff" * 3000, (4000, 2000)),
    Message(80 * MS, Direction.SERVER, True, "ünïcode".encode()),
)


def test_sessions_and_http_interactions_round_trip_in_one_cassette(tmp_path: Path) -> None:
    http_ix = chat_ix(20)
    ixs = [http_ix, session_ix(MESSAGES), session_ix((), close=None, by=None)]
    save(tmp_path / "c.tape", ixs)
    cas = load(tmp_path / "c.tape")
    assert list(cas) == ixs
    assert cas[0].websocket is None and cas[1].messages == MESSAGES
    assert cas[1].first_byte_ns == 10 * MS  # the first server message


def test_an_unframed_cassette_stays_version_1_until_a_session_is_written_then_says_2(tmp_path: Path) -> None:
    # A cassette written before checksums (format 1, bare records), appended to: the
    # writer keeps its format and raises the version in place for a session.
    path = tmp_path / "v.tape"
    path.write_bytes(msgpack.packb({**make_header(PLAIN_VERSION)}, use_bin_type=True) + b"".join(
        msgpack.packb(r, use_bin_type=True) for r in interaction_records(chat_ix(20), 0)))
    assert load(path).header["version"] == PLAIN_VERSION == 1 and not load(path).checksummed
    before = path.read_bytes()
    save(path, [session_ix(MESSAGES)])  # appending raises the header's version in place
    cas = load(path)
    assert cas.header["version"] >= WEBSOCKET_VERSION == 2  # (a later feature may raise it further)
    after = path.read_bytes()[: len(before)]
    assert [n for n in range(len(before)) if before[n] != after[n]] == [before.index(b"\xa7version") + 8]
    assert len(cas) == 2 and cas[0] == load(path)[0]
    save(path, [chat_ix(30)])
    assert load(path).header["version"] >= 2 and len(load(path)) == 3


def test_the_background_writer_raises_the_version_before_the_first_message_record(tmp_path: Path) -> None:
    path = tmp_path / "bg.tape"
    w = BackgroundWriter(path)
    rec = SessionRecorder(w.submit, w.new_id, flush_ns=0, min_batch=1)
    rec.open("k", Begun(Request("GET", "http://x/ws"), 0, None, {}), 101, "Switching Protocols", "HTTP/1.1", (), 1000)
    w.flush()
    assert load(path).header["version"] >= 2 and load(path)[0].outcome == Outcome.INTERRUPTED
    rec.message("k", False, True, b'{"type":"a"}', 5 * MS)
    rec.message("k", True, True, b'{"type":"b"}', 6 * MS)
    w.flush()
    assert [m.data for m in load(path)[0].messages] == [b'{"type":"a"}', b'{"type":"b"}']
    rec.finish("k", 9 * MS, 1001, "going away", False)
    w.close()
    (ix,) = load(path)
    assert ix.websocket == WebSocketSession(ix.messages, 1001, "going away", Direction.SERVER)
    assert [m.at_ns for m in ix.messages] == [5 * MS, 6 * MS] and ix.end_ns == 9 * MS


def test_a_reader_rejects_a_newer_version_and_a_message_record_for_an_http_interaction(tmp_path: Path) -> None:
    p = tmp_path / "bad.tape"
    p.write_bytes(msgpack.packb({"format": "streamtape", "version": NEWEST_VERSION + 1}))
    with pytest.raises(CassetteError, match=f"version {NEWEST_VERSION + 1} is newer than this streamtape"):
        load(p)
    begin = {"t": "begin", "id": 0, "request": {"method": "GET", "url": "http://x/", "http_version": "HTTP/1.1",
                                                "headers": [], "body": b"", "started_at": 0.0},
             "response": None, "labels": {}}
    p.write_bytes(b"".join(msgpack.packb(r, use_bin_type=True) for r in (
        {"format": "streamtape", "version": 2}, begin, ["m", 0, b"x", [1], [0], [1]])))
    with pytest.raises(CassetteError, match="not a WebSocket session"):
        list(load(p))  # (a lazy reader finds it when the interaction is read)


def test_a_torn_message_record_is_dropped_and_the_session_loads_interrupted(tmp_path: Path) -> None:
    p = tmp_path / "torn.tape"
    with CassetteWriter(p) as w:
        rec = SessionRecorder(w.write, w.new_id, flush_ns=0, min_batch=1)
        rec.open("k", Begun(Request("GET", "http://x/ws"), 0, None, {}), 101, "", "HTTP/1.1", (), 0)
        rec.message("k", False, True, b"first", MS)
        rec.message("k", False, True, b"second" * 100, 2 * MS)
    p.write_bytes(p.read_bytes()[:-50])
    cas = load(p)
    assert cas.warnings and [m.data for m in cas[0].messages] == [b"first"]
    assert cas[0].outcome == Outcome.INTERRUPTED


def test_client_messages_lose_the_named_fields_and_binary_messages_pass_untouched() -> None:
    records: list[object] = []
    rec = SessionRecorder(records.extend, iter(range(9)).__next__, redaction=Redaction.build(body_fields=["api_key"]))
    rec.open("k", Begun(Request("GET", "http://x/ws?token=t0k"), 0, None, {"a": "b"}), 101, "", "HTTP/1.1",
             (("Set-Cookie", "s=1"),), 0)
    secret = json.dumps({"type": "session.update", "session": {"api_key": "x", "nested": [{"api_key": "y"}]}})
    rec.message("k", True, True, secret.encode(), MS)
    rec.message("k", False, True, secret.encode(), 2 * MS)  # server messages are kept as they came
    rec.message("k", True, False, b'{"api_key": "z"}', 3 * MS)  # binary: not JSON text
    ix = rec.finish("k", 4 * MS, 1000, "", True)
    assert ix is not None and ix.websocket is not None
    c, s, b = ix.websocket.messages
    assert json.loads(c.data)["session"] == {"api_key": "REDACTED", "nested": [{"api_key": "REDACTED"}]}
    assert s.data == secret.encode() and b.data == b'{"api_key": "z"}'
    assert ix.request.url.endswith("token=REDACTED") and ix.response is not None
    assert ix.response.header("set-cookie") == "REDACTED" and ix.labels == {"a": "b"}
    assert [r[0] if isinstance(r, list) else r["t"] for r in records] == ["begin", "m", "end"]  # type: ignore[index]


def test_message_batches_go_out_by_age_and_count_like_data_records() -> None:
    batches: list[Record] = []
    rec = SessionRecorder(lambda recs: batches.extend(recs), iter(range(9)).__next__,
                          flush_ns=100 * MS, max_flush_ns=1000 * MS, min_batch=8)
    rec.open("k", Begun(Request("GET", "http://x/ws"), 0, None, {}), 101, "", "HTTP/1.1", (), 0)
    for n in range(20):
        rec.message("k", False, True, b"%d" % n, n * 20 * MS)  # 20 ms apart
    rec.tick(5000 * MS)
    sizes = [len(r[3]) for r in batches if isinstance(r, list)]
    assert sum(sizes) == 20 and all(s >= 6 for s in sizes[:-1]) and len(sizes) >= 2


HOLD_ADDON = """
import json, time
from pathlib import Path

def request(flow):
    if flow.request.path.startswith("/hold"):
        log = Path({logs!r}) / flow.request.path.strip("/")
        t0 = time.perf_counter_ns()
        log.with_suffix(".start").write_text(str(t0))
        time.sleep({hold!r})  # holds mitmproxy's event loop: no socket is read meanwhile
        log.write_text(json.dumps([t0, time.perf_counter_ns()]))
"""
HOLD_S = 0.5
"""How long a request to ``/holdN`` holds the recording proxy's event loop."""


def _hold(proxy_url: str, logs: Path, name: str) -> tuple[threading.Thread, Path]:
    """Start holding the proxy's loop (a request to ``/NAME`` from a thread); returns once
    the hold has begun, with the thread and the file its span will be written to."""
    log = logs / name
    t = threading.Thread(target=lambda: httpx.get(f"{proxy_url}/{name}", timeout=30), daemon=True)
    t.start()
    wait_until(log.with_suffix(".start").exists, timeout=20, interval=0.001)
    return t, log


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's receive stamps (SO_TIMESTAMPNS) are Linux's")
def test_messages_that_came_while_the_proxys_loop_was_busy_keep_their_arrival_times(tmp_path: Path) -> None:
    # A server message and then a client message, each sent while mitmproxy's loop is held:
    # each must keep the time it came in, not the time the loop got to it.
    sent: dict[str, int] = {}
    send_b = threading.Event()

    def script(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            assert ws.recv() == "start"
            sent["A"] = time.perf_counter_ns()
            ws.send("A")
            send_b.wait(20)
            sent["B"] = time.perf_counter_ns()
            ws.send("B")
            assert ws.recv() == "C"
            ws.send("D")
            ws.recv()

    logs, out, addon = tmp_path / "holds", tmp_path / "h.tape", tmp_path / "hold.py"
    logs.mkdir()
    addon.write_text(HOLD_ADDON.format(logs=str(logs), hold=HOLD_S))
    mitmdump = Path(sys.executable).parent / "mitmdump"
    with serve(script, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        up = f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        with start([str(mitmdump), "-s", str(ROOT / "addons" / "record.py"), "-s", str(addon),
                    "--mode", f"reverse:{up}", "--listen-host", "127.0.0.1", "-p", "0",
                    "--set", f"streamtape_out={out}"], r"listening at (\S+?:\d+)", cwd=tmp_path) as proxy:
            with sync_connect(proxy.url.replace("http://", "ws://") + "/v1/realtime", proxy=None) as ws:
                ws.send("start")
                assert ws.recv(timeout=10) == "A"
                held, log_b = _hold(proxy.url, logs, "hold1")
                send_b.set()  # the upstream writes B while the loop is held
                held.join()
                assert ws.recv(timeout=10) == "B"
                held, log_c = _hold(proxy.url, logs, "hold2")
                sent["C"] = time.perf_counter_ns()
                ws.send("C")  # the client writes C while the loop is held
                held.join()
                assert ws.recv(timeout=10) == "D"
            wait_until(lambda: (cas := on_disk(out)) is not None and len(cas) == 1 and cas[0].end_ns is not None)
        server.shutdown()
    # The setup this test needs: each message was written while its hold had 0.2 s or more
    # to run, so a message timed when the loop got to it would be 200 ms late or more.
    for name, log in (("B", log_b), ("C", log_c)):
        held_from, held_to = json.loads(log.read_text())
        assert held_from < sent[name] and held_to - sent[name] >= 0.2e9, (name, (held_to - sent[name]) / 1e6)
    (ix,) = load(out)
    ws_ = ix.websocket
    assert ws_ is not None
    at = {m.data.decode(): m.at_ns for m in ws_.messages}
    assert [m.data for m in ws_.messages] == [b"start", b"A", b"B", b"C", b"D"]
    assert [m.at_ns for m in ws_.messages] == sorted(m.at_ns for m in ws_.messages)
    errors = {name: abs((at[name] - at["A"]) - (sent[name] - sent["A"])) / 1e6 for name in ("B", "C")}
    # Loopback delivers a write at once: the recorded spans are the senders' within a few ms
    # (50 ms leaves room for a starved machine).
    assert max(errors.values()) < 50, errors
