"""Keeping CPython's full garbage collections off a busy replay server's loop.

A replay server's timing error comes from moments when its one thread is
not writing. Profiled at 1,000 concurrent streams, the longest such moments
were the cyclic garbage collector's *full* collections: with 1,000 open
connections (about 60 tracked objects each), the cassettes and the
request journal alive, one full collection stops the loop for 7-17 ms,
and CPython ran one every one or two seconds under that load. One such
pause delays the pieces of every stream that fall inside it: at 33,000
pieces a second a 15 ms pause is 500 late pieces, half of the 1 % a p99
may miss over a 3-second run.

The young generations keep running as CPython decides, with one change:
every young collection takes the middle generation too (its threshold set
to 1). What a thousand new connections leave alive (their coroutines,
futures, transports) survives the youngest generation and piled up in the
middle one until its turn, ten young collections later: at 1,000 streams
those middle-generation collections stopped the loop for 2.9 ms at the
median and up to 4.8 ms, 26 of them over three runs. Taken every time,
each holds one young collection's survivors: median 0.47 ms, longest
2.8 ms, same runs (``bench/replay.py --sections 8``, GC callbacks timing
each collection; 2-core AMD EPYC).

:class:`QuietCollector` does two things:

* ``gc.freeze()`` once the server is up: what is loaded at start (modules,
  cassettes, the matcher's keys) lives as long as the process, so no later
  collection scans it again;
* the middle generation is collected with every young collection (above);
* automatic full collections are turned off (the oldest generation's
  threshold set out of reach) and run by the collector instead: when no
  response is being played, checked every ``poll_s``, or at least every
  ``max_interval_s`` under uninterrupted load, so cyclic garbage is still
  freed and memory stays bounded.

It changes process-wide settings, so it is for processes that are a
replay server (``streamtape serve`` and its workers), never started by the
library on its own.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

__all__ = ["QuietCollector"]

_OUT_OF_REACH = 1 << 30
"""The oldest generation's threshold: gen-1 collections before an automatic full one."""
_MIDDLE_EVERY_TIME = 1
"""The middle generation's threshold: young collections before it is collected too."""


class QuietCollector:
    """Runs full collections when ``busy()`` is false, or every ``max_interval_s`` regardless.

    ``start()`` on the server's loop once it is listening; ``stop()`` puts the
    collector's settings back.
    """

    def __init__(
        self,
        busy: Callable[[], bool],
        *,
        poll_s: float = 1.0,
        max_interval_s: float = 60.0,
    ) -> None:
        self.busy = busy
        self.poll_s = poll_s
        self.max_interval_s = max_interval_s
        self.collections = 0
        """Full collections run so far (idle or forced)."""
        self.longest_ns = 0
        """The longest of them."""
        self._last = time.monotonic()
        self._handle: asyncio.TimerHandle | None = None
        self._thresholds: tuple[int, int, int] | None = None

    def start(self) -> None:
        gc.collect()
        gc.freeze()
        t0, t1, t2 = gc.get_threshold()
        self._thresholds = (t0, t1, t2)
        gc.set_threshold(t0, _MIDDLE_EVERY_TIME, _OUT_OF_REACH)
        self._last = time.monotonic()
        self._handle = asyncio.get_running_loop().call_later(self.poll_s, self._check)

    def _check(self) -> None:
        now = time.monotonic()
        overdue = now - self._last >= self.max_interval_s
        # Idle, and something reached the oldest generation since the last one; or overdue.
        if overdue or (not self.busy() and gc.get_count()[2] > 0):
            t = time.perf_counter_ns()
            gc.collect(2)
            self.longest_ns = max(self.longest_ns, time.perf_counter_ns() - t)
            self.collections += 1
            self._last = now
        self._handle = asyncio.get_running_loop().call_later(self.poll_s, self._check)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()
