"""The shadow sender: mirrors each recorded request to every shadow, off the proxy's hot path.

The recording addon calls four methods from the proxy's event loop, each of
which only queues work (:meth:`ShadowSender.request`, :meth:`keep`,
:meth:`finished`; :meth:`stop` at shutdown). Everything else runs on the
sender's own event loop in its own thread: rewriting the request, sending it
with httpx (one ``AsyncClient`` per shadow), timestamping each body piece
with ``perf_counter_ns`` as it is read, and feeding a
:class:`~streamtape.capture.recorder.Recorder` whose records go to the same
:class:`~streamtape.cassette.BackgroundWriter` as the primary's.

Why a thread of its own and not tasks on the proxy's loop: a shadow's work
then never sits in the proxy loop's queue between two of the client's body
pieces. ``bench/shadow_overhead.py`` measures both (a hidden ``--shadow-loop
proxy`` switch runs the sender on the proxy's loop): see its docstring.

Rules the client never feels:

- a shadow request starts when the proxy has the whole request (the moment
  the primary's is sent) and its t = 0 is the moment httpx starts sending it;
- at most ``max_in_flight`` requests per shadow are in flight; past that a
  request is not sent, and is recorded as skipped (no response, the
  ``not_sent`` label) and counted, so a slow or hanging shadow cannot pile up;
- a shadow that refuses, fails, is slow or hangs is recorded with its
  outcome (a hang ends at ``timeout_s`` as ``upstream_error``, or as
  ``interrupted`` when the recorder stops first);
- a shadow's records wait until the primary's fate is known: kept once the
  primary is recorded, dropped (and the shadow request cancelled) when the
  primary is not (a response the record filter leaves out).

Each recording carries the labels of :mod:`.labels` (``backend``, ``pair``,
``role``, and ``not_sent`` on a shadow recorded without being sent, whose
error says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, ParamSpec
from urllib.parse import urlsplit

import httpx

from ..capture.recorder import Recorder, Sink
from ..capture.redaction import Redaction
from ..cassette.model import Interaction, Outcome, Request
from ..cassette.records import Record
from ..fmt import failure_words
from .chat_mapping import Unmappable
from .labels import LABEL_BACKEND, LABEL_NOT_SENT, LABEL_PAIR, LABEL_ROLE, NotSent, Role
from .rewrite import ShadowRequest, shadow_request, stored_request
from .targets import ShadowPlan, ShadowTarget

P = ParamSpec("P")


@dataclass
class TargetCounts:
    """What happened to one shadow's requests during a run."""

    name: str
    sent: int = 0
    recorded: int = 0
    skipped: int = 0
    """Not sent: ``max_in_flight`` requests were already in flight."""
    unmappable: int = 0
    """Not sent: the request could not be rewritten for this shadow."""
    failed: int = 0
    """Sent, and ended other than complete (refused, closed early, timed out)."""


@dataclass
class _Flight:
    target: ShadowTarget
    recorder: Recorder
    task: asyncio.Task[None] | None = None
    done: bool = False


Decision = Literal["pending", "keep", "drop"]


@dataclass
class _Pair:
    """One client call's shadows, and whether their records may reach the cassette yet."""

    key: str
    id: str
    submit: Sink
    state: Decision = "pending"
    buffered: list[Record] = field(default_factory=list)
    finished: list[tuple[ShadowTarget, Interaction]] = field(default_factory=list)
    flights: list[_Flight] = field(default_factory=list)

    def sink(self, records: list[Record]) -> None:
        if self.state == "keep":
            self.submit(records)
        elif self.state == "pending":
            self.buffered.extend(records)

    @property
    def settled(self) -> bool:
        return self.state != "pending" and all(f.done for f in self.flights)



