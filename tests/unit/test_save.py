"""``streamtape.save``: a batch written whole, with one fsync, never half a new file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction
from tests.support.builders import interaction


def _batch(n: int) -> list[Interaction]:
    return [interaction([b"data: %d\n\n" % i, b"data: [DONE]\n\n"], times=[1_000, 2_000],
                        url=f"http://up.test/v1/chat/completions?i={i}") for i in range(n)]


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_saving_a_batch_fsyncs_a_few_times_not_once_per_interaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_fsyncs(monkeypatch)
    streamtape.save(tmp_path / "new.tape", _batch(200))
    new = len(calls)
    streamtape.save(tmp_path / "new.tape", _batch(200))  # an append
    appended = len(calls) - new
    assert new <= 3 and appended <= 3, (new, appended)  # the file, and the folder after the rename
    assert len(streamtape.load(tmp_path / "new.tape")) == 400


def test_a_new_cassette_appears_only_whole_and_leaves_no_part_file(tmp_path: Path) -> None:
    target = tmp_path / "t.tape"

    def failing() -> Iterator[Interaction]:
        yield from _batch(3)
        assert not target.exists()  # the batch goes to a file beside it until it is whole
        raise RuntimeError("the caller's generator fails")

    with pytest.raises(RuntimeError):
        streamtape.save(target, failing())
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no part file, no lock file left

    streamtape.save(target, _batch(3))
    assert [ix.request.url for ix in streamtape.load(target)] == [ix.request.url for ix in _batch(3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.tape"]


def test_an_append_that_fails_keeps_what_the_file_held(tmp_path: Path) -> None:
    target = tmp_path / "t.tape"
    streamtape.save(target, _batch(2))

    def failing() -> Iterator[Interaction]:
        yield from _batch(1)
        raise RuntimeError("the caller's generator fails")

    with pytest.raises(RuntimeError):
        streamtape.save(target, failing())
    urls = [ix.request.url for ix in streamtape.load(target)]
    assert urls[:2] == [ix.request.url for ix in _batch(2)]
