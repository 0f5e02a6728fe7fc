"""The rules that turn a test's recording into its cassette (the cassette lock across processes:
tests/system/test_pytest_tapes.py)."""

from __future__ import annotations

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
