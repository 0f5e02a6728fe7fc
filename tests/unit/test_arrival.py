"""The kernel's receive time of an upstream read (streamtape.arrival).

A real TCP connection on 127.0.0.1, read by asyncio's own transport: the time
a read's bytes came in is kept even when the event loop got to them late.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import pytest

from streamtape.arrival import ArrivalSocket, keep_stamps_on, stamp_arrivals

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SO_TIMESTAMPNS is Linux's")

HELD_S = 0.2
"""How long the loop is kept from reading after the peer wrote."""


async def _pair() -> tuple[socket.socket, asyncio.StreamReader, asyncio.StreamWriter]:
    srv = socket.create_server(("127.0.0.1", 0))
    reader, writer = await asyncio.open_connection(*srv.getsockname()[:2])
    peer, _ = srv.accept()
    srv.close()
    return peer, reader, writer


async def _until_the_kernel_stamps(peer: socket.socket, reader: asyncio.StreamReader, stamped: ArrivalSocket) -> None:
    """Linux turns its receive stamps on a moment after the first socket asks (from a work
    queue, later on a loaded machine): bytes read before then have the clock's time."""
    for _ in range(500):
        peer.sendall(b".")
        assert await reader.readexactly(1) == b"."
        if stamped.from_kernel:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the kernel never stamped a read in 5 s")


def test_a_read_keeps_the_time_its_bytes_came_not_the_time_the_loop_read_them() -> None:
    async def main() -> tuple[int, int, int, bytes]:
        peer, reader, writer = await _pair()
        stamped = stamp_arrivals(writer.transport)
        assert isinstance(stamped, ArrivalSocket)
        await _until_the_kernel_stamps(peer, reader, stamped)
        sent = time.perf_counter_ns()
        peer.sendall(b"late piece")
        time.sleep(HELD_S)  # the loop is busy: nothing reads the socket meanwhile
        data = await reader.read(100)
        read = time.perf_counter_ns()
        writer.close()
        peer.close()
        return sent, stamped.arrived_ns, read, data

    sent, arrived, read, data = asyncio.run(main())
    assert data == b"late piece"
    assert read - sent >= HELD_S * 1e9
    # Loopback delivers at once; the stamp is the sending moment's, give or take a starved
    # machine's scheduling, nowhere near the 200 ms the loop held it.
    assert sent <= arrived + 1_000_000 and arrived - sent < 0.05e9, (arrived - sent) / 1e6


def test_the_stamped_transport_reads_writes_and_ends_as_before() -> None:
    async def main() -> tuple[bytes, bytes, bytes]:
        peer, reader, writer = await _pair()
        assert stamp_arrivals(writer.transport) is not None
        assert stamp_arrivals(writer.transport) is stamp_arrivals(writer.transport)  # once only
        writer.write(b"request")
        await writer.drain()
        got_by_peer = peer.recv(100)
        peer.sendall(b"x" * 300_000)  # more than one read's worth
        peer.shutdown(socket.SHUT_WR)
        body = await reader.read()  # to the end of the stream
        eof = await reader.read(10)
        writer.close()
        await writer.wait_closed()
        peer.close()
        return got_by_peer, body, eof

    got_by_peer, body, eof = asyncio.run(main())
    assert got_by_peer == b"request"
    assert body == b"x" * 300_000 and eof == b""


def test_what_is_not_an_asyncio_socket_transport_is_left_alone() -> None:
    class Other(asyncio.Transport):
        pass

    assert stamp_arrivals(None) is None
    assert stamp_arrivals(Other()) is None


def test_the_kernel_stamps_from_the_first_read_once_kept_on() -> None:
    # Linux turns stamping on from a work queue a moment after the first socket asks;
    # keep_stamps_on holds it on, so a connection's first read is stamped at once.
    assert keep_stamps_on()

    async def main() -> bool:
        await asyncio.sleep(0.5)  # the work queue's moment, on a loaded machine too
        peer, reader, writer = await _pair()
        stamped = stamp_arrivals(writer.transport)
        assert stamped is not None
        peer.sendall(b"first")
        assert await reader.readexactly(5) == b"first"
        writer.close()
        peer.close()
        return stamped.from_kernel

    assert asyncio.run(main())
