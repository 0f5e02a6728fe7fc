"""Precise waits against absolute ``time.perf_counter_ns()`` deadlines.

    await sleep_until(deadline_ns)        # a task waits
    sleep_until_sync(deadline_ns)         # a thread waits
    timer = call_at_ns(deadline_ns, fn)   # a callback runs (drivers stepping a state machine)

asyncio's own timers cannot be trusted below a millisecond: on Linux the
selector rounds its wait up to whole milliseconds, so ``asyncio.sleep`` wakes
anywhere up to 1 ms late. Replay needs each recorded gap to land within a few
hundred microseconds, and a thousand streams must wait at once without
burning a core each.

The approach: **one waker per event loop** (``_Waker``), a heap of
``(deadline, future-or-callback)`` and a single Linux ``timerfd`` armed
(absolute, ``CLOCK_MONOTONIC``, the clock ``perf_counter_ns`` reads on Linux)
at the earliest deadline and registered with the loop's selector. The kernel
wakes the selector with nanosecond resolution; the waker then releases
every wait that is due, in deadline order, and re-arms for the next one. No
thread, one file descriptor per loop, O(log n) per wait, however many
streams are waiting.

The timerfd is aimed a little (up to 1.5 ms) before the deadline and the
waker spins the rest with ``call_soon`` turns, other tasks running in
between: on a virtual machine the wake-up path alone costs 0.1-0.3 ms, now
and then over 1 ms, and a warm spin takes it out. Measured with one paced
stream (20 pieces 20-50 ms apart, ``bench/replay.py --sections 9``, 2-core
AMD EPYC, quiet): with a 0.3 ms lead about one wake-up in 200 came 0.4-1.4 ms
late, and each made two recorded gaps wrong by that much (the p99 over 190
gaps: 0.2-2.2 ms from run to run); with 1.5 ms none did, and the client's
median gap error fell from 0.07 to 0.01 ms (a CPU that stays busy until the
write answers the client's wake-up sooner as well). The spin is on a CPU budget (10 % of the time), so
a thousand streams do not turn it into a busy loop. Where ``timerfd`` is not
available (not Linux, or a loop without ``add_reader``) the coarse wake-up is
the loop's own timer aimed 1.5 ms early, and the spin does the rest.

Because every deadline is absolute, a long stream accumulates no error: a
late wake-up for one piece does not push back the next.

Wake-ups are rate-limited (``_Waker.min_interval_ns``, 0.25 ms): the coarse
wake-up is never aimed sooner than that after the previous one, and such a
batched wake-up is not spun for. Measured on the replay server with a
thousand streams (33,000 deadlines a second, 30 us apart on average): a
process woken from its sleep pays 25-30 us of CPU on this virtual machine
(the selector round, re-arming the timerfd, the switch itself) whatever the
wake-up releases, so one wake-up per deadline (and a spin before each)
took most of a core before a byte was written. Releasing the deadlines
that fall within 0.25 ms of each other together took the server from
34 to 22 us of CPU per piece at 1,000 streams, at a cost of at most
0.25 ms of lateness, paid only when the loop would otherwise wake more
than 4,000 times a second; a wait is still never released early. A
single stream's deadlines are milliseconds apart and never meet the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import heapq
import itertools
import os
import sys
import time
import weakref
from collections.abc import Callable
from enum import StrEnum

__all__ = ["Backend", "Timer", "backend", "call_at_ns", "now_ns", "sleep_until", "sleep_until_sync"]

now_ns = time.perf_counter_ns

# Below this much remaining time the sync sleeper spins instead of sleeping.
_SYNC_SPIN_NS = 200_000
# Fallback waker: the loop timer is aimed this early, the rest is spun.
_COARSE_MARGIN_NS = 1_500_000


def sleep_until_sync(deadline_ns: int) -> None:
    """Block the calling thread until ``perf_counter_ns() >= deadline_ns``.

    ``time.sleep`` (``clock_nanosleep`` on Linux) carries the thread to within
    ~0.1 ms; the last stretch is a spin that yields the GIL on every turn.
    """
    remaining = deadline_ns - now_ns()
    if remaining <= 0:
        return
    if remaining > _SYNC_SPIN_NS:
        time.sleep((remaining - _SYNC_SPIN_NS) / 1e9)
    while now_ns() < deadline_ns:
        time.sleep(0)


async def sleep_until(deadline_ns: int) -> None:
    """Suspend the current task until ``perf_counter_ns() >= deadline_ns``.

    Returns at once (without yielding) when the deadline has passed. Cancelling
    the task cancels the wait.
    """
    if deadline_ns <= now_ns():
        return
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    _waker(loop).add(deadline_ns, fut)
    await fut


class Timer:
    """A pending :func:`call_at_ns` callback; :meth:`cancel` stops it, :meth:`again`
    sets it once more after it ran."""

    __slots__ = ("_callback", "_cancelled", "_queued", "_waker")

    def __init__(self, callback: Callable[[], object], waker: _Waker) -> None:
        self._callback = callback
        self._cancelled = False
        self._queued = False  # an entry of it is in the waker's heap
        self._waker = waker

    def cancel(self) -> None:
        self._cancelled = True

    def cancelled(self) -> bool:
        return self._cancelled

    done = cancelled  # the waker drops done entries

    def again(self, deadline_ns: int) -> None:
        """Call the callback once more at ``deadline_ns``, after it ran (or was cancelled).

        A driver that waits again and again (the replay server's player, a
        piece every few milliseconds on each of a thousand streams) keeps one
        timer instead of making a timer, a bound method and a loop lookup per
        wait. Only for a timer that ran (from its own callback, say): one that
        waits, or was cancelled and its deadline has not come, raises.
        """
        if self._queued:
            raise RuntimeError("this timer is still waiting (a cancelled one until its deadline)")
        self._cancelled = False
        self._queued = True
        self._waker.add(deadline_ns, self)

    def _run(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        try:
            self._callback()
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._waker._loop.call_exception_handler(
                {"message": "exception in a streamtape.clock callback", "exception": exc}
            )


def call_at_ns(deadline_ns: int, callback: Callable[[], object]) -> Timer:
    """Call ``callback()`` on the running loop once ``perf_counter_ns() >= deadline_ns``.

    The callback twin of :func:`sleep_until`, for drivers that step a state
    machine instead of resuming a task (no future, no task switch per wait).
    Callbacks due together run in deadline order, in the waker's turn.
    """
    waker = _waker(asyncio.get_running_loop())
    timer = Timer(callback, waker)
    timer._queued = True
    waker.add(deadline_ns, timer)
    return timer


# --------------------------------------------------------------------------- timerfd

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _load_timerfd() -> tuple[Callable[..., int], Callable[..., int]] | None:
    if not sys.platform.startswith("linux"):
        return None
    if time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        create = libc.timerfd_create
        settime = libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = [ctypes.c_int, ctypes.c_int]
    create.restype = ctypes.c_int
    settime.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(_Itimerspec),
        ctypes.POINTER(_Itimerspec),
    ]
    settime.restype = ctypes.c_int
    return create, settime


_TIMERFD = _load_timerfd()


class _TimerFd:
    """A non-blocking CLOCK_MONOTONIC timerfd armed at absolute deadlines."""

    def __init__(self) -> None:
        assert _TIMERFD is not None
        create, self._settime = _TIMERFD
        fd = create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self.fd = fd
        self._spec = _Itimerspec()

    def arm(self, deadline_ns: int) -> None:
        sec, nsec = divmod(max(deadline_ns, 1), 1_000_000_000)
        self._spec.it_value.tv_sec = sec
        self._spec.it_value.tv_nsec = nsec
        if self._settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            os.read(self.fd, 8)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


# --------------------------------------------------------------------------- wakers


class _Waker:
    """All precise waits of one event loop, woken in deadline order.

    A coarse wake-up (``_arm_coarse``) is aimed ``lead_ns`` before the earliest
    deadline; from there the waker spins with ``call_soon`` (other tasks run
    between turns) until the deadline passes. The spin keeps a just-woken CPU
    warm: on a virtual machine the wake-up path itself costs 0.1-0.3 ms, and
    now and then more than 1 ms (see the module docstring for the lead).

    Spinning is on a budget: over every 100 ms window at most ``spin_budget``
    of the time may be spent spinning; past it the lead halves (down to 0:
    pure timerfd wake-ups), under half of it the lead grows back towards
    ``max_lead_ns``. With many streams the loop is busy and hot anyway, and a
    process that spins on a shared machine gets descheduled by the kernel as
    a CPU hog, which costs far more than the spin saves.
    """

    max_lead_ns = 1_500_000
    min_lead_ns = 0
    spin_budget = 0.10
    window_ns = 100_000_000
    min_interval_ns = 250_000
    """The soonest a coarse wake-up is aimed after the previous tick (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: the waker lives in a WeakKeyDictionary keyed by its loop.
        self._loop_ref = weakref.ref(loop)
        self._heap: list[tuple[int, int, asyncio.Future[None] | Timer]] = []
        self._seq = itertools.count()
        self._coarse_at: int | None = None  # deadline the coarse wake-up is set for
        self._spinning = False
        self.lead_ns = self.max_lead_ns
        self._spin_since: int | None = None
        self._spun = 0
        self._window_start = now_ns()
        self._last_tick = 0

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop_ref()
        assert loop is not None, "the event loop is gone"
        return loop

    def add(self, deadline_ns: int, waiter: asyncio.Future[None] | Timer) -> None:
        heapq.heappush(self._heap, (deadline_ns, next(self._seq), waiter))
        if self._heap[0][2] is waiter:
            self._schedule(deadline_ns)

    def _schedule(self, deadline_ns: int) -> None:
        if self._spinning:
            return
        now = now_ns()
        batch_at = self._last_tick + self.min_interval_ns
        if deadline_ns < batch_at:
            # Dense: no wake-up sooner than min_interval_ns after the last tick; the
            # waits due by then are released together (late by at most the interval),
            # and nothing is spun (the batch is late by design, a spin buys nothing).
            if self._coarse_at is None or batch_at < self._coarse_at:
                self._coarse_at = batch_at
                self._arm_coarse(batch_at)
            return
        if deadline_ns - now <= self.lead_ns:
            self._spinning = True
            if self._spin_since is None:
                self._spin_since = now
            self._loop.call_soon(self._tick)
        elif self._coarse_at is None or deadline_ns - self.lead_ns < self._coarse_at:
            self._coarse_at = deadline_ns - self.lead_ns
            self._arm_coarse(self._coarse_at)

    def _tick(self) -> None:
        """Resolve every future whose deadline has passed; schedule the next wake-up."""
        self._spinning = False
        self._coarse_at = None
        heap = self._heap
        now = now_ns()
        if heap and heap[0][0] <= now:
            self._last_tick = now
        while heap and heap[0][0] <= now:
            _, _, item = heapq.heappop(heap)
            if isinstance(item, Timer):
                item._queued = False
                item._run()
            elif not item.done():
                item.set_result(None)
        # Drop cancelled waits sitting at the top so they do not cause wake-ups.
        while heap and heap[0][2].done():
            _, _, item = heapq.heappop(heap)
            if isinstance(item, Timer):
                item._queued = False
        if heap:
            self._schedule(heap[0][0])
        else:
            self._disarm()
        if not self._spinning and self._spin_since is not None:
            self._spun += now - self._spin_since
            self._spin_since = None
        if now - self._window_start >= self.window_ns:
            self._adapt(now)

    def _adapt(self, now: int) -> None:
        spun = self._spun
        if self._spin_since is not None:
            spun += now - self._spin_since
            self._spin_since = now
        share = spun / (now - self._window_start)
        if share > self.spin_budget:
            lead = self.lead_ns // 2
            self.lead_ns = max(self.min_lead_ns, lead if lead > 5_000 else 0)
        elif share < self.spin_budget / 2:
            self.lead_ns = min(self.max_lead_ns, self.lead_ns * 5 // 4 + 5_000)
        self._spun = 0
        self._window_start = now

    def _arm_coarse(self, at_ns: int) -> None:
        raise NotImplementedError

    def _disarm(self) -> None:
        pass

    def close(self) -> None:
        self._disarm()


class _TimerFdWaker(_Waker):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._tfd = _TimerFd()
        try:  # loops without readers (Windows Proactor) raise NotImplementedError
            loop.add_reader(self._tfd.fd, self._on_ready)
            loop.remove_reader(self._tfd.fd)
        except BaseException:
            self._tfd.close()
            raise
        self._reading = False
        self._rearmed = False
        weakref.finalize(loop, self._tfd.close)

    def _arm_coarse(self, at_ns: int) -> None:
        self._tfd.arm(at_ns)  # also resets the expiration count: the fd is not ready
        self._rearmed = True
        if not self._reading:
            self._loop.add_reader(self._tfd.fd, self._on_ready)
            self._reading = True

    def _on_ready(self) -> None:
        if self._spinning:
            self._tfd.clear()
            self._coarse_at = None
            return
        self._rearmed = False
        self._tick()
        if not self._rearmed:
            # Not armed again (spinning now, or nothing waits): consume the
            # expiration so the fd stops being ready. Re-arming already did.
            self._tfd.clear()

    def _disarm(self) -> None:
        # The reader stays registered: an unarmed timerfd never becomes ready,
        # and epoll_ctl on every idle/busy transition costs more than a wait.
        pass

    def close(self) -> None:
        if self._reading:
            self._reading = False
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                self._loop.remove_reader(self._tfd.fd)
        self._tfd.close()


class _LoopTimerWaker(_Waker):
    """Portable fallback: the loop's own (millisecond) timer, aimed well early."""

    max_lead_ns = min_lead_ns = _COARSE_MARGIN_NS

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._handle: asyncio.TimerHandle | None = None

    def _arm_coarse(self, at_ns: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        when = self._loop.time() + (at_ns - now_ns()) / 1e9
        self._handle = self._loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._handle = None
        if not self._spinning:
            self._tick()

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


_wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker] = (
    weakref.WeakKeyDictionary()
)


def _waker(loop: asyncio.AbstractEventLoop) -> _Waker:
    waker = _wakers.get(loop)
    if waker is None:
        if _TIMERFD is not None:
            try:
                waker = _TimerFdWaker(loop)
            except (OSError, NotImplementedError):
                waker = None
        if waker is None:
            waker = _LoopTimerWaker(loop)
        _wakers[loop] = waker
    return waker


class Backend(StrEnum):
    """The coarse wake-up mechanism under :func:`sleep_until` (both finish with a short spin)."""

    TIMERFD = "timerfd"
    """A Linux ``timerfd`` in the loop's selector: nanosecond wake-ups."""
    TIMER = "timer"
    """The loop's own millisecond timer, aimed 1.5 ms early (not Linux, or no ``add_reader``)."""


def backend(loop: asyncio.AbstractEventLoop | None = None) -> Backend:
    """Which wake-up mechanism ``sleep_until`` uses on ``loop`` (default: the running loop)."""
    loop = loop or asyncio.get_running_loop()
    return Backend.TIMERFD if isinstance(_waker(loop), _TimerFdWaker) else Backend.TIMER
