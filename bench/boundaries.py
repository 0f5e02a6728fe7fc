"""Do piece boundaries reach the client's reads? The share that does, by the spacing between pieces.

    .venv/bin/python -m bench.boundaries [--pieces 200] [--runs 3] [--spacings-us 0,50,100,200,500,1000,2000,5000]

A re-chunking profile (``chunk=utf8-split``, ``bytes:1``, ...) is only worth
something if each piece it cuts reaches the client as a read of its own: a
client that decodes each read by itself (``new TextDecoder().decode(value)``
on every read of a ``fetch`` body) shows its bug only when a read ends inside
a character. Pieces written back to back leave the server as separate
``write`` calls (``TCP_NODELAY``), but the client reads whatever has arrived
by the time it reads: Node's ``fetch`` (undici) hands its body stream
everything its socket buffered since the last read, so pieces due at the same
moment arrive as one read. This measures, for each spacing between pieces,
the share of boundaries that arrived as separate reads, with two clients:

- ``node cold``: Node's global ``fetch`` in a fresh ``node`` process (its first
  request, as a test's first client is), reading ``r.body.getReader()`` and
  reporting each read's size (the script is written into the run's temporary
  folder); ``node warm``: the second request of the same process;
- ``python``: a raw blocking socket in this process, ``recv`` in a loop,
  reporting where each ``recv`` ended on the wire.

and three servers, in child processes serving the same pieces:

- ``apart``: ``streamtape serve`` on a one-interaction cassette whose recorded
  pieces are the ones measured, under ``latency=apart:GAP`` (``latency=instant``
  at spacing 0), given per request in the ``X-Streamtape-Profile`` header: the
  subject (spaced times, and the player keeps the spacing in real time);
- ``fixed``: the same server under ``latency=fixed:0:GAP``: the same times, from
  absolute deadlines alone (a player that wakes late writes every piece due by
  then back to back, and the clock releases deadlines less than 0.25 ms apart
  together, ``streamtape/clock.py``): what spacing the times alone gives;
- ``paced``: a minimal socket server written here that writes the same HTTP
  chunks, sleeping GAP after each write: the baseline, what the kernel and
  the client allow when no two writes are ever closer than GAP.

The stream: ``--pieces`` pieces of an SSE body of chat chunks in mixed
scripts (about 30 bytes a piece), every cut between two pieces inside a
multi-byte UTF-8 character, as ``chunk=utf8-split`` cuts. A boundary is
"apart" when a read ended exactly there. Each figure is the median of
``--runs`` runs (one stream each) with their range.

Section 2 serves whole events and measures the profiles as shipped
(``adversarial:utf8-split``, ``chunk=utf8-split``, and ``latency=instant``
written explicitly), counting for each the share of UTF-8 cuts that reached
the Node client apart.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._common import cpu_model
from tests.support import ROOT

MS = 1_000_000
US = 1_000
REQUEST_BODY = json.dumps({"model": "bench", "stream": True}).encode()
PATH = "/v1/chat/completions"

NODE_CLIENT = """\
// STREAMS fetches of a replayed stream, one after another in this process; prints the
// size (bytes) of each read of each as one JSON line.
const [url, profile, gapNs, body, streams] = process.argv.slice(2);
for (let k = 0; k < Number(streams); k++) {
  const r = await fetch(url, {
    method: 'POST',
    headers: {'content-type': 'application/json', 'x-streamtape-profile': profile,
              'x-bench-gap-ns': gapNs},
    body,
  });
  const rd = r.body.getReader();
  const sizes = [];
  for (;;) {
    const {value, done} = await rd.read();
    if (done) break;
    sizes.push(value.byteLength);
  }
  console.log(JSON.stringify({status: r.status, sizes}));
}
"""


# --------------------------------------------------------------------------- the stream


WORDS = ["héllo", "wörld", "naïve", "€", "中文", "日本語", "😀", "𝄞", "ß", "Ωμέγα", "привет", "🎉"]


def events(count: int) -> list[bytes]:
    """``count`` SSE chat chunks whose content mixes scripts (2-, 3- and 4-byte characters)."""
    out = []
    for i in range(count):
        text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3))
        payload = {"id": "c1", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {"content": text}}]}
        out.append(f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


def utf8_cuts(body: bytes) -> list[int]:
    """Every offset inside a multi-byte UTF-8 character (right after its lead byte)."""
    return [i + 1 for i, b in enumerate(body[:-1]) if b >= 0xC0]


def split_pieces(pieces: int) -> list[bytes]:
    """A body of chat chunks cut into ``pieces`` pieces, every cut inside a character."""
    n_events = 1
    while True:
        body = b"".join(events(n_events))
        cuts = utf8_cuts(body)
        if len(cuts) >= 2 * pieces:
            break
        n_events += 1
    step = len(cuts) / pieces
    chosen = sorted({cuts[int(k * step)] for k in range(1, pieces)})
    points = [0, *chosen, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points)]


def make_tape(path: Path, pieces: Sequence[bytes]) -> None:
    """A one-interaction cassette whose recorded pieces are ``pieces``, 1 ms apart."""
    import streamtape
    from streamtape import Interaction, Piece, Request, Response

    ix = Interaction(
        Request("POST", f"http://bench.test{PATH}", headers=(("content-type", "application/json"),),
                body=REQUEST_BODY),
        Response(200, "OK", headers=(("Content-Type", "text/event-stream"),
                                     ("Transfer-Encoding", "chunked")),
                 framing="chunked", headers_at_ns=MS,
                 pieces=tuple(Piece(2 * MS + k * MS, p) for k, p in enumerate(pieces))),
        end_ns=(len(pieces) + 3) * MS,
    )
    if path.exists():
        path.unlink()
    streamtape.save(path, [ix])


def frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


# --------------------------------------------------------------------------- servers


def child_paced(tape: str) -> None:
    """The baseline server: the cassette's pieces as HTTP chunks, each written at least
    ``X-Bench-Gap-Ns`` after the previous write (a ``sleep`` after each: never two back to
    back, whatever the scheduler did meanwhile), one connection at a time."""
    import streamtape

    ix = streamtape.load(tape)[0]
    assert ix.response is not None
    wire = [frame(p.data) for p in ix.response.pieces]
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n")
    srv = socket.create_server(("127.0.0.1", 0))
    print(srv.getsockname()[1], flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        s, _ = srv.accept()
        with s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
            raw_head, _, rest = buf.partition(b"\r\n\r\n")
            gap, length = 0, 0
            for line in raw_head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"x-bench-gap-ns":
                    gap = int(value)
                elif name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                d = s.recv(65536)
                if not d:
                    break
                rest += d
            s.sendall(head)
            for k, piece in enumerate(wire):
                if k and gap:
                    time.sleep(gap / 1e9)  # after the previous write, whenever that was
                s.sendall(piece)
            s.sendall(b"0\r\n\r\n")
            s.shutdown(socket.SHUT_WR)
            with_timeout(s)


def with_timeout(s: socket.socket) -> None:
    """Wait (briefly) for the client to close, so the last bytes are not reset away."""
    s.settimeout(2)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass


class Server:
    """A server child process: ``streamtape serve`` or the paced baseline."""

    def __init__(self, kind: str, tape: Path) -> None:
        self.kind = kind
        if kind == "streamtape":
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streamtape.cli", "serve", "--port", "0", str(tape)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            )
            assert self.proc.stderr is not None
            first = self.proc.stderr.readline()
            if " on http://" not in first:
                raise RuntimeError(f"streamtape serve did not start: {first!r}")
            self.port = int(first.split(" on http://")[1].split()[0].rsplit(":", 1)[1])
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.boundaries", "--child", kind, "--tape", str(tape)],
            stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PATH}"

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- clients


def node_reads(node: str, script: Path, url: str, profile: str, gap_ns: int,
               streams: int = 1) -> list[list[int]]:
    """The size of each read of each of ``streams`` fetches made one after another by a fresh
    Node process (the first one cold, the others warm)."""
    out = subprocess.run([node, str(script), url, profile, str(gap_ns), REQUEST_BODY.decode(),
                          str(streams)], capture_output=True, text=True, timeout=120)
    if out.returncode:
        raise RuntimeError(f"the Node client failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    runs = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert len(runs) == streams and all(r["status"] == 200 for r in runs), out.stdout
    return [list(r["sizes"]) for r in runs]


def python_reads(port: int, profile: str, gap_ns: int) -> tuple[list[int], int]:
    """Where each ``recv`` of a blocking socket ended, in wire bytes after the head; and the
    head's length."""
    s = socket.create_connection(("127.0.0.1", port))
    with s:
        s.sendall(
            b"POST %s HTTP/1.1\r\nHost: bench.test\r\nContent-Type: application/json\r\n"
            b"X-Streamtape-Profile: %s\r\nX-Bench-Gap-Ns: %d\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s"
            % (PATH.encode(), profile.encode(), gap_ns, len(REQUEST_BODY), REQUEST_BODY)
        )
        ends: list[int] = []
        total = 0
        got = bytearray()
        while True:
            d = s.recv(65536)
            if not d:
                break
            total += len(d)
            got += d
            ends.append(total)
    head_len = got.index(b"\r\n\r\n") + 4
    return [e - head_len for e in ends if e > head_len], head_len


