"""The rerun driver: the schedule's sends, on time, through the lean client, into a session cassette.

A thin asyncio driver over pure parts: :mod:`.schedule` says when, :mod:`.mapping`
says what, :class:`~streamtape.capture.recorder.Recorder` turns the answer into
records, and a :class:`~streamtape.cassette.BackgroundWriter` (its own
thread) puts them on disk, so no file write ever sits between two reads.

Every send writes a pair to the output, as ``record --shadow`` does:

- the recording it re-ran, copied whole, as the ``primary`` (its ``backend``
  label kept, or the recorded host), written when the send goes out;
- the new backend's answer as the ``shadow``, recorded as it streams.

Both carry one ``pair`` id and the run's ``rerun`` id, so ``streamtape diff
OUT.tape`` compares them pair by pair and adds the load figures. A send
that cannot be made (a ``--path`` body mapping the request cannot take) is
recorded as not sent (``not_sent``), as a shadow's is.

Stopping (:meth:`Rerun.stop`, Ctrl-C in the CLI): no more sends; the streams
in flight get ``drain_s`` to end, then end as ``interrupted``; every record
is handed to the writer before :meth:`Rerun.run` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from ..arrival import keep_stamps_on
from ..capture.recorder import Recorder, Sink
from ..capture.redaction import Redaction
from ..cassette.model import Interaction, Outcome
from ..cassette.records import Record, interaction_records
from ..shadow.chat_mapping import Unmappable
from ..shadow.labels import (
    LABEL_BACKEND,
    LABEL_LATE,
    LABEL_NOT_SENT,
    LABEL_PAIR,
    LABEL_RERUN,
    LABEL_ROLE,
    LABEL_SLO,
    SESSION_LABELS,
    NotSent,
    Role,
)
from ..shadow.targets import ShadowTarget
from ..stats import compute, percentile
from .client import Exchange, exchange_async
from .mapping import rerun_request
from .schedule import Arrivals, SchedulePlan, Send, sends

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_DRAIN_S = 10.0
MAX_TTFT_SAMPLES = 100_000
"""First-token times kept for the run's own percentiles (the cassette holds them all)."""


@dataclass(frozen=True)
class Item:
    """One recorded request to re-run: its recording and its label (``FILE#N``)."""

    label: str
    recording: Interaction


@dataclass
class Counts:
    """What happened so far (read by the progress line and the summary)."""

    scheduled: int = 0
    sent: int = 0
    done: int = 0
    """Ended complete."""
    failed: int = 0
    """Ended other than complete (refused, closed early, timed out, interrupted)."""
    not_sent: int = 0
    missed: int = 0
    """Sends that went out late because ``concurrency`` requests were in flight."""
    late_max_ns: int = 0
    in_flight: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    ttft_ns: list[int] = field(default_factory=list)
    """First-token times of the complete answers analyzed so far (:meth:`Rerun.analyze`)."""
    pieces: int = 0
    cost_ns: int = 0
    """Time the client spent parsing and recording pieces (its own cost)."""
    first_send_ns: int | None = None
    last_end_ns: int | None = None
    stopped: bool = False

    def ttft_p(self, q: float) -> int | None:
        return percentile(self.ttft_ns, q)

    @property
    def cost_per_piece_ns(self) -> float | None:
        return self.cost_ns / self.pieces if self.pieces else None

    @property
    def elapsed_s(self) -> float | None:
        if self.first_send_ns is None or self.last_end_ns is None:
            return None
        return (self.last_end_ns - self.first_send_ns) / 1e9

    @property
    def rps(self) -> float | None:
        """Requests answered per second, from the first send to the last end."""
        s = self.elapsed_s
        return (self.done + self.failed) / s if s else None


def recorded_backend(ix: Interaction) -> str:
    """The name a re-run recording goes by as the primary: its ``backend`` label, or its host."""
    return ix.labels.get(LABEL_BACKEND) or urlsplit(ix.request.url).netloc.rpartition("@")[2] or "recorded"


def primary_copy(ix: Interaction, pair: str, run_id: str) -> Interaction:
    """The recording as a rerun session's primary: its own labels, less the session ones."""
    labels = {k: v for k, v in ix.labels.items() if k not in SESSION_LABELS}
    labels.update({LABEL_BACKEND: recorded_backend(ix), LABEL_PAIR: pair, LABEL_ROLE: Role.PRIMARY,
                   LABEL_RERUN: run_id})
    return replace(ix, labels=labels)


