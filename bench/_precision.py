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
import os
import socket
import statistics
import subprocess
import sys
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


def tape_for(tree: Path | None, path: Path) -> list[int]:
    """The paced cassette, written by ``tree``'s own code when given (an older checkout reads
    only its own format); the offsets are the same either way (same seed)."""
    from bench.replay import make_tape

    if tree is None:
        return make_tape(path, 20, 20, 50, seed=19)
    code = ("import sys; from pathlib import Path; from bench.replay import make_tape; "
            f"print(make_tape(Path({str(path)!r}), 20, 20, 50, seed=19))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                         check=True, capture_output=True, text=True).stdout
    return [int(x) for x in out.strip().strip("[]").split(",")]


def precision_section(tmp: Path, handful: int, plays: int, rounds: int = 3,
                      compare_tree: Path | None = None) -> None:
    """``rounds`` rounds; in each, every server (streamtape, the ``compare_tree`` checkout's
    streamtape, the asyncio baseline) at 1 and ``handful`` streams, in turn (alternating, so a
    change in the machine's load falls on all of them; each round starts with the next one). Prints each round's figures, then per
    row the median of the rounds with their range."""
    from bench.replay import REQUEST, Server

    servers: list[tuple[str, str, Path | None]] = [("streamtape", "streamtape", None)]
    if compare_tree is not None:
        servers.append((f"{compare_tree.name}", "streamtape", compare_tree))
    servers.append(("asyncio", "asyncio", None))
    tapes: dict[Path | None, Path] = {}
    offsets: list[int] = []
    for _, _, tree in servers:
        if tree not in tapes:
            tapes[tree] = tmp / f"paced-{len(tapes)}.tape"
            offsets = tape_for(tree, tapes[tree])
    print(f"9. precision of a few paced streams (20 pieces, gaps 20-50 ms), timed from recv() on "
          f"threads; {plays} plays each, {rounds} rounds; CPU {cpu_model()}", flush=True)
    print(f"   {'':<31}{'gap med':>9}{'gap p99':>9}{'dur med':>9}{'dur max':>9}  (ms)", flush=True)
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for r in range(rounds):
        # Each round starts with the next server: the one measured first was seen to read
        # several times worse (p99 1.495 against 0.172 ms for the same replay code).
        turn = servers[r % len(servers):] + servers[:r % len(servers)]
        for n in (1, handful):
            for name, kind, tree in turn:
                with Server(kind, tapes[tree], "faithful", tree=tree) as srv:
                    recv_arrivals(srv.port, REQUEST)  # warm up
                    got = play(srv.port, REQUEST, offsets, n, plays)
                label = f"{name}, {n} stream" + ("s" if n > 1 else "")
                fig = (statistics.median(got.gap_errors), pct(got.gap_errors, 99),
                       statistics.median(got.duration_errors), max(got.duration_errors))
                rows.setdefault(label, []).append(fig)
                print(f"   round {r + 1}: {label:<22}" + "".join(f"{v:>9.3f}" for v in fig)
                      + (f"  incomplete {got.incomplete}" if got.incomplete else ""), flush=True)
    print(f"   median of {rounds} rounds [range]:", flush=True)
    for label, figs in rows.items():
        cols = list(zip(*figs, strict=True))
        print(f"   {label:<26}" + "  ".join(
            f"{statistics.median(c):.3f} [{min(c):.3f}-{max(c):.3f}]" for c in cols), flush=True)
    print("   columns: gap med, gap p99, dur med, dur max; "
          "targets: 1 stream p99 gap error <= 0.5 ms, duration error <= 0.3 ms\n", flush=True)
