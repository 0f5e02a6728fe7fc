"""When each read's bytes reached this machine: the kernel's receive time.

Used where a streamed piece's time is the measurement: the recorder's upstream
reads (below) and the rerun client's (:mod:`streamtape.rerun.client`, whose
time to first token would otherwise carry its own event loop's or gevent
hub's lag under load).

A piece's time read in the stream callable is the time mitmproxy's event loop
got to the socket, plus its layers' work. On a busy proxy the loop comes to a
ready socket late (at 100 concurrent paced streams on 2 cores, tens of
milliseconds: ``bench/record_timing.py``), and every piece read there carried
that lag into the cassette, though the upstream had sent it on time.

Linux stamps every packet it receives (``SO_TIMESTAMPNS``), and a TCP read with
``recvmsg`` hands back the stamp of the last packet it consumed. So
:func:`stamp_arrivals` puts a :class:`ArrivalSocket` in place of an upstream
transport's socket: its ``recv`` (the one call asyncio's selector transport
makes to read) is ``recvmsg``, keeping that stamp, on the ``perf_counter_ns``
clock the recorder uses, as ``arrived_ns``. mitmproxy turns what a read brought
into pieces before it reads that socket again (the reading task runs before the
loop polls again), so the pieces a read gave carry its stamp: the time the
bytes came in, whatever the loop was doing then. TLS is no matter: mitmproxy
decrypts in memory what it read from the TCP socket.

The limit: one read has one stamp. Writes that waited in the socket together
(the loop later than the upstream's gap between them) are one read, and each
becomes its own piece (mitmproxy hands on every HTTP chunk) with the time the
last of them came. ``bench/record_timing.py`` counts those.

Where there is no such stamp (not Linux, a transport that is not asyncio's
selector socket transport, a QUIC connection, a TLS socket of Python's ``ssl``),
nothing is replaced and the clock is read when the read returns, as before.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import sys
import time
from typing import Any

__all__ = ["ArrivalSocket", "keep_stamps_on", "stamp_arrivals", "stamp_socket"]

SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
"""Linux's ``SO_TIMESTAMPNS`` (also the control message's type, ``SCM_TIMESTAMPNS``);
Python exposes it from 3.14 on."""

_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
_timespec = _TIMESPEC.unpack_from
_clock = time.perf_counter_ns
_wall = time.time_ns
STALE_NS = 10 * 10**9
"""A stamp further back than this (the wall clock stepped since) is not believed."""


class ArrivalSocket:
    """Stands in for a transport's socket: the same socket, with ``recv`` keeping the
    kernel's receive time of the bytes it returns (``arrived_ns``, ``perf_counter_ns``)."""

    __slots__ = ("_sock", "arrived_ns", "from_kernel")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.arrived_ns = time.perf_counter_ns()
        self.from_kernel = False
        """Whether the last read's time is the kernel's (else the clock when it returned)."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self._sock.recvmsg(bufsize, _ANCILLARY, flags)
        now = _clock()
        at = now
        if ancillary:  # the one control message the socket was asked for
            level, kind, raw = ancillary[0]
            if kind == SO_TIMESTAMPNS and level == socket.SOL_SOCKET and len(raw) >= _TIMESPEC.size:
                sec, nsec = _timespec(raw)
                # The stamp is wall-clock time: moved onto the monotonic clock by the two
                # clocks' difference now, and never after now (a wall clock that steps).
                at = sec * 1_000_000_000 + nsec - (_wall() - now)
                if not now - STALE_NS < at <= now:
                    at = now
        self.arrived_ns = at
        self.from_kernel = at != now
        return data

    def send(self, data: Any, flags: int = 0) -> int:  # the write path, without __getattr__'s lookup
        return self._sock.send(data, flags)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


_keeper: list[socket.socket] = []


def keep_stamps_on() -> bool:
    """Keep the kernel stamping received packets for as long as this process runs; False
    where it cannot (not Linux).

    Linux stamps packets only while some socket asks for stamps, and turns that on
    from a work queue, a moment after the first socket asks (``net_enable_timestamp``):
    packets that arrive before then carry no stamp, and one that arrived right after a
    new connection asked was read with the clock's time instead (seen on a loaded
    machine: a whole 200 ms hold). One socket of our own that asks, open until the
    process ends, keeps it on from the first call; call it early (at startup)."""
    if _keeper:
        return True
    if SO_TIMESTAMPNS is None:
        return False
    try:
        keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    _keeper.append(keeper)
    return True


def stamp_socket(sock: Any) -> ArrivalSocket | None:
    """Have the kernel stamp what a TCP socket receives; the :class:`ArrivalSocket` to read
    it through, or None where that cannot be done (not Linux, not TCP, an ``ssl`` socket,
    whose reads are decrypted records and have no control messages)."""
    if SO_TIMESTAMPNS is None or not _ANCILLARY:
        return None
    if not isinstance(sock, socket.socket) or isinstance(sock, ssl.SSLSocket) or sock.type != socket.SOCK_STREAM:
        return None
    keep_stamps_on()
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return None
    return ArrivalSocket(sock)


def stamp_arrivals(transport: asyncio.BaseTransport | None) -> ArrivalSocket | None:
    """Have the kernel stamp what ``transport``'s socket receives, and read it with the
    stamps kept; the :class:`ArrivalSocket` now in its place, or None where that
    cannot be done (the transport is left as it was)."""
    sock = getattr(transport, "_sock", None)
    if isinstance(sock, ArrivalSocket):
        return sock
    # asyncio's selector transport reads with ``self._sock.recv`` (3.11 to 3.14); a
    # transport without that reading method is someone else's, and is not touched.
    if not callable(getattr(transport, "_read_ready__data_received", None)):
        return None
    stamped = stamp_socket(sock)
    if stamped is not None:
        transport._sock = stamped  # type: ignore[union-attr]
    return stamped
