"""How much load one ``streamtape rerun`` process (and one Locust worker) sends while its TTFT
stays true: each load level run by a raw socket client and by the real tool, side by side.

    .venv/bin/python -m bench.rerun [--rates 10,20,40,80,160] [--seconds 4] [--tokens 40]
                                    [--gap-ms 10] [--first-ms 20] [--users 4,16,64] [--no-locust]
                                    [--runs 3]

The backend runs in a process of its own (so its threads never take the
measuring process's GIL): every request gets an SSE chat stream, the first
token ``--first-ms`` after the request arrived, then ``--tokens`` more
``--gap-ms`` apart (deadlines slept to within 2 ms and spun, as
bench/_common.send_paced does). For each rate:

- raw: a bare asyncio socket client (a Protocol that writes the request
  bytes and looks for the first token's bytes in what it reads, no HTTP
  parser, no recording), at a fixed rate, for ``--seconds``, in a fresh
  process of its own as the rerun is (``python -m bench.rerun --raw``);
- rerun: ``streamtape rerun SESSION --rate N/s --duration S`` (a subprocess,
  the real command) on a one-request session; its TTFT is read from the
  cassette it wrote (``streamtape.stats``, as ``diff`` reads it).

Both TTFTs count from the request written on an open connection to the read
that brought the first token, timed on Linux by the kernel's receive time of
that read (``streamtape.arrival``): the raw and bare-gevent baselines as the
rerun client and the Locust worker are. A level is *held* when the rerun's TTFT p50 is
within 1 ms of the raw client's at the same rate (and no request failed)
in the median of ``--runs`` runs: the figure is the highest held rate, with
the concurrent streams it meant (requests per second times the mean stream
duration, Little's law) and the largest number in flight. Each run takes
the levels in turn, and within a level the two clients take turns going
first (raw first in even runs): the baseline used to run in this process,
right after the previous level's rerun, and read 2-5 ms slower than the tool
it is the baseline of now and then; a fresh process each, in alternating
order, puts both on the same footing.

Locust (``--users``): a Locust master and one worker run the shipped
locustfile with U users, in ``split`` mode with the one request repeated
enough for about ``--seconds`` (each user one stream at a time: a closed
loop); the worker's requests per second and TTFT p50 come from the cassette
it wrote, beside the raw client run the same way: a closed loop of U users
(``--raw-closed``, a fresh process), both spawned over one stream's
duration (Locust's ``-r U / duration``). The baseline used to be the raw
client at the worker's mean rate, open loop: U closed-loop users keep U
streams in flight where that rate kept about half as many, and this
backend's threads (which share one interpreter lock, and spin the last 2 ms
to each write) answer later the more streams they pace: at 16 users the head
of a response came 2.2 ms after its request (p50), which was the backend's
lateness, not the worker's, and the open-loop baseline never saw it.
A third column runs the same closed loop on gevent's sockets as bare as the
raw client (``--gevent-closed``): what a Locust user pays for gevent itself,
before streamtape parses or records anything.

Where a worker's TTFT goes: the backend logs each first token (when the
request reached this machine, the kernel's receive stamp of the read that
completed its head; when its thread had it; when the token was written), and
each of the worker's recorded responses is paired with the entry whose write
is nearest its recorded first token. The table after the Locust one splits
the worker's TTFT into the request's way to the backend, the backend's
lateness to read it and to write the token, and the way back; beside it the
backend's lateness while the raw client ran. It tells a late load generator
from a late backend. ``--pin`` puts the backend on the first CPU and every
client on the others (``sched_setaffinity``), as when the backend is another
machine: on two cores a busy worker otherwise takes the backend's CPU and its
TTFT shows the backend's lateness. ``--only-locust`` skips the schedule and
the rerun levels.

Each Locust run starts with no worker cassette (the worker appends to its
file: until 2026-12-04 the second and third runs of a level read the runs
before them too, so their requests per second were wrong, 13.7 req/s for 16
users where one run gives 35.5, and their TTFT the runs' mixture).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import multiprocessing as mp
import os
import platform
import queue
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import ThreadedServer, pct, read_head, steal_s
from streamtape.arrival import ArrivalSocket, keep_stamps_on, stamp_arrivals, stamp_socket
from streamtape.cassette import Interaction, Request, Response, load, save
from streamtape.stats import compute
from tests.support.processes import STREAMTAPE

FIRST = b"FIRSTTOKEN"
CHAT_PATH = "/v1/chat/completions"
BODY = b'{"model":"bench","stream":true,"messages":[{"role":"user","content":"hi"}]}'
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")


def cpu_name() -> str:
    return next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), platform.processor() or "unknown")


def _event(content: str | None, role: bool = False, finish: bool = False) -> bytes:
    delta = '{"role":"assistant"}' if role else ('{}' if content is None else '{"content":"' + content + '"}')
    fin = '"stop"' if finish else "null"
    return b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}\n\n' % (
        delta.encode(), fin.encode())


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sleep_until(t: float) -> None:
    while (left := t - time.perf_counter()) > 0:
        time.sleep(left - 0.002 if left > 0.002 else 0)


_NUMBERED = re.compile(rb'"n":(\d+)')


@dataclass(frozen=True)
class FirstToken:
    """The backend's own account of one response's first token (wall-clock ns): when the
    request reached this machine (the kernel's receive time of the read that completed its
    head), when the serving thread had it, and when the first token was written."""

    arrived_ns: int
    read_ns: int
    wrote_ns: int


class Backend(ThreadedServer):
    def __init__(self, first_s: float, tokens: int, gap_s: float,
                 arrivals: mp.Queue[tuple[int, float]] | None = None,
                 firsts: mp.Queue[FirstToken] | None = None) -> None:
        self.first_s, self.tokens, self.gap_s = first_s, tokens, gap_s
        self.arrivals = arrivals
        """Where a numbered request's arrival goes: (its number, ``perf_counter``)."""
        self.firsts = firsts
        """Where every response's :class:`FirstToken` goes."""
        super().__init__()

    def serve(self, s: socket.socket) -> None:
        stamped = stamp_socket(s) if self.firsts is not None else None
        buf: bytes | None = b""
        try:
            while buf is not None and (buf := read_head(stamped or s, buf)) is not None:
                arrived = time.perf_counter()
                kernel_ns = stamped.arrived_ns if stamped is not None else time.perf_counter_ns()
                m = re.search(rb"content-length:\s*(\d+)", buf, re.I)
                # read_head left the body in buf's tail: drop it (its length is known)
                length = int(m.group(1)) if m else len(BODY)
                while len(buf) < length:
                    d = s.recv(65536)
                    if not d:
                        return
                    buf += d
                if self.arrivals is not None and (n := _NUMBERED.search(buf[:length])):
                    self.arrivals.put((int(n.group(1)), arrived))
                buf = buf[length:]
                s.sendall(HEAD + _chunk(_event(None, role=True)))
                _sleep_until(arrived + self.first_s)
                s.sendall(_chunk(_event(FIRST.decode())))
                if self.firsts is not None:
                    wrote = time.perf_counter_ns()
                    wall = time.time_ns() - time.perf_counter_ns()  # perf_counter_ns -> wall-clock ns
                    self.firsts.put(FirstToken(kernel_ns + wall, int(arrived * 1e9) + wall, wrote + wall))
                for i in range(self.tokens):
                    _sleep_until(arrived + self.first_s + (i + 1) * self.gap_s)
                    s.sendall(_chunk(_event(f" t{i}")))
                s.sendall(_chunk(_event(None, finish=True)) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        except OSError:
            return
        finally:
            s.close()


def _backend_main(q: mp.Queue[int], first_s: float, tokens: int, gap_s: float,
                  arrivals: mp.Queue[tuple[int, float]], firsts: mp.Queue[FirstToken], cpus: set[int]) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    keep_stamps_on()
    b = Backend(first_s, tokens, gap_s, arrivals, firsts)
    q.put(b.port)
    while True:
        time.sleep(3600)


def _drain(firsts: mp.Queue[FirstToken]) -> list[FirstToken]:
    """What the backend logged since the last drain (its feeder thread flushed: wait a moment)."""
    time.sleep(0.3)
    got: list[FirstToken] = []
    with contextlib.suppress(queue.Empty):
        while True:
            got.append(firsts.get_nowait())
    return got


def _head_bytes(port: int) -> bytes:
    return (f"POST {CHAT_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY


# ---------------------------------------------------------------------------- raw client


class _Raw(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[tuple[int, int]], request: bytes) -> None:
        self.done, self.request = done, request
        self.sent = 0
        self.first = 0
        self.tail = b""
        self.stamped: ArrivalSocket | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # Its reads keep the kernel's receive time, as the rerun client's do: the baseline's
        # own loop lag is no part of the backend's TTFT either.
        self.stamped = stamp_arrivals(transport)
        self.sent = time.perf_counter_ns()
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = self.stamped.arrived_ns if self.stamped is not None else time.perf_counter_ns()
        seen = self.tail + data
        if not self.first and FIRST in seen:
            self.first = now
        if seen.endswith(b"0\r\n\r\n") and not self.done.done():
            self.done.set_result((self.first - self.sent, now - self.sent))
            self.transport.close()
        self.tail = seen[-16:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError("closed early"))


def _child(mode: str, *args: object) -> dict[str, Any]:
    """One baseline client in a fresh process of its own (``python -m bench.rerun MODE ...``):
    the JSON it prints."""
    cmd = [sys.executable, "-m", "bench.rerun", mode, *(f"{a:g}" if isinstance(a, float) else str(a) for a in args)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent)
    got: dict[str, Any] = json.loads(r.stdout)
    return got


def _raw_closed(port: int, users: int, seconds: float, stream_s: float) -> list[int]:
    """:func:`_raw_closed_run` in a fresh process (``--raw-closed``): its TTFTs (ns)."""
    ttft: list[int] = _child("--raw-closed", port, users, seconds, stream_s)["ttft"]
    return ttft


async def _raw_closed_run(port: int, users: int, seconds: float, stream_s: float) -> list[int]:
    """The raw client as a closed loop of ``users``, as Locust's users are: each sends its next
    request when its last stream ended, for ``seconds``; started over one stream's duration."""
    loop = asyncio.get_running_loop()
    req = _head_bytes(port)
    ttft: list[int] = []
    end = time.perf_counter() + seconds

    async def user(k: int) -> None:
        await asyncio.sleep(stream_s * k / users)
        while time.perf_counter() < end:
            done: asyncio.Future[tuple[int, int]] = loop.create_future()
            await loop.create_connection(lambda done=done: _Raw(done, req), "127.0.0.1", port)  # type: ignore[misc]
            first, _ = await done
            ttft.append(first)

    await asyncio.gather(*(user(k) for k in range(users)))
    return ttft


def _gevent_closed(port: int, users: int, seconds: float, stream_s: float) -> list[int]:
    """:func:`_gevent_closed_main` in a fresh process (``--gevent-closed``): its TTFTs (ns)."""
    ttft: list[int] = _child("--gevent-closed", port, users, seconds, stream_s)["ttft"]
    return ttft


def _gevent_closed_main(port: int, users: int, seconds: float, stream_s: float) -> list[int]:
    """The same closed loop on gevent's sockets, as bare as the raw client (no HTTP parser, no
    recording): what any Locust user pays for gevent before streamtape does anything."""
    from gevent import monkey

    monkey.patch_all()
    import gevent

    req = _head_bytes(port)
    ttft: list[int] = []
    end = time.perf_counter() + seconds

    def user(k: int) -> None:
        gevent.sleep(stream_s * k / users)
        while time.perf_counter() < end:
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                stamped = stamp_socket(s)  # the kernel's receive times, as the worker reads
                read = stamped.recv if stamped is not None else s.recv
                sent = time.perf_counter_ns()
                s.sendall(req)
                first, tail = 0, b""
                while data := read(65536):
                    now = stamped.arrived_ns if stamped is not None else time.perf_counter_ns()
                    seen = tail + data
                    if not first and FIRST in seen:
                        first = now
                    if seen.endswith(b"0\r\n\r\n"):
                        break
                    tail = seen[-16:]
                ttft.append(first - sent)

    gevent.joinall([gevent.spawn(user, k) for k in range(users)])
    return ttft


def _raw(port: int, rate: float, seconds: float) -> tuple[list[int], int]:
    """:func:`_raw_run` in a fresh process (``--raw``): its TTFTs (ns) and most in flight."""
    got = _child("--raw", port, float(rate), float(seconds))
    return got["ttft"], got["max"]


async def _raw_run(port: int, rate: float, seconds: float) -> tuple[list[int], list[int], int]:
    loop = asyncio.get_running_loop()
    req = _head_bytes(port)
    futures: list[asyncio.Future[tuple[int, int]]] = []
    in_flight = [0, 0]

    async def one() -> tuple[int, int]:
        done: asyncio.Future[tuple[int, int]] = loop.create_future()
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        try:
            await loop.create_connection(lambda: _Raw(done, req), "127.0.0.1", port)
            return await done
        finally:
            in_flight[0] -= 1

    start = time.perf_counter()
    n = int(rate * seconds)
    for k in range(n):
        due = start + k / rate
        if (left := due - time.perf_counter()) > 0:
            await asyncio.sleep(left)
        futures.append(asyncio.ensure_future(one()))
    results = await asyncio.gather(*futures, return_exceptions=True)
    ok = [r for r in results if isinstance(r, tuple)]
    return [t for t, _ in ok], [e for _, e in ok], in_flight[1]


# ---------------------------------------------------------------------------- rerun


def _session(path: Path, port: int) -> Path:
    ix = Interaction(
        Request("POST", f"http://127.0.0.1:{port}{CHAT_PATH}", headers=(("Content-Type", "application/json"),),
                body=BODY, started_at=1.0),
        Response(200, "OK", headers=(("Content-Type", "text/event-stream"),)),
        end_ns=1,
    )
    save(path, [ix])
    return path


SCHEDULE_REQUESTS = 40
SCHEDULE_SPAN_S = 4.0


def _schedule_session(path: Path, port: int) -> tuple[Path, list[float]]:
    """A session of numbered requests at uneven recorded offsets (some 5 ms apart), seeded."""
    import random

    rng = random.Random(19)
    offsets = sorted([0.0, *(rng.uniform(0, SCHEDULE_SPAN_S) for _ in range(SCHEDULE_REQUESTS - 1))])
    ixs = [Interaction(
        Request("POST", f"http://127.0.0.1:{port}{CHAT_PATH}", headers=(("Content-Type", "application/json"),),
                body=BODY.replace(b'"stream":true', b'"stream":true,"n":%d' % n), started_at=1000.0 + off),
        Response(200, "OK", headers=(("Content-Type", "text/event-stream"),)),
        end_ns=1,
    ) for n, off in enumerate(offsets)]
    save(path, ixs)
    return path, offsets


def _schedule_errors(session: Path, offsets: list[float], out: Path, port: int, speed: float,
                     arrivals: mp.Queue[tuple[int, float]]) -> list[float]:
    """``rerun --speed`` of the numbered session: each request's arrival at the backend against
    its due offset (ms, absolute), less the shift they all share (a late first send moves
    every offset counted from it), as tests/system/test_rerun.py measures it."""
    if out.exists():
        out.unlink()
    cmd = [*STREAMTAPE, "rerun", str(session), "--upstream", f"http://127.0.0.1:{port}", "-o", str(out),
           "--speed", f"{speed:g}"]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    got: dict[int, float] = {}
    while len(got) < len(offsets):
        n, t = arrivals.get(timeout=30)
        got[n] = t
    t0 = min(got.values())
    diffs = [(got[n] - t0) * 1000 - off * 1000 / speed for n, off in enumerate(offsets)]
    shift = statistics.median(diffs)
    return [abs(d - shift) for d in diffs]


@dataclass
class RerunResult:
    ttft: list[int]
    e2e: list[int]
    failed: int
    rps: float
    cost_us: float | None
    wall_s: float


def _rerun(session: Path, out: Path, port: int, rate: float, seconds: float) -> RerunResult:
    if out.exists():
        out.unlink()
    cmd = [*STREAMTAPE, "rerun", str(session), "--upstream", f"http://127.0.0.1:{port}", "-o", str(out),
           "--rate", f"{rate:g}/s", "--duration", f"{seconds:g}"]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    got = [ix for ix in load(out) if ix.labels.get("role") == "shadow"]
    ok = [ix for ix in got if ix.outcome == "complete"]
    stats = [compute(ix) for ix in ok]
    m = re.search(r"client cost ([\d.]+) µs per piece", r.stdout)
    span = (max(ix.request.started_at + (ix.end_ns or 0) / 1e9 for ix in got)
            - min(ix.request.started_at for ix in got)) if got else 0
    return RerunResult([s.ttft_ns for s in stats if s.ttft_ns is not None], [ix.end_ns or 0 for ix in ok],
                       len(got) - len(ok), len(got) / span if span else 0.0,
                       float(m.group(1)) if m else None, wall)


# ---------------------------------------------------------------------------- locust


@dataclass(frozen=True)
class LocustRun:
    rps: float
    ttft_p50_ms: float
    failed: int
    where: Where | None


@dataclass(frozen=True)
class Where:
    """Where a worker's TTFT goes, the mean over its requests paired with the backend's log (ms;
    means, so the parts add up to ``ttft``):
    ``sent`` from the worker's t = 0 (the connection up, the request about to be written) to the
    request reaching the backend's machine (the kernel's stamp), ``read`` from there to the
    backend's thread having it, ``late`` the first token's write past its deadline (read +
    first-token time), ``back`` from that write to the worker's recorded first-token time."""

    paired: int
    ttft: float
    sent: float
    read: float
    late: float
    back: float


def _where(ok: list[Interaction], firsts: list[FirstToken], first_s: float) -> Where | None:
    """Pairs each recorded response with the backend's log entry whose first-token write is
    nearest its recorded first token (within 2 ms: loopback hands a write over in
    microseconds, and at 150 requests/s writes are ~7 ms apart)."""
    logged = sorted(firsts, key=lambda f: f.wrote_ns)
    writes = [f.wrote_ns for f in logged]
    parts: list[tuple[int, int, int, int, int]] = []
    for ix in ok:
        ttft = compute(ix).ttft_ns
        if ttft is None or not writes:
            continue
        t0 = int(ix.request.started_at * 1e9) + (ix.setup.wait_ns if ix.setup is not None else 0)
        first = t0 + ttft
        k = bisect.bisect_left(writes, first)
        near = min((j for j in (k - 1, k) if 0 <= j < len(writes)), key=lambda j: abs(writes[j] - first))
        f = logged[near]
        if abs(f.wrote_ns - first) > 2_000_000:
            continue
        parts.append((ttft, f.arrived_ns - t0, f.read_ns - f.arrived_ns, f.wrote_ns - f.read_ns - int(first_s * 1e9),
                      first - f.wrote_ns))
    if not parts:
        return None
    return Where(len(parts), *(statistics.fmean(p[k] for p in parts) / 1e6 for k in range(5)))


def _backend_view(firsts: list[FirstToken], first_s: float) -> tuple[float, float]:
    """The backend's read and late (see :class:`Where`), the means over what it logged (ms)."""
    if not firsts:
        return float("nan"), float("nan")
    return (statistics.fmean(f.read_ns - f.arrived_ns for f in firsts) / 1e6,
            statistics.fmean(f.wrote_ns - f.read_ns - int(first_s * 1e9) for f in firsts) / 1e6)


def _locust(session: Path, tmp: Path, port: int, users: int, seconds: float,
            stream_s: float, firsts: mp.Queue[FirstToken], first_s: float) -> LocustRun | None:
    exe = Path(sys.executable).with_name("locust")
    if not exe.exists() and shutil.which("locust") is None:
        return None
    locustfile = Path(__file__).resolve().parent.parent / "streamtape" / "rerun" / "locustfile.py"
    out = tmp / f"locust{users}.tape"
    part = tmp / f"locust{users}.worker0.tape"
    for old in (out, part):  # a worker appends to its cassette: each run starts with none
        old.unlink(missing_ok=True)
    with socket.socket() as probe:  # Locust's master cannot bind port 0 and tell its workers
        probe.bind(("127.0.0.1", 0))
        master_port = probe.getsockname()[1]
    sends = max(users, int(users * seconds / stream_s))
    _drain(firsts)  # what the backend logged before this run
    common = [str(exe if exe.exists() else "locust"), "-f", str(locustfile), "--streamtape-cassette", str(session),
              "--streamtape-out", str(out), "--loglevel", "WARNING"]
    master = subprocess.Popen(
        [*common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port),
         "--headless", "--expect-workers", "1", "-u", str(users), "-r", f"{users / stream_s:.3f}", "-t", "120s",
         "-H", f"http://127.0.0.1:{port}", "--streamtape-repeat", str(sends), "--only-summary"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp)
    worker = subprocess.Popen([*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    try:
        _, err = master.communicate(timeout=180)
    finally:
        worker.kill()
        worker.wait()
    if not part.exists():
        print(err.decode(errors="replace")[-2000:], file=sys.stderr)
        return None
    out = part
    # The worker's own cassette: what its users measured, as `diff` reads it (Locust's
    # report holds the same TTFTs, rounded to the millisecond in its histogram).
    got = [ix for ix in load(out) if ix.labels.get("role") == "shadow"]
    ok = [ix for ix in got if ix.outcome == "complete"]
    ttft = [t for t in (compute(ix).ttft_ns for ix in ok) if t is not None]
    span = (max(ix.request.started_at + (ix.end_ns or 0) / 1e9 for ix in ok)
            - min(ix.request.started_at for ix in ok)) if ok else 0
    # Streams Locust cut off at -t end interrupted: not the backend's failures.
    failed = sum(1 for ix in got if ix.outcome not in ("complete", "interrupted"))
    return LocustRun(len(ok) / span if span else 0.0, pct(ttft, 50) / 1e6, failed, _where(ok, _drain(firsts), first_s))




def _median_range(xs: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


@dataclass
class Level:
    rps: float
    streams: float
    in_flight: int
    raw_p50: float
    rerun_p50: float
    failed: int
    cost_us: float | None

    @property
    def delta(self) -> float:
        return self.rerun_p50 - self.raw_p50


def _level(session: Path, tmp: Path, port: int, rate: float, seconds: float, raw_first: bool) -> Level:
    def raw() -> tuple[list[int], int]:
        return _raw(port, rate, seconds)

    def rerun() -> RerunResult:
        return _rerun(session, tmp / "out.tape", port, rate, seconds)

    if raw_first:
        (raw_ttft, raw_max), rr = raw(), rerun()
    else:
        rr = rerun()
        raw_ttft, raw_max = raw()
    streams = rr.rps * (sum(rr.e2e) / len(rr.e2e) / 1e9) if rr.e2e else 0.0
    return Level(rr.rps, streams, raw_max, pct(raw_ttft, 50) / 1e6, pct(rr.ttft, 50) / 1e6, rr.failed, rr.cost_us)


def main() -> None:
    keep_stamps_on()  # before any client's first read (streamtape.arrival)
    if len(sys.argv) == 5 and sys.argv[1] == "--raw":  # the baseline client, in a process of its own
        ttft, _, most = asyncio.run(_raw_run(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])))
        print(json.dumps({"ttft": ttft, "max": most}))
        return
    if len(sys.argv) == 6 and sys.argv[1] == "--gevent-closed":  # the same on gevent's sockets
        ttfts = _gevent_closed_main(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
        print(json.dumps({"ttft": ttfts}))
        return
    if len(sys.argv) == 6 and sys.argv[1] == "--raw-closed":  # the same as a closed loop of users
        closed = asyncio.run(_raw_closed_run(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
                                             float(sys.argv[5])))
        print(json.dumps({"ttft": closed}))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="10,20,40,80,160")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--first-ms", type=float, default=20.0)
    ap.add_argument("--users", default="4,16,64")
    ap.add_argument("--no-locust", action="store_true")
    ap.add_argument("--only-locust", action="store_true", help="skip the schedule and the rerun levels")
    ap.add_argument("--pin", action="store_true",
                    help="the backend on the first CPU, the clients (and Locust) on the others, as when the "
                         "backend is another machine")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    q: mp.Queue[int] = mp.Queue()
    arrivals: mp.Queue[tuple[int, float]] = mp.Queue()
    firsts: mp.Queue[FirstToken] = mp.Queue()
    proc = mp.Process(target=_backend_main, daemon=True,
                      args=(q, args.first_ms / 1000, args.tokens, args.gap_ms / 1000, arrivals, firsts, set()))
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin:
        if len(cpus) < 2:
            ap.error("--pin needs two CPUs")
        proc = mp.Process(target=_backend_main, daemon=True,
                          args=(q, args.first_ms / 1000, args.tokens, args.gap_ms / 1000, arrivals, firsts,
                                {cpus[0]}))
        os.sched_setaffinity(0, set(cpus[1:]))  # this process and every client it starts
    proc.start()
    port = q.get(timeout=10)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; backend: first token "
          f"{args.first_ms:g} ms, {args.tokens} more {args.gap_ms:g} ms apart; {args.seconds:g} s per level; "
          f"median of {args.runs} runs [range]"
          + (f"; backend pinned to CPU {cpus[0]}, clients to {','.join(map(str, cpus[1:]))}" if args.pin else ""),
          flush=True)
    stolen = steal_s()
    rates = [] if args.only_locust else [float(r) for r in args.rates.split(",")]
    users_list = [int(u) for u in args.users.split(",")]
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            session = _session(tmp / "session.tape", port)
            if not args.only_locust:
                numbered, offsets = _schedule_session(tmp / "numbered.tape", port)
                print(f"\nthe schedule: {SCHEDULE_REQUESTS} requests at their recorded offsets over "
                      f"{SCHEDULE_SPAN_S:g} s, arrival at the backend against the due offset (ms, p50 / p99 / max)")
                for speed in (1.0, 2.0):
                    trips = []
                    for _ in range(args.runs):
                        errs = _schedule_errors(numbered, offsets, tmp / "sched.tape", port, speed, arrivals)
                        trips.append((pct(errs, 50), pct(errs, 99), max(errs)))
                    print(f"  --speed {speed:g}: " + " / ".join(_median_range([t[k] for t in trips])
                                                              for k in range(3)))
                print()
                levels: dict[float, list[Level]] = {r: [] for r in rates}
                for run in range(args.runs):
                    for rate in rates:
                        print(f"run {run + 1}/{args.runs}: {rate:g}/s...", file=sys.stderr, flush=True)
                        levels[rate].append(_level(session, tmp, port, rate, args.seconds, raw_first=run % 2 == 0))
                print(f"{'rate/s':>7} {'rps':>18} {'streams':>18} {'raw p50 ms':>18} {'rerun p50 ms':>18} "
                      f"{'delta ms':>20} {'cost/piece µs':>20}  held")
                held: tuple[float, float, int] | None = None
                for rate, got in levels.items():
                    delta = statistics.median(lv.delta for lv in got)
                    ok = abs(delta) <= 1.0 and sum(lv.failed for lv in got) == 0
                    costs = [lv.cost_us for lv in got if lv.cost_us is not None]
                    print(f"{rate:7g} {_median_range([lv.rps for lv in got], '{:.1f}'):>18} "
                          f"{_median_range([lv.streams for lv in got], '{:.1f}'):>18} "
                          f"{_median_range([lv.raw_p50 for lv in got]):>18} "
                          f"{_median_range([lv.rerun_p50 for lv in got]):>18} "
                          f"{_median_range([lv.delta for lv in got], '{:+.2f}'):>20} "
                          f"{(_median_range(costs, '{:.0f}') if costs else '-'):>20}  {'yes' if ok else 'no'}")
                    if ok:
                        held = (statistics.median(lv.rps for lv in got), statistics.median(lv.streams for lv in got),
                                max(lv.in_flight for lv in got))
                if held is not None:
                    print(f"rerun holds TTFT p50 within 1 ms of the raw client up to {held[0]:.1f} req/s, "
                          f"{held[1]:.1f} concurrent streams (max {held[2]} in flight)")
                else:
                    print("rerun held TTFT within 1 ms of the raw client at no level measured")
            if args.no_locust:
                return
            print(f"{'users':>7} {'rps':>18} {'raw p50 ms':>18} {'locust p50 ms':>18} {'delta ms':>20}  held"
                  f"  {'bare gevent p50 ms':>20}")
            lheld = None
            stream_s = (args.first_ms + args.tokens * args.gap_ms) / 1000
            wheres: dict[int, tuple[list[Where], list[tuple[float, float]]]] = {}
            for users in users_list:
                rows: list[tuple[float, float, float]] = []
                gevent_p50: list[float] = []
                failed = 0
                wheres[users] = ([], [])
                for run in range(args.runs):
                    print(f"run {run + 1}/{args.runs}: locust {users} users...", file=sys.stderr, flush=True)
                    got_l = _locust(session, tmp, port, users, args.seconds, stream_s, firsts, args.first_ms / 1000)
                    if got_l is None:
                        continue
                    if got_l.where is not None:
                        wheres[users][0].append(got_l.where)
                    raw_ttft = _raw_closed(port, users, args.seconds, stream_s)
                    wheres[users][1].append(_backend_view(_drain(firsts), args.first_ms / 1000))
                    rows.append((got_l.rps, pct(raw_ttft, 50) / 1e6, got_l.ttft_p50_ms))
                    gevent_p50.append(pct(_gevent_closed(port, users, args.seconds, stream_s), 50) / 1e6)
                    _drain(firsts)
                    failed += got_l.failed
                if not rows:
                    print(f"{users:7d} (locust gave no statistics)")
                    continue
                deltas = [lp - rp for _, rp, lp in rows]
                delta = statistics.median(deltas)
                ok = abs(delta) <= 1.0 and failed == 0
                print(f"{users:7d} {_median_range([r for r, _, _ in rows], '{:.1f}'):>18} "
                      f"{_median_range([rp for _, rp, _ in rows]):>18} {_median_range([lp for _, _, lp in rows]):>18} "
                      f"{_median_range(deltas, '{:+.2f}'):>20}  {'yes' if ok else 'no ':<4}"
                      f"{_median_range(gevent_p50):>20}")
                if ok:
                    lheld = (statistics.median(r for r, _, _ in rows), users)
            print("\nwhere the worker's TTFT goes (the mean per run, median [range], ms), from the backend's log of\n"
                  "each first token paired with the worker's recording: ttft = sent + read + first-token time +\n"
                  "late + back; sent = t 0 to the request at the backend's\n"
                  "socket (kernel stamp), read = to the backend's thread having it, late = the first token's\n"
                  "write past its deadline, back = from that write to the worker's recorded first token;\n"
                  "beside it the backend's read and late while the raw client ran the same users")
            print(f"{'users':>7} {'paired':>8} {'ttft':>20} {'sent':>20} {'read':>20} {'late':>20} {'back':>20} "
                  f"{'raw: read':>20} {'raw: late':>20}")
            for users, (ws, raws) in wheres.items():
                if not ws:
                    continue
                print(f"{users:7d} {statistics.median(w.paired for w in ws):8.0f} "
                      + " ".join(f"{_median_range([getattr(w, k) for w in ws]):>20}"
                                 for k in ("ttft", "sent", "read", "late", "back"))
                      + " " + " ".join(f"{_median_range([r[k] for r in raws]):>20}" for k in (0, 1)))
            print(f"one Locust worker holds TTFT within 1 ms of the raw client up to {lheld[0]:.1f} req/s "
                  f"({lheld[1]} users, each one stream at a time)" if lheld else
                  "one Locust worker held TTFT within 1 ms at no level measured")
    finally:
        proc.kill()
        print(f"the host took {steal_s() - stolen:.2f} s of CPU from this machine during the run (steal)")


if __name__ == "__main__":
    main()
