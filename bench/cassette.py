"""Big cassettes: open, list, show, serve and read one interaction of a generated 1 GiB
cassette, and the writer's rate; every figure beside the file size and its target.

    .venv/bin/python -m bench.cassette [--size-mib 1024] [--runs 3] [--dir /tmp]

The cassette is generated the way a recorder writes one: ``--concurrent``
interactions at a time, their records interleaved, each response in batches
of 10 pieces (data records) between its begin and end records, through
:class:`streamtape.cassette.CassetteWriter` (which appends the index record
when it closes). Each interaction is a chat completion: a JSON request with a
question of its own (so matching has to look at bodies) and ``--pieces`` SSE
events of about 150 bytes, like OpenAI chat chunks. The file is kept and
reused by later runs with the same parameters (``--regenerate`` to force).

Figures, each the median of ``--runs`` runs with its spread (min-max), every
command in a fresh process (wall time from spawn, peak RSS from ``wait4`` or
``/proc``):

1. writer: pieces/s through ``CassetteWriter.write`` (records already built),
   and through building the data records from pieces as well;
2. ``streamtape show FILE`` (the listing, to /dev/null): time and peak RSS;
3. ``streamtape show -i LAST FILE``: time and peak RSS;
4. ``streamtape serve FILE``: time until it accepts connections, RSS then,
   and RSS after playing the last interaction (instant profile);
5. ``load(FILE)[LAST]`` and its pieces through the API, in-process: time and
   peak RSS;
6. opening without the index (a scan of every record): time and peak RSS;
7. the loader before the index (the commit before streamtape/cassette_index.py
   was added, from git) against today's, both loading a ``--baseline-mib``
   cassette of the same shape and reading its last interaction.

Baselines measured in the same run: a bare ``streamtape --version`` (CLI start
time and RSS, which every command pays), ``import streamtape`` RSS, and
reading the file's bytes once (what any scan costs at least).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._common import cpu_model
from tests.support import ROOT
from tests.support.processes import peak_rss_kib, rss_kib, start

MS = 1_000_000
MIB = 1024 * 1024
PY = sys.executable


# --------------------------------------------------------------------------- the cassette


def chunk_texts(n: int = 256) -> list[bytes]:
    """SSE events like OpenAI chat chunks (~150 bytes), a few hundred distinct ones."""
    out = []
    for i in range(n):
        payload = {
            "id": "chatcmpl-AbCdEf0123456789", "object": "chat.completion.chunk",
            "created": 1786000000, "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "delta": {"content": f" tok{i:03d}"}, "finish_reason": None}],
        }
        out.append(f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode())
    return out


def question(k: int) -> str:
    return f"Question {k}: what is {k} times {k + 7}, and why does it matter?"


def request_body(k: int) -> bytes:
    return json.dumps({
        "model": "gpt-4o-mini", "stream": True, "temperature": 0,
        "messages": [{"role": "system", "content": "You are a terse assistant."},
                     {"role": "user", "content": question(k)}],
    }).encode()


@dataclass
class Generated:
    interactions: int
    pieces: int
    records: int
    write_s: float
    build_s: float
    size: int
    close_s: float


def generate(path: Path, size_bytes: int, pieces_per: int, concurrent: int, per_write: int,
             index: bool = True) -> Generated:
    """Write interactions until the file reaches ``size_bytes``; time the writer alone.

    Records go to the writer ``per_write`` interactions at a time, as a
    BackgroundWriter under load hands over what queued while its last write
    (and the fsync every finished interaction asks for) was running.
    """
    from streamtape.cassette.model import Outcome, Request, Response
    from streamtape.cassette.pieces import Piece
    from streamtape.cassette.records import Record, begin_record, data_record, end_record
    from streamtape.cassette.writer import CassetteWriter

    texts = chunk_texts()
    headers = (("Host", "api.openai.com"), ("Content-Type", "application/json"),
               ("Authorization", "REDACTED"), ("User-Agent", "OpenAI/Python 1.54.0"),
               ("Accept", "text/event-stream"))
    resp_headers = (("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked"),
                    ("openai-processing-ms", "112"))
    head = Response(200, "OK", "HTTP/1.1", resp_headers, "chunked", (), 180 * MS)
    batch = 10
    if path.exists():
        path.unlink()
    w = CassetteWriter(path, index_min_bytes=0 if index else 1 << 62)
    write_s = build_s = 0.0
    k = pieces_total = records = 0
    pending: list[Record] = []
    while True:
        # One round: `concurrent` interactions whose records interleave.
        t0 = time.perf_counter()
        ids = [w.new_id() for _ in range(concurrent)]
        for j, rid in enumerate(ids):
            req = Request("POST", "https://api.openai.com/v1/chat/completions", "HTTP/1.1", headers,
                          request_body(k + j), 1786000000.0 + k + j)
            pending.append(begin_record(rid, req, head, {}, None))
        prev = [0] * concurrent
        for b in range(0, pieces_per, batch):
            for j, rid in enumerate(ids):
                ps = [Piece(200 * MS + (b + i) * 20 * MS + j, texts[(k + j + b + i) % len(texts)])
                      for i in range(min(batch, pieces_per - b))]
                pending.append(data_record(rid, ps, prev[j]))
                prev[j] = ps[-1].at_ns
        for j, rid in enumerate(ids):
            pending.append(end_record(rid, Outcome.COMPLETE, None, prev[j] + MS))
        build_s += time.perf_counter() - t0
        k += concurrent
        pieces_total += concurrent * pieces_per
        if k % per_write == 0:
            t1 = time.perf_counter()
            w.write(pending)
            write_s += time.perf_counter() - t1
            records += len(pending)
            pending = []
            if w._good_end >= size_bytes:
                break
    t1 = time.perf_counter()
    w.close()  # writes the index
    close_s = time.perf_counter() - t1
    return Generated(k, pieces_total, records, write_s, build_s, path.stat().st_size, close_s)


def small_piece_writer_rate(path: Path, pieces: int = 2_000_000) -> float:
    """Pieces/s through CassetteWriter.write for 20-byte pieces in batches of 100 (records built)."""
    from streamtape.cassette.model import Request
    from streamtape.cassette.pieces import Piece
    from streamtape.cassette.records import begin_record, data_record
    from streamtape.cassette.writer import CassetteWriter

    recs = [data_record(0, [Piece(i * 1000, b"data: %012d\n\n" % i) for i in range(100)], 0)
            for _ in range(pieces // 100)]
    if path.exists():
        path.unlink()
    w = CassetteWriter(path, index_min_bytes=1 << 62)
    w.write([begin_record(0, Request("GET", "http://h/"), None, {}, None)])
    t = time.perf_counter()
    for i in range(0, len(recs), 100):
        w.write(recs[i:i + 100])
    dt = time.perf_counter() - t
    w.close()
    path.unlink()
    return pieces / dt


def save_rates(folder: Path, interactions: int, pieces: int) -> tuple[float, float]:
    """Pieces/s through ``streamtape.save`` for ordinary ``Interaction`` values (a new file
    on disk, fsynced), and the disk's own: the same bytes written and fsynced once (MiB/s)."""
    import streamtape
    from streamtape.cassette.model import Interaction, Request, Response
    from streamtape.cassette.pieces import Piece
    from streamtape.wire import Framing

    texts = [t[:12] for t in chunk_texts()]
    ixs = [Interaction(
        Request("POST", f"http://llm.test/v1/chat/completions?k={k}",
                headers=(("content-type", "application/json"),), body=request_body(k)),
        Response(200, "OK", headers=(("content-type", "text/event-stream"),), framing=Framing.CHUNKED,
                 pieces=tuple(Piece(20_000_000 + j * 25_000_000, b"data: {\"choices\":[{\"delta\":"
                                    b"{\"content\":\"%s\"}}]}\n\n" % texts[j % 256])
                              for j in range(pieces))),
    ) for k in range(interactions)]
    path = folder / "streamtape-bench-save.tape"
    for p in (path, folder / "streamtape-bench-raw.bin"):
        if p.exists():
            p.unlink()
    t = time.perf_counter()
    streamtape.save(path, ixs)
    save_s = time.perf_counter() - t
    data = path.read_bytes()
    path.unlink()
    raw = folder / "streamtape-bench-raw.bin"
    t = time.perf_counter()
    with open(raw, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    raw_s = time.perf_counter() - t
    raw.unlink()
    return interactions * pieces / save_s, len(data) / raw_s / MIB


# --------------------------------------------------------------------------- measuring


@dataclass
class Run:
    seconds: float
    rss_kib: int
    extra: float = 0.0


# Peak RSS is read from the child's own /proc/self/status (VmHWM, its address space
# alone): ru_maxrss of a forked child counts the parent's pages it started with.
HWM = "import atexit, sys; atexit.register(lambda: print('HWM', [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0], file=sys.stderr)); "


def run_cli(*args: str) -> Run:
    """``streamtape ARGS`` in a fresh process, output discarded: wall time from spawn, peak RSS."""
    code = HWM + f"sys.argv = ['streamtape', *{list(args)!r}]; from streamtape.cli import main; main()"
    t = time.perf_counter()
    p = subprocess.run([PY, "-P", "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    dt = time.perf_counter() - t
    err = p.stderr.decode()
    if p.returncode != 0:
        raise RuntimeError(f"streamtape {args} failed ({p.returncode}): {err[-2000:]}")
    hwm = [ln.split()[1] for ln in err.splitlines() if ln.startswith("HWM ")]
    return Run(dt, int(hwm[-1]))


def run_bare() -> Run:
    """``python -c pass`` the way :func:`run_cli` starts a child: the floor of any command."""
    t = time.perf_counter()
    subprocess.run([PY, "-P", "-c", HWM + "pass"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return Run(time.perf_counter() - t, 0)


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> Run:
    """A child Python that prints its own timing (seconds) first on stdout; its peak RSS."""
    t = time.perf_counter()
    p = subprocess.Popen([PY, "-P", "-c", HWM + code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    out, err = p.communicate()
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"child failed: {err.decode()[-2000:]}")
    hwm = [ln.split()[1] for ln in err.decode().splitlines() if ln.startswith("HWM ")]
    return Run(float(out.decode().split()[0]), int(hwm[-1]), dt)


def serve_run(path: Path, last_body: bytes, expect_bytes: int) -> tuple[Run, int, int]:
    """``streamtape serve``: seconds until it listens, RSS then, peak RSS after one stream."""
    t = time.perf_counter()
    with start([PY, "-m", "streamtape.cli", "serve", str(path), "--port", "0"], r" on (http://\S+:\d+)",
               timeout=600, env={"PYTHONPATH": str(ROOT)}) as server:
        ready = time.perf_counter() - t
        rss_ready = rss_kib(server.pid)
        req = urllib.request.Request(server.url + "/v1/chat/completions", data=last_body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "X-Streamtape-Profile": "instant"})
        with urllib.request.urlopen(req, timeout=60) as r:
            got = len(r.read())
        if got != expect_bytes:
            raise RuntimeError(f"served {got} bytes, expected {expect_bytes}")
        peak = peak_rss_kib(server.pid)
        server.stop(signal.SIGINT, timeout=10, must_exit=False)
    return Run(ready, rss_ready), peak, got


LOAD_LAST = """
import sys, time
t = time.perf_counter()
from streamtape import load
cas = load(sys.argv[1])
ix = cas[len(cas) - 1]
n = sum(len(p.data) for p in ix.pieces)
dt = time.perf_counter() - t
print(dt, n)
"""

IMPORT_ONLY = """
import time
t = time.perf_counter()
import streamtape
print(time.perf_counter() - t)
"""

SCAN = """
import sys, time
from pathlib import Path
from streamtape.cassette.reader import open_layout
import os
t = time.perf_counter()
layout, _, fd = open_layout(Path(sys.argv[1]), use_index=False)
os.close(fd)
print(time.perf_counter() - t, len(layout.table))
"""

READ_BYTES = """
import sys, time
t = time.perf_counter()
with open(sys.argv[1], "rb", buffering=0) as f:
    while f.read(1 << 20):
        pass
print(time.perf_counter() - t)
"""


def repeat(n: int, fn: Callable[[], Run]) -> list[Run]:
    return [fn() for _ in range(n)]


def med(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):.3f}"


def spread(xs: Sequence[float], fmt: str = "{:.3f}") -> str:
    return f"({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def secs(runs: Sequence[Run]) -> str:
    xs = [r.seconds for r in runs]
    return f"{med(xs)} s {spread(xs)}"


def rss(runs: Sequence[Run]) -> str:
    xs = [r.rss_kib / 1024 for r in runs]
    return f"{statistics.median(xs):.1f} MiB {spread(xs, '{:.1f}')}"


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def old_tree(dest: Path) -> str | None:
    """The package as it was before the index (git), extracted into ``dest``; its revision."""
    try:
        first = subprocess.run(
            ["git", "log", "--diff-filter=A", "--format=%H", "--", "streamtape/cassette_index.py"],
            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
        if not first:
            return None
        rev = first[-1] + "^"
        archive = subprocess.run(["git", "archive", rev, "streamtape"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.cassette", description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--baseline-mib", type=int, default=64,
                    help="size of the cassette the old loader is compared on")
    ap.add_argument("--pieces", type=int, default=100, help="pieces per interaction")
    ap.add_argument("--concurrent", type=int, default=8, help="interactions whose records interleave")
    ap.add_argument("--per-write", type=int, default=64, help="interactions handed to each write")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--no-old", action="store_true", help="skip the loader from before the index")
    ap.add_argument("--save-only", action="store_true",
                    help="only the save() and CLI start-up figures (no big cassette)")
    args = ap.parse_args()

    print(f"load average at start: {loadavg()}  ({os.cpu_count()} cores, {cpu_model()})")
    saves = [save_rates(args.dir, 4000, args.pieces) for _ in range(args.runs)]
    print(f"save(): 4,000 interactions x {args.pieces} pieces to {args.dir}: "
          f"{med([r / 1e6 for r, _ in saves])} M pieces/s {spread([r / 1e6 for r, _ in saves], '{:.2f}')}; "
          f"the same bytes written raw and fsynced: {med([d for _, d in saves])} MiB/s "
          f"{spread([d for _, d in saves], '{:.0f}')}   target >= 1 M pieces/s")
    version = repeat(args.runs, lambda: run_cli("--version"))
    bare = repeat(args.runs, run_bare)
    print(f"streamtape --version {secs(version)} against python -c pass {secs(bare)}   target < 0.15 s")
    if args.save_only:
        return
    from streamtape import load

    def tape_for(mib: int, index: bool = True) -> tuple[Path, Generated | None]:
        kind = "" if index else "-noindex"
        path = args.dir / f"streamtape-bench-{mib}m-{args.pieces}p-{args.concurrent}c{kind}.tape"
        if path.exists() and not args.regenerate:
            return path, None
        return path, generate(path, mib * MIB, args.pieces, args.concurrent, args.per_write, index)

    path, gen = tape_for(args.size_mib)
    size_mib = path.stat().st_size / MIB
    cas = load(path)
    n = len(cas)
    last = cas[n - 1]
    last_body = last.request.body
    expect = len(last.response.body) if last.response else 0
    table = cas.file.table if cas.file else None
    del cas, last
    print(f"file: {path}  {size_mib:.1f} MiB, {n:,} interactions x {args.pieces} pieces, "
          f"{table.record_count if table else 0:,} records, indexed: "
          f"{'yes' if table is not None and load(path).file.layout.indexed else 'no'}")  # type: ignore[union-attr]

    # 1. writer
    if gen is not None:
        print(f"writer: {gen.pieces / gen.write_s / 1e6:.2f} M pieces/s through CassetteWriter.write "
              f"({gen.size / gen.write_s / MIB:.0f} MiB/s); {gen.pieces / (gen.write_s + gen.build_s) / 1e6:.2f} "
              f"M pieces/s building the records from Piece values too   target >= 1 M pieces/s")
    else:
        print("writer: (cassette reused; --regenerate to time the writer on it)")
    shm = Path("/dev/shm")
    if shm.is_dir():  # the writer's own cost: tmpfs makes fsync free
        mem = []
        for _ in range(args.runs):
            g = generate(shm / "streamtape-bench-writer.tape", min(128, args.size_mib) * MIB, args.pieces,
                         args.concurrent, args.per_write)
            (shm / "streamtape-bench-writer.tape").unlink()
            mem.append(g.pieces / g.write_s / 1e6)
        print(f"writer on tmpfs (no disk wait), the same records: {med(mem)} M pieces/s "
              f"{spread(mem, '{:.2f}')}   target >= 1 M pieces/s")
    rates = [small_piece_writer_rate(args.dir / "streamtape-bench-writer.tape") for _ in range(args.runs)]
    print(f"writer, 20-byte pieces in records of 100: {med([r / 1e6 for r in rates])} M pieces/s "
          f"{spread([r / 1e6 for r in rates], '{:.2f}')}   target >= 1 M pieces/s")

    # baselines
    imp = repeat(args.runs, lambda: run_python(IMPORT_ONLY))
    raw = repeat(args.runs, lambda: run_python(READ_BYTES, str(path)))
    print(f"baseline: streamtape --version {secs(version)}, RSS {rss(version)}; "
          f"import streamtape RSS {rss(imp)}; reading the file's bytes once {secs(raw)}")

    # 2. listing
    listing = repeat(args.runs, lambda: run_cli("show", str(path)))
    print(f"show (listing, {size_mib:.0f} MiB, {n:,} rows): {secs(listing)}, RSS {rss(listing)}   "
          f"target: constant memory (RSS beside --version's)")

    # 3. show -i LAST
    show_last = repeat(args.runs, lambda: run_cli("show", "-i", str(n - 1), str(path)))
    print(f"show -i {n - 1} ({size_mib:.0f} MiB): {secs(show_last)}, RSS {rss(show_last)}   "
          f"target < 0.5 s, < 100 MiB (CLI start alone: {secs(version)})")

    # 4. serve
    served = [serve_run(path, last_body, expect) for _ in range(args.runs)]
    ready = [s[0] for s in served]
    peaks = [s[1] / 1024 for s in served]
    print(f"serve ({size_mib:.0f} MiB, {n:,} interactions): ready in {secs(ready)}, RSS {rss(ready)}, "
          f"peak after playing the last one {statistics.median(peaks):.1f} MiB {spread(peaks, '{:.1f}')}   "
          f"target ready < 2 s")

    # 5. load()[LAST]
    api = repeat(args.runs, lambda: run_python(LOAD_LAST, str(path)))
    print(f"load(...)[{n - 1}] and its pieces: {secs(api)} (import included), RSS {rss(api)}   "
          f"(import streamtape alone: RSS {rss(imp)})")

    # 6. no index
    scans = repeat(args.runs, lambda: run_python(SCAN, str(path)))
    print(f"open without the index (scan of {table.record_count if table else 0:,} records): "
          f"{secs(scans)}, RSS {rss(scans)}   (reading the bytes alone: {secs(raw)})")

    # 7. the loader before the index, on a smaller cassette of the same shape
    small, _ = tape_for(args.baseline_mib, index=False)  # the old loader reads version 1 only
    with tempfile.TemporaryDirectory() as old:
        rev = None if args.no_old else old_tree(Path(old))
        if rev is None:
            print("old loader: skipped" if args.no_old else "old loader: not available (no git history)")
        else:
            old_runs = repeat(args.runs, lambda: run_python(LOAD_LAST, str(small), env={"PYTHONPATH": old}))
            new_runs = repeat(args.runs, lambda: run_python(LOAD_LAST, str(small)))
            ratio = statistics.median(r.seconds for r in old_runs) / statistics.median(
                r.seconds for r in new_runs)
            print(f"load(...)[LAST] on {small.stat().st_size / MIB:.0f} MiB: before the index ({rev}) "
                  f"{secs(old_runs)}, RSS {rss(old_runs)}; now {secs(new_runs)}, RSS {rss(new_runs)}; "
                  f"{ratio:.0f}x faster")
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
