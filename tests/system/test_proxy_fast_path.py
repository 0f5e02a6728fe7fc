"""The replay proxy's fast path (streamtape/mitm/direct.py): a connection whose first request
a recording answers is relayed to the replay server below mitmproxy's HTTP layer.

A real mitmproxy runs the replay addon in this process (so a second addon can count
the HTTP flows mitmproxy made), real httpx clients go through it over plain HTTP and
through CONNECT tunnels with its CA, and a real upstream on 127.0.0.1 takes what no
recording answers.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from mitmproxy import http
from mitmproxy.proxy import server_hooks
from mitmproxy.tools.dump import DumpMaster

import streamtape
from streamtape.match.matcher import Matcher
from streamtape.mitm.direct import Origin, _closing
from streamtape.mitm.proxy import run_proxy
from streamtape.mitm.replay import ReplayAddon
from streamtape.serve.request import peek_request
from tests.support.builders import CHAT_BODY, EVENTS, chat_ix
from tests.support.servers import ScriptedServer, content_length

pytestmark = pytest.mark.slow

TEXT = b"".join(EVENTS).decode()
CHAT = "/v1/chat/completions"
INSTANT = {"X-Streamtape-Profile": "instant"}
BODY = json.dumps(CHAT_BODY).encode()


@dataclass
class FlowCounter:
    """An addon that counts the HTTP flows mitmproxy's HTTP layer made, and keeps the proxy's loop."""

    requests: list[str] = field(default_factory=list)
    servers: list[tuple[str, int]] = field(default_factory=list)
    master: DumpMaster | None = None
    loop: asyncio.AbstractEventLoop | None = None

    def running(self) -> None:
        from mitmproxy import ctx

        self.master = ctx.master  # type: ignore[assignment]
        self.loop = asyncio.get_running_loop()

    def request(self, flow: http.HTTPFlow) -> None:
        self.requests.append(flow.request.pretty_url)

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        assert data.server.address is not None
        self.servers.append(data.server.address)


@dataclass
class Proxy:
    url: str
    ca: ssl.SSLContext
    counter: FlowCounter
    addon: ReplayAddon
    lines: list[str]


@pytest.fixture(params=["passthrough", "refuse"])
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Proxy]:
    tape = tmp_path / "chat.tape"
    streamtape.save(tape, [chat_ix(0)])
    lines: list[str] = []
    addon = ReplayAddon(on_line=lines.append, on_error=lines.append)
    counter = FlowCounter()
    bound: list[tuple[str, int]] = []
    ready = threading.Event()

    def running(addrs: list[tuple[str, int]]) -> None:
        bound.extend(addrs)
        ready.set()

    opts = {"streamtape_cassette": [str(tape)], "streamtape_unmatched": request.param,
            "confdir": str(tmp_path / "mitm")}
    thread = threading.Thread(target=lambda: asyncio.run(run_proxy(
        "regular", "127.0.0.1", 0, [counter, addon], on_running=running, options=opts)),
        daemon=True)
    thread.start()
    assert ready.wait(20), lines
    ca = ssl.create_default_context(cafile=str(tmp_path / "mitm" / "mitmproxy-ca-cert.pem"))
    host, port = bound[0]
    yield Proxy(f"http://{host}:{port}", ca, counter, addon, lines)
    assert counter.loop is not None and counter.master is not None
    counter.loop.call_soon_threadsafe(counter.master.shutdown)
    thread.join(20)


def _passthrough(p: Proxy) -> bool:
    return p.addon.unmatched == "passthrough"


def test_matched_first_requests_never_become_mitmproxy_flows_over_http_and_https(proxy: Proxy) -> None:
    with httpx.Client(proxy=proxy.url, verify=proxy.ca) as client:
        for base in ("http://api.openai.com", "https://api.openai.com", "http://api.openai.com"):
            for _ in range(2):  # the second request reuses the relayed connection
                r = client.post(base + CHAT, json=CHAT_BODY, headers=INSTANT)
                assert r.status_code == 200
                assert r.text == TEXT
    assert proxy.counter.requests == []
    assert proxy.addon.stats["replayed"] == 6


def test_the_replay_server_takes_the_clients_own_socket_where_mitmproxy_lets_go(proxy: Proxy) -> None:
    """A plain connection whose first request matches, and a tunnel to the recorded host
    (TLS made by the replay server with mitmproxy's CA), are served on the client's socket:
    mitmproxy opens no connection of its own for them. A tunnel to another host is decrypted
    by mitmproxy and relayed, and still replayed."""
    with httpx.Client(proxy=proxy.url, verify=proxy.ca) as client:
        for url in ("http://api.openai.com", "https://api.openai.com", "http://other.test"):
            r = client.post(url + CHAT, json=CHAT_BODY, headers=INSTANT)
            assert (r.status_code, r.text) == (200, TEXT)
        assert proxy.counter.servers == []
        r = client.post("https://other.test" + CHAT, json=CHAT_BODY, headers=INSTANT)
        assert (r.status_code, r.text) == (200, TEXT)
    assert proxy.counter.servers == [("127.0.0.1", proxy.addon.server.port)]  # type: ignore[union-attr]
    assert proxy.counter.requests == []


def test_a_client_that_does_not_trust_the_ca_fails_its_handshake_and_others_go_on(proxy: Proxy) -> None:
    with pytest.raises(httpx.ConnectError), httpx.Client(proxy=proxy.url) as client:  # system CAs
        client.post("https://api.openai.com" + CHAT, json=CHAT_BODY, headers=INSTANT)
    with httpx.Client(proxy=proxy.url, verify=proxy.ca) as client:
        r = client.post("https://api.openai.com" + CHAT, json=CHAT_BODY, headers=INSTANT)
    assert (r.status_code, r.text) == (200, TEXT)


def test_an_unmatched_request_on_a_relayed_connection_gets_what_the_addon_decides(proxy: Proxy) -> None:
    with ScriptedServer({"/v1/models": content_length(b'{"data": []}')}) as up, \
            httpx.Client(proxy=proxy.url) as client:
        origin = up.url  # the recorded request's host is another: the path decides
        assert client.post(origin + CHAT, json=CHAT_BODY, headers=INSTANT).text == TEXT
        r = client.get(origin + "/v1/models")
        assert client.post(origin + CHAT, json=CHAT_BODY, headers=INSTANT).text == TEXT
    if _passthrough(proxy):
        assert (r.status_code, r.json()) == (200, {"data": []})
        assert [x.path for x in up.received] == ["/v1/models"]
        assert proxy.addon.stats["passthrough"] == 1
    else:
        assert r.status_code == 422
        assert "closest is chat.tape#0 POST /v1/chat/completions" in r.json()["error"]["message"]
        assert up.received == []
        assert proxy.addon.stats["refused"] == 1
    # Only the request that was passed on became a flow, with the URL the client asked for.
    assert proxy.counter.requests == [origin + "/v1/models"]
    assert proxy.addon.stats["replayed"] == 2


def test_an_unmatched_request_inside_a_relayed_tunnel_keeps_its_https_url(proxy: Proxy) -> None:
    with httpx.Client(proxy=proxy.url, verify=proxy.ca) as client:
        assert client.post("https://api.openai.com" + CHAT, json=CHAT_BODY, headers=INSTANT).text == TEXT
        r = client.get("https://api.openai.com/v1/models")
    # No network here: passed upstream, the request meets a name that does not resolve.
    assert r.status_code == (502 if _passthrough(proxy) else 422)
    assert proxy.counter.requests == ["https://api.openai.com/v1/models"]


def test_a_connection_whose_first_request_does_not_match_stays_on_the_http_layer(proxy: Proxy) -> None:
    with ScriptedServer({"/v1/models": content_length(b'{"data": []}')}) as up, \
            httpx.Client(proxy=proxy.url) as client:
        first = client.get(up.url + "/v1/models")
        r = client.post(up.url + CHAT, json=CHAT_BODY, headers=INSTANT)
    assert first.status_code == (200 if _passthrough(proxy) else 422)
    assert (r.status_code, r.text) == (200, TEXT)  # replayed on the slow path
    assert proxy.counter.requests == [up.url + "/v1/models", up.url + CHAT]


def test_a_request_the_relay_cannot_read_in_one_go_is_replayed_on_the_http_layer(proxy: Proxy) -> None:
    with httpx.Client(proxy=proxy.url) as client:
        chunked = client.post("http://api.openai.com" + CHAT, headers=INSTANT,
                              content=iter([BODY[:10], BODY[10:]]))
    assert (chunked.status_code, chunked.text) == (200, TEXT)
    assert proxy.counter.requests == ["http://api.openai.com" + CHAT]


def test_a_cut_fault_on_a_relayed_connection_reaches_the_client(proxy: Proxy) -> None:
    with pytest.raises(httpx.RemoteProtocolError), httpx.Client(proxy=proxy.url) as client:
        client.post("http://api.openai.com" + CHAT, json=CHAT_BODY,
                    headers={"X-Streamtape-Profile": "instant;fault=cut:50%"})
    assert proxy.counter.requests == []


def test_a_request_sent_a_byte_at_a_time_is_still_relayed(proxy: Proxy) -> None:
    body = BODY
    head = (f"POST http://api.openai.com{CHAT} HTTP/1.1\r\nHost: api.openai.com\r\n"
            f"X-Streamtape-Profile: instant\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for i in range(0, len(head + body), 7):
            s.sendall((head + body)[i:i + 7])
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200")
    assert b"".join(EVENTS)[:40] in got
    assert proxy.counter.requests == []


# -- the pure parts ----------------------------------------------------------------------------


def test_peek_request_wants_more_until_the_declared_body_is_in() -> None:
    whole = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd"
    for cut in range(len(whole)):
        assert peek_request(whole[:cut]) == "more"
    got = peek_request(whole + b"GET /next HTTP/1.1\r\n")
    assert not isinstance(got, str)
    assert (got.method, got.target, got.body) == ("POST", "/a", b"abcd")


@pytest.mark.parametrize("raw", [
    b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n",
    b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    b"POST /a HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
])
def test_peek_request_declines_what_needs_a_conversation_or_is_not_http1(raw: bytes) -> None:
    assert peek_request(raw) == "no"


def test_peek_request_gives_up_on_a_head_longer_than_the_limit() -> None:
    assert peek_request(b"GET / HTTP/1.1\r\nX: " + b"a" * (64 * 1024)) == "no"


def test_matcher_answers_without_serving_or_noting_the_request() -> None:
    m = Matcher([chat_ix(0)], strict=True)
    assert m.answers("POST", "http://h" + CHAT, None, BODY)
    assert m.used == [0] and m.received == []
    m.match("POST", "http://h" + CHAT, None, BODY)
    assert not m.answers("POST", "http://h" + CHAT, None, BODY)  # strict: used up
    assert not m.answers("GET", "http://h/v1/models")


def test_origin_urls_keep_absolute_targets_and_join_tunnel_ones() -> None:
    tunnel = Origin("https://api.openai.com", ("127.0.0.1", 8080))
    assert tunnel.url("/v1/models") == "https://api.openai.com/v1/models"
    assert tunnel.url("http://other/x") == "http://other/x"


def test_a_passed_on_answer_is_marked_to_close_the_connection() -> None:
    head = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n"
    assert _closing(head) == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
