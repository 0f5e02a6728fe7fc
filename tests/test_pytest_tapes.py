"""The cassette lock and the rules that turn a test's recording into its cassette."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import streamtape
from streamtape.cassette.lock import cassette_lock, lock_path
from streamtape.errors import CassetteError
from streamtape.pytest_plugin.settings import RecordMode
from streamtape.pytest_plugin.tapes import (
    Action,
    Outcome,
    commit,
    decide,
    failed_path,
    recording_path,
)
from tests.support.builders import chat_ix


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_writer_waits_for_the_lock_and_gets_it_when_released(tmp_path: Path) -> None:
    cassette = tmp_path / "c.tape"
    with cassette_lock(cassette):
        assert lock_path(cassette).read_text() == str(os.getpid())
        waiter = _python(
            """
            import sys
            from streamtape.cassette.lock import cassette_lock
            print("trying", flush=True)
            with cassette_lock(sys.argv[1], timeout=30):
                print("got it", flush=True)
            """,
            str(cassette),
        )
        assert waiter.stdout is not None and waiter.stdout.readline().strip() == "trying"
        time.sleep(0.3)
        assert waiter.poll() is None  # still waiting while the lock is held
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    assert out.strip() == "got it"
    assert not lock_path(cassette).exists()  # nothing left beside the cassette


def test_a_writer_that_waits_too_long_fails_naming_the_cassette_and_the_holder(tmp_path: Path) -> None:
    cassette = tmp_path / "c.tape"
    holder = _python(
        """
        import sys, time
        from streamtape.cassette.lock import cassette_lock
        with cassette_lock(sys.argv[1]):
            print("held", flush=True)
            time.sleep(30)
        """,
        str(cassette),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(CassetteError) as e, cassette_lock(cassette, timeout=0.3):
            pass
        assert str(e.value) == (
            f"{cassette}: another writer (pid {holder.pid}) has held it for more than 0.3 s ({lock_path(cassette)})"
        )
    finally:
        holder.kill()
        holder.wait()


def test_writers_in_four_processes_never_interleave_their_appends(tmp_path: Path) -> None:
    cassette = tmp_path / "shared.tape"
    writers = [
        _python(
            """
            import sys
            import streamtape
            from streamtape.cassette.lock import cassette_lock
            from tests.support.builders import chat_ix
            for i in range(15):
                with cassette_lock(sys.argv[1]):
                    streamtape.save(sys.argv[1], [chat_ix(1, tag=f"{sys.argv[2]}-{i}")])
            """,
            str(cassette),
            str(n),
        )
        for n in range(4)
    ]
    for w in writers:
        _out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
    cas = streamtape.load(cassette)
    assert cas.warnings == []
    assert sorted(ix.labels["tag"] for ix in cas) == sorted(f"{n}-{i}" for n in range(4) for i in range(15))


# -- decide and commit ------------------------------------------------------------------


def _cassette(path: Path, tag: str) -> Path:
    streamtape.save(path, [chat_ix(1, tag=tag)])
    return path


def _tags(path: Path) -> list[str]:
    return [ix.labels.get("tag", "") for ix in streamtape.load(path)]


def test_once_replays_a_cassette_from_an_earlier_run_and_records_into_one_this_run_wrote(tmp_path: Path) -> None:
    path = tmp_path / "t.tape"
    assert decide(RecordMode.ONCE, path, time.time()) is Action.RECORD  # missing
    _cassette(path, "old")
    assert decide(RecordMode.ONCE, path, time.time() + 1) is Action.REPLAY  # written before the run
    assert decide(RecordMode.ONCE, path, time.time() - 60) is Action.RECORD  # a sibling wrote it this run
    assert decide(RecordMode.NONE, path, 0) is Action.REPLAY
    assert decide(RecordMode.NEW_EPISODES, path, 0) is Action.EXTEND
    assert decide(RecordMode.ALL, path, time.time() + 1) is Action.RECORD


def test_all_replaces_an_earlier_runs_cassette_then_appends_the_other_parameter_sets(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "t.tape", "old")
    run_started = time.time() + 0.001
    time.sleep(0.01)
    first = _cassette(recording_path(path), "first")
    assert commit(first, path, RecordMode.ALL, passed=True, run_started=run_started) is Outcome.REPLACED
    second = _cassette(recording_path(path), "second")
    assert commit(second, path, RecordMode.ALL, passed=True, run_started=run_started) is Outcome.APPENDED
    assert _tags(path) == ["first", "second"]
    assert not first.exists() and not second.exists()


def test_a_failed_tests_recording_is_set_aside_and_the_next_good_one_clears_it(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "t.tape", "old")
    bad = _cassette(recording_path(path), "bad")
    assert commit(bad, path, RecordMode.NEW_EPISODES, passed=False, run_started=0) is Outcome.KEPT
    assert _tags(path) == ["old"]
    assert _tags(failed_path(path)) == ["bad"]
    good = _cassette(recording_path(path), "good")
    assert commit(good, path, RecordMode.NEW_EPISODES, passed=True, run_started=0) is Outcome.APPENDED
    assert _tags(path) == ["old", "good"]
    assert not failed_path(path).exists()


def test_a_recording_creates_a_missing_cassette_and_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "test_mod" / "test_x.tape"
    rec = _cassette(recording_path(path), "new")
    assert rec.parent == path.parent and rec.name.startswith(".test_x.tape.")
    assert commit(rec, path, RecordMode.ONCE, passed=True, run_started=0) is Outcome.CREATED
    assert _tags(path) == ["new"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["test_x.tape"]
