"""What a connection costs the recorder: N one-event streams through ``streamtape record``
and through plain mitmdump, the proxy's CPU per stream side by side.

    .venv/bin/python -m bench.connection_cost [--streams 1000] [--rate 400] [--runs 3]

Each stream is a connection of its own to the proxy and from it to the upstream
(``bench/upstream.c``, one event per request), read by ``bench/loadgen.c``,
``--rate`` new streams a second. A proxy's CPU (user + system of all its
processes, from ``/proc``) over the run, divided by N, is what one connection
with its request, response head, one event and ending costs it: the burst a
load test's ramp puts on a recorder (``bench/record_timing.py`` starts all its
streams within 0.5 s). The two proxies take turns going first. Figures: ms of
CPU per stream, median of ``--runs`` runs [range], with the CPU model and
each run's steal (``bench/_common.steal_s``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import _loadgen
from bench._common import cpu_model, steal_s
from bench.record_timing import c_load, start_mitmdump, start_record
from tests.support.processes import Child, cpu_s, start
from tests.support.reliability import raise_fd_limit, request_bytes


def cost_ms(proxy: Child, loadgen: Path, streams: int, rate: float, seed: int) -> float:
    """The proxy's CPU per stream (ms) while ``streams`` one-event streams went through it."""
    time.sleep(0.5)  # past its start-up
    before = cpu_s(proxy.pid, with_children=True)
    got = _loadgen.run(loadgen, proxy.port, request_bytes("/v1/chat/completions?c=cost"), streams,
                       streams / rate, seed, timeout=streams / rate + 120)
    bad = [s.status for s in got.streams if s.status != "ok"]
    if bad:
        raise SystemExit(f"{len(bad)} of {streams} streams did not complete ({sorted(set(bad))})")
    time.sleep(0.5)  # the last ones saved
    return (cpu_s(proxy.pid, with_children=True) - before) / streams * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.connection_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=400.0, help="new streams a second")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    raise_fd_limit(4 * a.streams + 200)
    costs: dict[str, list[float]] = {"streamtape record": [], "plain mitmdump": []}
    with tempfile.TemporaryDirectory(prefix="bench-connection-cost-") as tmp_dir:
        tmp = Path(tmp_dir)
        built = c_load(tmp)
        if isinstance(built, str):
            raise SystemExit(f"bench.connection_cost needs gcc: {built}")
        loadgen, upstream = built
        print(f"bench.connection_cost: CPU {cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
              f"{a.streams} one-event streams at {a.rate:g}/s, {a.runs} runs", flush=True)
        up = start([str(upstream), "1", "1"], r"upstream on (\S+:\d+)")
        starts: dict[str, Callable[[], Child]] = {
            "streamtape record": lambda: start_record(up.address, tmp / "cost.tape"),
            "plain mitmdump": lambda: start_mitmdump(up.address, tmp),
        }
        try:
            for run in range(a.runs):
                stolen = steal_s()
                for name in (list(starts) if run % 2 == 0 else list(starts)[::-1]):
                    print(f"run {run + 1}/{a.runs}: {name}...", file=sys.stderr, flush=True)
                    proxy = starts[name]()
                    try:
                        costs[name].append(cost_ms(proxy, loadgen, a.streams, a.rate, run))
                    finally:
                        proxy.stop(signal.SIGINT, timeout=60)
                    (tmp / "cost.tape").unlink(missing_ok=True)
                print(f"  run {run + 1}: the host took {steal_s() - stolen:.2f} s of CPU meanwhile (steal)")
        finally:
            up.stop(signal.SIGTERM, timeout=10)
    print("ms of the proxy's CPU per one-event stream (its connection), median of the runs [range]:")
    for name, xs in costs.items():
        print(f"  {name:<18} {statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]")
    rec, plain = (statistics.median(xs) for xs in costs.values())
    print(f"  record / mitmdump  {rec / plain:.2f}")


if __name__ == "__main__":
    main()
