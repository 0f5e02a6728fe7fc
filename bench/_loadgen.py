"""The C load client, ``bench/loadgen.c``, for the benchmarks that time a server's streams
(``bench/replay.py``, ``bench/reliability.py``, ``bench/record_timing.py``): compile it, run
it, read its output; and the C paced upstream of ``bench/record_timing.py``, ``bench/upstream.c``.

    exe, why = build(tmp)                   # None and the reason when gcc is missing or fails
    result = run(exe, port, request, 1000, stagger_s=1.0, seed=1000, hang_up=(20, 10))
    result = await run_async(...)           # the same from an event loop
    up, why = build(tmp, UPSTREAM_C)        # then: upstream EVENTS GAP_MS (its header)

``request`` is the bytes each connection sends; the streams come back in index
order, each with its status (``ok``, ``hangup``, ``eof``, ``bad`` or an errno
name), its body's length and 64-bit FNV-1a hash (:func:`fnv1a64` of the bytes
you expect tells whether it is byte-exact) and its chunks' arrival times
(``perf_counter_ns``), with the client's own CPU. The format is in loadgen.c's
header.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

LOADGEN_C = Path(__file__).with_name("loadgen.c")
UPSTREAM_C = Path(__file__).with_name("upstream.c")
CFLAGS = ["-O2", "-std=c99", "-Wall", "-Wextra", "-Werror"]


@dataclass
class Stream:
    """One stream as loadgen read it."""

    index: int
    status: str
    """``ok`` (the last chunk came), ``hangup`` (left on purpose), ``eof``, ``bad``, or the
    errno name of a failed connect, send or read."""
    http_status: int
    body_bytes: int
    body_fnv1a: int
    """The 64-bit FNV-1a hash of the body bytes read (without the chunked framing)."""
    arrivals: list[int]
    """Each chunk's arrival, ``perf_counter_ns``."""
    stamps: list[int] | None = None
    """With ``stamps=True``: each chunk's write time, the number after ``"t": `` in its data."""

    def exact(self, body: bytes) -> bool:
        """Complete, and its body is ``body`` (by length and hash)."""
        return (self.status == "ok" and self.body_bytes == len(body)
                and self.body_fnv1a == fnv1a64(body))


@dataclass
class Result:
    streams: list[Stream]
    cpu_s: float
    """The client's CPU (user + system) over the run."""


def fnv1a64(data: bytes) -> int:
    """The 64-bit FNV-1a hash of ``data``, as loadgen computes it for a body."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def build(tmp: Path, source: Path = LOADGEN_C) -> tuple[Path | None, str]:
    """Compile ``source`` (loadgen.c unless told) into ``tmp``: (the binary, "") or (None, why not)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None, "gcc not found"
    exe = tmp / source.stem
    cc = subprocess.run([gcc, *CFLAGS, "-o", str(exe), str(source)],
                        capture_output=True, text=True)
    if cc.returncode:
        errors = [ln for ln in cc.stderr.splitlines() if "error" in ln]
        return None, f"gcc failed: {(errors or [f'exit status {cc.returncode}'])[0]}"
    return exe, ""


def command(exe: Path, port: int, request: bytes, streams: int, stagger_s: float, seed: int,
            hang_up: tuple[int, int] | None = None, even: bool = False, stamps: bool = False) -> list[str]:
    """The command line of a run; the request is written to a file beside ``exe``.
    ``hang_up=(every, after)``: streams whose index is a multiple of ``every`` close their
    connection after ``after`` chunks. ``even``: the starts evenly spaced over ``stagger_s``
    (else uniformly random). ``stamps``: read each chunk's write time from its data."""
    path = exe.parent / f"request-{fnv1a64(request):016x}"
    if not path.exists():
        path.write_bytes(request)
    rule = [f"{hang_up[0]}:{hang_up[1]}"] if hang_up else []
    flags = ["-e"] * even + ["-t"] * stamps
    return [str(exe), *flags, str(port), str(path), str(streams), repr(float(stagger_s)), str(seed), *rule]


def parse(out: bytes) -> Result:
    """loadgen's output: its streams in index order and its CPU."""
    streams = []
    cpu = float("nan")
    for row in out.splitlines():
        fields = row.split()
        if fields[0] == b"s":  # s INDEX STATUS HTTP_STATUS BODY_BYTES FNV1A CHUNKS T1 .. TCHUNKS
            arrivals = [int(t) for t in fields[7:]]
            if len(arrivals) != int(fields[6]):
                raise ValueError(f"loadgen: {int(fields[6])} chunks but {len(arrivals)} times")
            streams.append(Stream(int(fields[1]), fields[2].decode(), int(fields[3]),
                                  int(fields[4]), int(fields[5], 16), arrivals))
        elif fields[0] == b"t":  # t INDEX W1 .. WCHUNKS, after its stream's line
            streams[-1].stamps = [int(t) for t in fields[2:]]
        elif fields[0] == b"cpu":
            cpu = float(fields[1])
    return Result(streams, cpu)


def lowest_priority(pid: int = 0) -> None:
    """Linux's ``SCHED_IDLE`` for a process (0: this one): it runs only on CPU time that no
    other process wants, as if it were on another machine while the others need the cores."""
    os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))


def _checked(code: int | None, out: bytes, err: bytes, streams: int) -> Result:
    if code:
        raise RuntimeError(f"loadgen exited with status {code}: {err.decode(errors='replace')}")
    result = parse(out)
    if len(result.streams) != streams:
        raise RuntimeError(f"loadgen reported {len(result.streams)} of {streams} streams")
    return result


def run(exe: Path, port: int, request: bytes, streams: int, stagger_s: float, seed: int,
        hang_up: tuple[int, int] | None = None, timeout: float | None = None,
        even: bool = False, stamps: bool = False, idle: bool = False) -> Result:
    """Run loadgen to the end (killed after ``timeout`` seconds: subprocess.TimeoutExpired);
    ``even`` and ``stamps`` as in :func:`command`; ``idle``: at the lowest priority there is
    (:func:`lowest_priority`)."""
    proc = subprocess.run(command(exe, port, request, streams, stagger_s, seed, hang_up, even, stamps),
                          capture_output=True, timeout=timeout, preexec_fn=lowest_priority if idle else None)
    return _checked(proc.returncode, proc.stdout, proc.stderr, streams)


async def run_async(exe: Path, port: int, request: bytes, streams: int, stagger_s: float,
                    seed: int, hang_up: tuple[int, int] | None = None) -> Result:
    """:func:`run` from an event loop, which stays free meanwhile (to sample the server)."""
    proc = await asyncio.create_subprocess_exec(
        *command(exe, port, request, streams, stagger_s, seed, hang_up),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await proc.communicate()
    return _checked(proc.returncode, out, err, streams)
