"""When each request of a rerun is sent: the schedule, as pure values. No clock, no sockets.

A rerun takes the recorded requests in their recorded order (by start time)
and gives every send a due time, an offset from the start of the run:

- ``recorded`` (the default): the requests' recorded start times, relative to
  the first, divided by ``speed`` (2 = the intervals halved). The recorded
  concurrency comes back: requests that overlapped when recorded overlap
  again. It is an open loop: a request is due at its time whatever the
  backend is doing.
- ``fixed`` / ``poisson``: ``rate`` sends per second, evenly spaced or with
  exponential gaps (a Poisson process, seeded, so a run can be repeated),
  taking the requests in order and looping over them.
- ``closed``: no due times; each of ``concurrency`` slots sends the next
  request as soon as its last one ended (the driver reads this as a queue).

A set is sent ``repeat`` times, or as many times as fit in ``duration_s``
(both: whichever ends first). Round ``r`` of the recorded schedule starts one
recorded span (first start to last start) plus one mean interval after round
``r - 1``, so a looped session keeps its pace.

The driver counts a send as *missed* when it cannot go out on time because
``concurrency`` requests are already in flight: it is sent when a slot frees,
and counted and reported with how late it went, never delayed silently.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ..errors import OptionError


class Arrivals(StrEnum):
    """How due times are given (see the module docstring)."""

    RECORDED = "recorded"
    FIXED = "fixed"
    POISSON = "poisson"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Send:
    """One send of the run: request ``item`` (its index among the picked requests), in
    round ``round``, due ``at_ns`` after the run started (0 for every send of a closed loop)."""

    seq: int
    item: int
    round: int
    at_ns: int


@dataclass(frozen=True)
class SchedulePlan:
    arrivals: Arrivals = Arrivals.RECORDED
    speed: float = 1.0
    rate: float | None = None
    """Sends per second (``fixed`` and ``poisson``)."""
    repeat: int | None = None
    """Rounds over the set; None: one, unless ``duration_s`` is given."""
    duration_s: float | None = None
    """Stop starting sends once this long has passed since the start."""
    concurrency: int | None = None
    """At most this many requests in flight (None: no cap; ``closed``: the loop's size)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise OptionError(f"--speed {self.speed:g}: must be a number above 0")
        if self.arrivals in (Arrivals.FIXED, Arrivals.POISSON) and not (self.rate and self.rate > 0):
            raise OptionError("--rate: must be more than 0 per second")
        if self.repeat is not None and self.repeat < 1:
            raise OptionError(f"--repeat {self.repeat}: must be at least 1")
        if self.duration_s is not None and not self.duration_s > 0:
            raise OptionError(f"--duration {self.duration_s:g}: must be more than 0 seconds")
        if self.concurrency is not None and self.concurrency < 1:
            raise OptionError(f"--concurrency {self.concurrency}: must be at least 1")
        if self.arrivals is Arrivals.CLOSED and self.concurrency is None:
            raise OptionError("a closed loop needs --concurrency N")

    @property
    def rounds(self) -> int | None:
        """How many rounds at most (None: as many as ``duration_s`` allows)."""
        if self.repeat is not None:
            return self.repeat
        return None if self.duration_s is not None else 1


_RATE = re.compile(r"^\s*(?P<n>\d+(?:\.\d*)?|\.\d+)\s*(?:/\s*(?P<unit>s|sec|m|min))?\s*$")


def parse_rate(text: str) -> float:
    """``10/s``, ``10``, ``600/min`` -> sends per second; :class:`OptionError` otherwise."""
    m = _RATE.match(text)
    if not m:
        raise OptionError(f"--rate {text!r}: expected N/s (sends per second), e.g. 10/s or 0.5/s")
    n = float(m.group("n"))
    per_min = (m.group("unit") or "s").startswith("m")
    rate = n / 60 if per_min else n
    if not rate > 0:
        raise OptionError(f"--rate {text!r}: must be more than 0 per second")
    return rate


def recorded_offsets(starts: Sequence[float], speed: float = 1.0) -> list[int]:
    """Each request's due offset (ns) from its recorded start time (seconds, wall clock),
    relative to the earliest, divided by ``speed``."""
    if not starts:
        return []
    first = min(starts)
    return [round((s - first) * 1e9 / speed) for s in starts]


def _round_period(offsets: Sequence[int], single_ns: int) -> int:
    """How far apart two rounds of the recorded schedule start: the span plus one mean interval."""
    span = max(offsets) - min(offsets)
    n = len(offsets)
    if n > 1 and span > 0:
        return span + span // (n - 1)
    return max(single_ns, 1_000_000)


def sends(plan: SchedulePlan, starts: Sequence[float], durations_ns: Sequence[int] = ()) -> Iterator[Send]:
    """The sends of a run, in due order (lazily: a ``duration_s`` run may be long).

    ``starts`` are the picked requests' recorded start times in seconds, in the
    order they are picked (the order the items are numbered); ``durations_ns``
    their recorded durations (the period of a one-request recorded loop)."""
    n = len(starts)
    if n == 0:
        return
    limit_ns = round(plan.duration_s * 1e9) if plan.duration_s is not None else None
    rounds = plan.rounds
    seq = itertools.count()
    if plan.arrivals in (Arrivals.RECORDED, Arrivals.CLOSED):
        order = sorted(range(n), key=lambda i: (starts[i], i))
        offsets = recorded_offsets(starts, plan.speed)
        if plan.arrivals is Arrivals.CLOSED:
            offsets = [0] * n
        single = round(max(durations_ns, default=0) / plan.speed)
        period = 0 if plan.arrivals is Arrivals.CLOSED else _round_period(offsets, single)
        for r in itertools.count():
            if rounds is not None and r >= rounds:
                return
            base = r * period
            for i in order:
                at = base + offsets[i]
                if limit_ns is not None and at >= limit_ns and plan.arrivals is not Arrivals.CLOSED:
                    return
                yield Send(next(seq), i, r, at)
            if plan.arrivals is Arrivals.CLOSED and rounds is None:
                continue  # the driver stops a closed loop at duration_s
        return
    assert plan.rate is not None
    rng = random.Random(plan.seed)
    gap_ns = 1e9 / plan.rate
    t = 0.0
    for k in itertools.count():
        r, i = divmod(k, n)
        if rounds is not None and r >= rounds:
            return
        if limit_ns is not None and t >= limit_ns:
            return
        yield Send(next(seq), i, r, round(t))
        t += rng.expovariate(plan.rate) * 1e9 if plan.arrivals is Arrivals.POISSON else gap_ns
