"""``framing=`` through the in-process transports: as far as an in-process response can.

There is no socket, so there are no chunks on a wire; what a transport does show is the
head and how the body ends. ``ReplayTransport`` (httpx, httpx2) gives the framing's
headers (``Transfer-Encoding: chunked``; ``Content-Length: N``; neither, and
``Connection: close``, on close-delimited framing) and ends a cut body as the client's own
connection would: a close-delimited one cleanly, a Content-Length one with "received N
bytes, expected M", a chunked one with "incomplete chunked read". ``ReplayAdapter``
(requests) feeds the real wire bytes to ``http.client``, so it frames exactly as the
replay server does.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import httpx
import pytest
import requests

import streamtape
from tests.support.builders import CHAT_BODY, CHAT_URL, EVENTS, chat_ix

WHOLE = b"".join(EVENTS)
FIRST_3 = b"".join(EVENTS[:3])


PACKAGES = [
    pytest.param("httpx", id="httpx"),
    pytest.param("httpx2", id="httpx2", marks=pytest.mark.httpx2),
]


def package(name: str) -> ModuleType:
    return httpx if name == "httpx" else importlib.import_module(name)


def replay(pkg: ModuleType, profile: str) -> tuple[dict[str, str], bytes, Exception | None]:
    """The head (lower-case names), the body bytes handed over, and what the read raised."""
    t = streamtape.ReplayTransport([chat_ix(5)], profile, realtime=False)
    got = b""
    with pkg.Client(transport=t) as client, client.stream("POST", CHAT_URL, json=CHAT_BODY) as r:
        head = {k.lower(): v for k, v in r.headers.items()}
        try:
            for piece in r.iter_raw():
                got += piece
        except Exception as e:  # the ending is what is tested: keep whichever it raised
            return head, got, e
    return head, got, None


@pytest.mark.parametrize("name", PACKAGES)
def test_replay_transport_gives_each_framings_headers(name):
    pkg = package(name)
    chunked, _, _ = replay(pkg, "instant;framing=chunked")
    assert chunked.get("transfer-encoding") == "chunked" and "content-length" not in chunked
    close, _, _ = replay(pkg, "instant;framing=close")
    assert "transfer-encoding" not in close and "content-length" not in close
    assert close.get("connection") == "close"
    length, body, _ = replay(pkg, "instant;framing=content-length;fault=keepalive:0")
    assert length.get("content-length") == str(len(body)) and len(body) > len(WHOLE)


@pytest.mark.parametrize("name", PACKAGES)
def test_replay_transport_ends_a_cut_close_delimited_body_cleanly_as_a_socket_would(name):
    _, body, error = replay(package(name), "instant;framing=close;fault=cut-event:3")
    assert (body, error) == (FIRST_3, None)


@pytest.mark.parametrize("name", PACKAGES)
def test_replay_transport_raises_on_a_cut_body_whose_framing_shows_it(name):
    pkg = package(name)
    _, body, error = replay(pkg, "instant;framing=content-length;fault=cut-event:3")
    assert body == FIRST_3 and isinstance(error, pkg.RemoteProtocolError)
    assert f"received {len(FIRST_3)} bytes, expected {len(WHOLE)}" in str(error)
    _, body, error = replay(pkg, "instant;framing=chunked;fault=cut-event:3")
    assert body == FIRST_3 and isinstance(error, pkg.RemoteProtocolError)
    assert "incomplete chunked read" in str(error)


def adapter_get(profile: str) -> tuple[requests.Response, bytes, Exception | None]:
    session = requests.Session()
    session.mount("https://", streamtape.ReplayAdapter([chat_ix(5)], profile, realtime=False))
    r = session.post(CHAT_URL, data=json.dumps(CHAT_BODY), stream=True)
    got = b""
    try:
        for piece in r.iter_content(None):
            got += piece
    except requests.RequestException as e:
        return r, got, e
    return r, got, None


def test_replay_adapter_frames_as_the_server_does_and_requests_sees_what_each_cut_shows():
    r, body, error = adapter_get("instant;framing=close;fault=cut-event:3")
    assert r.headers.get("connection") == "close" and "content-length" not in r.headers
    assert (body, error) == (FIRST_3, None)  # the close is the end
    r, body, error = adapter_get("instant;framing=content-length;fault=cut-event:3")
    assert r.headers["content-length"] == str(len(WHOLE))
    assert isinstance(error, requests.exceptions.ChunkedEncodingError) and "IncompleteRead" in str(error)
    r, body, error = adapter_get("instant;framing=chunked")
    assert r.headers["transfer-encoding"] == "chunked" and (body, error) == (WHOLE, None)
