"""What a shadow costs the client: per-event latency through ``streamtape record`` without a
shadow, with a busy shadow on the sender's own thread (the default), and with the same shadow
run on the proxy's event loop (``--shadow-loop proxy``), measured in one run, side by side.

    .venv/bin/python -m bench.shadow_overhead [--events 400] [--gap-ms 10] [--rounds 2]
                                              [--shadow-pieces 4000] [--shadow-gap-ms 1]

The primary upstream (in this process) writes SSE events ``--gap-ms`` apart, each
carrying the ``perf_counter_ns`` of its write (one clock for all processes on
Linux); a raw-socket client timestamps every read, and an event's latency is
read time minus write time. The shadow answers every request with
``--shadow-pieces`` small chunks ``--shadow-gap-ms`` apart: a shadow that keeps
its sender busy for the whole of the client's stream, the worst case for the
proxy. Paths:

- direct: client -> upstream (for reference)
- record: ``streamtape record --upstream ...`` (no shadow: the baseline)
- shadow-thread: ``... --shadow URL`` (the sender on its own thread and loop)
- shadow-proxy: ``... --shadow URL --shadow-loop proxy`` (the sender's tasks on
  the proxy's own event loop)

Also: how long response headers take to reach the client (the upstream sends
them 50 ms before the first event). Rounds alternate the order of the paths.
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._common import SSE_HEAD, ThreadedServer, Upstream, client, pct, read_head, send_paced
from tests.support.processes import STREAMTAPE, Child, start


class BusyShadow(ThreadedServer):
    """A shadow that streams ``pieces`` small chunks ``gap_s`` apart for every request."""

    def __init__(self, pieces: int, gap_s: float) -> None:
        self.pieces, self.gap_s = pieces, gap_s
        self.served = 0
        super().__init__()

    def serve(self, s: socket.socket) -> None:
        buf: bytes | None = b""
        try:
            while buf is not None and (buf := read_head(s, buf)) is not None:
                self.served += 1
                s.sendall(SSE_HEAD)
                send_paced(s, self.pieces, self.gap_s, time.perf_counter(), lambda i: b'data: {"i": %d}\n\n' % i)
        except OSError:
            return
        finally:
            s.close()


CHAT_REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: identity\r\n"
                b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")


def start_recorder(args: list[str]) -> Child:
    """``streamtape record`` on port 0 (the one launcher: the bound port read from its startup line)."""
    return start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", *args], r"recording on (\S+:\d+)")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.shadow_overhead", description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=400)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shadow-pieces", type=int, default=4000)
    ap.add_argument("--shadow-gap-ms", type=float, default=1.0)
    ap.add_argument("--head-requests", type=int, default=30, help="short streams per path for the header latency")
    a = ap.parse_args()

    up = Upstream(a.events, a.gap_ms / 1000)
    shadow = BusyShadow(a.shadow_pieces, a.shadow_gap_ms / 1000)
    tmp = Path(tempfile.mkdtemp())
    upstream = f"http://127.0.0.1:{up.port}"
    shadow_url = f"http://127.0.0.1:{shadow.port}"
    recorders = {
        "record": start_recorder(["--upstream", upstream, "-o", str(tmp / "record.tape")]),
        "shadow-thread": start_recorder(["--upstream", upstream, "--shadow", shadow_url, "-o", str(tmp / "thread.tape")]),
        "shadow-proxy": start_recorder(["--upstream", upstream, "--shadow", shadow_url, "--shadow-loop", "proxy",
                                        "-o", str(tmp / "proxy.tape")]),
    }
    paths = {"direct": up.port, **{k: rec.port for k, rec in recorders.items()}}
    lat: dict[str, list[float]] = {k: [] for k in paths}
    head: dict[str, list[float]] = {k: [] for k in paths}
    try:
        for r in range(a.rounds):
            order = list(paths) if r % 2 == 0 else list(reversed(paths))
            for name in order:
                print(f"round {r + 1}/{a.rounds}: {name} ({a.events} events, {a.gap_ms} ms apart)...", file=sys.stderr, flush=True)
                lat[name] += client(paths[name], CHAT_REQUEST).latencies_ms
                time.sleep(a.shadow_pieces * a.shadow_gap_ms / 1000 * 0.2)  # let the last shadow stream drain
        up.short = True
        print(f"headers: {a.head_requests} short streams per path...", file=sys.stderr, flush=True)
        for _ in range(a.head_requests):
            for name in paths:
                n = len(up.head_sent_ns)
                head_ns = client(paths[name], CHAT_REQUEST).head_ns
                head[name].append((head_ns - up.head_sent_ns[n]) / 1e6)
    finally:
        for rec in recorders.values():
            rec.stop(signal.SIGINT, timeout=60)

    print()
    print(f"per-event latency, upstream write -> client read ({a.events} events x {a.rounds} rounds, {a.gap_ms} ms apart);")
    print(f"the shadow streams {a.shadow_pieces} pieces {a.shadow_gap_ms} ms apart for every request")
    print(f"{'path':<14} {'median ms':>10} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} {'headers ms':>11}   vs record (median, p99, headers)")
    base = lat["record"]
    base_hd = statistics.median(head["record"])
    for name in paths:
        xs = lat[name]
        med, hd = statistics.median(xs), statistics.median(head[name])
        extra = ""
        if name not in ("direct", "record"):
            extra = f"   {med - statistics.median(base):+.3f}, {pct(xs, 99) - pct(base, 99):+.3f}, {hd - base_hd:+.3f}"
        print(f"{name:<14} {med:>10.3f} {pct(xs, 90):>8.3f} {pct(xs, 99):>8.3f} {max(xs):>8.3f} {hd:>11.3f}{extra}")
    print(f"\nthe shadow answered {shadow.served} requests")


if __name__ == "__main__":
    main()
