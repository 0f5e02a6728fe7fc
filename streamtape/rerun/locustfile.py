"""A locustfile that re-runs a recorded session: ``streamtape rerun`` past one machine.

Run it with Locust (``pip install 'streamtape[locust]'``; ``streamtape rerun
--locustfile`` prints this file's path)::

    locust -f "$(streamtape rerun --locustfile)" --headless -u 8 -r 8 \\
        --streamtape-cassette session.tape --streamtape-out out.tape -H http://new-backend:8000

and on many machines ``--master`` on one (with ``--expect-workers N``) and
``--worker --master-host HOST`` on the others, each with this file (the
master passes the ``--streamtape-*`` options on to its workers).

What the users do:

- ``--streamtape-mode split`` (the default): every recorded request is sent
  once per round (``--streamtape-repeat``, default 1), the requests split
  across the workers (worker *i* of *n* takes every *n*-th, from the *i*-th),
  and a worker's users take its share in recorded order; a worker whose share
  is done quits, and the run ends with the last one. ``loop``: each user
  sends the cassette's requests in order, over and over, until Locust stops
  it (``-t``).
- Each request goes through the same lean client as ``streamtape rerun``
  (:mod:`streamtape.rerun.client`, on gevent's sockets), mapped by the same
  rules (``--streamtape-header NAME=VALUE``, ``--streamtape-model``,
  ``--streamtape-path /FROM=/TO``; a value recorded as ``REDACTED`` needs a
  header, or the run stops before it starts).
- Locust's statistics get three request types per request path: ``stream``
  (the whole response, request sent to last byte, as a failure when it did
  not end complete with a status below 400), ``TTFT`` (time to the first
  token) and ``ITL`` (one entry per gap between two tokens), so Locust's
  charts, CSV files and HTML report show them.
- Each worker writes a session cassette of its own (``OUT.tape`` run alone;
  ``OUT.worker0.tape``, ``OUT.worker1.tape``, ... under a master), each new
  recording paired with the one it re-ran as ``streamtape rerun`` writes
  them; ``streamtape merge OUT.worker*.tape -o OUT.tape`` joins them and
  ``streamtape diff OUT.tape`` compares the session with its rerun.

Records are batched and written by one greenlet every 100 ms (one write and
one fsync per batch), so the users' sockets wait for the disk at most once per
batch. (Not a thread: the writer's locks, monkey-patched by gevent, must not
be shared between a greenlet and a real thread.)
"""

from __future__ import annotations

import collections
import itertools
import secrets
import time
from pathlib import Path
from typing import Any

import gevent
from locust import User, events, task
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from streamtape.arrival import keep_stamps_on
from streamtape.capture.recorder import Recorder
from streamtape.cassette.model import Interaction, Outcome
from streamtape.cassette.reader import load
from streamtape.cassette.records import Record, interaction_records
from streamtape.cassette.writer import CassetteWriter
from streamtape.rerun.client import Exchange, exchange_sync
from streamtape.rerun.mapping import build_target, check_sendable, parse_map, rerun_request
from streamtape.rerun.run import Item, pick, primary_copy
from streamtape.shadow.chat_mapping import Unmappable
from streamtape.shadow.labels import LABEL_BACKEND, LABEL_PAIR, LABEL_RERUN, LABEL_ROLE, Role
from streamtape.shadow.targets import ShadowTarget
from streamtape.stats import compute

