"""The recorder under load and under failure: real ``streamtape record`` processes, a stamped
upstream in its own process (tests/support/reliability.py), real SIGKILLs, a really full disk.

- 200 concurrent streams: every one recorded, the cassette's body of each
  byte-identical to what its client received, in the same pieces.
- SIGKILL at a random moment under that load, ten times, appending to one
  cassette: the file always loads, and every interaction the recorder
  reported saved is in it, complete and identical to what its client got.
- Two recorders on one cassette: the second is refused at start, naming the
  first's pid; the first goes on recording and the file holds only its records.
- An unwritable cassette path is one clear error at start; a disk that fills
  up mid-recording (a 96 KiB tmpfs when this runs as root, else a file size
  limit, RLIMIT_FSIZE, which makes the kernel fail the write the same way)
  leaves every client served, one error line, each lost interaction listed,
  and a cassette that loads with exactly the ones reported saved.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import streamtape
from streamtape.cassette.model import Outcome
from tests.support.processes import STREAMTAPE, start
from tests.support.recording import recording
from tests.support.reliability import Fetched, fetch_many

pytestmark = pytest.mark.slow

EVENTS, GAP_MS = 40, 25


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """The stamped upstream (``EVENTS`` events ``GAP_MS`` apart per request), in its own process."""
    with start(
        [sys.executable, "-m", "tests.support.reliability", "upstream", "--events", str(EVENTS), "--gap-ms", str(GAP_MS)],
        r"upstream on (\S+:\d+)",
    ) as proc:
        yield proc.url
        proc.kill()


def paths(n: int, tag: str) -> list[str]:
    return [f"/v1/chat/completions?c={tag}{i}" for i in range(n)]


def fetch(port: int, ps: list[str], stagger_s: float = 0.5) -> list[Fetched]:
    return asyncio.run(fetch_many("127.0.0.1", port, ps, stagger_s=stagger_s))


def test_200_concurrent_streams_are_all_recorded_as_their_clients_received_them(
    tmp_path: Path, upstream: str
) -> None:
    out = tmp_path / "load.tape"
    with recording(out, upstream=upstream) as rec:
        got = fetch(rec.port, paths(200, "a"))
        rec.wait_lines(200, timeout=60)
    assert rec.proc.returncode == 0
    assert [f.ending for f in got] == ["complete"] * 200
    assert all(len(f.pieces) == EVENTS for f in got)
    cas = streamtape.load(out)
    assert cas.warnings == []
    by_path = {ix.request.path: ix for ix in cas}
    assert sorted(by_path) == sorted(f.key for f in got)
    for f in got:
        ix = by_path[f.key]
        assert ix.outcome is Outcome.COMPLETE
        assert ix.response is not None and ix.response.body == f.body
        # The same pieces: one upstream chunk, one recorded piece, one chunk to the client.
        assert [p.data for p in ix.response.pieces] == [d for _, d in f.pieces]


_SAVED = re.compile(r"^POST (\S+) 200 .* complete$")


async def _load_and_kill(pid: int, port: int, ps: list[str], kill_after: float,
                         after_a_save: list[str] | None = None) -> list[Fetched]:
    """Start the streams, SIGKILL the recorder ``kill_after`` seconds in, return what the
    clients got (the streams cut by the kill end as ``eof`` or ``reset``). With
    ``after_a_save`` (the recorder's stdout lines, as they come) the seconds count from
    the first interaction it reports saved (at most 30 s of waiting for one)."""
    task = asyncio.ensure_future(fetch_many("127.0.0.1", port, ps, stagger_s=0.5, timeout=30))
    if after_a_save is not None:
        deadline = time.monotonic() + 30
        while not any(_SAVED.match(line) for line in list(after_a_save)) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    await asyncio.sleep(kill_after)
    os.kill(pid, signal.SIGKILL)
    return await task


def test_sigkill_under_load_never_loses_a_saved_interaction_nor_the_file(tmp_path: Path, upstream: str) -> None:
    out = tmp_path / "killed.tape"
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    saved_bodies: dict[str, bytes] = {}
    for round_ in range(10):
        kill_after = rng.uniform(0.2, 1.6)  # streams last ~1 s each, started over 0.5 s
        # The last round kills after the first save, so one round has saved something to
        # check even where a loaded machine slowed every stream past the earlier kills.
        last = round_ == 9
        with recording(out, upstream=upstream) as rec:
            fetched = asyncio.run(_load_and_kill(rec.proc.pid, rec.port, paths(200, f"r{round_}-"),
                                                 rng.uniform(0, 0.5) if last else kill_after,
                                                 after_a_save=rec.out_lines if last else None))
            rec.wait(10)
            stdout = rec.stdout
        got = {f.key: f for f in fetched}
        saved = [m.group(1) for line in stdout.splitlines() if (m := _SAVED.match(line))]
        msg = f"seed {seed}, round {round_}, killed after {kill_after:.2f} s"
        cas = streamtape.load(out)  # never raises: a torn tail is dropped with a warning
        by_path = {ix.request.path: ix for ix in cas}
        for path in saved:
            ix = by_path.get(path)
            assert ix is not None, f"{msg}: {path} was reported saved but is not in the cassette"
            assert ix.outcome is Outcome.COMPLETE and ix.response is not None, msg
            assert got[path].ending == "complete", msg
            assert ix.response.body == got[path].body, msg
            saved_bodies[path] = ix.response.body
        # Whatever else made it to disk is a prefix of what its client received.
        for ix in cas:
            f = got.get(ix.request.path)
            if f is not None and ix.response is not None:
                assert f.body.startswith(ix.response.body), msg
    cas = streamtape.load(out)
    by_path = {ix.request.path: ix for ix in cas}
    assert saved_bodies, f"seed {seed}: no round saved anything before its kill"
    assert all(by_path[p].response.body == b for p, b in saved_bodies.items())  # type: ignore[union-attr]


def test_a_second_recorder_on_the_same_cassette_is_refused_naming_the_first(
    tmp_path: Path, upstream: str
) -> None:
    out = tmp_path / "one.tape"
    with recording(out, upstream=upstream) as first:
        second = subprocess.run(
            [*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), "--upstream", upstream],
            capture_output=True, text=True, timeout=60,
        )
        assert second.returncode == 2
        (line,) = second.stderr.strip().splitlines()
        assert line.startswith("streamtape: error: ") and str(out) in line
        assert f"pid {first.proc.pid}" in line and "one writer at a time" in line
        got = fetch(first.port, paths(3, "one"), stagger_s=0)
        first.wait_lines(3)
    assert first.proc.returncode == 0
    cas = streamtape.load(out)
    assert sorted(ix.request.path for ix in cas) == sorted(f.key for f in got)
    assert not (tmp_path / f".{out.name}.lock").exists()  # released at the first's exit


@pytest.mark.parametrize(
    ("make", "expect"),
    [
        (lambda d: d / "missing" / "x.tape", "does not exist"),
        (lambda d: d, "is a directory"),
    ],
    ids=["folder-missing", "a-directory"],
)
def test_an_unwritable_cassette_path_is_one_clear_error_at_start(
    tmp_path: Path, upstream: str, make: object, expect: str
) -> None:
    out = make(tmp_path)  # type: ignore[operator]
    r = subprocess.run(
        [*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), "--upstream", upstream],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("streamtape: error: ") and expect in line and str(out) in line


def test_a_read_only_filesystem_is_one_clear_error_at_start(upstream: str) -> None:
    with _tmpfs("ro,size=64k") as mnt:
        r = subprocess.run(
            [*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(mnt / "x.tape"),
             "--upstream", upstream],
            capture_output=True, text=True, timeout=60,
        )
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("streamtape: error: ") and "Read-only file system" in line


@contextlib.contextmanager
def _tmpfs(options: str) -> Iterator[Path]:
    """A tmpfs mounted for the block (skips the test where mounting is not permitted)."""
    import tempfile

    mnt = Path(tempfile.mkdtemp(prefix="streamtape-tmpfs-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or 'mount failed'})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


_LIMIT_FSIZE = """
import os, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execv(sys.argv[2], sys.argv[2:])
"""


@contextlib.contextmanager
def _small_disk(how: str, tmp_path: Path, size: int) -> Iterator[tuple[Path, list[str]]]:
    """A cassette path where writes fail past ``size`` bytes, and the command prefix that runs
    the recorder there: a tmpfs of that size, or a file size limit on the recorder."""
    if how == "tmpfs":
        with _tmpfs(f"size={size}") as mnt:
            yield mnt / "full.tape", []
    else:
        yield tmp_path / "full.tape", [sys.executable, "-c", _LIMIT_FSIZE, str(size)]


@pytest.mark.parametrize("how", ["tmpfs", "rlimit-fsize"])
def test_a_disk_that_fills_up_mid_recording_keeps_serving_and_says_once_what_was_lost(
    tmp_path: Path, upstream: str, how: str
) -> None:
    size = 96 * 1024  # about 20 of these recordings fit; 40 are made
    with _small_disk(how, tmp_path, size) as (out, prefix):
        cmd = [*prefix, *STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), "--upstream", upstream]
        with start(cmd, r"recording on (\S+:\d+)") as proc:
            got: list[Fetched] = []
            for batch in range(4):  # in waves, so some are saved before the disk is full
                got += fetch(proc.port, paths(10, f"w{batch}-"), stagger_s=0.2)
            lines = proc.wait_lines(len(got), timeout=30)
            proc.stop(signal.SIGINT, timeout=30)
        err = proc.stderr
        cas = streamtape.load(out)
    # Every client was served in full, disk or no disk.
    assert [f.ending for f in got] == ["complete"] * len(got)
    assert all(len(f.pieces) == EVENTS for f in got)
    # One error, said once, then the stop line counting both.
    errors = [x for x in err.splitlines() if x.startswith("streamtape: error: ")]
    assert len(errors) == 1, err
    assert f"cannot write {out}" in errors[0] and ("No space left" in errors[0] or "File too large" in errors[0])
    saved = [x.split()[1] for x in lines if not x.endswith("[not saved]")]
    lost = [x.split()[1] for x in lines if x.endswith("[not saved]")]
    assert saved and lost, lines
    assert sorted(saved + lost) == sorted(f.key for f in got)
    assert err.strip().splitlines()[-1] == (
        f"streamtape: stopped; {len(saved)} interactions saved to {out}, {len(lost)} could not be written"
    )
    assert proc.returncode == 1
    # The cassette loads without a warning; its complete interactions are exactly the ones
    # reported saved, byte for byte. Lost ones whose first records made it to disk before
    # the failure load as interrupted (their end never did).
    assert cas.warnings == []
    complete = [ix for ix in cas if ix.outcome is Outcome.COMPLETE]
    assert sorted(ix.request.path for ix in complete) == sorted(saved)
    bodies = {f.key: f.body for f in got}
    assert all(ix.response is not None and ix.response.body == bodies[ix.request.path] for ix in complete)
    assert all(ix.outcome is Outcome.INTERRUPTED and ix.request.path in lost
               for ix in cas if ix.outcome is not Outcome.COMPLETE)