def share_apart(read_ends: Sequence[int], boundaries: Sequence[int]) -> float:
    """The share of ``boundaries`` (offsets) at which some read ended."""
    ends = set(read_ends)
    return sum(b in ends for b in boundaries) / len(boundaries) if boundaries else 1.0


def cumulative(sizes: Iterable[int]) -> list[int]:
    out, pos = [], 0
    for n in sizes:
        pos += n
        out.append(pos)
    return out


SUBJECTS = ("apart", "fixed", "paced")
"""The servers of section 1: ``streamtape serve`` under ``latency=apart:GAP`` (the
subject: spaced times, and the spacing kept in real time), under
``latency=fixed:0:GAP`` (the same times, from absolute deadlines alone), and the paced
baseline."""


def profile_for(subject: str, gap_ns: int) -> str:
    """The profile that spaces the recorded pieces ``gap_ns`` apart (instant at 0)."""
    if gap_ns == 0:
        return "chunk=recorded;latency=instant"
    if subject == "fixed":
        return f"chunk=recorded;latency=fixed:0:{gap_ns / MS:g}"
    return f"chunk=recorded;latency=apart:{gap_ns / US:g}"


@dataclass
class Figure:
    shares: list[float]

    def __str__(self) -> str:
        med = statistics.median(self.shares) * 100
        lo, hi = min(self.shares) * 100, max(self.shares) * 100
        return f"{med:5.1f}% ({lo:.1f}-{hi:.1f})"


