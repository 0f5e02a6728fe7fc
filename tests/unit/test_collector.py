"""The quiet collector of the replay server and the recorder: full collections off the busy loop."""

from __future__ import annotations

import asyncio
import gc

from streamtape.serve.collector import QuietCollector


def _garbage_in_the_oldest_generation() -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    for _ in range(200):
        Cycle()
    gc.collect(1)  # what survives a gen-1 collection moves to the oldest generation


def test_no_full_collection_while_busy_and_one_once_idle() -> None:
    busy = [True]
    before = gc.get_threshold()

    async def main() -> tuple[int, int, int, int]:
        c = QuietCollector(lambda: busy[0], poll_s=0.02, max_interval_s=60)
        c.start()
        frozen_threshold = gc.get_threshold()[2]
        assert gc.get_threshold()[1] == 1  # the middle generation goes with every young one
        _garbage_in_the_oldest_generation()
        await asyncio.sleep(0.2)
        while_busy = c.collections
        busy[0] = False
        for _ in range(200):  # generous: a loaded machine runs the poll late
            await asyncio.sleep(0.02)
            if c.collections:
                break
        idle = c.collections
        c.stop()
        return frozen_threshold, while_busy, idle, gc.get_threshold()[2]

    threshold, while_busy, idle, restored = asyncio.run(main())
    assert threshold >= 1 << 30  # automatic full collections are out of reach
    assert while_busy == 0
    assert idle >= 1
    assert restored == before[2]
    assert gc.get_threshold() == before


def test_an_overdue_full_collection_runs_even_under_uninterrupted_load() -> None:
    async def main() -> int:
        c = QuietCollector(lambda: True, poll_s=0.02, max_interval_s=0.05)
        c.start()
        for _ in range(250):
            await asyncio.sleep(0.02)
            if c.collections:
                break
        c.stop()
        return c.collections

    assert asyncio.run(main()) >= 1


def test_the_recorder_counts_as_busy_only_while_a_response_is_in_flight() -> None:
    from streamtape.capture.recorder import Recorder
    from streamtape.cassette import Request
    from streamtape.commands.record import _Run

    run = _Run("unused.tape", "http://127.0.0.1:9", None, own_thread=False)
    assert not run.collector.busy()  # no recorder yet (the addon is not running)
    records: list[object] = []
    run.addon.recorder = Recorder(records.extend, iter(range(10)).__next__)
    assert not run.collector.busy()
    run.addon.recorder.begin("flow-1", Request("GET", "http://127.0.0.1:9/s"), 0)
    assert run.collector.busy()
