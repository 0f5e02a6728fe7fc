"""Upstream faults the recorder must pass on as they are, shared by
tests/system/test_reliability_upstream.py and ``bench/reliability.py``: the upstream's
handlers (for :class:`tests.support.servers.ScriptedServer`) and what an httpx client
sees of each, directly or through a proxy.

- ``/reset``: three SSE events, then a TCP RST;
- ``/stall``: three events, then silence past the client's read timeout;
- ``/bad-chunk``: three events, then a chunk size that is not hex;
- ``/endless-head``: part of a response head, then silence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from tests.support.builders import EVENTS
from tests.support.servers import SSE_HEADERS, Conn, Received

CLIENT_TIMEOUT = 1.0
"""The read timeout of the client in :func:`see`; the stalls last three times longer."""

FIRST = EVENTS[:3]
"""The events every faulty stream sends before its fault."""


def _three_events(c: Conn) -> None:
    c.head(200, SSE_HEADERS)
    for ev in FIRST:
        c.chunk(ev)
        c.sleep(0.01)


def reset_mid_stream(req: Received, c: Conn) -> str:
    _three_events(c)
    c.reset()
    return "close"


def stall(req: Received, c: Conn) -> str:
    _three_events(c)
    c.sleep(CLIENT_TIMEOUT * 3)
    return "close"


def bad_chunk(req: Received, c: Conn) -> str:
    _three_events(c)
    c.raw(b"zz\r\nnot a chunk\r\n")
    c.sleep(1.0)
    return "close"


def endless_head(req: Received, c: Conn) -> str:
    c.raw(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Part: 1\r\n")
    c.sleep(CLIENT_TIMEOUT * 3)
    return "close"


ROUTES: dict[str, Callable[[Received, Conn], str]] = {
    "/reset": reset_mid_stream, "/stall": stall, "/bad-chunk": bad_chunk, "/endless-head": endless_head,
}


@dataclass
class Seen:
    """What an httpx client saw: the status (0: none), the body bytes before the failure,
    the failure's type."""

    status: int
    body: bytes
    failure: type[Exception] | None

    @property
    def failure_name(self) -> str:
        return self.failure.__name__ if self.failure else "ok"


def see(url: str) -> Seen:
    """POST a streaming request to ``url`` and read what comes, with a 1 s read timeout."""
    status, got = 0, []
    try:
        with httpx.Client(timeout=CLIENT_TIMEOUT) as client, \
                client.stream("POST", url, json={"stream": True}) as r:
            status = r.status_code
            for b in r.iter_raw():
                got.append(b)
    except httpx.HTTPError as e:
        return Seen(status, b"".join(got), type(e))
    return Seen(status, b"".join(got), None)
