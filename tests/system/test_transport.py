"""The in-process transports against the real thing: a fault raises the same exception with
the same message through ``ReplayTransport`` (and ``ReplayAdapter``: the same exception) as
through the replay server on a real socket;
and ``import streamtape`` in a fresh interpreter loads no HTTP client. The transports
themselves are tests/unit/test_transport.py."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import requests

import streamtape
from streamtape import Interaction
from streamtape.serve import ReplayServer
from tests.support.streams import BODY, URL, sse_ix

try:
    import httpx2
except ImportError:  # Python 3.11: the httpx2 cases skip, with the reason (the httpx2 marker, tests/conftest.py)
    httpx2 = None  # type: ignore[assignment]

PACKAGES = [pytest.param(httpx, id="httpx"), pytest.param(httpx2, id="httpx2", marks=pytest.mark.httpx2)]


@pytest.mark.parametrize("pkg", PACKAGES)
@pytest.mark.parametrize("framing", ["chunked", "content-length"])
@pytest.mark.parametrize("fault", ["cut:10B", "reset:10B", "cut-event:2"])
def test_faults_raise_the_same_exception_and_message_as_the_replay_server_on_a_socket(
    pkg, framing: str, fault: str
) -> None:
    ix = sse_ix(framing=framing)
    profile = f"instant;fault={fault}"

    def outcome(client, url: str) -> tuple[str, str, bytes]:
        got = b""
        try:
            with client.stream("POST", url, json=BODY) as r:
                for p in r.iter_raw():
                    got += p
        except pkg.TransportError as e:
            return type(e).__name__, str(e), got
        return "ok", "", got

    with pkg.Client(transport=streamtape.ReplayTransport([ix], profile)) as c:
        in_process = outcome(c, URL)
    with ReplayServer([ix], profile=profile, log=lambda x: None) as srv, pkg.Client() as c:
        over_socket = outcome(c, srv.url + "/v1/chat/completions")
    assert in_process == over_socket
    assert in_process[0] != "ok"


def test_import_streamtape_does_not_import_http_clients() -> None:
    code = (
        "import sys, streamtape; "
        "print(sorted(m for m in ('httpx', 'httpx2', 'requests', 'urllib3') if m in sys.modules)); "
        "streamtape.ReplayTransport; "
        "print(sorted(m for m in ('httpx', 'httpx2', 'requests') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[]"]


def session(ix: Interaction, profile: str, *, realtime: bool) -> requests.Session:
    """A requests session whose http:// goes to the in-process ReplayAdapter."""
    s = requests.Session()
    s.mount("http://", streamtape.ReplayAdapter([ix], profile, realtime=realtime))
    return s


@pytest.mark.parametrize(
    ("profile", "framing", "exc"),
    [
        ("instant;fault=cut-event:2", "chunked", requests.exceptions.ChunkedEncodingError),
        ("instant;fault=cut:10B", "content-length", requests.exceptions.ChunkedEncodingError),
        ("instant;fault=reset:50%", "chunked", requests.exceptions.ChunkedEncodingError),
        ("instant;fault=stall:3:30", "chunked", requests.exceptions.ConnectionError),
    ],
    ids=["cut-chunked", "cut-content-length", "reset", "stall"],
)
def test_adapter_faults_raise_what_requests_raises_on_a_real_socket(profile, framing, exc) -> None:
    """The same profile through the replay server on a real socket raises the same."""
    ix = sse_ix(framing=framing)
    with session(ix, profile, realtime=False) as s, pytest.raises(exc):
        list(s.post(URL, json=BODY, stream=True, timeout=(5, 0.5)).iter_content(chunk_size=None))
    with ReplayServer([ix], profile=profile.replace("stall:3:30", "stall:3:3"), log=lambda x: None) as srv, requests.Session() as s2, pytest.raises(exc):
        list(s2.post(srv.url + "/v1/chat/completions", json=BODY, stream=True, timeout=(5, 0.5)).iter_content(chunk_size=None))
