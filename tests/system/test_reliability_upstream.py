"""Upstream faults through ``streamtape record``: the client sees what it would see without the
proxy, and the cassette keeps how the response ended.

Each fault is played by a scripted upstream (tests/support/servers.py) to an httpx
client twice, once directly and once through a real ``streamtape record``
process, and the two clients must see the same bytes and the same kind of
failure:

- reset mid-stream: a TCP RST after three events. Direct, ``ReadError``
  (ECONNRESET); mitmproxy reports a reset as an early close and would close
  the client with a FIN (``RemoteProtocolError``), so the recorder resets the
  client's connection itself (streamtape.mitm.faults) and says so in the
  recording's error;
- a stall longer than the client's read timeout: ``ReadTimeout`` after three
  events; the recording ends ``client_disconnected`` with those three pieces;
- a malformed chunked encoding (a chunk size ``zz``): ``RemoteProtocolError``
  after three events either way (the message differs: direct, h11 names the bad
  chunk header; through the proxy, mitmproxy stopped at it and the body ends
  short); the recording ends ``upstream_closed`` naming the bad chunk header;
- headers that never end: part of a head, then nothing; ``ReadTimeout`` and no
  response either way; the recording has no response and ends
  ``client_disconnected``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import mitmproxy.version
import pytest

import streamtape
from streamtape.cassette.model import Interaction, Outcome
from streamtape.wire import UPSTREAM_RESET
from tests.support.recording import recording
from tests.support.servers import ScriptedServer
from tests.support.upstream_faults import FIRST, ROUTES, Seen, see

MITMPROXY_MAJOR = int(mitmproxy.version.VERSION.split(".")[0])

pytestmark = pytest.mark.slow

@dataclass
class Run:
    direct: dict[str, Seen]
    proxied: dict[str, Seen]
    recorded: dict[str, Interaction]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    out = tmp_path_factory.mktemp("faults") / "faults.tape"
    with ScriptedServer(dict(ROUTES)) as up:
        direct = {p: see(up.url + p) for p in ROUTES}
        with recording(out, upstream=up.url) as rec:
            proxied = {p: see(rec.url + p) for p in ROUTES}
            rec.wait_lines(len(ROUTES), timeout=20)
    yield Run(direct, proxied, {ix.request.path: ix for ix in streamtape.load(out)})


Check = Callable[[Interaction], None]


def _reset(ix: Interaction) -> None:
    assert ix.outcome is Outcome.UPSTREAM_CLOSED
    assert ix.error is not None and ix.error.startswith(UPSTREAM_RESET)


def _stall(ix: Interaction) -> None:
    assert ix.outcome is Outcome.CLIENT_DISCONNECTED


def _bad_chunk(ix: Interaction) -> None:
    assert ix.outcome is Outcome.UPSTREAM_CLOSED
    assert ix.error is not None and "chunk" in ix.error and UPSTREAM_RESET not in ix.error


def _endless_head(ix: Interaction) -> None:
    assert ix.outcome is Outcome.CLIENT_DISCONNECTED and ix.response is None


@pytest.mark.parametrize(
    ("path", "failure", "check"),
    [
        pytest.param(
            "/reset", httpx.ReadError, _reset, id="reset-mid-stream",
            marks=pytest.mark.xfail(
                MITMPROXY_MAJOR < 12, strict=True,
                reason="mitmproxy 11 drops the upstream connection before the error hook, after a "
                "reset and after a clean early close alike, so the recorder cannot tell them apart: "
                "the client sees a close (RemoteProtocolError) and the cassette says upstream_closed",
            ),
        ),
        pytest.param("/stall", httpx.ReadTimeout, _stall, id="stall-past-the-client-timeout"),
        pytest.param("/bad-chunk", httpx.RemoteProtocolError, _bad_chunk, id="malformed-chunked"),
        pytest.param("/endless-head", httpx.ReadTimeout, _endless_head, id="headers-never-end"),
    ],
)
def test_the_client_sees_what_it_would_without_the_proxy_and_the_cassette_keeps_the_outcome(
    run: Run, path: str, failure: type[Exception], check: Check
) -> None:
    direct, proxied = run.direct[path], run.proxied[path]
    assert direct.failure is failure  # the fault is what the test says it is
    assert proxied.failure is direct.failure
    assert proxied.status == direct.status
    assert proxied.body == direct.body
    ix = run.recorded[path]
    check(ix)
    pieces = [p.data for p in ix.response.pieces] if ix.response is not None else []
    assert b"".join(pieces) == direct.body
    assert pieces == (list(FIRST) if direct.body else [])
