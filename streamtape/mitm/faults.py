"""Upstream faults the proxy would blur, told apart and passed on as they were.

The client of a recording proxy must see what it would see without it. One
fault mitmproxy blurs: an upstream that aborts a stream with a TCP reset is
reported exactly like one that closes it early (``peer closed connection
without sending complete message body``), and the client's connection is
then closed with a FIN, so the client sees a clean close (httpx:
``RemoteProtocolError``) where, direct, it would have seen
``ECONNRESET`` (``ReadError``).

They can be told apart in the ``error`` hook: a reset is a read error, on
which asyncio closes the upstream transport at once, while a FIN only
half-closes it (mitmproxy keeps it open for writing until it is done with
the flow). On a reset, :func:`pass_reset_on` sets ``SO_LINGER`` 0 on the
client's socket, so mitmproxy's own close of it a moment later sends a reset
too; and the recording's error says so (:data:`streamtape.wire.UPSTREAM_RESET`).

The sockets are reached through mitmproxy's proxyserver addon
(:func:`streamtape.mitm.transports.transport_of`): a mitmproxy that stores them
otherwise only loses the pass-through (the client sees a close, as before),
never the flow.

mitmproxy 11 (what Python 3.11 resolves) has already dropped the upstream
connection when the ``error`` hook runs, after a reset and after a clean early
close alike, so there the two cannot be told apart: a reset reaches the client
as a close and is recorded as ``upstream_closed`` (a strict xfail in
``tests/system/test_reliability_upstream.py`` pins it).
"""

from __future__ import annotations

import socket
import struct

from mitmproxy import http

from .transports import transport_of

__all__ = ["pass_reset_on", "upstream_reset"]

_EARLY_CLOSE = "peer closed connection"


def upstream_reset(flow: http.HTTPFlow) -> bool:
    """In the ``error`` hook: whether the upstream ended the flow's response with a reset."""
    msg = (flow.error.msg if flow.error else "") or ""
    if _EARLY_CLOSE not in msg or flow.response is None:
        return False
    transport = transport_of(flow.client_conn, flow.server_conn)
    return transport is not None and transport.is_closing()


def pass_reset_on(flow: http.HTTPFlow) -> bool:
    """Make mitmproxy's close of the client connection a reset (``SO_LINGER`` 0); False if
    the socket could not be reached."""
    transport = transport_of(flow.client_conn, flow.client_conn)
    sock: socket.socket | None = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        return False
    return True
