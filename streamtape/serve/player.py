"""Writing a schedule's pieces to a socket on time: the replay server's inner loop.

A thousand concurrent streams each write a piece every few milliseconds, so
the loop that writes them is the server's hot path. It is written for that:

* :class:`Prepared` frames a schedule for the wire once (each ``send`` step
  becomes its HTTP chunk on chunked framing, via :func:`streamtape.wire.frame`),
  as parallel tuples, and the server shares it between every request that
  plays the same schedule with the same framing.
* :class:`Player` writes the pieces from :func:`streamtape.clock.call_at_ns`
  callbacks: no future and no task switch per piece. It stops, and tells the
  server why (:class:`Stop`), only when the server has something to do:
  a terminal step is due, the socket buffer is full, many pieces went out back
  to back (other streams get a turn), or the client went away.
* A schedule whose pieces are spaced (:attr:`~streamtape.profiles.Schedule.apart_ns`,
  a re-chunking profile's) keeps the spacing in real time: after a late
  wake-up the player writes one piece and waits the spacing again, where the
  absolute deadlines alone would write every piece due by then back to back,
  and the client would read them as one. Measured with ``bench/boundaries.py``
  on a two-core machine loaded by other work (load 4.3): of pieces 1 ms apart,
  99.5 % reached a warm Node ``fetch`` client as separate reads with the
  spacing kept (``latency=apart:1000``), 58 % from the same times as
  deadlines alone (``latency=fixed:0:1``); a raw Python socket 99.5 % and
  92.5 %. On a quiet machine the two are alike (100 % and 99.5 %).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ..clock import Timer, call_at_ns, now_ns
from ..profiles import Step, StepKind, Steps
from ..wire import Framing, frame, framer

__all__ = ["Player", "Prepared", "Stop", "reset"]

_BURST = 64  # pieces written back to back before other streams get a turn
_HIGH_WATER = 65536  # bytes buffered in the transport before the player waits for a drain
_WATCH_AFTER_NS = 1_000_000_000
_WATCH_EVERY_NS = 200_000_000
_NEVER = -(1 << 62)  # the time of the last write before the first one


class Stop(StrEnum):
    """Why :meth:`Player.start`'s future resolved."""

    STEP = "step"
    """The next step is a due end / cut / reset."""
    STEPS = "steps"
    """No steps left."""
    DRAIN = "drain"
    """The socket buffer is full: await ``drain()``, then start again."""
    YIELD = "yield"
    """Many pieces went out back to back: let other streams run, then start again."""
    CLOSED = "closed"
    """The client went away."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A schedule's steps as parallel tuples, with each piece framed for the wire.

    ``wire`` holds each step's bytes as they go on the wire (empty for
    terminal steps, and for every step on framing ``none``: HEAD, 204, 304
    get the head only, at the recorded times); ``body_sizes`` the body bytes
    each step carries, for the log line.
    """

    offsets: tuple[int, ...]
    kinds: tuple[StepKind, ...]
    wire: tuple[bytes, ...]
    body_sizes: tuple[int, ...]

    @classmethod
    def of(cls, steps: Sequence[Step], framing: Framing) -> Prepared:
        if isinstance(steps, Steps) and framing != Framing.NONE:  # columns already
            last = steps.last
            return cls(
                (*steps.at, last.at_ns),
                (*itertools.repeat(StepKind.SEND, len(steps.at)), last.kind),
                (*map(framer(framing), steps.data), b""),
                (*map(len, steps.data), 0),
            )

        def sends(s: Step) -> bool:
            return s.kind == StepKind.SEND and framing != Framing.NONE

        return cls(
            tuple(s.at_ns for s in steps),
            tuple(s.kind for s in steps),
            tuple(frame(framing, s.data) if sends(s) else b"" for s in steps),
            tuple(len(s.data) if sends(s) else 0 for s in steps),
        )

    def kind_at(self, i: int) -> StepKind:
        """The kind of step ``i``; ``end`` past the last step."""
        return self.kinds[i] if i < len(self.kinds) else StepKind.END


class Player:
    """Writes the ``send`` steps of a :class:`Prepared` schedule from clock callbacks.

    Each piece is written by :func:`streamtape.clock.call_at_ns` at its
    deadline (``t0`` plus the step's offset). :meth:`start` returns a future
    that says why the player stopped (:class:`Stop`); the server acts on it
    and calls :meth:`start` again to go on from the same step.
    """

    __slots__ = ("apart_ns", "fut", "i", "last_write", "pieces", "prepared", "reader", "t0",
                 "timer", "transport")

    def __init__(self, prepared: Prepared, t0: int, transport: asyncio.WriteTransport,
                 reader: asyncio.StreamReader | None = None, apart_ns: int = 0) -> None:
        self.prepared = prepared
        self.apart_ns = apart_ns
        """The least real time between two pieces written (the schedule's ``apart_ns``)."""
        self.last_write = _NEVER
        self.reader = reader
        self.t0 = t0
        self.transport = transport
        self.i = 0
        self.pieces = 0
        self.timer: Timer | None = None
        self.fut: asyncio.Future[Stop] | None = None

    def start(self) -> asyncio.Future[Stop]:
        self.fut = asyncio.get_running_loop().create_future()
        self.run()
        return self.fut

    def run(self) -> None:
        p = self.prepared
        offsets, kinds, wire, t0 = p.offsets, p.kinds, p.wire, self.t0
        transport = self.transport
        write, closing = transport.write, transport.is_closing
        n = len(offsets)
        i = self.i
        now = now_ns()
        burst = 0
        gap, last = self.apart_ns, self.last_write
        try:
            while i < n:
                due = t0 + offsets[i]
                if gap and last + gap > due and kinds[i] == StepKind.SEND:
                    due = last + gap  # late: the spacing, not a burst of what is due
                if due > now:
                    now = now_ns()
                    if due > now:
                        if due - now > _WATCH_AFTER_NS:
                            # A long silence (a stall): look in on the client now and then,
                            # so one that gave up (read timeout) is noticed at once.
                            if closing() or (self.reader and self.reader.at_eof()):
                                return self._stop(Stop.CLOSED)
                            due = now + _WATCH_EVERY_NS
                        if self.timer is None:
                            self.timer = call_at_ns(due, self.run)
                        else:  # one timer for the whole stream
                            self.timer.again(due)
                        return
                if closing():
                    return self._stop(Stop.CLOSED)
                if kinds[i] != StepKind.SEND:
                    return self._stop(Stop.STEP)
                data = wire[i]
                i += 1
                if data:
                    write(data)
                    self.pieces += 1
                    if gap:
                        now = last = now_ns()
                burst += 1
                if not burst & 15:
                    if transport.get_write_buffer_size() > _HIGH_WATER:
                        return self._stop(Stop.DRAIN)
                    if burst >= _BURST:
                        return self._stop(Stop.YIELD)
            if transport.get_write_buffer_size() > _HIGH_WATER:
                return self._stop(Stop.DRAIN)
            self._stop(Stop.STEPS)
        finally:
            self.i = i
            self.last_write = last

    @property
    def byte_count(self) -> int:
        """Body bytes written so far."""
        return sum(self.prepared.body_sizes[: self.i])

    @property
    def next_kind(self) -> StepKind:
        """The kind of the step the player stopped at (``end`` past the last step)."""
        return self.prepared.kind_at(self.i)

    def _stop(self, why: Stop) -> None:
        if self.fut is not None and not self.fut.done():
            self.fut.set_result(why)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def reset(transport: asyncio.WriteTransport) -> None:
    """Abort the connection with a TCP RST (``SO_LINGER`` 0, then abort)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
