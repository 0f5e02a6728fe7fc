"""The replay addon's hook logic, in-process: :class:`ReplayAddon` driven by
mitmproxy's own test harness (``mitmproxy.test.taddons`` / ``tflow``), in
milliseconds, with real cassette files in ``tmp_path``.

In-process there is no proxy server, but there is everything the addon's hooks
decide with: the ``running`` hook starts the real replay server on 127.0.0.1
(the test's event loop), the ``request`` hook matches and rewrites a flow to it
(or refuses it, or leaves it to go upstream), and ``next_layer`` turns a
connection whose first request a recording answers into a relay to it (the
fast path, :mod:`streamtape.mitm.direct`). What the tests cannot see here is
mitmproxy carrying the bytes: that is pinned by tests/test_proxy_replay.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from mitmproxy import http
from mitmproxy.connection import Server
from mitmproxy.proxy import events, layers
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layer import NextLayer
from mitmproxy.proxy.layers.http import HTTPMode
from mitmproxy.test import taddons, tflow

import streamtape
from streamtape.mitm.replay import ReplayAddon, Unmatched
from tests.support.builders import CHAT_BODY, CHAT_URL, EVENTS, chat_ix

CHAT = json.dumps(CHAT_BODY).encode()
JSON = (("Content-Type", "application/json"),)


@dataclass
class Rig:
    addon: ReplayAddon
    tctx: taddons.context
    lines: list[str]
    errors: list[str]


@contextlib.asynccontextmanager
async def replaying(tape: Path | None, *, run: bool = True, **options: object) -> AsyncIterator[Rig]:
    """A :class:`ReplayAddon` configured with ``options`` (by name, as ``--set`` gives
    them) replaying ``tape``, past its ``running`` hook (the replay server listens)
    unless ``run`` is false; ``done`` on the way out."""
    if tape is not None:
        options.setdefault("streamtape_cassette", [str(tape)])
    lines: list[str] = []
    errors: list[str] = []
    addon = ReplayAddon(on_line=lines.append, on_error=errors.append)
    with taddons.context(addon) as tctx:
        if options:
            tctx.configure(addon, **options)
        if run:
            await addon.running()
        try:
            yield Rig(addon, tctx, lines, errors)
        finally:
            await addon.done()


@pytest.fixture
def tape(tmp_path: Path) -> Path:
    """One recorded OpenAI chat stream (``POST /v1/chat/completions``, :data:`CHAT_BODY`)."""
    p = tmp_path / "chat.tape"
    streamtape.save(p, [chat_ix(1)])
    return p


def fields(headers: Sequence[tuple[str, str]]) -> http.Headers:
    return http.Headers([(k.encode(), v.encode()) for k, v in headers])


def chat_flow(url: str = CHAT_URL, body: bytes = CHAT, headers: Sequence[tuple[str, str]] = JSON) -> http.HTTPFlow:
    """A live flow with only its request, as mitmproxy has it in the ``request`` hook."""
    return tflow.tflow(req=http.Request.make("POST", url, body, fields(headers)))


def untouched(f: http.HTTPFlow, url: str = CHAT_URL) -> bool:
    """The flow goes on as it came: same destination, no answer, no replay header."""
    return (
        f.request.url == url
        and f.response is None
        and "X-Streamtape-Replay" not in f.request.headers
        and "streamtape_replay" not in f.metadata
    )


async def send(f: http.HTTPFlow) -> httpx.Response:
    """Send a flow's request where it now points, as mitmproxy would send it upstream."""
    headers = [(k, v) for k, v in f.request.headers.items(multi=True) if k.lower() != "content-length"]
    # verify=False: plain HTTP to 127.0.0.1, and no CA bundle to load (that takes 50 ms)
    async with httpx.AsyncClient(trust_env=False, verify=False) as client:
        return await client.request(f.request.method, f.request.url, headers=headers, content=f.request.raw_content)


# --------------------------------------------------------------------------
# A request a recording answers


async def test_a_matching_request_is_pointed_at_the_replay_server_naming_the_interaction(tape: Path) -> None:
    async with replaying(tape) as rig:
        server = rig.addon.server
        assert server is not None and server.port > 0  # listening since the running hook
        f = chat_flow()
        await rig.addon.request(f)
        assert f.response is None  # not answered in the hook: the replay server streams it
        assert (f.request.scheme, f.request.host, f.request.port) == ("http", "127.0.0.1", server.port)
        assert f.request.path == "/v1/chat/completions"
        token, _, index = f.request.headers["X-Streamtape-Replay"].rpartition(":")
        assert token and index == "0" and f.metadata["streamtape_replay"] == 0


