"""The rules that turn a test's recording into its cassette (the cassette lock across processes:
tests/system/test_pytest_tapes.py)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import streamtape
from streamtape.pytest_plugin.settings import RecordMode
from streamtape.pytest_plugin.tapes import (
    Action,
    Outcome,
    commit,
    decide,
    failed_path,
    matrix_step,
    recording_path,
)
from tests.support.builders import chat_ix

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


# -- a profile matrix's one recording ------------------------------------------------------


def _labelled(path: Path, *tests: str) -> Path:
    streamtape.save(path, [dataclasses.replace(chat_ix(1), labels={"test": t}) for t in tests])
    return path


GROUP = ("t.py::test_x[bytes-1]", "t.py::test_x[utf8-split]")


def test_a_matrix_records_when_no_recording_of_its_cases_is_from_this_run(tmp_path: Path) -> None:
    path = tmp_path / "t.tape"
    now = time.time()
    assert matrix_step(RecordMode.ONCE, path, now, GROUP) is Action.RECORD  # missing
    assert matrix_step(RecordMode.ALL, path, now, GROUP) is Action.RECORD
    assert matrix_step(RecordMode.NEW_EPISODES, path, now, GROUP) is Action.EXTEND
    assert matrix_step(RecordMode.NONE, path, now, GROUP) is Action.REPLAY  # fails later, naming the file
    _labelled(path, "t.py::test_x[other-a]")  # another parameter set, this run
    assert matrix_step(RecordMode.ONCE, path, now - 60, GROUP) is Action.RECORD
    assert matrix_step(RecordMode.ALL, path, now + 60, GROUP) is Action.RECORD  # an earlier run's: again


def test_a_matrix_replays_its_recording_from_this_run_and_under_once_an_earlier_runs(tmp_path: Path) -> None:
    path = _labelled(tmp_path / "t.tape", GROUP[1])
    now = time.time()
    assert matrix_step(RecordMode.ONCE, path, now - 60, GROUP) is Action.REPLAY
    assert matrix_step(RecordMode.ALL, path, now - 60, GROUP) is Action.REPLAY
    assert matrix_step(RecordMode.ONCE, path, now + 60, ("t.py::test_y[bytes-1]",)) is Action.REPLAY  # once
    assert matrix_step(RecordMode.NEW_EPISODES, path, now - 60, GROUP) is Action.EXTEND  # the caller remembers


def test_a_failed_recording_of_the_matrix_this_run_is_a_message_naming_the_case(tmp_path: Path) -> None:
    path = tmp_path / "t.tape"
    _labelled(failed_path(path), GROUP[0])
    now = time.time()
    step = matrix_step(RecordMode.ONCE, path, now - 60, GROUP)
    assert step == (
        "t.py::test_x[bytes-1] ran first with no recording of this profile matrix and failed while it recorded "
        "it in this run (its recording is in t.tape.failed): there is nothing to replay, and its requests are "
        "not sent upstream again"
    )
    assert matrix_step(RecordMode.ONCE, path, now + 60, GROUP) is Action.RECORD  # an earlier run's failure
    assert matrix_step(RecordMode.ONCE, path, now - 60, ("t.py::test_y[bytes-1]",)) is Action.RECORD  # not its


def test_a_failed_recording_of_a_matrix_of_one_this_run_is_a_message_naming_the_test_alone(tmp_path: Path) -> None:
    """One profile, not faithful: the group is the test itself (run again, pytest-rerunfailures)."""
    path = tmp_path / "t.tape"
    _labelled(failed_path(path), "t.py::test_x")
    step = matrix_step(RecordMode.ONCE, path, time.time() - 60, ("t.py::test_x",))
    assert step == (
        "t.py::test_x failed while it recorded its cassette under faithful in this run (its recording is in "
        "t.tape.failed): there is nothing to replay under its profile, and its requests are not sent upstream again"
    )