PLAN_MESSAGE = "streamtape_plan"


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    group = parser.add_argument_group("streamtape", "Re-run a recorded session (streamtape rerun)")
    group.add_argument("--streamtape-cassette", metavar="SESSION.tape", default="",
                       help="The session cassette whose requests are sent.")
    group.add_argument("--streamtape-out", metavar="OUT.tape", default="rerun.tape",
                       help="The cassette to write (one per worker: OUT.workerN.tape).")
    group.add_argument("--streamtape-mode", choices=["split", "loop"], default="split",
                       help="split: each request once per round across the workers; loop: every user loops.")
    group.add_argument("--streamtape-repeat", type=int, default=1, help="Rounds in split mode.")
    group.add_argument("--streamtape-header", action="append", default=[], metavar="NAME=VALUE",
                       help="A header set on every request (never written to the cassette).")
    group.add_argument("--streamtape-model", default="", help="Replace the JSON body's model.")
    group.add_argument("--streamtape-path", action="append", default=[], metavar="/FROM=/TO",
                       help="Send /FROM requests to /TO (OpenAI chat <-> Ollama chat bodies mapped).")
    group.add_argument("--streamtape-timeout", type=float, default=300.0, help="Seconds one request may take.")


class _Worker:
    """What one Locust process holds: its share of the requests, the recorder, the writer."""

    def __init__(self, env: Environment, index: int, count: int) -> None:
        keep_stamps_on()  # before the first response (streamtape.arrival)
        opts = env.parsed_options
        assert opts is not None
        if not opts.streamtape_cassette:
            raise SystemExit("streamtape: --streamtape-cassette SESSION.tape is needed")
        if not env.host:
            raise SystemExit("streamtape: -H URL (the backend to send the requests to) is needed")
        path = opts.streamtape_cassette
        cas = load(path)
        items = pick((f"{path}#{i}", ix) for i, ix in enumerate(cas))
        self.target: ShadowTarget = build_target(
            env.host, env.host.split("://")[-1].rstrip("/"),
            parse_map(opts.streamtape_header, opts.streamtape_model or None, opts.streamtape_path),
        )
        for it in items:
            check_sendable(self.target, it.recording.request, it.label)
        self.mode = opts.streamtape_mode
        self.timeout_s = float(opts.streamtape_timeout)
        self.items = items
        ordered = sorted(items, key=lambda it: it.recording.request.started_at)
        share = ordered[index::count] if self.mode == "split" else []
        self.queue = collections.deque(share * max(1, int(opts.streamtape_repeat)))
        self.left = len(self.queue)
        out = Path(opts.streamtape_out)
        self.path = out if count == 1 and not isinstance(env.runner, WorkerRunner) else \
            out.with_name(f"{out.stem}.worker{index}{out.suffix or '.tape'}")
        self.writer = CassetteWriter(self.path)
        self.pending: list[Record] = []
        self.run_id = f"{secrets.token_hex(3)}w{index}"
        self.seq = itertools.count()
        self.recorder = Recorder(self._submit, self.writer.new_id,
                                 labels={LABEL_BACKEND: self.target.name, LABEL_ROLE: Role.SHADOW,
                                         LABEL_RERUN: self.run_id})
        self.env = env
        self.ticker = gevent.spawn(self._tick)

    def _submit(self, records: list[Record]) -> None:
        self.pending.extend(records)

    def _flush(self) -> None:
        batch, self.pending = self.pending, []
        if batch:
            self.writer.write(batch)

    def _tick(self) -> None:
        while True:
            gevent.sleep(0.1)
            self.recorder.tick(time.perf_counter_ns())
            self._flush()

    def next_item(self) -> Item | None:
        if self.mode == "loop":
            return None
        return self.queue.popleft() if self.queue else None

    def send(self, item: Item) -> None:
        """Send one request, record it, report it to Locust's statistics."""
        seq = next(self.seq)
        pair = f"{self.run_id}-{seq}"
        self._submit(interaction_records(primary_copy(item.recording, pair, self.run_id), self.writer.new_id()))
        path = item.recording.request.path.split("?")[0]
        fire = self.env.events.request.fire
        try:
            out = rerun_request(self.target, item.recording.request)
        except Unmappable as e:
            fire(request_type="stream", name=path, response_time=0, response_length=0,
                 exception=RuntimeError(f"not sent: {e.reason}"))
            return
        ex = Exchange(self.recorder, seq, self.target.name, out, {LABEL_PAIR: pair})
        started = time.perf_counter()
        try:
            exchange_sync(ex, timeout_s=self.timeout_s)
        except BaseException:  # GreenletExit when Locust stops the user: the stream is cut off
            ex.fail(Outcome.INTERRUPTED, "locust stopped the user before the response ended")
            self._finish(ex, path, started)
            raise
        self._finish(ex, path, started)

    def _finish(self, ex: Exchange, path: str, started: float) -> None:
        ix = ex.finish(time.perf_counter_ns())
        if ix is None:
            return
        fire = self.env.events.request.fire
        elapsed_ms = (time.perf_counter() - started) * 1000
        ok = ix.outcome is Outcome.COMPLETE and ix.response is not None and ix.response.status < 400
        size = len(ix.response.body) if ix.response is not None else 0
        fire(request_type="stream", name=path, response_time=elapsed_ms, response_length=size,
             exception=None if ok else RuntimeError(_failure(ix)))
        if not ok:
            return
        stats = compute(ix)
        if stats.ttft_ns is not None:
            fire(request_type="TTFT", name=path, response_time=stats.ttft_ns / 1e6, response_length=0, exception=None)
        for gap in stats.gaps_ns:
            fire(request_type="ITL", name=path, response_time=gap / 1e6, response_length=0, exception=None)

    def done_one(self) -> None:
        self.left -= 1
        if self.mode == "split" and self.left <= 0:
            gevent.spawn_later(0.1, self._quit)

    def _quit(self) -> None:
        """This worker's share is done: its last statistics to the master, then quit (the
        master ends a headless run when its last worker quits)."""
        runner = self.env.runner
        if isinstance(runner, WorkerRunner):
            runner._send_stats()  # as Locust's own "quit" handling does, so no sample is lost
        if runner is not None:
            runner.quit()

    def close(self) -> None:
        self.ticker.kill()
        self.recorder.close(time.perf_counter_ns())
        self._flush()
        self.writer.close()


