"""Reliability figures of the recorder and the replay server, one line per figure.

    .venv/bin/python -m bench.reliability [--runs 3] [--streams 200] [--replay-streams 1000]

Everything is real: ``streamtape record`` and ``streamtape serve`` processes,
an upstream in its own process (``python -m tests.support.reliability upstream``: SSE
events stamped with the ``perf_counter_ns`` of their write), raw HTTP/1.1
clients on one event loop in this process (tests/support/reliability.py) except for
the replay server's realtime streams (``bench/loadgen.c``, a C epoll client in
its own process, compiled with gcc by bench/_loadgen.py; on two cores the
Python client's own cost showed up as the server's timing error; the asyncio
client when gcc is missing, and the line says which), SIGKILL, a tmpfs that
fills up (root; else a file size limit, RLIMIT_FSIZE, which fails the write
the same way, and the line says which), descriptors and RSS read from /proc.
Each figure that has a baseline is measured beside it in the same run: the
recorder's per-event latency beside the same streams direct and through a
plain ``mitmdump`` that only streams; the replay server's gap error at 1,000
streams beside 5 streams at once.

With ``--runs N`` every measurement is made N times (the paths alternating
order) and each line gives the median, with the range ``[min-max]`` after it.
The load average is printed first and last: this machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

import streamtape
from bench import _loadgen
from bench._common import pct
from streamtape.cassette.model import Outcome
from tests.support import ROOT
from tests.support.builders import EVENTS, MS, interaction
from tests.support.processes import fd_count, rss_kib, start
from tests.support.reliability import (
    Fetched,
    event_latencies_ms,
    exchange,
    fetch_many,
    raise_fd_limit,
    request_bytes,
)
from tests.support.servers import ScriptedServer
from tests.support.upstream_faults import ROUTES, see

PY = sys.executable
STREAMTAPE = [PY, "-m", "streamtape.cli"]
PATH = "/v1/chat/completions"
EVENTS_PER_STREAM, GAP_MS = 40, 25


# --------------------------------------------------------------------------- figures


@dataclass
class Figure:
    """One line: a name, the numbers of each run, and how to print them."""

    name: str
    fmt: str
    runs: list[dict[str, float]] = field(default_factory=list)
    note: str = ""
    note_fmt: str = ""  # a note with numbers in it, formatted as ``fmt`` is (their medians)

    def line(self) -> str:
        keys = self.runs[0].keys()
        med = {k: statistics.median(r[k] for r in self.runs) for k in keys}
        text = self.fmt.format(**med)
        if len(self.runs) > 1:
            spread = ", ".join(
                f"{k} {min(r[k] for r in self.runs):g}-{max(r[k] for r in self.runs):g}"
                for k in keys if len({r[k] for r in self.runs}) > 1
            )
            text += f"  [median of {len(self.runs)}" + (f"; range {spread}]" if spread else "; all equal]")
        note = "; ".join(x for x in (self.note, self.note_fmt.format(**med)) if x)
        return f"{self.name}: {text}" + (f" ({note})" if note else "")


class Figures:
    def __init__(self) -> None:
        self.by_name: dict[str, Figure] = {}

    def add(self, name: str, fmt: str, note: str = "", note_fmt: str = "", **values: float) -> None:
        fig = self.by_name.setdefault(name, Figure(name, fmt, note=note, note_fmt=note_fmt))
        fig.runs.append(values)


# --------------------------------------------------------------------------- processes


@contextlib.contextmanager
def upstream() -> Iterator[str]:
    proc = start([PY, "-m", "tests.support.reliability", "upstream", "--events", str(EVENTS_PER_STREAM),
                  "--gap-ms", str(GAP_MS)], r"upstream on (\S+:\d+)")
    try:
        yield proc.address
    finally:
        proc.kill()


def port_of(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def fetch(port: int, paths: list[str], **kw: object) -> list[Fetched]:
    return asyncio.run(fetch_many("127.0.0.1", port, paths, **kw))  # type: ignore[arg-type]


def paths(n: int, tag: str) -> list[str]:
    return [f"{PATH}?c={tag}{i}" for i in range(n)]


PLAIN_ADDON = "def responseheaders(flow):\n    flow.response.stream = True\n"


# --------------------------------------------------------------------------- recorder


def record_load(figs: Figures, up: str, tmp: Path, n: int, run: int) -> None:
    """n concurrent streams direct, through plain mitmdump, through streamtape record."""
    addon = tmp / "plain.py"
    addon.write_text(PLAIN_ADDON)
    out = tmp / f"load{run}.tape"
    mitm = start([str(Path(PY).parent / "mitmdump"), "-s", str(addon), "--mode", f"reverse:http://{up}",
                            "--listen-host", "127.0.0.1", "-p", "0", "--set", "connection_strategy=lazy",
                            "--set", "flow_detail=0"], r"listening at (\S+?:\d+)")
    rec = start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out),
                 "--upstream", f"http://{up}"], r"recording on (\S+:\d+)")
    got: dict[str, list[Fetched]] = {}
    order = [("direct", port_of(up)), ("mitmdump", mitm.port), ("streamtape", rec.port)]
    if run % 2:
        order.reverse()
    try:
        for name, port in order:
            got[name] = fetch(port, paths(n, f"{name}{run}-"), stagger_s=0.5)
        deadline = time.monotonic() + 30
        while sum(" complete" in x for x in rec.all_lines) < n and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        mitm.stop(timeout=30, must_exit=False)
        rec.stop(timeout=30, must_exit=False)
    cas = streamtape.load(out)
    bodies = {f.key: f.body for f in got["streamtape"]}
    identical = sum(1 for ix in cas if ix.response is not None and bodies.get(ix.request.path) == ix.response.body)
    lat = {k: event_latencies_ms(v) for k, v in got.items()}
    figs.add(f"record: {n} concurrent streams", "{recorded:.0f}/{n:.0f} recorded, {identical:.0f} byte-identical "
             "to what their clients received", recorded=len(cas), n=n, identical=identical)
    figs.add(
        f"record: per-event latency at {n} streams (upstream write -> client read)",
        "streamtape p50 {st50:.2f} ms p99 {st99:.2f} ms; plain mitmdump p50 {mp50:.2f} p99 {mp99:.2f}; "
        "direct p50 {d50:.2f} p99 {d99:.2f}; added over mitmdump p50 {add50:+.2f} ms p99 {add99:+.2f} ms",
        st50=round(pct(lat["streamtape"], 50), 2), st99=round(pct(lat["streamtape"], 99), 2),
        mp50=round(pct(lat["mitmdump"], 50), 2), mp99=round(pct(lat["mitmdump"], 99), 2),
        d50=round(pct(lat["direct"], 50), 2), d99=round(pct(lat["direct"], 99), 2),
        add50=round(pct(lat["streamtape"], 50) - pct(lat["mitmdump"], 50), 2),
        add99=round(pct(lat["streamtape"], 99) - pct(lat["mitmdump"], 99), 2),
    )


_SAVED = re.compile(r"^POST (\S+) 200 .* complete$")


def record_kills(figs: Figures, up: str, tmp: Path, n: int, kills: int, run: int) -> None:
    """SIGKILL the recorder at a random moment under n streams, ``kills`` times, one cassette."""
    out = tmp / f"killed{run}.tape"
    rng = random.Random(run)
    loads = found = reported = torn = 0
    for k in range(kills):
        rec = start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out),
                     "--upstream", f"http://{up}"], r"recording on (\S+:\d+)")
        kill_after = rng.uniform(0.2, 1.6)

        async def load_and_kill(pid: int = rec.pid, port: int = rec.port, k: int = k,
                                after: float = kill_after) -> list[Fetched]:
            task = asyncio.ensure_future(fetch_many("127.0.0.1", port, paths(n, f"k{k}-"), stagger_s=0.5,
                                                    timeout=20))
            await asyncio.sleep(after)
            os.kill(pid, signal.SIGKILL)
            return await task

        got = {f.key: f for f in asyncio.run(load_and_kill())}
        rec.wait()  # and the last of its output
        saved = [m.group(1) for line in rec.all_lines if (m := _SAVED.match(line.rstrip("\n")))]
        try:
            cas = streamtape.load(out)
        except streamtape.CassetteError:
            continue
        loads += 1
        torn += bool(cas.warnings)
        by_path = {ix.request.path: ix for ix in cas}
        reported += len(saved)
        found += sum(1 for p in saved if (ix := by_path.get(p)) is not None and ix.outcome is Outcome.COMPLETE
                     and ix.response is not None and ix.response.body == got[p].body)
    figs.add(f"record: SIGKILL at a random moment under {n} streams, {kills} times, one cassette",
             "the file loaded {loads:.0f}/{kills:.0f} times; interactions reported saved and found complete and "
             "byte-identical {found:.0f}/{reported:.0f}; torn last record dropped {torn:.0f} times",
             loads=loads, kills=kills, found=found, reported=reported, torn=torn)


def record_second(figs: Figures, up: str, tmp: Path) -> None:
    out = tmp / "one.tape"
    first = start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out),
                             "--upstream", f"http://{up}"], r"recording on (\S+:\d+)")
    try:
        t0 = time.perf_counter()
        second = subprocess.run([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out),
                                 "--upstream", f"http://{up}"], capture_output=True, text=True, timeout=60, cwd=ROOT)
        took = time.perf_counter() - t0
    finally:
        first.stop(timeout=30, must_exit=False)
    msg = second.stderr.strip().replace(str(tmp), "DIR")
    figs.add("record: a second recorder on the same cassette",
             "refused with exit status {status:.0f} in {took:.2f} s (start-up included)",
             note=f"stderr: {msg}", status=second.returncode, took=round(took, 2))


_LIMIT_FSIZE = "import os,resource,sys;n=int(sys.argv[1]);resource.setrlimit(resource.RLIMIT_FSIZE,(n,n));os.execv(sys.argv[2],sys.argv[2:])"


@contextlib.contextmanager
def small_disk(tmp: Path, size: int) -> Iterator[tuple[Path, list[str], str]]:
    mnt = Path(tempfile.mkdtemp(prefix="streamtape-bench-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode == 0:
        try:
            yield mnt / "full.tape", [], f"a {size // 1024} KiB tmpfs"
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
            mnt.rmdir()
    else:
        mnt.rmdir()
        yield tmp / "full.tape", [PY, "-c", _LIMIT_FSIZE, str(size)], f"a {size // 1024} KiB file size limit"


def record_full_disk(figs: Figures, up: str, tmp: Path) -> None:
    with small_disk(tmp, 96 * 1024) as (out, prefix, how):
        rec = start([*prefix, *STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out),
                                    "--upstream", f"http://{up}"], r"recording on (\S+:\d+)")
        got: list[Fetched] = []
        for w in range(4):
            got += fetch(rec.port, paths(10, f"w{w}-"), stagger_s=0.2)
        deadline = time.monotonic() + 30
        while sum(PATH in x for x in rec.all_lines) < len(got) and time.monotonic() < deadline:
            time.sleep(0.05)
        status = rec.stop(timeout=30, must_exit=False)
        rlines = rec.all_lines
        cas = streamtape.load(out)
    served = sum(f.ending == "complete" and len(f.pieces) == EVENTS_PER_STREAM for f in got)
    errors = sum(x.startswith("streamtape: error: ") for x in rlines)
    lost = sum(x.rstrip().endswith("[not saved]") for x in rlines)
    saved = sum(PATH in x and not x.rstrip().endswith("[not saved]") for x in rlines)
    complete = sum(ix.outcome is Outcome.COMPLETE for ix in cas)
    figs.add("record: the disk fills up mid-recording",
             "clients served in full {served:.0f}/{n:.0f}; error lines {errors:.0f}; reported saved {saved:.0f}, "
             "not saved {lost:.0f}; cassette loads with {complete:.0f} complete, {warnings:.0f} warnings; "
             "exit status {status:.0f}",
             note=how, served=served, n=len(got), errors=errors, saved=saved, lost=lost, complete=complete,
             warnings=len(cas.warnings), status=status)


# --------------------------------------------------------------------------- upstream faults


def upstream_faults(figs: Figures, tmp: Path, run: int) -> None:
    out = tmp / f"faults{run}.tape"
    with ScriptedServer(dict(ROUTES)) as up:
        direct = {p: see(up.url + p) for p in ROUTES}
        rec = start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out),
                     "--upstream", up.url], r"recording on (\S+:\d+)")
        try:
            proxied = {p: see(rec.url + p) for p in ROUTES}
            deadline = time.monotonic() + 20
            while sum(x.startswith("POST ") for x in rec.all_lines) < len(ROUTES) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            rec.stop(timeout=30, must_exit=False)
    by_path = {ix.request.path: ix for ix in streamtape.load(out)}
    for p in ROUTES:
        ix = by_path[p]
        d, t = direct[p], proxied[p]
        same = (d.failure, d.body) == (t.failure, t.body)
        error = (ix.error or "").split(": HTTP/1")[0]
        figs.add(f"upstream fault {p.strip('/')}",
                 "the client sees the same bytes and failure direct and through the recorder: {same:.0f}/1",
                 note=f"direct {d.failure_name}, through record {t.failure_name}, {len(d.body)} B; recorded "
                      f"{ix.outcome}, {len(ix.pieces)} pieces, error {error!r}",
                 same=int(same))


# --------------------------------------------------------------------------- replay server


def _steady_tape(path: Path, pieces: int = 50) -> tuple[list[int], bytes]:
    times = [20 * MS + i * 30 * MS + (i % 3 - 1) * 10 * MS for i in range(pieces)]
    events = [b'data: {"i": %d, "pad": "%s"}\n\n' % (i, b"p" * 100) for i in range(pieces)]
    streamtape.save(path, [interaction(events, times=times, url=f"http://upstream.test{PATH}")])
    return times, b"".join(events)


@dataclass
class Served:
    """One stream read from the replay server, by either client."""

    complete: bool  # the last chunk came
    exact: bool  # complete, and its body is the recorded one byte for byte
    hung_up: bool  # this client left on purpose
    arrivals: list[int]  # each piece's arrival, perf_counter_ns


HANG_UP = (20, 10)  # every 20th client (0 included) hangs up after 10 pieces


def _serve_round(port: int, n: int, stagger_s: float, body: bytes, loadgen: Path | None,
                 hang_up: bool = True) -> tuple[list[Served], float]:
    """``n`` streams of the replay server's recording, ``HANG_UP`` among them (if ``hang_up``);
    with the client's CPU seconds. loadgen (``bench/loadgen.c``, its own process) starts stream
    i at a time drawn uniformly from [0, stagger_s) and checks a body by its FNV-1a hash; the
    asyncio client of tests/support/reliability.py (in this process) starts them evenly spaced."""
    every, after = HANG_UP
    if loadgen is not None:
        result = _loadgen.run(loadgen, port, request_bytes(PATH), n, stagger_s, seed=n,
                              hang_up=HANG_UP if hang_up else None, timeout=stagger_s + 120)
        return [Served(s.status == "ok", s.exact(body), s.status == "hangup", s.arrivals)
                for s in result.streams], result.cpu_s
    cpu0 = time.process_time()
    got = fetch(port, [PATH] * n, stagger_s=stagger_s, timeout=60,
                hang_up={i: after for i in range(0, n, every)} if hang_up else None)
    cpu = time.process_time() - cpu0
    return [Served(f.ending == "complete", f.ending == "complete" and f.body == body,
                   f.ending == "hung_up", [t for t, _ in f.pieces]) for f in got], cpu


def _gap_errors(served: list[Served], times: list[int]) -> list[float]:
    rec = [b - a for a, b in itertools.pairwise(times)]
    return [abs((b - a) - g) / MS for s in served
            for (a, b), g in zip(itertools.pairwise(s.arrivals), rec, strict=False)]


def serve_streams(figs: Figures, tmp: Path, n: int, loadgen: Path | None, why: str) -> None:
    """``n`` realtime streams, ``HANG_UP`` among them, measured by loadgen (``loadgen`` None:
    by the asyncio client, ``why`` says why), beside 5 streams at once."""
    tape = tmp / "steady.tape"
    times, body = _steady_tape(tape)
    proc = start([*STREAMTAPE, "serve", str(tape), "--port", "0"], r" on http://(\S+:\d+) ")
    port, lines = proc.port, proc.all_lines
    every, after = HANG_UP
    hangers = set(range(0, n, every))
    peak = {"fds": 0, "rss": 0}
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.wait(0.05):
            with contextlib.suppress(OSError, ValueError):
                peak["fds"] = max(peak["fds"], fd_count(proc.pid))
                peak["rss"] = max(peak["rss"], rss_kib(proc.pid))

    try:
        alone, _ = _serve_round(port, 5, 0.0, body, loadgen, hang_up=False)  # the baseline
        alone = [s for s in alone if s.complete]
        _serve_round(port, n, 1.0, body, loadgen)  # warm-up
        time.sleep(1.0)
        fds0, rss0 = fd_count(proc.pid), rss_kib(proc.pid)
        logged = len(lines)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        got, client_cpu = _serve_round(port, n, 1.0, body, loadgen)
        stop_sampling.set()
        sampler.join()
        deadline = time.monotonic() + 10
        while fd_count(proc.pid) > fds0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        fds1, rss1 = fd_count(proc.pid), rss_kib(proc.pid)
        disconnected = sum("outcome=client_disconnected" in x for x in lines[logged:])
    finally:
        proc.stop(timeout=30, must_exit=False)
    stayed = [s for i, s in enumerate(got) if i not in hangers]
    complete = sum(s.exact for s in stayed)
    hung = sum(got[i].hung_up and len(got[i].arrivals) == after for i in hangers)
    errs, base = _gap_errors(stayed, times), _gap_errors(alone, times)
    client = ("bench/loadgen.c (C, its own process), streams started uniformly over 1 s (seeded)"
              if loadgen else f"the asyncio client of tests/support/reliability.py in this process: "
                              f"loadgen unavailable ({why}), streams started evenly over 1 s")
    figs.add(f"serve: {n} realtime streams, {len(hangers)} clients hanging up mid-stream",
             "{complete:.0f}/{stayed:.0f} others complete and byte-exact; gap error p50 {p50:.2f} ms p99 {p99:.2f} ms "
             "(5 streams at once p50 {b50:.2f} p99 {b99:.2f}); {hung:.0f} hung up after " + str(after)
             + " pieces, the server logged {disc:.0f} client_disconnected",
             note=f"client: {client}", note_fmt="client CPU {ccpu:.2f} s for the " + str(n) + " streams",
             complete=complete, stayed=len(stayed), p50=round(pct(errs, 50), 2),
             p99=round(pct(errs, 99), 2), b50=round(pct(base, 50), 2), b99=round(pct(base, 99), 2),
             hung=hung, disc=disconnected, ccpu=round(client_cpu, 2))
    figs.add(f"serve: resources around {n} streams (after a warm-up round)",
             "open descriptors {fds0:.0f} -> peak {fdp:.0f} -> {fds1:.0f}; RSS {rss0:.0f} -> peak {rssp:.0f} -> "
             "{rss1:.0f} KiB ({drss:+.0f} KiB)",
             fds0=fds0, fdp=peak["fds"], fds1=fds1, rss0=rss0, rssp=peak["rss"], rss1=rss1, drss=rss1 - rss0)


MALFORMED = [
    (bytes.fromhex("16030100c8010000c40303") + bytes(194), None),
    (b"HELLO\r\n\r\n", 400),
    (b"POST /x HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400),
    (b"POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef", 400),
    (b"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
]


def serve_abuse(figs: Figures, tmp: Path) -> None:
    tape = tmp / "small.tape"
    streamtape.save(tape, [interaction(EVENTS, url=f"http://upstream.test{PATH}")])
    big = tmp / "big.tape"
    streamtape.save(big, [interaction([b"d" * 8192] * 1000, gap_ns=MS, url="http://upstream.test/big")])
    proc = start([*STREAMTAPE, "serve", str(tape), str(big), "--port", "0", "--profile", "instant",
                  "--client-timeout", "1"], r" on http://(\S+:\d+) ")
    port, url, lines = proc.port, proc.url, proc.all_lines
    try:
        answered = after_ok = 0
        for data, status in MALFORMED:
            got = exchange(port, data)
            m = re.match(rb"HTTP/1\.1 (\d{3}) ", got)
            answered += (m is None and not got) if status is None else (m is not None and int(m.group(1)) == status)
            after_ok += httpx.post(url + PATH, json={"stream": True}, timeout=10).status_code == 200
        figs.add("serve: malformed HTTP (TLS hello, bad request line, bad Content-Length x3, bad chunk, "
                 "64 KiB+ head, HTTP/2 preface)",
                 "{answered:.0f}/{n:.0f} got the expected 400/431/505 or a close; the next request served "
                 "{after:.0f}/{n:.0f}", answered=answered, n=len(MALFORMED), after=after_ok)
        t0 = time.perf_counter()
        r = httpx.post(url + PATH, content=b"x" * (16 * 1024 * 1024 + 1), timeout=30)
        t413 = time.perf_counter() - t0
        t0 = time.perf_counter()
        r2 = httpx.post(url + PATH, content=b"x" * (16 * 1024 * 1024), timeout=30)
        tfull = time.perf_counter() - t0
        figs.add("serve: request body limit (default 16 MiB)",
                 "16 MiB + 1 -> {s413:.0f} in {t413:.0f} ms; 16 MiB read in full -> {s404:.0f} in {tfull:.0f} ms",
                 s413=r.status_code, t413=round(t413 * 1000), s404=r2.status_code, tfull=round(tfull * 1000))
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", port))
        stuck.sendall(request_bytes("/big"))
        t0 = time.monotonic()
        while not any("client_stalled" in x for x in lines) and time.monotonic() - t0 < 20:
            time.sleep(0.01)
        dropped = time.monotonic() - t0
        stuck.close()
        line = next((x for x in lines if "client_stalled" in x), "")
        waiting = int(w.group(1)) if (w := re.search(r"with (\d+) bytes waiting", line)) else -1
        figs.add("serve: a client that never reads an 8 MiB instant stream (--client-timeout 1)",
                 "dropped after {dropped:.2f} s with {kib:.0f} KiB waiting in the server (high-water mark 64 KiB "
                 "+ at most 16 pieces)", dropped=round(dropped, 2), kib=round(waiting / 1024))
    finally:
        proc.stop(timeout=30, must_exit=False)


def serve_bind_and_folder(figs: Figures, tmp: Path) -> None:
    folder, outside = tmp / "cassettes", tmp / "private"
    folder.mkdir(exist_ok=True)
    outside.mkdir(exist_ok=True)
    streamtape.save(folder / "inside.tape", [interaction(EVENTS, url="http://upstream.test/inside")])
    streamtape.save(outside / "secret.tape", [interaction(EVENTS, url="http://upstream.test/secret")])
    with contextlib.suppress(FileExistsError):
        (folder / "secret.tape").symlink_to(outside / "secret.tape")
        (folder / "up.tape").symlink_to("../private/secret.tape")
        os.mkfifo(folder / "pipe.tape")
    proc = start([*STREAMTAPE, "serve", str(folder), "--port", "0"], r" on http://(\S+:\d+) ")
    try:
        inside = httpx.post(f"{proc.url}/inside", json={"stream": True}, timeout=10).status_code
        secret = httpx.post(f"{proc.url}/secret", json={"stream": True}, timeout=10).status_code
    finally:
        proc.stop(timeout=30, must_exit=False)
    skipped = sum("skipped" in x for x in proc.all_lines)
    figs.add("serve: a folder with two links leading out and a FIFO",
             "{skipped:.0f}/3 skipped with a warning; inside -> {inside:.0f}, the outside file's request -> {secret:.0f}",
             skipped=skipped, inside=inside, secret=secret)
    default = start([*STREAMTAPE, "serve", str(folder / "inside.tape"), "--port", "0"], r" on http://(\S+:\d+) ")
    default.stop(timeout=30, must_exit=False)
    anyif = start([*STREAMTAPE, "serve", str(folder / "inside.tape"), "--port", "0", "--host", "0.0.0.0"],
                  r" on http://(\S+:\d+) ")
    anyif.stop(timeout=30, must_exit=False)
    dl, al = default.all_lines, anyif.all_lines
    figs.add(f"serve: where it listens (default {default.address.rsplit(':', 1)[0]})",
             "warnings at the default: {dw:.0f}; with --host 0.0.0.0: {aw:.0f}",
             dw=sum("warning" in x for x in dl), aw=sum("listening on every interface" in x for x in al))


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=3, help="measure each figure this many times (median, range)")
    ap.add_argument("--streams", type=int, default=200, help="concurrent streams through the recorder")
    ap.add_argument("--kills", type=int, default=10, help="SIGKILLs per run")
    ap.add_argument("--replay-streams", type=int, default=1000, help="concurrent streams from the replay server")
    a = ap.parse_args()
    if not raise_fd_limit(2 * max(a.streams, a.replay_streams) + 500):
        raise SystemExit("the descriptor limit is too low for this many streams")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores", flush=True)
    figs = Figures()
    with tempfile.TemporaryDirectory() as d, upstream() as up:
        tmp = Path(d)
        loadgen, why = _loadgen.build(tmp)
        for run in range(a.runs):
            print(f"run {run + 1}/{a.runs}...", file=sys.stderr, flush=True)
            record_load(figs, up, tmp, a.streams, run)
            record_kills(figs, up, tmp, a.streams, a.kills, run)
            record_second(figs, up, tmp)
            record_full_disk(figs, up, tmp)
            upstream_faults(figs, tmp, run)
            serve_streams(figs, tmp, a.replay_streams, loadgen, why)
            serve_abuse(figs, tmp)
            serve_bind_and_folder(figs, tmp)
    for fig in figs.by_name.values():
        print(fig.line())
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