async def test_the_rewritten_request_gets_the_recorded_status_headers_and_stream(tape: Path) -> None:
    async with replaying(tape, streamtape_profile="instant") as rig:
        f = chat_flow()
        await rig.addon.request(f)
        r = await send(f)
        assert rig.addon.stats["replayed"] == 1
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["transfer-encoding"] == "chunked"
    assert r.content == b"".join(EVENTS)


async def test_the_replay_header_alone_chooses_the_interaction_so_matching_happens_once(tmp_path: Path) -> None:
    tape = tmp_path / "two.tape"
    streamtape.save(tape, [chat_ix(1, events=[b"data: first\n\n"]), chat_ix(1, events=[b"data: second\n\n"])])
    async with replaying(tape, streamtape_profile="instant", streamtape_strict="true") as rig:
        flows = [chat_flow(), chat_flow()]
        for f in flows:
            await rig.addon.request(f)
        assert [f.metadata["streamtape_replay"] for f in flows] == [0, 1]  # repeats in recorded order
        bodies = [(await send(f)).content for f in reversed(flows)]  # the other order: the header decides
    assert bodies == [b"data: second\n\n", b"data: first\n\n"]


async def test_a_replayed_flow_streams_its_response_and_other_flows_are_left_as_they_are(tape: Path) -> None:
    async with replaying(tape, streamtape_unmatched="passthrough") as rig:
        replayed, other = chat_flow(), chat_flow(url="http://llm.test/v1/models")
        for f in (replayed, other):
            await rig.addon.request(f)
            f.response = http.Response.make(200, b"", fields([("Content-Type", "text/event-stream")]))
            rig.addon.responseheaders(f)
    assert replayed.response is not None and replayed.response.stream is True
    assert other.response is not None and other.response.stream is False


async def test_streamtape_ignore_fields_lets_a_request_differing_only_there_match(tape: Path) -> None:
    other_model = json.dumps({**CHAT_BODY, "model": "another-model"}).encode()
    async with replaying(tape, streamtape_unmatched="refuse") as rig:
        strict = chat_flow(body=other_model)
        await rig.addon.request(strict)
        assert strict.response is not None and strict.response.status_code == 422
    async with replaying(tape, streamtape_unmatched="refuse", streamtape_ignore_fields=["model"]) as rig:
        lenient = chat_flow(body=other_model)
        await rig.addon.request(lenient)
        assert lenient.response is None and lenient.metadata["streamtape_replay"] == 0


async def test_streamtape_match_headers_makes_a_request_with_another_value_a_no_match(tape: Path) -> None:
    async with replaying(tape, streamtape_unmatched="refuse", streamtape_match_headers=["content-type"]) as rig:
        same, other = chat_flow(), chat_flow(headers=(("Content-Type", "text/plain"),))
        await rig.addon.request(same)
        await rig.addon.request(other)
    assert same.response is None and same.metadata["streamtape_replay"] == 0
    assert other.response is not None and other.response.status_code == 422


async def test_with_streamtape_strict_a_recording_answers_only_as_often_as_it_was_recorded(tape: Path) -> None:
    async with replaying(tape, streamtape_unmatched="refuse", streamtape_strict="true") as rig:
        first, second = chat_flow(), chat_flow()
        await rig.addon.request(first)
        await rig.addon.request(second)
    assert first.metadata["streamtape_replay"] == 0
    assert second.response is not None and second.response.status_code == 422


async def test_a_null_sent_for_a_field_the_recording_lacks_matches_unless_streamtape_strict_nulls(tape: Path) -> None:
    with_null = json.dumps({**CHAT_BODY, "user": None}).encode()
    async with replaying(tape, streamtape_unmatched="refuse") as rig:
        lenient = chat_flow(body=with_null)
        await rig.addon.request(lenient)
    assert lenient.response is None and lenient.metadata["streamtape_replay"] == 0
    async with replaying(tape, streamtape_unmatched="refuse", streamtape_strict_nulls="true") as rig:
        strict = chat_flow(body=with_null)
        await rig.addon.request(strict)
    assert strict.response is not None and strict.response.status_code == 422


# --------------------------------------------------------------------------
# A request no recording answers


async def test_with_refuse_an_unmatched_request_gets_a_422_naming_the_closest_recording(tape: Path) -> None:
    async with replaying(tape, streamtape_unmatched="refuse") as rig:
        f = chat_flow(body=json.dumps({**CHAT_BODY, "model": "x"}).encode())
        await rig.addon.request(f)
        assert rig.addon.stats == {"replayed": 0, "passthrough": 0, "refused": 1}
    assert f.response is not None
    assert f.response.status_code == 422
    assert f.response.headers["Content-Type"] == "application/json"
    error = json.loads(f.response.content or b"")["error"]
    assert error["type"] == "streamtape_no_match"
    assert "closest is chat.tape#0 POST /v1/chat/completions" in error["message"]
    assert "model" in error["message"]
    assert f.request.host == "api.openai.com"  # refused here, never sent anywhere
    assert any("refused (422)" in line for line in rig.lines), rig.lines