def _failure(ix: Interaction) -> str:
    if ix.outcome is not Outcome.COMPLETE:
        return f"{ix.outcome}: {ix.error}" if ix.error else str(ix.outcome)
    return f"status {ix.response.status if ix.response is not None else '?'}"


_state: dict[str, Any] = {"workers": None, "worker": None, "env": None}


@events.init.add_listener
def _init(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        def plan(environment: Environment, msg: Any, **kw: Any) -> None:
            _state["workers"] = int(msg.data["workers"])

        runner.register_message(PLAN_MESSAGE, plan)


@events.test_start.add_listener
def _start(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        runner.send_message(PLAN_MESSAGE, {"workers": runner.worker_count})
        return
    _state["env"] = environment


def _worker() -> _Worker:
    """This process's worker, made on first use, in a user's greenlet."""
    if _state["worker"] is None:
        environment = _state["env"]
        runner = environment.runner
        if isinstance(runner, WorkerRunner):
            index, count = runner.worker_index, _state["workers"] or 1
        else:
            index, count = 0, 1
        _state["worker"] = _Worker(environment, index, count)
    worker: _Worker = _state["worker"]
    return worker


@events.quitting.add_listener
def _quitting(environment: Environment, **_: Any) -> None:
    worker = _state["worker"]
    if worker is not None:
        _state["worker"] = None
        worker.close()


class RerunUser(User):
    """Sends the recorded requests (see the module docstring)."""

    def on_start(self) -> None:
        self._loop = itertools.cycle(_worker().items)

    @task
    def rerun(self) -> None:
        worker = _worker()
        if worker.mode == "loop":
            assert self._loop is not None
            worker.send(next(self._loop))
            return
        item = worker.next_item()
        if item is None:
            raise StopUser()
        try:
            worker.send(item)
        finally:
            worker.done_one()
