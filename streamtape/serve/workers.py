"""``streamtape serve --workers N``: N processes accepting on one port.

One asyncio loop runs on one core: a replay server's realtime capacity is
what one core can write on time. With ``--workers N`` the ``serve`` process
forks N workers once the cassettes are loaded. Each is a whole replay
server, with its own event loop, clock (:mod:`streamtape.clock` keeps one
waker per loop), matcher and caches, listening on the same port with
``SO_REUSEPORT``: the kernel spreads new connections over the workers'
listening sockets by a hash of each connection's addresses, so nothing in
user space sits in front of them. The parent keeps the port reserved (a
socket bound with ``SO_REUSEPORT`` that never listens, so it gets no
connections) and does nothing else while they run.

Shared between the workers:

* request numbers: one counter in shared memory, so the log's ``#N`` are
  unique and in arrival order over all workers;
* the request journal (``GET /_streamtape/requests`` on any worker lists
  every worker's requests): :class:`~.journal.SharedJournal`, whose
  docstring says why it is a folder of per-worker files;
* the log: each worker sends its lines to the parent over its own pipe
  (length-prefixed messages), and the parent writes them to its stdout, so
  every line comes out of the one ``serve`` process whole, never two
  workers' lines mixed;
* their counts, sent to the parent as they stop, for the closing line.

Not shared: the order in which repeats of one request are served and
``--strict`` count per worker (each matcher counts what it served).

Signals: SIGINT and SIGTERM stop the parent, which stops the workers
(SIGTERM) and waits for their last lines; a worker that dies on its own
ends the whole server with an error, so a half-served port never goes
unnoticed. Linux only (``SO_REUSEPORT`` balancing and ``fork``).

The process machinery (:func:`run_workers`: fork, the reserved port, the
pipes, the lifeline, the supervision) knows nothing of replay: ``record
--workers`` runs N mitmproxy recorders on it the same way
(:mod:`streamtape.commands.record`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

from ..errors import OptionError, StreamtapeError, WorkerError
from .collector import QuietCollector
from .journal import SharedJournal

if TYPE_CHECKING:
    from multiprocessing.sharedctypes import Synchronized

    from .server import ReplayServer

__all__ = ["Seat", "WorkerSetup", "WorkersResult", "run_server", "run_workers", "serve_workers"]

_STOP_TIMEOUT_S = 10.0


class _Kind(IntEnum):
    """What a message on a worker's pipe carries."""

    LINE = 1
    """A log line (for the parent's stdout)."""
    ERR_LINE = 5
    """A line for the parent's stderr."""
    READY = 2
    """The worker listens (payload: its URL)."""
    ERROR = 3
    """The worker could not start (payload: the message)."""
    STATS = 4
    """The worker stopped (payload: its counts, JSON)."""


_HEAD = struct.Struct("!BI")


@dataclass(frozen=True)
class Seat:
    """What a worker process of :func:`run_workers` is given, in the child."""

    index: int
    port: int
    """The port every worker listens on (already chosen when the option was 0)."""
    numbers: Callable[[], int]
    """The next number of a counter shared by all workers."""
    log: Callable[[str], None]
    """Sends a line to the parent's stdout (whole: never mixed with another worker's)."""
    warn: Callable[[str], None]
    """Sends a line to the parent's stderr."""
    ready: Callable[[str], None]
    """Says the worker listens (at this URL or address); call it once."""
    lifeline: int
    """The read end of a pipe only the parent holds open: readable (end of file) once
    the parent is gone, even killed; a worker stops then."""


WorkerBody = Callable[[Seat], dict[str, int]]
"""A worker's whole work, run in the forked child: it serves until SIGINT, SIGTERM or the
lifeline's end, and returns its counts (sent to the parent). A
:class:`~streamtape.errors.StreamtapeError` it raises before it is ready ends the run
with that error."""


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker's server is built with, besides the command's own options."""

    index: int
    port: int
    """The port every worker listens on (already chosen when the option was 0)."""
    numbers: Callable[[], int]
    """The next request number, shared by all workers."""
    journal: SharedJournal
    log: Callable[[str], None]
    """Sends a log line to the parent's stdout."""


@dataclass
class WorkersResult:
    """What the workers served, added up."""

    served: int = 0
    no_match: int = 0
    per_worker: list[int] = field(default_factory=list)