class Rerun:
    """Sends ``items`` to ``target`` on ``schedule`` and records the answers to ``submit``.

    ``submit`` takes records (thread-safe, e.g. :meth:`BackgroundWriter.submit`);
    ``new_id`` gives record ids. ``on_finished(item, recording)`` is called on the
    loop for every new recording.
    """

    def __init__(
        self,
        items: Sequence[Item],
        target: ShadowTarget,
        schedule: SchedulePlan,
        *,
        submit: Sink,
        new_id: Callable[[], int],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        drain_s: float = DEFAULT_DRAIN_S,
        ssl_context: ssl.SSLContext | None = None,
        slo: str | None = None,
        labels: dict[str, str] | None = None,
        run_id: str | None = None,
        on_finished: Callable[[Item, Interaction], None] | None = None,
    ) -> None:
        keep_stamps_on()  # before the first response (streamtape.arrival)
        self.items = list(items)
        self.target = target
        self.schedule = schedule
        self.submit = submit
        self.new_id = new_id
        self.timeout_s = timeout_s
        self.drain_s = drain_s
        self.ssl_context = ssl_context
        self.run_id = run_id or secrets.token_hex(3)
        self.on_finished = on_finished
        self.counts = Counts()
        extra = dict(labels or {})
        if slo:
            extra[LABEL_SLO] = slo
        # The request is stored as sent, its --header values as REDACTED
        # (shadow.rewrite.stored_request), and redacted as `record` redacts.
        self.recorder = Recorder(self._sink, new_id, redaction=Redaction(),
                                 labels={**extra, LABEL_BACKEND: target.name, LABEL_ROLE: Role.SHADOW,
                                         LABEL_RERUN: self.run_id})
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._exchanges: dict[int, Exchange] = {}
        self._slots: asyncio.Semaphore | None = None
        self._unanalyzed: deque[Interaction] = deque(maxlen=MAX_TTFT_SAMPLES)

    def _sink(self, records: list[Record]) -> None:
        self.submit(records)

    def stop(self) -> None:
        """Stop sending (thread-unsafe: call on the loop; the CLI's signal handler does)."""
        self.counts.stopped = True
        self._stop.set()

    async def run(self, start_ns: int | None = None) -> Counts:
        """Send every scheduled request and wait for the answers (see the module docstring)."""
        clock = time.perf_counter_ns
        with contextlib.suppress(Unmappable):
            self._warm_up()
        start = start_ns if start_ns is not None else clock()
        cap = self.schedule.concurrency
        self._slots = asyncio.Semaphore(cap) if cap is not None else None
        ticker = asyncio.get_running_loop().create_task(self._tick())
        plan = sends(self.schedule, [it.recording.request.started_at for it in self.items],
                     [it.recording.duration_ns or 0 for it in self.items])
        closed = self.schedule.arrivals is Arrivals.CLOSED
        blocked_until = 0
        limit = int(self.schedule.duration_s * 1e9) if self.schedule.duration_s is not None else None
        try:
            for send in plan:
                if self._stop.is_set():
                    break
                due = start + send.at_ns
                if not closed and await self._wait(due):
                    break
                if closed and limit is not None and clock() - start >= limit:
                    break
                late = 0
                if self._slots is not None:
                    waited = self._slots.locked()
                    if await self._acquire():
                        break
                    now = clock()
                    # Late because of the cap: it waited for a slot, or it fell due while
                    # a send before it waited for one.
                    if not closed and (waited or due < blocked_until):
                        self.counts.missed += 1
                        late = max(0, now - due)
                    if waited:
                        blocked_until = now
                self._launch(send, late)
            await self._drain()
        finally:
            ticker.cancel()
        return self.counts

    async def _wait(self, due: int) -> bool:
        """Sleep until ``due`` (a clock reading); True when stopped meanwhile."""
        left = (due - time.perf_counter_ns()) / 1e9
        if left <= 0:
            return self._stop.is_set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), left)
        return self._stop.is_set()

    async def _acquire(self) -> bool:
        """A free slot; True when stopped while waiting for one."""
        assert self._slots is not None
        got = asyncio.ensure_future(self._slots.acquire())
        stop = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait((got, stop), return_when=asyncio.FIRST_COMPLETED)
        if got.done():
            stop.cancel()
            return False
        got.cancel()
        return True

    def _launch(self, send: Send, late_ns: int) -> None:
        item = self.items[send.item]
        pair = f"{self.run_id}-{send.seq}"
        primary = primary_copy(item.recording, pair, self.run_id)
        self.submit(interaction_records(primary, self.new_id()))
        labels = {LABEL_PAIR: pair}
        if late_ns:
            labels[LABEL_LATE] = f"{late_ns / 1e6:.1f}"
            self.counts.late_max_ns = max(self.counts.late_max_ns, late_ns)
        self.counts.scheduled += 1
        try:
            out = rerun_request(self.target, item.recording.request)
        except Unmappable as e:
            self._not_sent(send, item, labels, e.reason)
            return
        ex = Exchange(self.recorder, send.seq, self.target.name, out, labels)
        self._exchanges[send.seq] = ex
        self.counts.sent += 1
        self.counts.in_flight += 1
        now = time.perf_counter_ns()
        if self.counts.first_send_ns is None:
            self.counts.first_send_ns = now
        task = asyncio.get_running_loop().create_task(self._exchange(send, item, ex))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _not_sent(self, send: Send, item: Item, labels: dict[str, str], reason: str) -> None:
        self.counts.not_sent += 1
        if self._slots is not None:
            self._slots.release()
        parts = urlsplit(item.recording.request.url)
        url = f"{self.target.origin}{self.target.prefix}{parts.path}" + (f"?{parts.query}" if parts.query else "")
        now = time.perf_counter_ns()
        self.recorder.begin(send.seq, replace(item.recording.request, url=url), now,
                            labels={**labels, LABEL_NOT_SENT: NotSent.UNMAPPABLE})
        self.recorder.finish(send.seq, Outcome.UPSTREAM_ERROR, f"not sent: {reason}", now)

    async def _exchange(self, send: Send, item: Item, ex: Exchange) -> None:
        try:
            await exchange_async(ex, timeout_s=self.timeout_s, ssl_context=self.ssl_context)
        finally:
            self._ended(send, item, ex)

    def _ended(self, send: Send, item: Item, ex: Exchange) -> None:
        c = self.counts
        if self._exchanges.pop(send.seq, None) is None:
            return
        c.in_flight -= 1
        if self._slots is not None:
            self._slots.release()
        now = time.perf_counter_ns()
        c.last_end_ns = now
        c.pieces += ex.pieces
        c.cost_ns += ex.cost_ns
        ix = ex.finish(now)
        c.by_outcome[ex.outcome] = c.by_outcome.get(ex.outcome, 0) + 1
        if ex.outcome is Outcome.COMPLETE:
            c.done += 1
        else:
            c.failed += 1
        if ix is not None:
            if ix.outcome is Outcome.COMPLETE:
                self._unanalyzed.append(ix)
            if self.on_finished is not None:
                self.on_finished(item, ix)

    def analyze(self, budget: int | None = None) -> None:
        """Find the first token of up to ``budget`` finished answers (None: all).

        Parsing a stream takes a millisecond or more, and on the loop it would
        delay the reads of the streams in flight: so it is not done when a
        stream ends, only when asked (a live progress line asks for one answer
        per refresh; the summary for the rest, once the run is over)."""
        n = len(self._unanalyzed) if budget is None else min(budget, len(self._unanalyzed))
        for _ in range(n):
            ix = self._unanalyzed.popleft()
            ttft = compute(ix).ttft_ns
            if ttft is not None and len(self.counts.ttft_ns) < MAX_TTFT_SAMPLES:
                self.counts.ttft_ns.append(ttft)

    def _warm_up(self) -> None:
        """Run the parser and the recorder once on a canned answer, off the record, so the
        first real request does not pay for first calls (imports, caches)."""
        rec = Recorder(lambda records: None, lambda: 0, redaction=Redaction())
        out = rerun_request(self.target, self.items[0].recording.request)
        ex = Exchange(rec, "warm-up", self.target.name, out, {})
        ex.begin(0)
        ex.request_bytes()
        ex.receive(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                   b"6\r\ndata: \r\n0\r\n\r\n", 1)
        ex.finish(2)
        compute(self.items[0].recording)

    async def _drain(self) -> None:
        """Wait for the streams in flight (``drain_s`` at most once stopped), then end the rest."""
        if self._tasks and not self._stop.is_set():
            stopper = asyncio.ensure_future(self._stop.wait())
            waiting = asyncio.ensure_future(asyncio.wait(set(self._tasks)))
            await asyncio.wait({stopper, waiting}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            waiting.cancel()
        while self._tasks:  # stopped while some were in flight, or more began meanwhile
            pending = set(self._tasks)
            timeout = self.drain_s if self._stop.is_set() else None
            _, left = await asyncio.wait(pending, timeout=timeout)
            if left and self._stop.is_set():
                for t in left:
                    t.cancel()
                await asyncio.gather(*left, return_exceptions=True)
                return

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            self.recorder.tick(time.perf_counter_ns())


def pick(recordings: Iterable[tuple[str, Interaction]], *, indices: Sequence[int] = (),
         keep: Callable[[Interaction], bool] | None = None) -> list[Item]:
    """The recordings to re-run: HTTP ones (not WebSocket sessions), a session's primaries
    only (its shadows answered the same calls), those ``indices`` name (all when empty),
    and those ``keep`` accepts."""
    out: list[Item] = []
    wanted = set(indices)
    for n, (label, ix) in enumerate(recordings):
        if wanted and n not in wanted:
            continue
        if ix.websocket is not None or ix.labels.get(LABEL_ROLE) == Role.SHADOW:
            continue
        if keep is not None and not keep(ix):
            continue
        out.append(Item(label, ix))
    return out