# --------------------------------------------------------------------------- sections


def measure_spacings(args: argparse.Namespace, node: str | None, script: Path, tape: Path,
                     pieces: Sequence[bytes]) -> dict[tuple[str, str], int | None]:
    """Section 1; returns, for each (server, client), the least spacing with >= 99% apart in
    every run."""
    body_bounds = cumulative(len(p) for p in pieces)[:-1]
    wire_bounds = cumulative(len(frame(p)) for p in pieces)[:-1]
    print(f"1. boundaries apart, by spacing ({len(pieces)} pieces, {len(body_bounds)} boundaries; "
          f"median of {args.runs} runs (range)). apart: streamtape serve, latency=apart:GAP; "
          f"fixed: latency=fixed:0:GAP; paced: the baseline. node cold: the first fetch of a "
          f"fresh process; node warm: its second", flush=True)
    clients = (["node cold", "node warm"] if node else []) + ["python"]
    print(f"   {'spacing':>8}  {'server':<6}  " + "  ".join(f"{c:>21}" for c in clients), flush=True)
    least: dict[tuple[str, str], int | None] = {(s, c): None for s in SUBJECTS for c in clients}
    with Server("streamtape", tape) as st, Server("paced", tape) as paced:
        for gap_us in args.spacings_us:
            gap_ns = int(gap_us * US)
            for subject in SUBJECTS:
                srv = paced if subject == "paced" else st
                profile = profile_for(subject, gap_ns)
                shares: dict[str, list[float]] = {c: [] for c in clients}
                for _ in range(args.runs):
                    if node:
                        cold, warm = node_reads(node, script, srv.url, profile, gap_ns, streams=2)
                        shares["node cold"].append(share_apart(cumulative(cold), body_bounds))
                        shares["node warm"].append(share_apart(cumulative(warm), body_bounds))
                    ends, _ = python_reads(srv.port, profile, gap_ns)
                    shares["python"].append(share_apart(ends, wire_bounds))
                for client in clients:
                    if least[subject, client] is None and min(shares[client]) >= 0.99:
                        least[subject, client] = gap_ns
                label = f"{gap_us:>5g} us" if subject == SUBJECTS[0] else ""
                print(f"   {label:>8}  {subject:<6}  "
                      + "  ".join(f"{Figure(shares[c])!s:>21}" for c in clients), flush=True)
    print("   least spacing with >= 99% apart in every run:", flush=True)
    def said(v: int | None) -> str:
        return "none measured" if v is None else f"{v / US:g} us"

    for subject in SUBJECTS:
        print(f"     {subject:<6} " + ", ".join(f"{c} {said(least[subject, c])}" for c in clients),
              flush=True)
    print("", flush=True)
    return least


