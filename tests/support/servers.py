"""Real HTTP/1.1 peers on 127.0.0.1 for the tests: upstream servers with real servers' quirks,
and a raw client that sees every chunk.

Each server is a plain socket server (one thread per connection) driven by
handlers that write exactly the bytes they are told, when they are told:
chunked or Content-Length or close-delimited framing, chunks split at any
byte, delays between writes, gzip, an early close or a TCP reset. Nothing here
is streamtape code, so the recorder and the replay engine are tested against
an independent peer.

    with ScriptedServer({"/v1/chat/completions": sse_events(EVENTS, gap=0.03)}) as up:
        httpx.post(up.url + "/v1/chat/completions", json={...})
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.builders import CHAT_BODY


@dataclass
class Received:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


class Conn:
    """What a handler writes with. Every write is one ``sendall`` with TCP_NODELAY set."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def head(self, status: int = 200, headers: Sequence[tuple[str, str]] = (), reason: str = "OK") -> None:
        lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
        self.raw(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def chunk(self, data: bytes) -> None:
        """One HTTP chunk in one write."""
        self.raw(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self) -> None:
        self.raw(b"0\r\n\r\n")

    def chunked(self, pieces: Iterable[bytes], gap: float = 0.0, first_delay: float = 0.0) -> None:
        """A chunked body after the head: ``first_delay`` seconds, then each piece as one
        HTTP chunk ``gap`` seconds apart, then the last chunk."""
        if first_delay:
            self.sleep(first_delay)
        for i, p in enumerate(pieces):
            if i and gap:
                self.sleep(gap)
            self.chunk(p)
        self.end_chunks()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def reset(self) -> None:
        """Close with a TCP RST instead of a FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


Handler = Callable[[Received, Conn], str | None]
"""Writes one response; returns "close" to close the connection after it."""


def by_scenario(handlers: Mapping[str, Handler]) -> Handler:
    """One route for many scripted responses: the request's ``X-Scenario`` header names
    the handler (headers take no part in pairing or matching unless asked)."""

    def route(req: Received, c: Conn) -> str | None:
        name = req.header("x-scenario")
        assert name is not None, f"no X-Scenario header on {req.method} {req.path}"
        return handlers[name](req, c)

    return route


@dataclass
class ScriptedServer:
    routes: dict[str, Handler]
    host: str = "127.0.0.1"
    received: list[Received] = field(default_factory=list)
    tls: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        self._sock = socket.create_server((self.host, 0))
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # shutdown first: close() alone leaves the port accepting while the accept thread
        # is blocked in accept() (Linux), so a client could still reach a "gone" server.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                s, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            if self.tls:
                s = self.tls.wrap_socket(s, server_side=True)
            while True:
                while b"\r\n\r\n" not in buf:
                    data = s.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _version = lines[0].split(" ", 2)
                headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if ":" in line]
                length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
                while len(buf) < length:
                    data = s.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
                req = Received(method, path, headers, body)  # type: ignore[arg-type]
                self.received.append(req)
                handler = self.routes.get(path.split("?")[0]) or self.routes.get("*")
                conn = Conn(s)
                if handler is None:
                    msg = b'{"error": "no route"}'
                    conn.head(404, [("Content-Type", "application/json"), ("Content-Length", str(len(msg)))], "Not Found")
                    conn.raw(msg)
                    continue
                if handler(req, conn) == "close":
                    return
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                s.close()


# ---------------------------------------------------------------------------
# Handlers with the behaviours real servers have.

SSE_HEADERS = [
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache"),
    ("Transfer-Encoding", "chunked"),
]


def sse_events(
    events: Sequence[bytes],
    gap: float = 0.0,
    headers: Sequence[tuple[str, str]] = SSE_HEADERS,
    *,
    first_delay: float = 0.0,
) -> Handler:
    """Chunked SSE: one HTTP chunk per event, ``gap`` seconds apart, the first
    ``first_delay`` seconds after the head."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, headers)
        c.chunked(events, gap, first_delay)

    return handle


def ndjson_lines(objs: Sequence[dict[str, object]], gap: float = 0.0) -> Handler:
    """Ollama-style NDJSON, chunked, one line per chunk."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, [("Content-Type", "application/x-ndjson"), ("Transfer-Encoding", "chunked")])
        c.chunked((json.dumps(o).encode() + b"\n" for o in objs), gap)

    return handle


def split_writes(pieces: Sequence[bytes], gap: float = 0.02) -> Handler:
    """Chunked SSE whose pieces are written exactly as given (to split a character)."""
    return sse_events(pieces, gap)


def gzip_sse(events: Sequence[bytes], gap: float = 0.0) -> Handler:
    """A gzip-encoded SSE body, sent as chunks of one compressed stream."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, [*SSE_HEADERS, ("Content-Encoding", "gzip")])
        comp = gzip.GzipFile(fileobj=(sink := _Sink()), mode="wb")
        for i, ev in enumerate(events):
            if i and gap:
                c.sleep(gap)
            comp.write(ev)
            comp.flush()
            c.chunk(sink.take())
        comp.close()
        c.chunk(sink.take())
        c.end_chunks()

    return handle


class _Sink:
    def __init__(self) -> None:
        self.buf = bytearray()

    def write(self, b: bytes) -> int:
        self.buf += b
        return len(b)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        out = bytes(self.buf)
        self.buf.clear()
        return out


def close_mid_stream(events: Sequence[bytes], after: int, gap: float = 0.01) -> Handler:
    """Chunked SSE that closes the connection after ``after`` events, no terminating chunk."""

    def handle(req: Received, c: Conn) -> str:
        c.head(200, SSE_HEADERS)
        for ev in events[:after]:
            c.chunk(ev)
            c.sleep(gap)
        return "close"

    return handle


def content_length(body: bytes, writes: int = 1, gap: float = 0.0, ctype: str = "application/json") -> Handler:
    """A Content-Length body, written in ``writes`` parts."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
        step = max(1, -(-len(body) // writes))
        for i in range(0, len(body), step):
            if i and gap:
                c.sleep(gap)
            c.raw(body[i : i + step])

    return handle


def close_delimited(pieces: Sequence[bytes], gap: float = 0.0, ctype: str = "text/event-stream") -> Handler:
    """An HTTP/1.1 body with neither Content-Length nor chunked: it ends when the server closes."""

    def handle(req: Received, c: Conn) -> str:
        c.head(200, [("Content-Type", ctype), ("Connection", "close")])
        for i, p in enumerate(pieces):
            if i and gap:
                c.sleep(gap)
            c.raw(p)
        return "close"

    return handle


@contextlib.contextmanager
def refused_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port that refuses connections for as long as the block runs.

    The socket is bound and never listens: a connection attempt gets a TCP RST
    (connection refused), and no other process can take the port meanwhile, as
    it could between closing a probe socket and using its number.
    """
    with socket.socket() as s:
        s.bind((host, 0))
        yield s.getsockname()[1]


def self_signed_tls(host: str = "127.0.0.1") -> ssl.SSLContext:
    """A server TLS context with a fresh self-signed certificate for ``host``."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(self_signed_pem(host))
    return ctx


def self_signed_pem(host: str = "127.0.0.1") -> str:
    """A PEM file holding a fresh self-signed certificate for ``host`` and its key
    (for servers that take file names, like hypercorn)."""
    import datetime
    import ipaddress
    import tempfile

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return f.name


class PreferH2(ssl.SSLContext):
    """A client TLS context that offers h2 before http/1.1, as browsers and curl do.

    httpcore offers ``["http/1.1", "h2"]``; a server picks its own favourite,
    but mitmproxy, as a client's peer, honours the client's order and would
    answer HTTP/1.1. (``http1=False`` is no way out through a proxy: httpx
    would then speak HTTP/2 to the proxy for the CONNECT too.)
    """

    def set_alpn_protocols(self, alpn_protocols: Any) -> None:
        super().set_alpn_protocols(sorted(alpn_protocols, key=lambda p: p != "h2"))


def trusting(confdir: Path) -> PreferH2:
    """A client TLS context that trusts a recorder's CA (in ``confdir``) and offers h2 first."""
    ctx = PreferH2(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(confdir / "mitmproxy-ca-cert.pem"))
    return ctx


# ---------------------------------------------------------------------------
# A raw HTTP/1.1 client that sees the wire: every chunk, timestamped.


@dataclass
class Raw:
    """A response as it came off the socket: the chunks of a chunked body as sent."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    chunks: list[tuple[int, bytes]] = field(default_factory=list)  # (arrival ns after send, data)
    ending: str = ""  # "complete" | "eof" (closed without finishing) | "reset"
    head_at: int = 0

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    @property
    def body(self) -> bytes:
        return b"".join(d for _, d in self.chunks)


class _Sock:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.t = 0

    def fill(self) -> bool:
        data = self.sock.recv(65536)
        self.t = time.perf_counter_ns()
        if not data:
            return False
        self.buf += data
        return True

    def until(self, sep: bytes) -> bytes | None:
        while sep not in self.buf:
            if not self.fill():
                return None
        out, _, self.buf = self.buf.partition(sep)
        return out

    def exactly(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not self.fill():
                return None
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def raw_request(url: str, path: str = "/v1/chat/completions", body: dict[str, object] | None = None,
                headers: dict[str, str] | None = None, method: str = "POST",
                timeout: float = 10, proxy: bool = False) -> Raw:
    """One request on a fresh socket (body default :data:`tests.support.builders.CHAT_BODY`);
    the response parsed by hand, chunk by chunk. ``proxy``: an absolute-form target,
    as a client sends it to an HTTP proxy."""
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(CHAT_BODY if body is None else body).encode() if method == "POST" else b""
    target = f"http://llm.test{path}" if proxy else path
    lines = [f"{method} {target} HTTP/1.1", "Host: llm.test", "Connection: close"]
    if payload:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        r = _Sock(s)
        t0 = time.perf_counter_ns()
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        try:
            head = r.until(b"\r\n\r\n")
            assert head is not None, "no response head"
            status_line, *hlines = head.decode("latin-1").split("\r\n")
            _, status, reason = ([*status_line.split(" ", 2), ""])[:3]
            hdrs = [(k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in hlines)]
            out = Raw(int(status), reason, hdrs, head_at=r.t - t0)
            te = out.header("transfer-encoding")
            if te == "chunked":
                while True:
                    size_line = r.until(b"\r\n")
                    if size_line is None:
                        out.ending = "eof"
                        return out
                    size = int(size_line, 16)
                    data = r.exactly(size + 2)
                    if data is None:
                        out.ending = "eof"
                        return out
                    if size == 0:
                        out.ending = "complete"
                        return out
                    out.chunks.append((r.t - t0, data[:-2]))
            length = out.header("content-length")
            while True:
                if length is not None and sum(len(d) for _, d in out.chunks) >= int(length):
                    out.ending = "complete"
                    return out
                if r.buf:
                    out.chunks.append((r.t - t0, r.buf))
                    r.buf = b""
                    continue
                if not r.fill():
                    out.ending = "eof" if length is not None else "complete"
                    return out
        except ConnectionResetError:
            out.ending = "reset"
            return out
