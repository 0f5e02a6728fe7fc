"""HTTP/2 upstreams: every DATA frame is recorded as one piece, and replays as one HTTP/1.1 chunk.

A real HTTP/2 server (hypercorn serving an ASGI app that streams SSE, one
``send`` per event, so one DATA frame per event), a real client (httpx with
``http2=True``), and real mitmproxy (``streamtape record``) in both modes:

- regular: the client tunnels through the proxy (CONNECT) and speaks HTTP/2
  inside the tunnel;
- reverse: the client speaks HTTP/2 to the proxy over TLS, and the proxy
  HTTP/2 upstream. (A plain HTTP/1.1 client gets HTTP/1.1 upstream: mitmproxy
  offers the upstream what the client offered it.)

The recording is then played by ``streamtape serve`` to an HTTP/1.1 client
that reads the chunks off the socket.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config

import streamtape
from streamtape.cassette.model import Interaction
from streamtape.wire import Framing
from tests.support.builders import chat_events
from tests.support.processes import STREAMTAPE, Child, start
from tests.support.recording import recording
from tests.support.servers import raw_request, self_signed_pem, trusting

pytestmark = pytest.mark.slow

PATH = "/v1/chat/completions"
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
EVENTS = chat_events(["Frames", " are", " pieces"])
GAP = 0.02
"""Between the app's sends: each event leaves in a DATA frame (and a TCP segment) of its own."""

Scope = dict[str, Any]
Message = dict[str, Any]


@dataclass
class H2Upstream:
    """hypercorn on 127.0.0.1 with a self-signed certificate, serving :func:`sse_app`."""

    url: str
    versions: list[str] = field(default_factory=list)
    """The HTTP version of each request, as the server saw it."""


def sse_app(versions: list[str]) -> Callable[..., Any]:
    async def app(scope: Scope, receive: Callable[[], Any], send: Callable[[Message], Any]) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        versions.append(scope["http_version"])
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        for ev in EVENTS:
            await asyncio.sleep(GAP)
            await send({"type": "http.response.body", "body": ev, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


@pytest.fixture(scope="module")
def h2_upstream() -> Iterator[H2Upstream]:
    pem = self_signed_pem()
    sock = socket.create_server(("127.0.0.1", 0))  # bound here: no port race
    up = H2Upstream(f"https://127.0.0.1:{sock.getsockname()[1]}")
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # hypercorn owns (and closes) the socket from here
    config.certfile = config.keyfile = pem
    config.alpn_protocols = ["h2"]  # an HTTP/2-only API
    config.accesslog = config.errorlog = None
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def run() -> None:
        loop.run_until_complete(serve(sse_app(up.versions), config, shutdown_trigger=stop.wait))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield up
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


CASES = {
    # name: how the client reaches the upstream
    "regular-h2-client": "regular",
    "reverse-h2-client": "reverse-tls",
}


def record_one(case: str, up: H2Upstream, out: Path, confdir: Path) -> httpx.Response:
    how = CASES[case]
    args = ["--confdir", str(confdir), "--insecure"]  # --insecure: the upstream's certificate is self-signed
    if how == "regular":
        args += ["--mode", "regular"]
    with recording(out, *args, upstream=None if how == "regular" else up.url) as rec:
        if how == "regular":
            client = httpx.Client(http2=True, proxy=rec.url, verify=trusting(confdir), timeout=10)
            url = up.url + PATH
        else:
            client = httpx.Client(http2=True, verify=trusting(confdir), timeout=10)
            url = rec.url.replace("http://", "https://") + PATH
        with client, client.stream("POST", url, json=BODY) as r:
            r.read()
        rec.wait_lines(1)
    return r


@pytest.fixture(scope="module")
def recorded(h2_upstream: H2Upstream, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, httpx.Response]]:
    """Each case recorded once through ``streamtape record``."""
    base = tmp_path_factory.mktemp("h2")
    confdir = base / "mitm"
    done: dict[str, tuple[Path, httpx.Response]] = {}
    for case in CASES:
        out = base / f"{case}.tape"
        done[case] = (out, record_one(case, h2_upstream, out, confdir))
    return done


@pytest.mark.parametrize("case", list(CASES))
def test_each_data_frame_of_an_h2_upstream_is_one_recorded_piece(
    case: str, recorded: dict[str, tuple[Path, httpx.Response]], h2_upstream: H2Upstream
) -> None:
    out, response = recorded[case]
    assert response.status_code == 200 and response.content == b"".join(EVENTS)
    assert response.http_version == "HTTP/2"  # the client did speak HTTP/2 to the proxy
    (ix,) = streamtape.load(out)
    assert ix.request.url.endswith(PATH)
    assert ix.request.http_version == "HTTP/2.0"
    r = ix.response
    assert r is not None and r.status == 200
    assert r.http_version == "HTTP/2.0" and r.framing is Framing.FRAMES
    assert [p.data for p in ix.pieces] == EVENTS  # one piece per frame, bytes as sent
    at = [p.at_ns for p in ix.pieces]
    assert at == sorted(at) and at[-1] - at[0] >= (len(EVENTS) - 1) * GAP * 1e9 * 0.9
    assert ix.outcome == "complete"
    assert h2_upstream.versions and set(h2_upstream.versions) == {"2"}  # the upstream spoke HTTP/2 only


@pytest.fixture
def serving(request: pytest.FixtureRequest) -> Iterator[Callable[[Path], str]]:
    procs: list[Child] = []

    def serve(tape: Path) -> str:
        procs.append(start([*STREAMTAPE, "serve", str(tape), "--port", "0"], r"on http://(\S+?:\d+)"))
        return procs[-1].url

    yield serve
    for p in procs:
        p.stop(signal.SIGTERM)


@pytest.mark.parametrize("case", list(CASES))
def test_an_h2_recording_replays_to_http1_as_one_chunk_per_frame(
    case: str, recorded: dict[str, tuple[Path, httpx.Response]], serving: Callable[[Path], str]
) -> None:
    out, _ = recorded[case]
    ix: Interaction = streamtape.load(out)[0]
    url = serving(out)
    raw = raw_request(url, PATH, body=BODY)
    assert raw.status == 200 and raw.header("transfer-encoding") == "chunked"
    assert raw.ending == "complete"
    assert [data for _, data in raw.chunks] == [p.data for p in ix.pieces] == EVENTS