class _Pipe:
    """A worker's end of its pipe to the parent: whole messages, one writer."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, kind: _Kind, text: str) -> None:
        payload = text.encode("utf-8", "replace")
        data = memoryview(_HEAD.pack(kind, len(payload)) + payload)
        while data:
            data = data[os.write(self.fd, data) :]

    def line(self, text: str) -> None:
        self.send(_Kind.LINE, text)

    def err_line(self, text: str) -> None:
        self.send(_Kind.ERR_LINE, text)


def _counter(value: Synchronized[int]) -> Callable[[], int]:
    def next_number() -> int:
        with value.get_lock():
            value.value += 1
            return int(value.value)

    return next_number


async def run_server(
    server: ReplayServer, on_ready: Callable[[], None], *, lifeline: int | None = None
) -> None:
    """Run ``server`` until SIGINT or SIGTERM, with full collections kept off its loop
    (:class:`~.collector.QuietCollector`); ``on_ready`` once it listens. ``lifeline``:
    the read end of a pipe whose writer is the parent; its end-of-file (the parent
    is gone, even killed) stops the server too."""
    await server.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if lifeline is not None:
        loop.add_reader(lifeline, stop.set)
    collector = QuietCollector(lambda: server.playing > 0)
    collector.start()
    try:
        on_ready()
        await stop.wait()
    finally:
        collector.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await server.close()


def _worker(
    index: int, port: int, counter: Synchronized[int], pipe: _Pipe, lifeline: int,
    body: WorkerBody, close_fds: Sequence[int],
) -> None:
    """A worker's whole life, in the forked child."""
    for fd in close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    seat = Seat(index, port, _counter(counter), pipe.line, pipe.err_line,
                lambda url: pipe.send(_Kind.READY, url), lifeline)
    try:
        stats = body(seat)
    except StreamtapeError as e:
        pipe.send(_Kind.ERROR, str(e))
        sys.exit(2)
    pipe.send(_Kind.STATS, json.dumps(stats))