def measure_profiles(args: argparse.Namespace, node: str, script: Path, folder: Path) -> None:
    """The shipped profiles on whole events: the share of UTF-8 cuts that reached Node apart."""
    from streamtape.profiles import parse_profile

    evs = events(max(10, args.pieces // 10))
    tape = folder / "events.tape"
    make_tape(tape, evs)
    import streamtape

    ix = streamtape.load(tape)[0]
    body = b"".join(evs)
    cuts = [c for c in utf8_cuts(body)]
    profiles = ["adversarial:utf8-split", "chunk=utf8-split", "chunk=utf8-split;latency=instant"]
    print(f"2. the profiles as shipped: {len(evs)} whole events, {len(cuts)} UTF-8 cuts; "
          f"share of the cuts that reached Node apart, median of {args.runs} runs (range)",
          flush=True)
    with Server("streamtape", tape) as st:
        for text in profiles:
            sched = parse_profile(text).schedule(ix)
            sends = sched.sends
            gaps = [b.at_ns - a.at_ns for a, b in itertools.pairwise(sends)]
            least = min(gaps) if gaps else 0
            shares = [share_apart(cumulative(node_reads(node, script, st.url, text, 0)[0]), cuts)
                      for _ in range(args.runs)]
            print(f"   {text:<34} least gap {least / US:6g} us  {Figure(shares)}  "
                  f"({sched.duration_ns / MS:.1f} ms for {len(sends)} pieces)", flush=True)
    print("", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.boundaries", description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pieces", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--spacings-us", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0, 50, 100, 200, 500, 1000, 2000, 5000])
    ap.add_argument("--sections", type=lambda s: {int(x) for x in s.split(",")}, default={1, 2})
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tape", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "paced":
        child_paced(args.tape)
        return

    node = shutil.which("node")
    cpu = cpu_model()
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() \
        if node else "not found (Node columns left out)"
    print(f"bench.boundaries: CPU {cpu}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"Python {platform.python_version()}; node {node_version}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-boundaries-") as tmp:
        folder = Path(tmp)
        script = folder / "client.mjs"
        script.write_text(NODE_CLIENT)
        pieces = split_pieces(args.pieces)
        tape = folder / "pieces.tape"
        make_tape(tape, pieces)
        if 1 in args.sections:
            measure_spacings(args, node, script, tape, pieces)
        if 2 in args.sections and node:
            measure_profiles(args, node, script, folder)
    print(f"load at the end {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
