"""Which way a test runs, and how its recording becomes the cassette. Files only, no sockets.

A recording never writes the cassette while the test runs: it goes to a
private file beside it, and when the test is over :func:`commit` moves it in
under the cassette's lock (:func:`streamtape.cassette.lock.cassette_lock`), so
parallel writers (pytest-xdist workers recording parameter sets of one test)
never interleave and a reader never sees half a file:

* the test passed: the recording becomes the cassette (``once`` creating it,
  ``all`` replacing it) or is appended to it (``new_episodes``; and any mode
  when an earlier test of this run already wrote the file: parameter sets
  share their test's cassette, so each appends to what this run recorded);
* the test failed: the cassette stays as it was, and the recording is kept
  as ``NAME.tape.failed`` to look at (``streamtape show``). A cassette must
  hold what a passing test saw: a 401 for a missing key, or the answer to a
  wrong request, committed as the recording would replay that mistake for ever.

"Written by this run" is told by the cassette header's ``created`` time,
compared with the time the run started (the controller's, under xdist), so
it holds across processes without any shared state but the file.

A profile matrix's cases share one recording, made once by whichever case
runs first (:mod:`.matrix_record`; a test with one profile, not faithful, is
a matrix of one); :func:`matrix_step` tells a case, from
the files alone, whether its matrix has been recorded in this run, so
pytest-xdist workers agree without talking to each other.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Collection
from enum import StrEnum
from pathlib import Path

from ..cassette.lock import cassette_lock
from ..cassette.reader import load, read_records
from ..cassette.writer import CassetteWriter
from ..errors import CassetteError
from .settings import RecordMode

FAILED_SUFFIX = ".failed"
_counter = itertools.count()


class Action(StrEnum):
    """What a test does with the backend."""

    REPLAY = "replay"  # the cassette answers everything
    RECORD = "record"  # everything goes to the upstream and is recorded
    EXTEND = "extend"  # the cassette answers what it can; the rest is recorded (new_episodes)


class Outcome(StrEnum):
    """What :func:`commit` did with a recording."""

    CREATED = "created"
    REPLACED = "replaced"
    APPENDED = "appended"
    KEPT = "kept"  # the test failed: the cassette is unchanged, the recording set aside


def written_since(cassette: Path, started: float) -> bool:
    """Whether the cassette file was created at or after ``started`` (by this run)."""
    try:
        header, _records, _end, _size = read_records(cassette)
    except CassetteError:
        return False
    created = header.get("created")
    return isinstance(created, int | float) and created >= started


def decide(mode: RecordMode, cassette: Path, run_started: float) -> Action:
    """The action for a test starting now (see the module docstring)."""
    if mode is RecordMode.NONE:
        return Action.REPLAY
    if mode is RecordMode.NEW_EPISODES:
        return Action.EXTEND
    if mode is RecordMode.ONCE and cassette.exists() and not written_since(cassette, run_started):
        return Action.REPLAY
    return Action.RECORD


def labels_written_since(cassette: Path, started: float) -> set[str]:
    """The ``test`` labels of a cassette's interactions when the file was written by this
    run (created at or after ``started``); empty when it was not, or cannot be read."""
    try:
        cas = load(cassette)
    except CassetteError:
        return set()
    created = cas.header.get("created")
    if not isinstance(created, int | float) or created < started:
        return set()
    return {ix.labels.get("test", "") for ix in cas}


def matrix_step(mode: RecordMode, cassette: Path, run_started: float, group: Collection[str]) -> Action | str:
    """What a case of a profile matrix does now, told from the files alone.

    ``group`` holds the recording labels of the cases that share this case's
    recording: its matrix, the cases differing from it only in profile (one
    label: a test with one profile, not faithful, a matrix of one). Answers:

    * a message: one of them recorded in this run and failed (its recording
      is ``NAME.tape.failed``, labelled with it): nothing to replay, and the
      same requests are not sent upstream again;
    * :attr:`Action.REPLAY`: the cassette holds the group's recording, from
      this run, or (``once``) from an earlier one, or the mode never records;
    * :attr:`Action.RECORD` / :attr:`Action.EXTEND`: this case records the
      group (``new_episodes`` always extends: the caller remembers which
      groups it extended, and an extension the files do not show is only a
      replay with nothing new to record).
    """
    failed = sorted(labels_written_since(failed_path(cassette), run_started) & set(group))
    if failed:
        return matrix_failed(failed[0], cassette, alone=len(group) == 1)
    if mode is RecordMode.NONE:
        return Action.REPLAY
    if mode is RecordMode.NEW_EPISODES:
        return Action.EXTEND
    if not cassette.exists():
        return Action.RECORD
    if mode is RecordMode.ONCE and not written_since(cassette, run_started):
        return Action.REPLAY
    return Action.REPLAY if labels_written_since(cassette, run_started) & set(group) else Action.RECORD


def matrix_failed(by: str, cassette: Path, *, alone: bool = False) -> str:
    """Why a matrix case has nothing to replay: case ``by`` recorded its matrix and failed
    (``alone``: ``by`` is a matrix of one, the test itself, run again in this run)."""
    failed = failed_path(cassette)
    where = f" (its recording is in {failed.name})" if failed.exists() else ""
    if alone:
        return (
            f"{by} failed while it recorded its cassette under faithful in this run{where}: there is "
            "nothing to replay under its profile, and its requests are not sent upstream again"
        )
    return (
        f"{by} ran first with no recording of this profile matrix and failed while it recorded "
        f"it in this run{where}: there is nothing to replay, and its requests are not sent upstream again"
    )


def recording_path(cassette: Path) -> Path:
    """A private file beside the cassette for one test's recording (its folder is created)."""
    cassette.parent.mkdir(parents=True, exist_ok=True)
    return cassette.with_name(f".{cassette.name}.{os.getpid()}.{next(_counter)}.recording")


def failed_path(cassette: Path) -> Path:
    return cassette.with_name(cassette.name + FAILED_SUFFIX)


def _append(recording: Path, cassette: Path) -> None:
    with CassetteWriter(cassette) as w:
        for ix in load(recording):
            w.add(ix)
    recording.unlink()


def commit(
    recording: Path, cassette: Path, mode: RecordMode, *, passed: bool, run_started: float, lock_timeout: float = 120.0
) -> Outcome:
    """Move a finished recording into its cassette (or aside, when the test failed)."""
    with cassette_lock(cassette, lock_timeout):
        if not passed:
            os.replace(recording, failed_path(cassette))
            return Outcome.KEPT
        with contextlib.suppress(FileNotFoundError):
            failed_path(cassette).unlink()
        if not cassette.exists():
            os.replace(recording, cassette)
            return Outcome.CREATED
        if mode is RecordMode.ALL and not written_since(cassette, run_started):
            os.replace(recording, cassette)
            return Outcome.REPLACED
        _append(recording, cassette)
        return Outcome.APPENDED


def discard(recording: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        recording.unlink()
