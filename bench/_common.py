"""What the benchmarks share: the timestamping upstream, paced chunked writes and the
raw-socket client that time every read (the recording benchmarks), and how every benchmark
prints a percentile.

``bench/record_overhead.py`` (direct / mitmdump / streamtape record) and
``bench/shadow_overhead.py`` (record with and without a busy shadow) measure
the same thing, an event's latency from the upstream's write to the client's
read, so they measure it with the same parts: a change to how it is measured
changes both. ``perf_counter_ns`` is one clock for all processes on Linux, so
an event stamped by the upstream here is timed against the client here even
when a recorder in another process sits between them.
"""

from __future__ import annotations

import math
import os
import platform
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from streamtape.stats import percentile

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
"""A streaming response's head: SSE, chunked."""

GET_STREAM = b"GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: identity\r\n\r\n"
"""The client's default request: no body, no compression."""


class ThreadedServer:
    """A socket server on 127.0.0.1 (port 0) with a thread per connection; a subclass
    writes the responses in :meth:`serve`."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.serve(s)

    def serve(self, s: socket.socket) -> None:
        raise NotImplementedError


class Readable(Protocol):
    """A socket, or anything that reads like one (``streamtape.arrival.ArrivalSocket``)."""

    def recv(self, bufsize: int, flags: int = ..., /) -> bytes: ...


def read_head(s: Readable, buf: bytes) -> bytes | None:
    """Reads until ``buf`` holds a whole request head; what follows the head (None when the
    client closed first). A request's body, if any, is left unread: the servers here answer
    without it."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None
        buf += d
    return buf.partition(b"\r\n\r\n")[2]


def send_paced(s: socket.socket, count: int, gap_s: float, start: float, event: Callable[[int], bytes]) -> None:
    """``count`` HTTP chunks, ``event(i)`` each, the first at ``start`` (``perf_counter``) and
    then ``gap_s`` apart, then the last chunk. Sleeps to within 2 ms of a deadline and spins
    the rest, and ``event`` is called at the write, so a timestamp in it is the write's."""
    deadline = start
    for i in range(count):
        while (left := deadline - time.perf_counter()) > 0:
            time.sleep(left if left > 0.002 else 0)
        ev = event(i)
        s.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
        deadline += gap_s
    s.sendall(b"0\r\n\r\n")


def stamped_event(_: int) -> bytes:
    """An SSE event carrying the ``perf_counter_ns`` of its making (the client reads ``"t"``)."""
    return b'data: {"t": %d, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}\n\n' % time.perf_counter_ns()


class Upstream(ThreadedServer):
    """The primary: timestamped SSE events, ``gap_s`` apart, 50 ms after the head; one
    response per connection. With ``short`` set, one event (for header latency)."""

    def __init__(self, events: int, gap_s: float) -> None:
        self.events, self.gap_s = events, gap_s
        self.short = False
        self.head_sent_ns: list[int] = []
        super().__init__()

    def serve(self, s: socket.socket) -> None:
        if read_head(s, b"") is None:
            return
        s.sendall(SSE_HEAD)
        self.head_sent_ns.append(time.perf_counter_ns())
        send_paced(s, 1 if self.short else self.events, self.gap_s, time.perf_counter() + 0.05, stamped_event)
        s.close()


@dataclass(frozen=True)
class Reading:
    """What :func:`client` saw of one response."""

    latencies_ms: list[float]
    """Each stamped event's read time less its write time."""
    head_ns: int
    """When the first bytes (the head) arrived, ``perf_counter_ns``."""
    size: int
    """Bytes read, head and framing included."""


def client(port: int, request: bytes = GET_STREAM) -> Reading:
    """Sends ``request`` on a fresh connection and times every read until the last chunk."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(request)
    buf = b""
    lat: list[float] = []
    head_ns = None
    size = 0
    while True:
        d = s.recv(65536)
        now = time.perf_counter_ns()
        if not d:
            break
        if head_ns is None:
            head_ns = now
        buf += d
        size += len(d)
        *complete, buf = buf.split(b"\n\n")  # an event is done at its blank line
        for ev in complete:
            if m := re.search(rb'"t": (\d+)', ev):
                lat.append((now - int(m.group(1))) / 1e6)
        if d.endswith(b"0\r\n\r\n"):
            break
    s.close()
    return Reading(lat, head_ns or 0, size)


def pct(values: Sequence[float], q: float) -> float:
    """:func:`streamtape.stats.percentile` as a figure to print: the nearest-rank percentile,
    the one ``streamtape diff`` reports (always one of the values; p99 of 100 values is the
    99th, not the largest), NaN for no values."""
    v = percentile(values, q)
    return math.nan if v is None else float(v)


def steal_s() -> float:
    """CPU time the host took from this virtual machine so far (``steal`` in ``/proc/stat``, in
    seconds, all CPUs): read before and after a run, the difference says whether the run's
    outliers were the host's. 0.0 where it cannot be read."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), printed with every figure."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")),
                platform.processor() or "unknown")
