"""The replay proxy's fast path: matched requests answered below mitmproxy's HTTP layer.

A response streamed through mitmproxy's HTTP layer costs about 150 µs of
CPU per piece (parsed from the replay server, passed through the layer stack
as events, framed again for the client), and under load that time shows up
as timing error. So where mitmproxy is about to put its HTTP layer on a
client connection (a plain-HTTP proxy connection, or the decrypted inside of
a CONNECT tunnel), :meth:`DirectRoutes.route` looks at the first request the
client sent: when it is complete and a recording answers it, the connection
becomes a byte relay instead (mitmproxy's TCP layer in its ``ignore`` form:
no flow, no hooks, TLS still mitmproxy's) to the replay server, which reads
that request and the ones after it itself. A piece then costs mitmproxy one
read and one write.

The replay server answers what it has recordings for. A request on such a
connection that none answers is sent on to mitmproxy's own listening port as
a proxy request (absolute URL, ``Connection: close``) by :func:`pass_on`, so
the addon passes it upstream or refuses it as it does every request, and the
answer is relayed back; the client's connection closes after it.

A first request that does not match, is not complete in one decision's worth
of bytes (a chunked body, ``Expect: 100-continue``), is not HTTP/1 (h2), or
comes in another proxy mode leaves the connection to mitmproxy's HTTP layer,
where the addon rewrites matched flows to the replay server (the slow path).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from mitmproxy.connection import Server
from mitmproxy.proxy import layer, layers
from mitmproxy.proxy.mode_specs import RegularMode

from .match import Matcher
from .serve.request import HTTPRequest, peek_request
from .wire import HOP_BY_HOP, header_value

__all__ = ["DirectRoutes", "Origin", "pass_on"]

_NOT_PASSED = HOP_BY_HOP | {"content-length", "transfer-encoding", "proxy-connection"}
_RELAY_READ = 65536


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a relayed connection's requests were headed, and where the proxy listens."""

    base: str
    """``scheme://host[:port]`` of the tunnel's target; empty for a plain-HTTP proxy
    connection, whose requests carry absolute URLs."""
    proxy: tuple[str, int]
    """The proxy's own address as the client reached it (where :func:`pass_on` sends)."""

    def url(self, target: str) -> str:
        return target if "://" in target else self.base + target


class DirectRoutes:
    """The connections relayed to the replay server, and the origin of each."""

    def __init__(self) -> None:
        self._opening: dict[str, Origin] = {}  # by mitmproxy's server-connection id
        self._open: dict[tuple[str, int], Origin] = {}  # by the replay server's peer address

    def route(self, nextlayer: layer.NextLayer, matcher: Matcher, port: int) -> bool:
        """Relay the connection to the replay server on ``port`` when its first request
        is one ``matcher`` answers; True if it does. Called from the ``next_layer``
        hook, after mitmproxy's own choice."""
        chosen = nextlayer.layer
        context = nextlayer.context
        if not isinstance(chosen, layers.HttpLayer) or not isinstance(
                context.client.proxy_mode, RegularMode):
            return False
        got = peek_request(nextlayer.data_client())
        if got == "more":  # decide again when more of the request is in
            _undo(nextlayer, chosen)
            return False
        if got == "no" or got.method == "CONNECT":
            return False
        origin = _origin(context.client.sockname, context.server.address, context.client.tls)
        if not matcher.answers(got.method, origin.url(got.target), got.headers, got.body):
            return False
        _undo(nextlayer, chosen)
        server = Server(address=("127.0.0.1", port))
        self._opening[server.id] = origin
        context.server = server
        nextlayer.layer = layers.TCPLayer(context, ignore=True)
        return True

    def connected(self, server: Server) -> None:
        """mitmproxy's ``server_connected``: note the relay's local address."""
        origin = self._opening.pop(server.id, None)
        if origin is not None and server.sockname is not None:
            self._open[server.sockname[:2]] = origin

    def disconnected(self, server: Server) -> None:
        """mitmproxy's ``server_disconnected``."""
        self._opening.pop(server.id, None)
        if server.sockname is not None:
            self._open.pop(server.sockname[:2], None)

    def origin(self, writer: asyncio.StreamWriter) -> Origin | None:
        """The origin of a connection the replay server accepted (None: not a relay)."""
        peer = writer.get_extra_info("peername")
        return self._open.get(peer[:2]) if peer else None


def _undo(nextlayer: layer.NextLayer, chosen: layer.Layer) -> None:
    """Take back mitmproxy's choice: a layer joins its context's stack when it is made,
    and mitmproxy's next choice reads that stack."""
    with contextlib.suppress(ValueError):
        nextlayer.context.layers.remove(chosen)
    nextlayer.layer = None


def _origin(proxy: tuple[str, int] | None, target: tuple[str, int] | None, tls: bool) -> Origin:
    listen = (proxy[0], proxy[1]) if proxy else ("127.0.0.1", 8080)
    if target is None:
        return Origin("", listen)
    scheme = "https" if tls else "http"
    host, port = target
    default = 443 if tls else 80
    authority = f"[{host}]" if ":" in host else host
    return Origin(f"{scheme}://{authority}{'' if port == default else f':{port}'}", listen)


async def pass_on(req: HTTPRequest, origin: Origin, writer: asyncio.StreamWriter) -> bool:
    """Send ``req`` to the proxy at ``origin.proxy`` and relay its answer to ``writer``.

    The answer is relayed as it arrives, its head marked ``Connection: close``:
    it ends when the proxy closes, and so does the client's connection (False).
    """
    lines = [f"{req.method} {origin.url(req.target)} HTTP/1.1"]
    lines += [f"{k}: {v}" for k, v in req.headers if k.lower() not in _NOT_PASSED]
    if req.body or header_value(req.headers, "content-length") is not None:
        lines.append(f"Content-Length: {len(req.body)}")
    lines.append("Connection: close")
    reader, upstream = await asyncio.open_connection(*origin.proxy)
    try:
        upstream.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + req.body)
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(_closing(head))
        while data := await reader.read(_RELAY_READ):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass  # the client sees the answer end where the proxy's did
    finally:
        upstream.close()
        with contextlib.suppress(Exception):
            await upstream.wait_closed()
    return False


def _closing(head: bytes) -> bytes:
    """A response head with ``Connection: close`` in place of its connection headers."""
    first, *rest = head[:-4].split(b"\r\n")
    kept = [h for h in rest
            if h.split(b":", 1)[0].strip().lower() not in (b"connection", b"keep-alive")]
    return b"\r\n".join([first, *kept, b"Connection: close"]) + b"\r\n\r\n"
