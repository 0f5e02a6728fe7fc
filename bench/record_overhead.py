"""What recording costs: per-event latency direct, through plain mitmproxy streaming, and
through ``streamtape record``, measured in one run, side by side.

    .venv/bin/python -m bench.record_overhead [--events 400] [--gap-ms 10] [--rounds 2]

An upstream in this process writes SSE events ``--gap-ms`` apart, each carrying
the ``perf_counter_ns`` of its write (one clock for all processes on Linux). A
raw-socket client timestamps every read; an event's latency is read time minus
write time. The same upstream serves three paths:

- direct: client -> upstream
- mitmdump: ``mitmdump --mode reverse:...`` with an addon that only sets
  ``flow.response.stream = True`` (mitmproxy's own streaming, the baseline)
- streamtape: ``streamtape record --upstream ...``

Also measured: how long response headers take to reach the client (the
upstream sends them 50 ms before the first event), and the cassette's size
against the raw body. Rounds alternate the paths so drift hits all alike.
Target: streamtape adds <= 0.1 ms median over plain mitmproxy streaming, and
headers arrive as fast as through plain mitmproxy.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._common import Upstream, client, pct
from tests.support.processes import STREAMTAPE, start

PLAIN_ADDON = """
def responseheaders(flow):
    flow.response.stream = True
"""


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.record_overhead", description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=400)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--head-requests", type=int, default=40, help="short streams per path for the header latency")
    a = ap.parse_args()

    up = Upstream(a.events, a.gap_ms / 1000)
    bindir = Path(sys.executable).parent
    tmp = Path(tempfile.mkdtemp())
    (tmp / "plain.py").write_text(PLAIN_ADDON)
    tape = tmp / "bench.tape"
    # Both bind port 0 and say where (the one launcher, tests/support/processes.py).
    procs = [
        start([str(bindir / "mitmdump"), "-s", str(tmp / "plain.py"), "--mode", f"reverse:http://127.0.0.1:{up.port}",
               "--listen-host", "127.0.0.1", "-p", "0", "--set", "flow_detail=0"], r"listening at (\S+?:\d+)"),
        start([*STREAMTAPE, "record", "--upstream", f"http://127.0.0.1:{up.port}", "--listen", "127.0.0.1:0",
               "-o", str(tape)], r"recording on (\S+:\d+)"),
    ]
    try:
        paths = {"direct": up.port, "mitmdump": procs[0].port, "streamtape": procs[1].port}
        lat: dict[str, list[float]] = {k: [] for k in paths}
        head: dict[str, list[float]] = {k: [] for k in paths}
        body = 0
        for r in range(a.rounds):
            order = list(paths) if r % 2 == 0 else list(reversed(paths))
            for name in order:
                print(f"round {r + 1}/{a.rounds}: {name} ({a.events} events, {a.gap_ms} ms apart)...", file=sys.stderr, flush=True)
                lat[name] += client(paths[name]).latencies_ms
        up.short = True
        print(f"headers: {a.head_requests} short streams per path...", file=sys.stderr, flush=True)
        for _ in range(a.head_requests):
            for name in paths:
                n_heads = len(up.head_sent_ns)
                head_ns = client(paths[name]).head_ns
                head[name].append((head_ns - up.head_sent_ns[n_heads]) / 1e6)
        time.sleep(1.5)
    finally:
        for p in procs:
            p.stop(signal.SIGINT, timeout=30)

    import streamtape

    cas = streamtape.load(tape)
    body = sum(len(ix.response.body) for ix in cas if ix.response is not None)
    print()
    print(f"per-event latency, upstream write -> client read ({a.events} events x {a.rounds} rounds, {a.gap_ms} ms apart)")
    print(f"{'path':<12} {'median ms':>10} {'p99 ms':>9} {'headers ms':>11}   vs mitmdump (median, p99, headers)")
    base_med, base_p99 = statistics.median(lat["mitmdump"]), pct(lat["mitmdump"], 99)
    for name in paths:
        med, p99 = statistics.median(lat[name]), pct(lat[name], 99)
        hd = statistics.median(head[name])
        base_hd = statistics.median(head["mitmdump"])
        extra = f"   {med - base_med:+.3f} ms, {p99 - base_p99:+.3f} ms, {hd - base_hd:+.3f} ms" if name != "direct" else ""
        print(f"{name:<12} {med:>10.3f} {p99:>9.3f} {hd:>11.3f}{extra}")
    size = os.path.getsize(tape)
    print()
    print(f"cassette: {len(cas)} interactions, {size} bytes on disk for {body} body bytes: {size / body:.3f}x "
          f"(request and response heads included)")
    print(f"headers: median over {a.head_requests} requests; the upstream writes them 50 ms before the first event")
    med_extra = statistics.median(lat["streamtape"]) - base_med
    print(f"target: streamtape adds <= 0.100 ms median over mitmdump streaming: {'met' if med_extra <= 0.1 else 'NOT met'} ({med_extra:+.3f} ms)")


if __name__ == "__main__":
    main()
