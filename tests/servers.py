"""Real HTTP/1.1 upstream servers on 127.0.0.1 for the tests, with real servers' quirks.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field


@dataclass
class Received:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes


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

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def reset(self) -> None:
        """Close with a TCP RST instead of a FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


Handler = Callable[[Received, Conn], None]


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


def chat_chunk(content: str | None = None, *, role: str | None = None, finish: str | None = None) -> dict:
    delta: dict = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1786000000,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sse_data(obj: dict | str) -> bytes:
    payload = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


def chat_events(words: Iterable[str]) -> list[bytes]:
    """A whole OpenAI chat stream: role chunk, one event per word, finish, [DONE]."""
    events = [sse_data(chat_chunk("", role="assistant"))]
    events += [sse_data(chat_chunk(w)) for w in words]
    events += [sse_data(chat_chunk(finish="stop")), sse_data("[DONE]")]
    return events


def sse_events(events: Sequence[bytes], gap: float = 0.0, headers: Sequence[tuple[str, str]] = SSE_HEADERS) -> Handler:
    """Chunked SSE: one HTTP chunk per event, ``gap`` seconds apart."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, headers)
        for i, ev in enumerate(events):
            if i and gap:
                c.sleep(gap)
            c.chunk(ev)
        c.end_chunks()

    return handle


def ndjson_lines(objs: Sequence[dict], gap: float = 0.0) -> Handler:
    """Ollama-style NDJSON, chunked, one line per chunk."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, [("Content-Type", "application/x-ndjson"), ("Transfer-Encoding", "chunked")])
        for i, o in enumerate(objs):
            if i and gap:
                c.sleep(gap)
            c.chunk(json.dumps(o).encode() + b"\n")
        c.end_chunks()

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed_tls(host: str = "127.0.0.1") -> ssl.SSLContext:
    """A server TLS context with a fresh self-signed certificate for ``host``."""
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
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(f.name)
    return ctx