def _headers(raw: list[tuple[bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    return tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in raw)


class ShadowSender:
    """Mirrors requests to the shadows of ``plan`` and records their answers (see the module).

    ``on_finished(target, interaction)`` is called, on the sender's thread, for
    every shadow recording that is kept. ``own_thread=False`` runs the sender
    on the caller's event loop instead (for measuring what that costs).
    """

    def __init__(
        self,
        plan: ShadowPlan,
        *,
        on_finished: Callable[[ShadowTarget, Interaction], None] | None = None,
        own_thread: bool = True,
    ) -> None:
        self.plan = plan
        self.on_finished = on_finished
        self.own_thread = own_thread
        self.counts = {t.name: TargetCounts(t.name) for t in plan.targets}
        self._run = secrets.token_hex(3)
        self._next_pair = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._submit: Sink = lambda records: None
        self._new_id: Callable[[], int] = lambda: 0
        self._redaction = Redaction()
        self._labels: dict[str, str] = {}
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._in_flight = dict.fromkeys(self.counts, 0)
        self._pairs: dict[str, _Pair] = {}
        self._early: dict[str, bool] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._stopped = False

    # -- called from the proxy's loop ----------------------------------------

    def start(
        self, submit: Sink, new_id: Callable[[], int], redaction: Redaction, labels: Mapping[str, str]
    ) -> None:
        """Start sending: records go to ``submit`` (thread-safe), ids come from ``new_id``."""
        self._submit, self._new_id = submit, new_id
        self._redaction, self._labels = redaction, dict(labels)
        if not self.own_thread:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            self._setup()
            return
        self._thread = threading.Thread(target=self._thread_main, name="streamtape-shadow", daemon=True)
        self._thread.start()
        self._ready.wait()

    def request(self, key: str, request: Request) -> dict[str, str]:
        """The proxy has a whole request: queue it for every shadow; returns the
        primary's labels (its backend name, the pair id, its role)."""
        pair = f"{self._run}-{self._next_pair}"
        self._next_pair += 1
        if self._loop is not None and not self._stopped:
            self._loop.call_soon_threadsafe(self._launch, key, request, pair)
        return {
            LABEL_BACKEND: self.plan.primary_backend(request.url),
            LABEL_PAIR: pair,
            LABEL_ROLE: Role.PRIMARY,
        }

    def keep(self, key: str) -> None:
        """The primary of ``key`` is being recorded: its shadows' records may be written."""
        self._call(self._decide, key, True)

    def finished(self, key: str, recorded: bool) -> None:
        """The primary of ``key`` ended, recorded or not (a response the filter leaves out)."""
        self._call(self._decide, key, recorded)

    def stop(self, timeout: float = 10.0) -> None:
        """Finish every shadow still in flight as ``interrupted`` and stop sending.
        Every record is handed to ``submit`` before this returns."""
        if self._loop is None or self._stopped:
            return
        self._stopped = True
        if not self.own_thread:
            self._halt()
            self._loop.create_task(self._close())
            return
        self._loop.call_soon_threadsafe(self._halt)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)

    def _call(self, fn: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> None:
        """Run ``fn`` on the sender's loop: now if this is its thread, else queued."""
        if self._loop is None or self._stopped:
            return
        if threading.get_ident() == self._loop_thread:
            fn(*args, **kwargs)
        else:
            self._loop.call_soon_threadsafe(lambda: fn(*args, **kwargs))

    # -- the sender's loop ---------------------------------------------------

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._setup()
        self._ready.set()
        try:
            loop.run_forever()
            loop.run_until_complete(self._close())
        finally:
            loop.close()

    def _setup(self) -> None:
        n = self.plan.max_in_flight
        for t in self.plan.targets:
            self._clients[t.name] = httpx.AsyncClient(
                verify=self.plan.verify,
                trust_env=False,  # like mitmproxy: no proxy from the environment
                follow_redirects=False,
                timeout=httpx.Timeout(None, connect=30.0, write=30.0),
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            )
        assert self._loop is not None
        self._ticker = self._loop.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            now = time.perf_counter_ns()
            for pair in self._pairs.values():
                for f in pair.flights:
                    if not f.done:
                        f.recorder.tick(now)

    async def _close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        tasks = [f.task for p in self._pairs.values() for f in p.flights if f.task is not None]
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                await client.aclose()

    def _launch(self, key: str, request: Request, pair_id: str) -> None:
        pair = _Pair(key, pair_id, self._submit)
        self._pairs[key] = pair
        assert self._loop is not None
        for target in self.plan.targets:
            labels = {
                **self._labels,
                LABEL_BACKEND: target.name,
                LABEL_PAIR: pair_id,
                LABEL_ROLE: Role.SHADOW,
            }
            flight = _Flight(target, Recorder(pair.sink, self._new_id, redaction=self._redaction, labels=labels))
            pair.flights.append(flight)
            flight.task = self._loop.create_task(self._send(pair, flight, request))
        if key in self._early:
            self._decide(key, self._early.pop(key))

    def _decide(self, key: str, recorded: bool) -> None:
        pair = self._pairs.get(key)
        if pair is None:
            self._early[key] = recorded  # the launch is still queued
            return
        if pair.state != "pending":
            return
        if recorded:
            pair.state = "keep"
            buffered, pair.buffered = pair.buffered, []
            if buffered:
                self._submit(buffered)
            for target, ix in pair.finished:
                self._announce(target, ix)
            pair.finished.clear()
        else:
            pair.state = "drop"
            pair.buffered.clear()
            pair.finished.clear()
            for f in pair.flights:
                if not f.done:
                    f.done = True  # nothing of it will be kept, whatever it was doing
                    if f.task is not None:
                        f.task.cancel()
        self._forget_if_settled(pair)

    def _forget_if_settled(self, pair: _Pair) -> None:
        if pair.settled and self._pairs.get(pair.key) is pair:
            del self._pairs[pair.key]

    def _announce(self, target: ShadowTarget, ix: Interaction) -> None:
        counts = self.counts[target.name]
        if LABEL_NOT_SENT not in ix.labels:  # those are counted when skipped
            counts.recorded += 1
            counts.failed += ix.outcome is not Outcome.COMPLETE
        if self.on_finished is not None:
            self.on_finished(target, ix)

    def _end(self, pair: _Pair, flight: _Flight, outcome: Outcome, error: str | None) -> None:
        """Finish one shadow recording (once) and pass it on as its pair's state allows."""
        if flight.done:
            return
        flight.done = True
        ix = flight.recorder.finish(flight.target.name, outcome, error, time.perf_counter_ns())
        if ix is not None:
            if pair.state == "keep":
                self._announce(flight.target, ix)
            elif pair.state == "pending":
                pair.finished.append((flight.target, ix))
        self._forget_if_settled(pair)

    def _halt(self) -> None:
        """Stopping: every shadow still in flight ends as ``interrupted``, now."""
        for pair in list(self._pairs.values()):
            for f in pair.flights:
                if not f.done:
                    self._end(pair, f, Outcome.INTERRUPTED, "the recorder stopped before the shadow's response ended")
                    if f.task is not None:
                        f.task.cancel()

    def _not_sent(self, pair: _Pair, flight: _Flight, request: Request, why: NotSent, error: str) -> None:
        target = flight.target
        parts = urlsplit(request.url)
        url = f"{target.origin}{target.prefix}{parts.path}" + (f"?{parts.query}" if parts.query else "")
        flight.recorder.begin(
            target.name, replace(request, url=url), time.perf_counter_ns(), labels={LABEL_NOT_SENT: why}
        )
        self._end(pair, flight, Outcome.UPSTREAM_ERROR, error)

    async def _send(self, pair: _Pair, flight: _Flight, request: Request) -> None:
        target = flight.target
        name = target.name
        counts = self.counts[name]
        if self._in_flight[name] >= self.plan.max_in_flight:
            counts.skipped += 1
            n = self.plan.max_in_flight
            self._not_sent(
                pair, flight, request, NotSent.IN_FLIGHT_BOUND,
                f"skipped: {n} request{'s' if n != 1 else ''} already in flight to {name} (--shadow-max-in-flight)",
            )
            return
        try:
            out = shadow_request(target, request)
        except Unmappable as e:
            counts.unmappable += 1
            self._not_sent(pair, flight, request, NotSent.UNMAPPABLE, f"not sent: {e.reason}")
            return
        self._in_flight[name] += 1
        counts.sent += 1
        try:
            await self._exchange(pair, flight, out)
        finally:
            self._in_flight[name] -= 1

    async def _exchange(self, pair: _Pair, flight: _Flight, out: ShadowRequest) -> None:
        """Send one request and record its response as it streams in."""
        name = flight.target.name
        rec = flight.recorder
        req = httpx.Request(out.method, out.url, headers=list(out.headers), content=out.body)
        sent = Request(
            method=out.method,
            url=str(req.url),
            http_version="HTTP/1.1",
            headers=_headers(req.headers.raw),
            body=out.body,
            started_at=time.time(),
        )
        rec.begin(name, stored_request(sent, out.secret_headers), time.perf_counter_ns())
        resp: httpx.Response | None = None
        outcome, error = Outcome.COMPLETE, None
        clock = time.perf_counter_ns
        try:
            async with asyncio.timeout(self.plan.timeout_s):
                resp = await self._clients[name].send(req, stream=True)
                rec.response_headers(
                    name, resp.status_code, resp.reason_phrase, resp.http_version,
                    _headers(resp.headers.raw), clock(),
                )
                async for data in resp.aiter_raw():
                    if data:
                        rec.piece(name, data, clock())
        except TimeoutError:
            outcome = Outcome.UPSTREAM_ERROR
            error = f"no complete answer within {self.plan.timeout_s:g} s (--shadow-timeout)"
        except httpx.HTTPError as e:
            outcome = Outcome.UPSTREAM_CLOSED if resp is not None else Outcome.UPSTREAM_ERROR
            error = failure_words(e)
        except asyncio.CancelledError:
            self._end(pair, flight, Outcome.INTERRUPTED, "the recorder stopped before the shadow's response ended")
            raise
        finally:
            if resp is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await resp.aclose()
        self._end(pair, flight, outcome, error)
