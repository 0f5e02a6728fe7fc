"""mitmproxy's live asyncio transports, reached through its proxyserver addon.

mitmproxy keeps each connection handler (by client id) and, in it, the reader
and writer of every connection the handler has open. That is not a public
API: every step is guarded, and a mitmproxy that stores them otherwise gives
None, never an exception, so the callers lose only what they wanted the socket
for (a reset passed on, a kernel arrival time), never the flow.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mitmproxy import connection, ctx

__all__ = ["transport_of"]


def transport_of(client: connection.Client, conn: connection.Connection,
                 proxyserver: Any = None) -> asyncio.BaseTransport | None:
    """The asyncio transport of ``conn`` (the client's own connection or one of its upstream
    connections), None when it cannot be found (or is not an asyncio transport: QUIC).

    ``proxyserver`` is mitmproxy's proxyserver addon, looked up in the running master
    when not given."""
    with contextlib.suppress(Exception):
        ps = proxyserver if proxyserver is not None else ctx.master.addons.get("proxyserver")
        handler = ps.connections.get(client.id)
        io = handler.transports.get(conn) if handler is not None else None
        transport = getattr(getattr(io, "writer", None), "transport", None)
        if isinstance(transport, asyncio.BaseTransport):
            return transport
    return None