def _reserve(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` with ``SO_REUSEPORT`` that never listens: it holds the
    port (and picks it when ``port`` is 0) while the workers listen beside it."""
    try:
        family, type_, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        raise OptionError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise OptionError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    return sock


@dataclass(eq=False)
class _Child:
    index: int
    process: BaseProcess
    fd: int
    buffer: bytearray = field(default_factory=bytearray)
    ready: str | None = None
    stats: dict[str, int] | None = None
    error: str | None = None
    eof: bool = False


def serve_workers(
    count: int,
    host: str,
    port: int,
    build: Callable[[WorkerSetup], ReplayServer],
    *,
    on_line: Callable[[str], None],
    on_ready: Callable[[str], None],
) -> WorkersResult:
    """Run ``count`` replay servers on ``host:port`` until SIGINT or SIGTERM.

    ``build`` makes a worker's server from its :class:`WorkerSetup` (in the
    worker, after the fork; it must pass ``port``, ``reuse_port=True``,
    ``numbers``, ``journal`` and ``log`` on to :class:`~.server.ReplayServer`).
    ``on_line`` gets every log line, ``on_ready`` the URL once all workers
    listen. A worker that cannot start raises its :class:`~streamtape.errors.OptionError`
    here; one that dies raises :class:`~streamtape.errors.WorkerError`.
    """
    folder = tempfile.mkdtemp(prefix="streamtape-journal-")

    def body(seat: Seat) -> dict[str, int]:
        setup = WorkerSetup(seat.index, seat.port, seat.numbers, SharedJournal(folder, seat.index), seat.log)
        server = build(setup)
        asyncio.run(run_server(server, lambda: seat.ready(server.url), lifeline=seat.lifeline))
        return {"served": server.stats.served, "no_match": server.stats.no_match}

    try:
        counts = run_workers(count, host, port, body, on_line=on_line, on_warning=on_line,
                             on_ready=on_ready)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = WorkersResult()
    for st in counts:
        result.served += st.get("served", 0)
        result.no_match += st.get("no_match", 0)
        result.per_worker.append(st.get("served", 0))
    return result


def run_workers(
    count: int,
    host: str,
    port: int,
    body: WorkerBody,
    *,
    on_line: Callable[[str], None],
    on_warning: Callable[[str], None],
    on_ready: Callable[[str], None],
) -> list[dict[str, int]]:
    """Fork ``count`` workers that each run ``body`` listening on ``host:port`` (with
    ``SO_REUSEPORT``), until SIGINT or SIGTERM; returns each worker's counts, in order.

    ``on_line`` and ``on_warning`` get the workers' stdout and stderr lines,
    ``on_ready`` the first worker's URL once all are ready. A worker that cannot
    start raises its :class:`~streamtape.errors.OptionError` here; one that dies
    raises :class:`~streamtape.errors.WorkerError`.
    """
    if not sys.platform.startswith("linux"):
        raise OptionError("--workers needs Linux (SO_REUSEPORT spreads connections over workers)")
    holder = _reserve(host, port)
    port = holder.getsockname()[1]
    ctx = multiprocessing.get_context("fork")
    counter: Synchronized[int] = ctx.Value("Q", 0)
    # The workers read the lifeline; only the parent writes it (never does): when the
    # parent is gone, even killed, they see its end and stop instead of serving on.
    life_r, life_w = os.pipe()
    children: list[_Child] = []
    # Nothing is buffered in the standard streams when the children copy them.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        for i in range(count):
            r, w = os.pipe()
            keep_out = [holder.fileno(), r, life_w, *(c.fd for c in children)]
            proc = ctx.Process(target=_worker,
                               args=(i, port, counter, _Pipe(w), life_r, body, keep_out),
                               name=f"streamtape-worker-{i}")
            proc.start()
            os.close(w)
            children.append(_Child(i, proc, r))
        return asyncio.run(_supervise(children, on_line, on_warning, on_ready))
    finally:
        for c in children:
            if c.process.is_alive():
                c.process.kill()
            c.process.join(1)
            with contextlib.suppress(OSError):
                os.close(c.fd)
        holder.close()
        os.close(life_r)
        os.close(life_w)


async def _supervise(
    children: list[_Child], on_line: Callable[[str], None], on_warning: Callable[[str], None],
    on_ready: Callable[[str], None],
) -> list[dict[str, int]]:
    """The parent's loop: relay lines, announce readiness, stop the workers on a signal."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    changed = asyncio.Event()
    announced = False

    def readable(child: _Child) -> None:
        try:
            data = os.read(child.fd, 65536)
        except BlockingIOError:
            return
        if not data:
            child.eof = True
            loop.remove_reader(child.fd)
            changed.set()
            return
        child.buffer += data
        while len(child.buffer) >= _HEAD.size:
            kind, n = _HEAD.unpack_from(child.buffer)
            if len(child.buffer) < _HEAD.size + n:
                break
            text = bytes(child.buffer[_HEAD.size : _HEAD.size + n]).decode("utf-8", "replace")
            del child.buffer[: _HEAD.size + n]
            if kind == _Kind.LINE:
                on_line(text)
            elif kind == _Kind.ERR_LINE:
                on_warning(text)
            elif kind == _Kind.READY:
                child.ready = text
                changed.set()
            elif kind == _Kind.ERROR:
                child.error = text
                changed.set()
            elif kind == _Kind.STATS:
                child.stats = json.loads(text)

    for c in children:
        os.set_blocking(c.fd, False)
        loop.add_reader(c.fd, readable, c)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    stop_wait = asyncio.ensure_future(stopping.wait())
    failure: StreamtapeError | None = None
    try:
        while not stopping.is_set():
            change = asyncio.ensure_future(changed.wait())
            await asyncio.wait({stop_wait, change}, return_when=asyncio.FIRST_COMPLETED)
            change.cancel()
            changed.clear()
            errors = [c.error for c in children if c.error is not None]
            if errors:
                failure = OptionError(errors[0])
                break
            dead = [c for c in children if c.eof]
            if dead:
                c = dead[0]
                if c.stats is not None:
                    break  # it stopped cleanly (a signal of its own, as Ctrl-C sends to all)
                c.process.join(1)
                failure = WorkerError(c.index, c.process.exitcode)
                break
            if not announced and all(c.ready for c in children):
                announced = True
                on_ready(children[0].ready or "")
    finally:
        stop_wait.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        for c in children:
            if c.process.is_alive() and c.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(c.process.pid, signal.SIGTERM)
        # Their last lines and counts, until every pipe is closed.
        deadline = loop.time() + _STOP_TIMEOUT_S
        while not all(c.eof for c in children) and loop.time() < deadline:
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), max(0.0, deadline - loop.time()))
        for c in children:
            if not c.eof:
                loop.remove_reader(c.fd)
    if failure is not None:
        raise failure
    return [c.stats or {} for c in children]
