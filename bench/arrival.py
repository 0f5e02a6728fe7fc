"""What a read with the kernel's receive time costs: :class:`streamtape.arrival.ArrivalSocket`'s
``recv`` (``recvmsg`` with ``SO_TIMESTAMPNS``) against a plain ``recv`` of the same socket.

    .venv/bin/python -m bench.arrival [--reads 50000] [--runs 3]

One loopback TCP connection; the peer writes a 150-byte event, the reader reads it,
``--reads`` times per run, the two ways alternating run by run. Prints the time per
read (µs) of each, median of the runs with the range, and the difference: what the
recorder's event loop pays per upstream read for timing pieces by their arrival.
Linux only.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable

from bench._common import cpu_model
from streamtape.arrival import SO_TIMESTAMPNS, ArrivalSocket

EVENT = b"data: " + b"x" * 142 + b"\n\n"


def per_read_us(write: socket.socket, read: Callable[[int], bytes], reads: int) -> float:
    spent = 0
    for _ in range(reads):
        write.send(EVENT)
        t0 = time.perf_counter_ns()
        read(65536)
        spent += time.perf_counter_ns() - t0
    return spent / reads / 1000


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.arrival", description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if sys.platform != "linux" or SO_TIMESTAMPNS is None:
        raise SystemExit("bench.arrival: the kernel's receive stamps (SO_TIMESTAMPNS) are Linux's")
    srv = socket.create_server(("127.0.0.1", 0))
    reader = socket.create_connection(srv.getsockname()[:2])
    writer, _ = srv.accept()
    srv.close()
    for s in (reader, writer):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    stamped = ArrivalSocket(reader)
    print(f"bench.arrival: CPU {cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"{a.reads} reads of {len(EVENT)} bytes per run, {a.runs} runs", flush=True)
    plain: list[float] = []
    arrival: list[float] = []
    for _ in range(a.runs):
        plain.append(per_read_us(writer, reader.recv, a.reads))
        arrival.append(per_read_us(writer, stamped.recv, a.reads))
    diff = [x - y for x, y in zip(arrival, plain, strict=True)]

    def cell(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} µs [{min(xs):.2f}-{max(xs):.2f}]"

    print(f"plain recv (the baseline)        {cell(plain)}")
    print(f"ArrivalSocket.recv (stamped)     {cell(arrival)}")
    print(f"what the stamp costs per read    {cell(diff)}  ({statistics.median(arrival) / statistics.median(plain):.2f}x)")
    reader.close()
    writer.close()


if __name__ == "__main__":
    main()
