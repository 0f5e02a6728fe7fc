"""The rerun client times a piece by when it came, not by when its busy loop read it.

A real backend on 127.0.0.1 (a thread here) writes the first token while the
client cannot read: its asyncio loop is held by another callback, or, as in
a Locust worker, another greenlet holds the gevent hub (a subprocess with
gevent's monkey patching, so this process stays unpatched). The recorded
first piece must keep the write's time (Linux: the kernel's receive stamp).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from streamtape.capture.recorder import Recorder, Redaction
from streamtape.cassette.model import Interaction
from streamtape.rerun.client import Exchange, exchange_async
from streamtape.shadow.rewrite import ShadowRequest
from tests.support import ROOT

pytestmark = [
    pytest.mark.realtime,
    pytest.mark.skipif(sys.platform != "linux", reason="the kernel's receive stamps (SO_TIMESTAMPNS) are Linux's"),
]

FIRST_S = 0.1
"""The backend writes the first token this long after it has the request."""
HELD_FROM_S, HELD_S = 0.03, 0.3
"""The client's loop is held from 30 ms after the request, for 300 ms: the token comes inside."""
END_S = 0.5
"""The end comes this long after the token, after the hold: writes that wait in the socket
together are one read, with the last one's stamp."""
TOKEN = b'data: {"token": "hi"}\n\n'
BOUND_NS = 40_000_000
"""How far the recorded arrival may be from the backend's write: loopback delivers at once,
so this is room for a starved machine; a piece timed when the loop got to it is 200 ms off."""


@dataclass
class Backend:
    """Answers each connection's request with an SSE head and a first token FIRST_S later,
    then the end END_S after; notes when it had the request and when it wrote the token."""

    port: int = 0
    had_ns: list[int] = field(default_factory=list)
    wrote_ns: list[int] = field(default_factory=list)


@pytest.fixture
def backend() -> Iterator[Backend]:
    srv = socket.create_server(("127.0.0.1", 0))
    b = Backend(srv.getsockname()[1])

    def serve() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                got = b""
                while b"\r\n\r\n" not in got:
                    got += c.recv(4096)
                b.had_ns.append(time.perf_counter_ns())
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                time.sleep(FIRST_S)
                b.wrote_ns.append(time.perf_counter_ns())
                c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                          + b"%x\r\n%s\r\n" % (len(TOKEN), TOKEN))
                time.sleep(END_S)  # well after the hold: not in the token's read
                c.sendall(b"0\r\n\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield b
    srv.close()


def exchange(port: int) -> tuple[Exchange, Recorder]:
    rec = Recorder(lambda records: None, lambda: 0, redaction=Redaction())
    out = ShadowRequest("POST", f"http://127.0.0.1:{port}/v1/chat/completions",
                        (("Content-Type", "application/json"),), b'{"stream": true}', frozenset())
    return Exchange(rec, "k", "new", out, {}), rec


def arrival_error_ns(ix: Interaction, had_ns: int, wrote_ns: int) -> int:
    """The recorded first piece's time against the backend's write (t = 0 is the request
    written, just before the backend had it)."""
    assert ix.pieces, ix.error
    return abs(had_ns + ix.pieces[0].at_ns - wrote_ns)


def test_the_async_client_keeps_a_pieces_arrival_while_its_loop_is_held(backend: Backend) -> None:
    held: list[int] = []

    def hold() -> None:
        held.append(time.perf_counter_ns())
        time.sleep(HELD_S)  # another callback on the loop: nothing is read meanwhile
        held.append(time.perf_counter_ns())

    async def main() -> Interaction | None:
        ex, _ = exchange(backend.port)
        asyncio.get_running_loop().call_later(HELD_FROM_S, hold)
        await exchange_async(ex, timeout_s=10, ssl_context=None)
        return ex.finish(time.perf_counter_ns())

    ix = asyncio.run(main())
    assert ix is not None and ix.outcome == "complete"
    (had,), (wrote,) = backend.had_ns, backend.wrote_ns
    assert held[0] < wrote < held[1] - 100_000_000, "the token did not come while the loop was held"
    assert arrival_error_ns(ix, had, wrote) < BOUND_NS, arrival_error_ns(ix, had, wrote) / 1e6


GEVENT_CLIENT = """
from gevent import monkey
monkey.patch_all()
import json, sys, time
import gevent
from tests.system.test_rerun_client_timing import exchange
from streamtape.rerun.client import exchange_sync

sleep = monkey.get_original("time", "sleep")
held = []

def hold():  # another user's greenlet busy on the hub: no socket is read meanwhile
    held.append(time.perf_counter_ns())
    sleep({held_s!r})
    held.append(time.perf_counter_ns())

ex, _ = exchange(int(sys.argv[1]))
user = gevent.spawn(exchange_sync, ex, timeout_s=10)
gevent.spawn_later({held_from_s!r}, hold)
user.join()
ix = ex.finish(time.perf_counter_ns())
print(json.dumps({{"outcome": str(ix.outcome), "error": ix.error, "at": [p.at_ns for p in ix.pieces], "held": held}}))
"""


def test_the_locust_users_client_keeps_a_pieces_arrival_while_the_gevent_hub_is_held(backend: Backend) -> None:
    pytest.importorskip("gevent")
    code = GEVENT_CLIENT.format(held_s=HELD_S, held_from_s=HELD_FROM_S)
    run = subprocess.run([sys.executable, "-c", code, str(backend.port)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["outcome"] == "complete", got
    (had,), (wrote,) = backend.had_ns, backend.wrote_ns
    held_from, held_to = got["held"]
    assert held_from < wrote < held_to - 100_000_000, "the token did not come while the hub was held"
    error = abs(had + got["at"][0] - wrote)
    assert error < BOUND_NS, error / 1e6