async def test_streamtape_no_match_status_sets_the_refusal_status_and_the_replay_servers(tape: Path) -> None:
    async with replaying(tape, streamtape_unmatched="refuse", streamtape_no_match_status="501") as rig:
        f = chat_flow(url="http://llm.test/api/chat", body=CHAT)
        await rig.addon.request(f)
        assert rig.addon.server is not None and rig.addon.server.no_match_status == 501
        rig.tctx.configure(rig.addon, streamtape_no_match_status="404")
        assert rig.addon.server.no_match_status == 404
    assert f.response is not None and f.response.status_code == 501
    assert f.response.headers["X-Should-Retry"] == "false"  # the SDKs would retry a 5xx
    error = json.loads(f.response.content or b"")["error"]  # Ollama's shape, for /api/chat
    assert isinstance(error, str) and error.startswith("no recorded interaction matches POST /api/chat")
    assert any("refused (501)" in line for line in rig.lines), rig.lines


async def test_with_passthrough_an_unmatched_request_is_left_to_go_upstream(tape: Path) -> None:
    async with replaying(tape) as rig:  # passthrough is the default
        assert rig.addon.unmatched is Unmatched.PASSTHROUGH
        f = chat_flow(url="http://llm.test/v1/models")
        await rig.addon.request(f)
        assert rig.addon.stats == {"replayed": 0, "passthrough": 1, "refused": 0}
    assert untouched(f, "http://llm.test/v1/models")
    assert any("passed upstream" in line and "closest is chat.tape#0" in line for line in rig.lines), rig.lines


async def test_a_flow_another_addon_answered_already_is_left_alone(tape: Path) -> None:
    async with replaying(tape, streamtape_unmatched="refuse") as rig:
        f = chat_flow()
        f.response = http.Response.make(407, b"proxy auth required")
        await rig.addon.request(f)
        assert rig.addon.stats == {"replayed": 0, "passthrough": 0, "refused": 0}
    assert f.response.status_code == 407 and "X-Streamtape-Replay" not in f.request.headers


async def test_a_request_for_the_replay_server_itself_is_not_matched_again(tape: Path) -> None:
    async with replaying(tape, streamtape_unmatched="refuse") as rig:
        assert rig.addon.server is not None
        url = f"http://127.0.0.1:{rig.addon.server.port}/v1/chat/completions"
        f = chat_flow(url=url)
        await rig.addon.request(f)
        assert rig.addon.stats == {"replayed": 0, "passthrough": 0, "refused": 0}
    assert untouched(f, url)


async def test_a_request_arriving_before_the_running_hook_waits_for_the_replay_server(tape: Path) -> None:
    async with replaying(tape, run=False) as rig:
        f = chat_flow()
        waiting = asyncio.ensure_future(rig.addon.request(f))
        await asyncio.sleep(0.01)
        assert not waiting.done() and untouched(f)  # not passed upstream unreplayed
        await rig.addon.running()
        await asyncio.wait_for(waiting, 1)
        assert rig.addon.server is not None
        assert f.request.port == rig.addon.server.port and f.metadata["streamtape_replay"] == 0


# --------------------------------------------------------------------------
# The fast path: a connection whose first request a recording answers


def proxy_connection(rig: Rig, first_bytes: bytes) -> NextLayer:
    """A plain-HTTP proxy connection (regular mode) as mitmproxy's ``next_layer`` hook
    sees it: its first bytes received, mitmproxy's own choice (its HTTP layer) made."""
    client = tflow.tclient_conn()
    client.sockname = ("127.0.0.1", 8080)
    context = Context(client, rig.tctx.options)
    nl = NextLayer(context)
    nl.events.append(events.DataReceived(client, first_bytes))
    nl.layer = layers.HttpLayer(context, HTTPMode.regular)
    return nl


