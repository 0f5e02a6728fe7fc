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

Better still, where mitmproxy lets go of the client's socket (its connection
handler and transport are there to be found), the socket itself is handed
over (:func:`take_socket`): mitmproxy stops reading it and drops its hold,
and the replay server serves the client on it directly, exactly as it serves
its own clients, with the bytes mitmproxy had read first. A CONNECT tunnel to
a host the recordings were made on is handed over before its TLS handshake
(:meth:`DirectRoutes.tunnel`), and the replay server makes the handshake with
a certificate from mitmproxy's own CA (:func:`tls_context`), so a client that
trusts mitmproxy trusts it. The relay stays the way when the hand-over cannot
be made.

A first request that does not match, is not complete in one decision's worth
of bytes (a chunked body, ``Expect: 100-continue``), is not HTTP/1 (h2), or
comes in another proxy mode leaves the connection to mitmproxy's HTTP layer,
where the addon rewrites matched flows to the replay server (the slow path).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import ssl
import tempfile
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from mitmproxy.connection import Client, Server
from mitmproxy.proxy import layer, layers
from mitmproxy.proxy.mode_specs import RegularMode

from ..match.matcher import Matcher
from ..serve import ReplayServer
from ..serve.request import HTTPRequest, peek_request
from ..wire import Framing, end_to_end, framing_headers, header_value, request_head
from .transports import transport_of

__all__ = ["DirectRoutes", "Origin", "pass_on", "take_socket", "tls_context"]

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
        self._tls: dict[str, ssl.SSLContext] = {}  # by host: a certificate from mitmproxy's CA
        self._tasks: set[asyncio.Task[None]] = set()

    def route(self, nextlayer: layer.NextLayer, matcher: Matcher, server: ReplayServer,
              proxyserver: Any) -> bool:
        """Give the connection to ``server`` when its first request is one ``matcher``
        answers (its socket, else a relay); True if it does. Called from the
        ``next_layer`` hook, after mitmproxy's own choice."""
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
        if not context.client.tls:
            sock = take_socket(proxyserver, context.client)
            if sock is not None:  # mitmproxy lets go: closing the client now is its only step
                self.serve(server, sock, origin, received=nextlayer.data_client())
                return True
        relay = Server(address=("127.0.0.1", server.port))
        self._opening[relay.id] = origin
        context.server = relay
        nextlayer.layer = layers.TCPLayer(context, ignore=True)
        return True

    def tunnel(self, address: tuple[str, int], client: Client, server: ReplayServer,
               proxyserver: Any, certstore: Any, hosts: Collection[tuple[str, int]]) -> bool:
        """Take a CONNECT tunnel to ``address`` before its TLS handshake when the
        recordings were made on that host (``hosts``); True if it does. Called from
        the ``http_connect`` hook."""
        host, port = address
        if (host, port) not in hosts:
            return False
        tls: ssl.SSLContext | None = None
        if port != 80:
            tls = self._tls.get(host)
            if tls is None:
                try:
                    tls = self._tls[host] = tls_context(certstore, host)
                except Exception:  # a certificate mitmproxy cannot make: leave it the tunnel
                    return False
        sock = take_socket(proxyserver, client)
        if sock is None:
            return False
        try:
            sock.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        except OSError:
            sock.close()
            return True  # the client is gone
        origin = _origin(client.sockname, address, tls is not None)
        self.serve(server, sock, origin, tls=tls)
        return True

    def serve(self, server: ReplayServer, sock: socket.socket, origin: Origin, *,
              received: bytes = b"", tls: ssl.SSLContext | None = None) -> None:
        """Serve a handed-over socket on ``server`` (a task of its own)."""
        peer = sock.getpeername()[:2]
        self._open[peer] = origin

        async def run() -> None:
            try:
                await server.serve_socket(sock, received=received, tls=tls)
            finally:
                self._open.pop(peer, None)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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


def take_socket(proxyserver: Any, client: Client) -> socket.socket | None:
    """The client's socket, duplicated, once mitmproxy has stopped reading it and let go
    of its own descriptor (the connection stays open through the duplicate); None
    when mitmproxy's handler of that connection cannot be found (it then keeps it).

    Letting go is ``abort()`` on mitmproxy's transport: its descriptor closes without
    a shutdown, so the client sees nothing, and mitmproxy ends its side of the
    connection as when a client goes away, writing nothing more to it.
    """
    transport = transport_of(client, client, proxyserver)
    if transport is None:
        return None
    raw = transport.get_extra_info("socket")
    if not isinstance(transport, asyncio.Transport) or raw is None or transport.is_closing():
        return None
    transport.pause_reading()
    try:
        sock = socket.socket(fileno=os.dup(raw.fileno()))
    except OSError:
        transport.resume_reading()
        return None
    sock.setblocking(False)
    transport.abort()
    return sock


def tls_context(certstore: Any, host: str) -> ssl.SSLContext:
    """A server-side TLS context for ``host`` with a certificate from mitmproxy's CA
    (``certstore``: its ``tlsconfig`` addon's), offering HTTP/1.1."""
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        san = x509.DNSName(host)
    entry = certstore.get_cert(host, [san])
    key = entry.privatekey.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    chain = b"".join(c.to_pem() for c in [entry.cert, *getattr(entry, "chain_certs", [])])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as d:  # ssl loads certificates from files only
        cert_file, key_file = Path(d, "cert.pem"), Path(d, "key.pem")
        cert_file.write_bytes(chain)
        key_file.write_bytes(key)
        ctx.load_cert_chain(cert_file, key_file)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def recorded_hosts(urls: Iterable[str]) -> set[tuple[str, int]]:
    """The ``(host, port)`` of each recorded URL (the port its scheme implies if none)."""
    out = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname:
            with contextlib.suppress(ValueError):
                out.add((parts.hostname, parts.port or (443 if parts.scheme in ("https", "wss") else 80)))
    return out


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
    headers = end_to_end(req.headers)  # the body goes as read: de-chunked, its length declared
    if req.body or header_value(req.headers, "content-length") is not None:
        headers += framing_headers(Framing.CONTENT_LENGTH, len(req.body))
    headers.append(("Connection", "close"))
    reader, upstream = await asyncio.open_connection(*origin.proxy)
    try:
        upstream.write(request_head(req.method, origin.url(req.target), headers) + req.body)
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
