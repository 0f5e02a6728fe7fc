"""Load for the reliability tests and ``bench/reliability.py``: a stamped upstream in its own
process, and many concurrent raw HTTP/1.1 streams from one event loop.

- ``python -m tests.support.reliability upstream --events N --gap-ms G``: an upstream
  (:class:`tests.support.servers.ScriptedServer`, one thread per connection) that
  answers every request with ``N`` chunked SSE events ``G`` ms apart, each
  carrying the client's id (``?c=ID`` in the path), its index and the
  ``perf_counter_ns`` of its write (one clock for every process on Linux), so
  a client can tell what it received and how late. It prints
  ``upstream on HOST:PORT`` and serves until killed. A process of its own: its
  200 writer threads never share a GIL with the clients that time them.
- :func:`fetch_many`: open one connection per request (staggered, as
  independent clients are), send it, and read the chunked response as
  :class:`Fetched`: every chunk with its arrival time, and how the response
  ended. A client may hang up after a given number of pieces.
- :func:`raise_fd_limit`: room for that many connections in this process and its children.

The processes themselves and their /proc readings are tests/support/processes.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

MS = 1_000_000


# --------------------------------------------------------------------------- the upstream


def stamped_event(client: str, i: int, pad: int) -> bytes:
    """One SSE event naming its client and index, stamped with the time of its write."""
    return b'data: {"c": "%s", "i": %d, "t": %d, "pad": "%s"}\n\n' % (
        client.encode(), i, time.perf_counter_ns(), b"x" * pad)


def stamped_stream(events: int, gap_s: float, pad: int = 60) -> object:
    """A :class:`tests.support.servers.ScriptedServer` handler: ``events`` stamped events ``gap_s`` apart
    (on absolute deadlines), then the last chunk; the connection is kept."""
    from tests.support.servers import SSE_HEADERS, Conn, Received

    def handle(req: Received, c: Conn) -> None:
        m = re.search(r"[?&]c=([^&]+)", req.path)
        client = m.group(1) if m else "-"
        c.head(200, SSE_HEADERS)
        deadline = time.perf_counter()
        for i in range(events):
            while (left := deadline - time.perf_counter()) > 0:
                time.sleep(left)
            c.chunk(stamped_event(client, i, pad))
            deadline += gap_s
        c.end_chunks()

    return handle


def run_upstream(events: int, gap_ms: float, pad: int) -> None:
    from tests.support.servers import ScriptedServer

    with ScriptedServer({"*": stamped_stream(events, gap_ms / 1000, pad)}) as up:  # type: ignore[dict-item]
        print(f"upstream on {up.host}:{up.port}", flush=True)
        while True:
            time.sleep(3600)


# --------------------------------------------------------------------------- the clients


@dataclass
class Fetched:
    """One response as a client read it: status, each chunk with its arrival time, the ending.

    ``ending``: ``complete`` (the last chunk came), ``eof`` (closed before it),
    ``reset`` (a TCP reset), ``hung_up`` (this client left on purpose),
    ``timeout``, or ``refused`` (no connection).
    """

    key: str
    status: int = 0
    pieces: list[tuple[int, bytes]] = field(default_factory=list)
    ending: str = ""
    sent_ns: int = 0
    held: int = 0
    """For a client that hung up: the chunks it held by then, read or still in its buffer
    (a lagging reader holds more than it read)."""
    held_whole: bool = False
    """A client that hung up already held the last chunk (a reader that lagged by the whole
    stream: the server had written every byte, and rightly logs it ``complete``)."""

    @property
    def body(self) -> bytes:
        return b"".join(d for _, d in self.pieces)


class _Client(asyncio.Protocol):
    def __init__(self, request: bytes, fetched: Fetched, done: asyncio.Future[None],
                 hang_up_after: int | None) -> None:
        self.request = request
        self.f = fetched
        self.done = done
        self.hang_up_after = hang_up_after
        self.buf = bytearray()
        self.head = True
        self.length: int | None = None  # a Content-Length body (an error answer), else chunked
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.f.sent_ns = time.perf_counter_ns()
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.buf += data
        if self.head:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            self.f.status = int(head[0].split(" ")[1])
            fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
            if "chunked" not in fields.get("transfer-encoding", ""):
                self.length = int(fields.get("content-length", "0"))
            del self.buf[: end + 4]
            self.head = False
        if self.length is not None:
            if len(self.buf) >= self.length:
                self.f.pieces.append((now, bytes(self.buf[: self.length])))
                self._end("complete")
            return
        while True:
            nl = self.buf.find(b"\r\n")
            if nl < 0:
                return
            size = int(bytes(self.buf[:nl]).split(b";")[0], 16)
            if len(self.buf) < nl + 2 + size + 2:
                return
            if size == 0:
                self._end("complete")
                return
            self.f.pieces.append((now, bytes(self.buf[nl + 2 : nl + 2 + size])))
            del self.buf[: nl + 2 + size + 2]
            if self.hang_up_after is not None and len(self.f.pieces) >= self.hang_up_after:
                self.f.held, self.f.held_whole = _held(len(self.f.pieces), self.buf)
                self._end("hung_up")
                return

    def _end(self, how: str) -> None:
        if not self.f.ending:
            self.f.ending = how
        if self.transport is not None:
            if how == "hung_up":
                self.transport.abort()
            else:
                self.transport.close()
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.f.ending:
            self.f.ending = "reset" if isinstance(exc, ConnectionResetError) else "eof"
        if not self.done.done():
            self.done.set_result(None)


def _held(read: int, buf: bytearray) -> tuple[int, bool]:
    """The chunks held (``read`` plus the whole ones in ``buf``) and whether the last came."""
    at = 0
    while (nl := buf.find(b"\r\n", at)) >= 0:
        size = int(bytes(buf[at:nl]).split(b";")[0], 16)
        if size == 0:
            return read, True
        if len(buf) < nl + 2 + size + 2:
            break
        read += 1
        at = nl + 2 + size + 2
    return read, False


def request_bytes(path: str, body: bytes = b'{"stream": true}', host: str = "llm.test") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nAccept-Encoding: identity\r\n\r\n"
    ).encode() + body


async def fetch_many(
    host: str, port: int, paths: Sequence[str], *, stagger_s: float = 0.0,
    hang_up: dict[int, int] | None = None, timeout: float = 60.0, body: bytes = b'{"stream": true}',
    starts: Sequence[float] | None = None,
) -> list[Fetched]:
    """One connection per path, started ``stagger_s / len(paths)`` apart (or at ``starts[i]``
    seconds from now); each reads its chunked response to the end (client ``i`` hangs up
    after ``hang_up[i]`` pieces)."""
    loop = asyncio.get_running_loop()
    hang_up = hang_up or {}
    out = [Fetched(p) for p in paths]

    async def one(i: int, f: Fetched) -> None:
        await asyncio.sleep(starts[i] if starts is not None else stagger_s * i / max(1, len(paths)))
        done: asyncio.Future[None] = loop.create_future()
        try:
            transport, _ = await loop.create_connection(
                lambda: _Client(request_bytes(f.key, body), f, done, hang_up.get(i)), host, port)
        except OSError:
            f.ending = "refused"
            return
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            f.ending = f.ending or "timeout"
            transport.abort()

    await asyncio.gather(*(one(i, f) for i, f in enumerate(out)))
    return out


# --------------------------------------------------------------------------- figures


_STAMP = re.compile(rb'"t": (\d+)')


def event_latencies_ms(fetched: Sequence[Fetched]) -> list[float]:
    """For every stamped event received: arrival time minus the upstream's write time (ms)."""
    out: list[float] = []
    for f in fetched:
        for at, data in f.pieces:
            out.extend((at - int(m.group(1))) / MS for m in _STAMP.finditer(data))
    return out


def exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection to 127.0.0.1; everything the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                out += chunk
    return out


def raise_fd_limit(needed: int) -> bool:
    """Raise this process's soft descriptor limit (children inherit it) to at least
    ``needed``; False when the hard limit is lower."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return True
    if hard != resource.RLIM_INFINITY and hard < needed:
        return False
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return True


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("upstream")
    up.add_argument("--events", type=int, default=40)
    up.add_argument("--gap-ms", type=float, default=25.0)
    up.add_argument("--pad", type=int, default=60)
    a = ap.parse_args(argv)
    if a.cmd == "upstream":
        run_upstream(a.events, a.gap_ms, a.pad)


if __name__ == "__main__":
    main()

