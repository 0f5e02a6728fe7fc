"""The shortcuts that make replay fast play exactly what the long way plays.

- a schedule without piece-reshaping faults is built without the per-piece
  pipeline (``_ScheduleBuilder.plain``): the same schedule as the full one;
- the in-process faces walk a plan's flat :class:`~streamtape.transport.Timeline`
  when no read timeout can fire: the same pieces and ending as
  :func:`~streamtape.transport.play_actions`; a Replayer schedules each
  (profile, interaction) once;
- the clock releases deadlines that crowd together in one wake-up, never early;
- :class:`~streamtape.serve.collector.QuietCollector` runs full collections
  only when the server is idle (or overdue), and puts the settings back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import random
import time

import pytest

from streamtape import clock
from streamtape.cassette.pieces import Pieces
from streamtape.profiles import Step, StepKind, Steps, parse_profile
from streamtape.serve.collector import QuietCollector
from streamtape.transport import Timeline, play_actions
from streamtape.transport.replayer import Replayer
from tests.support.builders import CHAT_BODY, CHAT_URL, MS, chat_chunk, chat_ix, interaction, sse

now = time.perf_counter_ns

# An SSE stream without [DONE]: fault=drop-done then changes nothing, but sends the
# schedule down the full pipeline, the reference for the shortcut.
NO_DONE = [sse(chat_chunk("", role="assistant")), *(sse(chat_chunk(w)) for w in "abcdefg"),
           sse(chat_chunk(finish="stop"))]


def _recordings(seed: int) -> list:  # type: ignore[type-arg]
    rng = random.Random(seed)
    out = []
    for _ in range(40):
        k = rng.randint(0, len(NO_DONE))
        times = sorted(rng.randint(0, 80 * MS) for _ in range(k))
        if rng.random() < 0.3:
            rng.shuffle(times)  # recorded offsets out of order: the schedule still never goes back
        out.append(interaction(
            NO_DONE[:k], times=times, head_ns=rng.choice([0, 3 * MS, 40 * MS]),
            end_ns=rng.choice([None, 0, 120 * MS]) if k else None,
            outcome=rng.choice(["complete", "client_disconnected", "upstream_closed"]),
            framing=rng.choice(["chunked", "content-length", "close-delimited"]),
        ))
    return out


PROFILES = ["faithful", "instant", "latency=scale:0.5", "latency=fixed:4:2", "latency=jitter:3",
            "fault=slow-headers:15", "latency=scale:2;fault=slow-headers:5", "chunk=bytes:9",
            "chunk=events", "chunk=coalesce:12;latency=jitter:2", "chunk=whole"]


@pytest.mark.parametrize("profile", PROFILES)
def test_a_schedule_without_reshaping_faults_is_the_full_pipelines_schedule(profile: str) -> None:
    quick = parse_profile(profile)
    full = parse_profile(f"{profile};fault=drop-done")
    for ix in _recordings(len(profile)):
        compact = dataclasses.replace(
            ix, response=dataclasses.replace(ix.response, pieces=Pieces.of(ix.response.pieces)))
        reference = dataclasses.replace(full.schedule(ix), text=quick.text)
        assert quick.schedule(ix) == reference
        assert quick.schedule(compact) == reference  # a loaded cassette's compact pieces


def test_columnar_steps_are_the_same_sequence_as_the_tuple_of_their_steps() -> None:
    last = Step(30, StepKind.CUT)
    steps = Steps([10, 20], [b"a", b"bc"], last)
    same = (Step(10, StepKind.SEND, b"a"), Step(20, StepKind.SEND, b"bc"), last)
    assert steps == same and same == steps and hash(steps) == hash(same)
    assert list(steps) == list(same) and len(steps) == 3
    assert [steps[i] for i in range(-3, 3)] == [*same, *same]
    assert steps[1:] == same[1:]
    assert steps != same[:2]
    with pytest.raises(IndexError):
        steps[3]
    with pytest.raises(ValueError, match="2 times for 1 pieces"):
        Steps([1, 2], [b"x"], last)


def test_a_plain_profile_builds_no_step_per_piece() -> None:
    ix = _recordings(3)[-1]
    for profile in ("instant", "faithful", "latency=scale:0.5", "fault=slow-headers:0.1"):
        steps = parse_profile(profile).schedule(ix).steps
        assert isinstance(steps, Steps), profile
        assert steps.data == [p.data for p in ix.response.pieces if p.data]


@pytest.mark.parametrize("profile", [*PROFILES, "fault=stall:1:0.05", "fault=cut:60%",
                                     "fault=keepalive:0.01", "fault=reset:10B"])
def test_a_timeline_plays_what_play_actions_plays_when_no_timeout_fires(profile: str) -> None:
    prof = parse_profile(profile)
    for ix in _recordings(7):
        if not ix.response.pieces and "stall" in profile:
            continue  # a stall needs an event to stall before
        schedule = prof.schedule(ix)
        timeline = Timeline.of(schedule)
        assert timeline is not None
        for timeout in (None, timeline.longest_silence_ns, 1 * MS, 0):
            actions = list(play_actions(schedule.steps, schedule.head_at_ns, timeout))
            if not timeline.plays_whole(timeout):
                assert actions[-1].kind == "timeout"
                continue
            assert [(a.at_ns, a.data) for a in actions[:-1]] == list(zip(timeline.at, timeline.datas, strict=True))
            assert actions[-1] == timeline.ending
            assert sum(map(len, timeline.datas)) == timeline.sent


def test_a_replayer_schedules_each_profile_and_recording_once() -> None:
    replayer = Replayer([chat_ix(5), chat_ix(5, body={**CHAT_BODY, "model": "b"})], "instant")
    headers = [("content-type", "application/json")]
    body = json.dumps(CHAT_BODY).encode()
    first = replayer.plan("POST", CHAT_URL, headers, body)
    again = replayer.plan("POST", CHAT_URL, headers, body)
    assert again is first and again.timeline is first.timeline
    other = replayer.plan("POST", CHAT_URL, [*headers, ("X-Streamtape-Profile", "faithful")], body)
    assert other is not first and other.profile == "faithful"
    assert other.schedule.steps[0].at_ns > first.schedule.steps[0].at_ns
    assert len(replayer.received) == 3  # every request is still journalled


# --------------------------------------------------------------------------- clock


async def test_crowded_deadlines_share_wake_ups_and_none_is_early() -> None:
    waker = clock._waker(asyncio.get_running_loop())
    lates: list[int] = []
    releasing = 0  # the loop's turns that released some of the deadlines
    tick = waker._tick

    def counting() -> None:
        nonlocal releasing
        before = len(lates)
        tick()
        releasing += len(lates) > before

    waker._tick = counting  # type: ignore[method-assign]
    try:
        # 50 ms ahead: registering them all must end before the first is due, even on a
        # loaded machine (a past deadline's sleep_until returns without yielding).
        start = now() + 50 * MS
        # 400 deadlines 10 us apart: 4 ms of them; without batching, a turn for each few.
        deadlines = [start + i * 10_000 for i in range(400)]
        for d in deadlines:
            clock.call_at_ns(d, lambda d=d: lates.append(now() - d))  # type: ignore[misc]
        await clock.sleep_until(deadlines[-1] + 2 * MS)
    finally:
        del waker._tick
    assert len(lates) == 400
    assert min(lates) >= 0
    # At most one release per 0.25 ms (the documented limit): 4 ms of deadlines in
    # about 16 (a loaded machine can only merge more of them).
    assert releasing <= 4 * MS // 250_000 + 3, releasing


async def test_one_timer_waits_again_and_again_never_early() -> None:
    done = asyncio.get_running_loop().create_future()
    start = now() + MS
    lates: list[int] = []

    def step() -> None:
        due = start + len(lates) * MS // 2
        lates.append(now() - due)
        if len(lates) == 10:
            done.set_result(None)
        else:
            timer.again(start + len(lates) * MS // 2)

    timer = clock.call_at_ns(start, step)
    await asyncio.wait_for(done, 5)
    assert len(lates) == 10 and min(lates) >= 0
    timer.again(now() + 50 * MS)
    with pytest.raises(RuntimeError, match="still waiting"):
        timer.again(now() + MS)  # one entry at a time: it would run twice
    timer.cancel()
    with pytest.raises(RuntimeError, match="still waiting"):
        timer.again(now() + MS)  # its cancelled entry is still there


@pytest.mark.realtime
async def test_sparse_deadlines_are_not_batched() -> None:
    waker = clock._waker(asyncio.get_running_loop())
    held: list[int] = []  # deadlines the rate limit held back: due sooner than a tick allows
    late_ticks = 0  # waits whose wake-up came so late that the next deadline was near it
    schedule = waker._schedule

    def watching(deadline_ns: int) -> None:
        if deadline_ns < waker._last_tick + waker.min_interval_ns:
            held.append(deadline_ns)
        schedule(deadline_ns)

    waker._schedule = watching  # type: ignore[method-assign]
    try:
        t0 = now() + 2 * MS
        for i in range(40):
            d = t0 + i * 3 * MS
            await clock.sleep_until(d)
            # A tick later than 2.75 ms past its deadline leaves the next one (3 ms on)
            # inside the limit's 0.25 ms: only a loaded machine's stall does that.
            late_ticks += waker._last_tick - d > 3 * MS - 250_000  # the documented limit
    finally:
        del waker._schedule
    # The rate limit never applies 3 ms apart (a machine-independent check: the
    # waits' own lateness is the scheduler's on a loaded machine).
    assert len(held) <= late_ticks, (held, late_ticks)


# --------------------------------------------------------------------------- collector


async def test_full_collections_wait_for_an_idle_server_and_settings_come_back() -> None:
    before = gc.get_threshold()
    busy = True
    collector = QuietCollector(lambda: busy, poll_s=0.01, max_interval_s=60)
    collector.start()
    try:
        assert gc.get_threshold()[2] > 10**6  # no automatic full collection
        assert gc.get_freeze_count() > 0  # what was loaded is not scanned again
        gc.collect(1)  # something reaches the oldest generation
        await asyncio.sleep(0.1)
        assert collector.collections == 0  # busy: not now
        busy = False
        await asyncio.sleep(0.1)
        assert collector.collections >= 1
    finally:
        collector.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_a_busy_server_still_gets_a_full_collection_when_overdue() -> None:
    collector = QuietCollector(lambda: True, poll_s=0.01, max_interval_s=0.05)
    collector.start()
    try:
        await asyncio.sleep(0.2)
        assert collector.collections >= 1
    finally:
        collector.stop()
