"""The cassette lock across processes: a second writer waits for it, one that waits too long
fails naming the holder, and four writing processes never interleave their appends. The rules
that turn a test's recording into its cassette are tests/unit/test_pytest_tapes.py."""

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
