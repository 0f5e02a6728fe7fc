"""Section 9 of ``bench/replay.py``: the precision of a few paced streams, timed from ``recv()``.

A recorded 20-piece OpenAI stream with gaps of 20-50 ms is played faithfully by
``streamtape serve`` and by the minimal asyncio server of section 1, in the same run,
to 1 and to a handful of concurrent clients. Each client is a blocking socket on a
thread of its own: a piece's arrival is the ``perf_counter_ns`` right after the
``recv()`` that completed it (no event loop between the socket and the clock).

Figures per server: the gap error |arrival gap - recorded gap| (median and p99 over
every gap of every play) and the duration error |last - first arrival - (last -
first recorded)| (median and max over the plays). Targets (issue 19): one stream
p99 gap error <= 0.5 ms and duration error <= 0.3 ms.
"""

from __future__ import annotations

import itertools
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench._common import cpu_model, pct

MS = 1_000_000


@dataclass
class Plays:
    gap_errors: list[float] = field(default_factory=list)
    duration_errors: list[float] = field(default_factory=list)
    incomplete: int = 0


def recv_arrivals(port: int, request: bytes, timeout: float = 30.0) -> list[int] | None:
    """One response over a blocking socket: each chunk's arrival (the recv that completed
    it), or None when the response did not end with the last chunk."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(request)
    buf = bytearray()
    head = True
    arrivals: list[int] = []
    try:
        while True:
            data = s.recv(65536)
            now = time.perf_counter_ns()
            if not data:
                return None
            buf += data
            if head:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    continue
                del buf[: end + 4]
                head = False
            while (nl := buf.find(b"\r\n")) >= 0:
                size = int(bytes(buf[:nl]).split(b";")[0], 16)
                if len(buf) < nl + 2 + size + 2:
                    break
                if size == 0:
                    return arrivals
                arrivals.append(now)
                del buf[: nl + 2 + size + 2]
    finally:
        s.close()


def play(port: int, request: bytes, offsets: list[int], streams: int, plays: int) -> Plays:
    """``plays`` rounds of ``streams`` concurrent clients (threads started together)."""
    out = Plays()
    rec_gaps = [b - a for a, b in itertools.pairwise(offsets)]
    rec_span = offsets[-1] - offsets[0]
    for _ in range(plays):
        got: list[list[int] | None] = [None] * streams

        def one(i: int, into: list[list[int] | None] = got) -> None:
            into[i] = recv_arrivals(port, request)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for arr in got:
            if arr is None or len(arr) != len(offsets):
                out.incomplete += 1
                continue
            out.gap_errors += [abs((b - a) - g) / MS for (a, b), g in
                               zip(itertools.pairwise(arr), rec_gaps, strict=True)]
            out.duration_errors.append(abs((arr[-1] - arr[0]) - rec_span) / MS)
        time.sleep(0.2)
    return out


def precision_section(tmp: Path, handful: int, plays: int) -> None:
    from bench.replay import REQUEST, Server, make_tape

    tape = tmp / "paced.tape"
    offsets = make_tape(tape, 20, 20, 50, seed=19)
    print(f"9. precision of a few paced streams (20 pieces, gaps 20-50 ms), timed from recv() on "
          f"threads; {plays} plays each; CPU {cpu_model()}", flush=True)
    print(f"   {'':<22}{'gap med':>9}{'gap p99':>9}{'dur med':>9}{'dur max':>9}  (ms)", flush=True)
    for n in (1, handful):
        p99s: dict[str, float] = {}
        for kind in ("streamtape", "asyncio"):
            with Server(kind, tape, "faithful") as srv:
                recv_arrivals(srv.port, REQUEST)  # warm up
                r = play(srv.port, REQUEST, offsets, n, plays)
            p99s[kind] = pct(r.gap_errors, 99)
            print(f"   {kind + f', {n} stream' + ('s' if n > 1 else ''):<22}"
                  f"{statistics.median(r.gap_errors):>9.3f}{p99s[kind]:>9.3f}"
                  f"{statistics.median(r.duration_errors):>9.3f}{max(r.duration_errors):>9.3f}"
                  + (f"  incomplete {r.incomplete}" if r.incomplete else ""), flush=True)
        print(f"   p99 gap error, streamtape / asyncio at {n}: "
              f"{p99s['streamtape'] / max(p99s['asyncio'], 1e-9):.2f}x", flush=True)
    print("   targets: 1 stream p99 gap error <= 0.5 ms, duration error <= 0.3 ms\n", flush=True)