def proxy_request(url: str, body: bytes = CHAT) -> bytes:
    return (
        f"POST {url} HTTP/1.1\r\nHost: api.openai.com\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def test_a_proxy_connection_whose_first_request_a_recording_answers_becomes_a_relay(tape: Path) -> None:
    async with replaying(tape) as rig:
        server = rig.addon.server
        assert server is not None
        nl = proxy_connection(rig, proxy_request(CHAT_URL))
        rig.addon.next_layer(nl)
        assert isinstance(nl.layer, layers.TCPLayer)  # bytes relayed, below the HTTP layer
        assert isinstance(nl.context.server, Server)
        assert nl.context.server.address == ("127.0.0.1", server.port)


async def test_a_proxy_connection_whose_first_request_no_recording_answers_keeps_mitmproxys_http_layer(
    tape: Path,
) -> None:
    async with replaying(tape) as rig:
        nl = proxy_connection(rig, proxy_request("http://llm.test/v1/models"))
        chosen = nl.layer
        rig.addon.next_layer(nl)
    assert nl.layer is chosen  # the slow path: the request hook decides, flow by flow
    assert nl.context.server.address is None


async def test_a_proxy_connection_whose_first_request_is_not_all_in_is_decided_again_later(tape: Path) -> None:
    async with replaying(tape) as rig:
        nl = proxy_connection(rig, proxy_request(CHAT_URL)[:40])
        rig.addon.next_layer(nl)
    assert nl.layer is None  # mitmproxy asks the next_layer hook again when more bytes come
    assert nl.context.server.address is None


# --------------------------------------------------------------------------
# Bad options fail loudly


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("streamtape_unmatched", "maybe", "streamtape_unmatched: expected passthrough or refuse, got 'maybe'"),
        ("streamtape_strict", "perhaps", "streamtape_strict: invalid value 'perhaps' (expected true or false)"),
        ("streamtape_strict_nulls", "sometimes",
         "streamtape_strict_nulls: invalid value 'sometimes' (expected true or false)"),
        ("streamtape_profile", "chunk=sideways", "streamtape_profile:"),
        ("streamtape_cassette", ["/nonexistent/x.tape"], "streamtape_cassette:"),
        ("streamtape_no_match_status", "200",
         "streamtape_no_match_status: expected an error status, 400 to 599, got '200'"),
    ],
    ids=["unmatched", "strict", "strict-nulls", "profile", "cassette", "no-match-status"],
)
async def test_a_bad_option_value_fails_loudly_and_stops_the_proxy(
    tape: Path, option: str, value: object, message: str
) -> None:
    async with replaying(tape, run=False, **{option: value}) as rig:
        assert len(rig.errors) == 1 and rig.errors[0].startswith(message), rig.errors
        await rig.addon.running()
        await asyncio.sleep(0)  # shutdown is asked for thread-safely: on the next loop turn
        assert rig.tctx.master.should_exit.is_set()
        assert rig.addon.server is None  # no replay server
        f = chat_flow()
        await asyncio.wait_for(rig.addon.request(f), 1)  # does not wait for a server that never comes
    assert untouched(f)
    if option == "profile":
        assert "sideways" in rig.errors[0]
    if option == "cassette":
        assert "no such cassette file" in rig.errors[0]


async def test_no_cassette_at_all_fails_loudly_at_running(tape: Path) -> None:
    async with replaying(None, run=False) as rig:
        await rig.addon.running()
        await asyncio.sleep(0)
        assert rig.errors == ["streamtape_cassette: no cassette given (--set streamtape_cassette=FILE)"]
        assert rig.tctx.master.should_exit.is_set() and rig.addon.server is None


async def test_without_on_error_a_bad_option_is_logged_as_an_error_naming_it(
    tape: Path, caplog: pytest.LogCaptureFixture
) -> None:
    addon = ReplayAddon()
    with caplog.at_level(logging.ERROR, logger="streamtape"), taddons.context(addon) as tctx:
        tctx.configure(addon, streamtape_cassette=[str(tape)], streamtape_unmatched="maybe")
        await addon.running()
        await asyncio.sleep(0)
        assert tctx.master.should_exit.is_set()
        await addon.done()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("streamtape_unmatched: expected passthrough or refuse" in line for line in lines), lines
    assert any("replay disabled" in line for line in lines), lines


async def test_a_misspelt_streamtape_option_left_unconverted_by_mitmproxy_fails_at_running(tape: Path) -> None:
    async with replaying(tape, run=False) as rig:
        rig.tctx.options.set("streamtape_unmached=refuse", defer=True)  # as --set leaves it
        await rig.addon.running()
        await asyncio.sleep(0)
        assert rig.errors == ["invalid value 'refuse' for option streamtape_unmached"]
        assert rig.tctx.master.should_exit.is_set() and rig.addon.server is None


async def test_options_changed_at_runtime_apply_to_the_running_replay_server(tmp_path: Path, tape: Path) -> None:
    other = tmp_path / "other.tape"
    streamtape.save(other, [chat_ix(1, body={**CHAT_BODY, "model": "other"})])
    async with replaying(tape, streamtape_unmatched="refuse") as rig:
        server = rig.addon.server
        assert server is not None
        rig.tctx.configure(rig.addon, streamtape_profile="instant", streamtape_cassette=[str(other)])
        assert server.profile == streamtape.parse_profile("instant")
        f = chat_flow()  # the old cassette's request
        await rig.addon.request(f)
        assert f.response is not None and f.response.status_code == 422
        g = chat_flow(body=json.dumps({**CHAT_BODY, "model": "other"}).encode())
        await rig.addon.request(g)
        assert g.metadata["streamtape_replay"] == 0
        assert server.matcher is rig.addon.matcher
