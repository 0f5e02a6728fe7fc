"""The recording addon's hook logic, in-process: :class:`RecordAddon` driven by
mitmproxy's own test harness (``mitmproxy.test.taddons`` / ``tflow``), as
mitmproxy unit-tests its addons, in milliseconds.

Each test calls the hooks in the order mitmproxy calls them for a live flow
(``request``, ``responseheaders``, each body piece through the stream callable,
then ``response`` or ``error``; ``done`` when the proxy stops), with a real
cassette file in ``tmp_path`` read back with :func:`streamtape.load`. What
only a real proxy shows (chunk boundaries on the wire, timing, an upstream
reset told apart from an early close and passed on to the client: that reads
the live sockets through mitmproxy's proxyserver addon, which a taddons
context does not have) is pinned by the real-proxy tests (tests/test_record.py,
tests/test_reliability_upstream.py).

The hooks need a running event loop (the addon hands records to its writer
after the current hook returns), so the tests are coroutines.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import flow as mflow
from mitmproxy import http
from mitmproxy.proxy import server_hooks
from mitmproxy.proxy.layers.http import HttpStream, SendHttp
from mitmproxy.proxy.layers.http import _events as events
from mitmproxy.proxy.layers.http._hooks import HttpErrorHook
from mitmproxy.test import taddons, tflow, tutils
from mitmproxy.websocket import WebSocketMessage
from wsproto.frame_protocol import Opcode

import streamtape
from streamtape.cassette.model import REDACTED, Direction, Interaction, Outcome
from streamtape.mitm import error_answer
from streamtape.mitm.record import RecordAddon
from streamtape.wire import Framing
from tests.support.builders import CHAT_BODY, CHAT_URL, EVENTS, async_wait_until

SSE_HEAD = (("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked"))
JSON_HEAD = (("Content-Type", "application/json"), ("Content-Length", "2"))
EARLY_CLOSE = "peer closed connection without sending complete message body: incomplete chunked read"


# --------------------------------------------------------------------------
# The rig: an addon in a taddons context, and flows through its hooks


@dataclass
class Rig:
    addon: RecordAddon
    tctx: taddons.context
    tape: Path
    errors: list[str]
    finished: list[Interaction] = field(default_factory=list)
    saved: list[Interaction] = field(default_factory=list)

    def stop(self) -> list[Interaction]:
        """The proxy stops (``done``): the writer closes; what the cassette holds."""
        self.addon.done()
        return list(streamtape.load(self.tape))


@contextlib.contextmanager
def recording(tmp_path: Path, *, run: bool = True, **options: object) -> Iterator[Rig]:
    """A :class:`RecordAddon` configured with ``options`` (by name, as ``--set`` gives
    them) writing to ``tmp_path/rec.tape``, past its ``running`` hook unless ``run``
    is false. ``done`` is called on the way out if the test did not."""
    tape = tmp_path / "rec.tape"
    options.setdefault("streamtape_out", str(tape))
    errors: list[str] = []
    finished: list[Interaction] = []
    saved: list[Interaction] = []
    addon = RecordAddon(on_error=errors.append, on_finished=finished.append, on_saved=saved.append)
    with taddons.context(addon) as tctx:
        tctx.configure(addon, **options)
        if run:
            addon.running()
        try:
            yield Rig(addon, tctx, tape, errors, finished, saved)
        finally:
            addon.done()  # idempotent: a test that stopped already changes nothing


def fields(headers: Sequence[tuple[str, str]]) -> http.Headers:
    return http.Headers([(k.encode(), v.encode()) for k, v in headers])


def chat_flow(
    headers: Sequence[tuple[str, str]] = (("Content-Type", "application/json"),),
    url: str = CHAT_URL,
    body: bytes = json.dumps(CHAT_BODY).encode(),
) -> http.HTTPFlow:
    """A live flow with only its request, as mitmproxy has it in the ``request`` hook."""
    return tflow.tflow(req=http.Request.make("POST", url, body, fields(headers)))


def head(
    f: http.HTTPFlow,
    headers: Sequence[tuple[str, str]] = SSE_HEAD,
    status: int = 200,
    http_version: bytes = b"HTTP/1.1",
) -> None:
    """The response head arrives: as in ``responseheaders``, a response without its body."""
    f.response = tutils.tresp(
        status_code=status,
        http_version=http_version,
        headers=fields(headers),
        content=None,
    )


def through(f: http.HTTPFlow, pieces: Sequence[bytes]) -> list[bytes]:
    """Each body piece through the stream callable, as mitmproxy passes them; what it returned."""
    assert f.response is not None
    stream = f.response.stream
    assert callable(stream), f"no recording callable on the response: stream={stream!r}"
    returned = []
    for p in pieces:
        out = stream(p)
        assert isinstance(out, bytes)
        returned.append(out)
    return returned


def stream_flow(
    addon: RecordAddon,
    f: http.HTTPFlow,
    pieces: Sequence[bytes] = EVENTS,
    headers: Sequence[tuple[str, str]] = SSE_HEAD,
) -> None:
    """One whole streaming flow through the hooks: request, head, pieces (through the
    callable when the addon set one), the clean end."""
    addon.request(f)
    head(f, headers)
    addon.responseheaders(f)
    if f.response is not None and callable(f.response.stream):
        through(f, [*pieces, b""])  # b"" once, on a clean end
    addon.response(f)


def whole_flow(addon: RecordAddon, f: http.HTTPFlow, headers: Sequence[tuple[str, str]] = JSON_HEAD) -> None:
    """A non-streaming flow with the body ``{}``."""
    stream_flow(addon, f, [b"{}"], headers)


def request_header(ix: Interaction, name: str) -> str | None:
    return ix.request.header(name)


# --------------------------------------------------------------------------
# Streaming responses


async def test_a_streaming_response_becomes_one_interaction_with_exactly_the_pieces_passed_through(
    tmp_path: Path,
) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        stream_flow(rig.addon, f, EVENTS)
        (ix,) = rig.stop()
    assert [p.data for p in ix.pieces] == EVENTS
    assert ix.outcome is Outcome.COMPLETE and ix.error is None
    assert ix.request.method == "POST" and ix.request.url == CHAT_URL
    assert json.loads(ix.request.body) == CHAT_BODY
    assert ix.response is not None
    assert ix.response.status == 200
    assert ix.response.framing is Framing.CHUNKED
    assert ("Content-Type", "text/event-stream") in ix.response.headers
    offsets = [p.at_ns for p in ix.pieces]
    assert offsets == sorted(offsets) and ix.end_ns is not None and ix.end_ns >= offsets[-1]


async def test_the_stream_callable_returns_every_piece_unchanged(tmp_path: Path) -> None:
    pieces = [b"data: {\"x\": \"w\xc3", b"\xb6rld\"}\n\n", b": keep-alive\n\n", b"\x00\xff" * 40_000, b""]
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        head(f)
        rig.addon.responseheaders(f)
        returned = through(f, pieces)
        rig.addon.response(f)
        (ix,) = rig.stop()
    assert returned == pieces
    assert all(r is p for r, p in zip(returned, pieces, strict=True))  # the same objects, not copies
    assert [p.data for p in ix.pieces] == pieces[:-1]  # the end's b"" is no piece


async def test_two_streams_interleaved_on_the_hooks_are_recorded_apart(tmp_path: Path) -> None:
    with recording(tmp_path) as rig:
        a, b = chat_flow(url="http://llm.test/a"), chat_flow(url="http://llm.test/b")
        for f in (a, b):
            rig.addon.request(f)
            head(f)
            rig.addon.responseheaders(f)
        for n in range(3):
            through(a, [f"a{n}".encode()])
            through(b, [f"b{n}".encode()])
        rig.addon.response(b)
        rig.addon.response(a)
        tape = rig.stop()
    by_url = {ix.request.url: [p.data for p in ix.pieces] for ix in tape}
    assert by_url == {"http://llm.test/a": [b"a0", b"a1", b"a2"], "http://llm.test/b": [b"b0", b"b1", b"b2"]}


@pytest.mark.parametrize(
    ("headers", "http_version"),
    [
        ((("Content-Type", "text/event-stream; charset=utf-8"), ("Content-Length", "99")), b"HTTP/1.1"),
        ((("Content-Type", "application/x-ndjson"), ("Transfer-Encoding", "chunked")), b"HTTP/1.1"),
        ((("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")), b"HTTP/1.1"),
        ((("Content-Type", "text/event-stream"),), b"HTTP/2.0"),
    ],
    ids=["sse-content-length", "ndjson", "chunked-of-unknown-type", "h2-sse"],
)
async def test_streaming_is_told_by_content_type_or_a_chunked_body(
    tmp_path: Path, headers: tuple[tuple[str, str], ...], http_version: bytes
) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        head(f, headers, http_version=http_version)
        rig.addon.responseheaders(f)
        through(f, [b"one", b"two"])
        rig.addon.response(f)
        (ix,) = rig.stop()
    assert [p.data for p in ix.pieces] == [b"one", b"two"]


# --------------------------------------------------------------------------
# What is recorded: non-streaming responses, the filter


@pytest.mark.parametrize(
    ("headers", "http_version"),
    [
        (JSON_HEAD, b"HTTP/1.1"),
        ((("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")), b"HTTP/2.0"),
    ],
    ids=["json-content-length", "h2-json"],
)
async def test_a_non_streaming_response_is_not_recorded_and_passes_through_as_it_comes(
    tmp_path: Path, headers: tuple[tuple[str, str], ...], http_version: bytes
) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        head(f, headers, http_version=http_version)
        rig.addon.responseheaders(f)
        assert f.response is not None and f.response.stream is True  # streamed on, not buffered
        rig.addon.response(f)
        assert rig.stop() == []
    assert rig.finished == []


async def test_with_streamtape_all_a_non_streaming_response_is_recorded_too(tmp_path: Path) -> None:
    with recording(tmp_path, streamtape_all="true") as rig:
        whole_flow(rig.addon, chat_flow())
        (ix,) = rig.stop()
    assert [p.data for p in ix.pieces] == [b"{}"]
    assert ix.response is not None and ix.response.framing is Framing.CONTENT_LENGTH


async def test_streamtape_filter_records_only_the_flows_it_matches(tmp_path: Path) -> None:
    with recording(tmp_path, streamtape_filter="~u /v1/chat/") as rig:
        stream_flow(rig.addon, chat_flow(url="http://llm.test/v1/chat/completions"), [b"chat"])
        stream_flow(rig.addon, chat_flow(url="http://llm.test/v1/completions"), [b"legacy"])
        tape = rig.stop()
    assert [(ix.request.url, [p.data for p in ix.pieces]) for ix in tape] == [
        ("http://llm.test/v1/chat/completions", [b"chat"])
    ]


async def test_streamtape_filter_applies_to_non_streaming_responses_recorded_with_streamtape_all(
    tmp_path: Path,
) -> None:
    with recording(tmp_path, streamtape_all="yes", streamtape_filter="~s & ~c 200") as rig:
        ok, missing = chat_flow(url="http://llm.test/ok"), chat_flow(url="http://llm.test/missing")
        whole_flow(rig.addon, ok)
        rig.addon.request(missing)
        head(missing, JSON_HEAD, status=404)
        rig.addon.responseheaders(missing)
        rig.addon.response(missing)
        tape = rig.stop()
    assert [ix.request.url for ix in tape] == ["http://llm.test/ok"]


# --------------------------------------------------------------------------
# Secrets


SECRET_HEADERS = (
    ("Content-Type", "application/json"),
    ("Authorization", "Bearer sk-live-123"),
    ("Cookie", "session=abc"),
    ("api-key", "azure-key-456"),
    ("X-Api-Key", "anthropic-key-789"),
    ("X-Request-Id", "req-1"),
)


async def test_authorization_cookie_and_api_key_headers_are_redacted_by_default(tmp_path: Path) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow(SECRET_HEADERS, url="http://llm.test/v1/chat/completions?key=gem-1&stream=1")
        rig.addon.request(f)
        head(f, (*SSE_HEAD, ("Set-Cookie", "track=1")))
        rig.addon.responseheaders(f)
        through(f, [b"data: x\n\n"])
        rig.addon.response(f)
        (ix,) = rig.stop()
    for name in ("authorization", "cookie", "api-key", "x-api-key"):
        assert request_header(ix, name) == REDACTED, name
    assert request_header(ix, "x-request-id") == "req-1"
    assert ix.request.url == f"http://llm.test/v1/chat/completions?key={REDACTED}&stream=1"
    assert ix.response is not None and ("Set-Cookie", REDACTED) in ix.response.headers
    raw = rig.tape.read_bytes()
    for secret in (b"sk-live-123", b"session=abc", b"azure-key-456", b"anthropic-key-789", b"gem-1", b"track=1"):
        assert secret not in raw, secret


async def test_with_redaction_off_secrets_are_recorded_as_sent(tmp_path: Path) -> None:
    with recording(tmp_path, streamtape_redact="false") as rig:
        f = chat_flow(SECRET_HEADERS, url="http://llm.test/v1/chat/completions?key=gem-1")
        stream_flow(rig.addon, f, [b"data: x\n\n"])
        (ix,) = rig.stop()
    assert request_header(ix, "authorization") == "Bearer sk-live-123"
    assert request_header(ix, "cookie") == "session=abc"
    assert request_header(ix, "api-key") == "azure-key-456"
    assert request_header(ix, "x-api-key") == "anthropic-key-789"
    assert ix.request.url.endswith("?key=gem-1")


async def test_more_headers_query_parameters_and_body_fields_are_redacted_when_named(tmp_path: Path) -> None:
    body = json.dumps({"model": "m", "auth": {"secret": "s-1"}, "messages": []}).encode()
    with recording(
        tmp_path,
        streamtape_redact_headers=["X-Org-Token, X-Team"],
        streamtape_redact_query=["sig"],
        streamtape_redact_fields=["secret"],
    ) as rig:
        f = chat_flow(
            (("Content-Type", "application/json"), ("X-Org-Token", "o-1"), ("X-Team", "t-1")),
            url="http://llm.test/v1/chat/completions?sig=abc",
            body=body,
        )
        stream_flow(rig.addon, f, [b"data: x\n\n"])
        (ix,) = rig.stop()
    assert request_header(ix, "x-org-token") == REDACTED
    assert request_header(ix, "x-team") == REDACTED
    assert ix.request.url.endswith(f"?sig={REDACTED}")
    assert json.loads(ix.request.body)["auth"] == {"secret": REDACTED}


# --------------------------------------------------------------------------
# Flows that end in the error hook


@pytest.mark.parametrize(
    ("message", "outcome"),
    [
        (EARLY_CLOSE, Outcome.UPSTREAM_CLOSED),
        ("received 5 bytes, expected 99", Outcome.UPSTREAM_CLOSED),
        ("Client disconnected.", Outcome.CLIENT_DISCONNECTED),
    ],
    ids=["incomplete-chunked-read", "short-content-length", "client-disconnected"],
)
async def test_a_stream_ending_in_the_error_hook_keeps_its_pieces_and_gets_its_outcome(
    tmp_path: Path, message: str, outcome: Outcome
) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        head(f)
        rig.addon.responseheaders(f)
        through(f, EVENTS[:3])  # no b"": the body never ended cleanly
        f.error = mflow.Error(message)
        rig.addon.error(f)
        (ix,) = rig.stop()
    assert ix.outcome is outcome
    assert ix.error == message
    assert [p.data for p in ix.pieces] == EVENTS[:3]


async def test_a_request_that_got_no_response_is_recorded_as_an_upstream_error_without_one(
    tmp_path: Path,
) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        f.error = mflow.Error("Connection refused")
        rig.addon.error(f)
        (ix,) = rig.stop()
    assert ix.outcome is Outcome.UPSTREAM_ERROR
    assert ix.error == "Connection refused"
    assert ix.response is None and ix.pieces == ()


async def test_a_stream_still_open_when_the_proxy_stops_is_saved_as_interrupted(tmp_path: Path) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        head(f)
        rig.addon.responseheaders(f)
        through(f, EVENTS[:2])
        (ix,) = rig.stop()
    assert ix.outcome is Outcome.INTERRUPTED
    assert [p.data for p in ix.pieces] == EVENTS[:2]


# --------------------------------------------------------------------------
# Labels, setup, saving


async def test_streamtape_label_is_stored_with_every_interaction(tmp_path: Path) -> None:
    with recording(tmp_path, streamtape_label=["backend=vllm", "run=3,day=mon"]) as rig:
        stream_flow(rig.addon, chat_flow(url="http://llm.test/a"), [b"a"])
        stream_flow(rig.addon, chat_flow(url="http://llm.test/b"), [b"b"])
        tape = rig.stop()
    assert [ix.labels for ix in tape] == [{"backend": "vllm", "run": "3", "day": "mon"}] * 2


async def test_a_request_that_waited_for_a_new_connection_keeps_its_tcp_setup_out_of_the_offsets(
    tmp_path: Path,
) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        # tserver_conn's stamps: TCP set up 1 s after it started; plain HTTP, so ready now.
        rig.addon.server_connected(server_hooks.ServerConnectionHookData(server=f.server_conn, client=f.client_conn))
        head(f)
        rig.addon.responseheaders(f)
        through(f, [b"x"])
        rig.addon.response(f)
        (ix,) = rig.stop()
    assert ix.setup is not None
    assert ix.setup.tcp_ns == 1_000_000_000
    assert ix.setup.tls_ns is None and ix.setup.wait_ns >= 0


async def test_a_finished_interaction_is_on_disk_and_reported_saved_while_the_proxy_runs(
    tmp_path: Path,
) -> None:
    with recording(tmp_path) as rig:
        stream_flow(rig.addon, chat_flow(), EVENTS)
        assert [p.data for p in rig.finished[0].pieces] == EVENTS  # on_finished: as it ends
        await async_wait_until(lambda: rig.saved)  # the writer thread writes; the report comes back to the loop
        assert rig.saved == rig.finished and rig.addon.saved == 1
        (on_disk,) = streamtape.load(rig.tape)  # before done: saved means saved
        assert [p.data for p in on_disk.pieces] == EVENTS


async def test_a_request_arriving_before_the_running_hook_is_held_and_then_recorded(tmp_path: Path) -> None:
    with recording(tmp_path, run=False) as rig:
        f = chat_flow()
        held = rig.addon.request(f)
        assert held is not None  # mitmproxy awaits it: the request waits
        waiting = asyncio.ensure_future(held)
        await asyncio.sleep(0)
        assert not waiting.done()
        rig.addon.running()
        await asyncio.wait_for(waiting, 1)
        head(f)
        rig.addon.responseheaders(f)
        through(f, [b"early"])
        rig.addon.response(f)
        (ix,) = rig.stop()
    assert [p.data for p in ix.pieces] == [b"early"]


# --------------------------------------------------------------------------
# WebSocket sessions (streamtape.mitm.websocket)


async def test_a_websocket_session_becomes_one_interaction_with_its_messages_and_its_close(
    tmp_path: Path,
) -> None:
    with recording(tmp_path) as rig:
        f = tflow.twebsocketflow()
        ws, f.websocket = f.websocket, None  # mitmproxy sets it just before the response hook
        assert ws is not None
        ws.messages = []
        rig.addon.request(f)
        rig.addon.responseheaders(f)
        f.websocket = ws
        rig.addon.response(f)
        sent = [
            WebSocketMessage(Opcode.TEXT, True, b'{"type": "session.update"}'),
            WebSocketMessage(Opcode.TEXT, False, b'{"type": "session.updated"}'),
            WebSocketMessage(Opcode.BINARY, False, b"\x00\x01"),
        ]
        dropped = WebSocketMessage(Opcode.TEXT, True, b"dropped by another addon")
        for m in [sent[0], dropped, *sent[1:]]:
            ws.messages.append(m)
            rig.addon.websocket_message(f)
            if m is dropped:
                m.drop()
            await asyncio.sleep(0)  # the message is read once mitmproxy has relayed it
        ws.close_code, ws.close_reason, ws.closed_by_client = 1000, "bye", True
        rig.addon.websocket_end(f)
        await asyncio.sleep(0)
        (ix,) = rig.stop()
    assert ix.websocket is not None
    assert [(m.direction, m.text, m.data) for m in ix.websocket.messages] == [
        (Direction.CLIENT, True, b'{"type": "session.update"}'),
        (Direction.SERVER, True, b'{"type": "session.updated"}'),
        (Direction.SERVER, False, b"\x00\x01"),
    ]
    assert (ix.websocket.close_code, ix.websocket.close_reason, ix.websocket.closed_by) == (1000, "bye", Direction.CLIENT)
    assert ix.response is not None and ix.response.status == 101
    assert ix.outcome is Outcome.COMPLETE


# --------------------------------------------------------------------------
# Bad options fail loudly


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"streamtape_redact": "maybe"}, "streamtape_redact: invalid value 'maybe' (expected true or false)"),
        ({"streamtape_all": "perhaps"}, "streamtape_all: invalid value 'perhaps' (expected true or false)"),
        ({"streamtape_filter": "~u ("}, "streamtape_filter: invalid filter expression '~u ('"),
        ({"streamtape_label": ["novalue"]}, "bad label 'novalue'"),
        ({"streamtape_out": ""}, "streamtape_out: no cassette file given"),
    ],
    ids=["redact", "all", "filter", "label", "out"],
)
async def test_a_bad_option_value_fails_loudly_and_records_nothing(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with recording(tmp_path, run=False, **options) as rig:
        assert len(rig.errors) == 1 and rig.errors[0].startswith(message), rig.errors
        assert rig.addon.failed == rig.errors[0]
        rig.addon.running()
        await asyncio.sleep(0)  # shutdown is asked for thread-safely: on the next loop turn
        assert rig.tctx.master.should_exit.is_set()  # the proxy stops instead of running on
        f = chat_flow()
        rig.addon.request(f)
        head(f)
        rig.addon.responseheaders(f)
        rig.addon.response(f)
        rig.addon.done()
    assert rig.addon.recorder is None
    assert not rig.tape.exists()  # not even an empty cassette
    assert rig.finished == []


async def test_without_on_error_a_bad_option_is_logged_as_an_error_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    addon = RecordAddon()
    with caplog.at_level(logging.ERROR, logger="streamtape"), taddons.context(addon) as tctx:
        tctx.configure(addon, streamtape_out=str(tmp_path / "rec.tape"), streamtape_redact="maybe")
        addon.running()
        await asyncio.sleep(0)
        assert tctx.master.should_exit.is_set()
        addon.done()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "streamtape: streamtape_redact: invalid value 'maybe' (expected true or false)" in lines
    assert any("recording disabled" in line for line in lines), lines


async def test_a_misspelt_streamtape_option_left_unconverted_by_mitmproxy_fails_at_running(
    tmp_path: Path,
) -> None:
    with recording(tmp_path, run=False) as rig:
        rig.tctx.options.set("streamtape_redcat=false", defer=True)  # as --set leaves it
        rig.addon.running()
        await asyncio.sleep(0)
        assert rig.errors == ["invalid value 'false' for option streamtape_redcat"]
        assert rig.tctx.master.should_exit.is_set()
    assert not rig.tape.exists()


async def test_a_bad_value_set_while_running_stops_recording_until_a_good_one_comes(tmp_path: Path) -> None:
    with recording(tmp_path) as rig:
        rig.tctx.configure(rig.addon, streamtape_redact="maybe")  # as ':set' in a running mitmproxy
        assert rig.errors == ["streamtape_redact: invalid value 'maybe' (expected true or false)"]
        stream_flow(rig.addon, chat_flow(url="http://llm.test/while-failed"), [b"lost"])
        rig.tctx.configure(rig.addon, streamtape_redact="off")
        assert rig.addon.failed is None
        stream_flow(rig.addon, chat_flow(SECRET_HEADERS, url="http://llm.test/after"), [b"kept"])
        await asyncio.sleep(0)
        assert not rig.tctx.master.should_exit.is_set()  # the proxy itself goes on serving
        (ix,) = rig.stop()
    assert ix.request.url == "http://llm.test/after"
    assert request_header(ix, "authorization") == "Bearer sk-live-123"  # the new value applies


# --------------------------------------------------------------------------
# The JSON answer to a request the upstream never answered (streamtape.mitm.error_answer)


@pytest.fixture
def pristine(monkeypatch: pytest.MonkeyPatch) -> object:
    """mitmproxy's method unwrapped and no install counted, for this test only: an addon
    another test loaded and never stopped (a taddons context without ``done``) leaves
    the wrapper installed for the rest of the process. Undone after the test."""
    original = inspect.unwrap(HttpStream.handle_protocol_error)
    monkeypatch.setattr(HttpStream, "handle_protocol_error", original)
    monkeypatch.setattr(error_answer, "_users", 0)
    monkeypatch.setattr(error_answer, "_original", None)
    return original


async def test_the_addon_wraps_mitmproxys_protocol_error_handler_while_loaded_and_restores_it_when_done(
    tmp_path: Path, pristine: object
) -> None:
    original = HttpStream.handle_protocol_error
    assert not error_answer.installed()
    (tmp_path / "second").mkdir()
    with recording(tmp_path) as first, recording(tmp_path / "second") as second:
        assert error_answer.installed()
        first.addon.done()
        assert error_answer.installed()  # counted: the second recorder still answers
        second.addon.done()
    assert HttpStream.handle_protocol_error is original


def test_mitmproxy_internals_not_as_checked_leave_its_own_page(monkeypatch: pytest.MonkeyPatch, pristine: object) -> None:
    def not_a_generator(self: object, event: object) -> None:
        return None

    assert not error_answer.installed()
    monkeypatch.setattr(HttpStream, "handle_protocol_error", not_a_generator)
    assert error_answer.install() is False
    assert getattr(HttpStream, "handle_protocol_error") is not_a_generator  # noqa: B009 - mypy: not a method here
    error_answer.uninstall()  # nothing was installed: nothing to undo
    assert getattr(HttpStream, "handle_protocol_error") is not_a_generator  # noqa: B009


REFUSED = "[Errno 111] Connect call failed ('127.0.0.1', 9)"


def protocol_error(rig: Rig, f: http.HTTPFlow) -> list[object]:
    """What mitmproxy's own ``HttpStream.handle_protocol_error`` (as the addon left it)
    sends when ``f``'s upstream gives no response: it is driven as mitmproxy's layer
    drives it, with the ``error`` hook run where it yields that hook."""
    from mitmproxy.proxy.context import Context

    ctx = Context(f.client_conn, rig.tctx.options)
    ctx.server = f.server_conn
    stream = HttpStream(ctx, 1)
    stream.flow = f
    stream.client_state = stream.state_done  # the whole request was read
    stream.server_state = stream.state_wait_for_response_headers
    code: Any = events.ErrorCode.CONNECT_FAILED if hasattr(events, "ErrorCode") else 502  # 12.x; 11.x: the status
    commands = stream.handle_protocol_error(events.ResponseProtocolError(1, REFUSED, code))
    sent: list[object] = []
    reply = None
    with contextlib.suppress(StopIteration):
        while True:
            command = commands.send(reply)
            if isinstance(command, HttpErrorHook):
                rig.addon.error(f)
            elif isinstance(command, SendHttp):
                sent.append(command.event)
    return sent


async def test_a_recorded_flow_the_upstream_never_answered_gets_a_json_502_in_place_of_mitmproxys_page(
    tmp_path: Path,
) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        head_, data, end = protocol_error(rig, f)
        (ix,) = rig.stop()
    assert isinstance(head_, events.ResponseHeaders) and isinstance(end, events.ResponseEndOfMessage)
    assert head_.response.status_code == 502 and head_.response.headers["content-type"] == "application/json"
    assert isinstance(data, events.ResponseData)
    assert json.loads(data.data) == {"error": {
        "message": "streamtape's recording proxy could not reach the upstream https://api.openai.com:443: "
                   f"connection refused ({REFUSED})",
        "type": "streamtape_upstream_error", "param": None, "code": None}}
    assert ix.outcome is Outcome.UPSTREAM_ERROR and ix.error == REFUSED  # the cassette keeps mitmproxy's words


async def test_a_flow_the_addon_did_not_record_keeps_mitmproxys_own_error_for_the_client(tmp_path: Path) -> None:
    with recording(tmp_path) as rig:
        f = chat_flow()  # no request hook: begun before the addon was there
        (sent,) = protocol_error(rig, f)
    assert isinstance(sent, events.ResponseProtocolError) and sent.message == REFUSED


async def test_an_answer_that_cannot_be_built_leaves_mitmproxys_own_error_for_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> bytes:
        raise AttributeError("as if mitmproxy's internals had changed")

    monkeypatch.setattr(error_answer, "error_body", broken)
    with recording(tmp_path) as rig:
        f = chat_flow()
        rig.addon.request(f)
        (sent,) = protocol_error(rig, f)
        (ix,) = rig.stop()
    assert isinstance(sent, events.ResponseProtocolError) and sent.message == REFUSED
    assert ix.outcome is Outcome.UPSTREAM_ERROR
