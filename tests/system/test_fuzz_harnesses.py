"""The atheris harnesses of tests/corpus run for real, a bounded number of runs each, so CI runs
them: coverage-guided fuzzing of the SSE / NDJSON parsers and normalizers
(``fuzz_atheris``, the hypothesis tests are tests/unit/test_sse.py) and of the cassette reader
(``fuzz_cassette``, tests/unit/test_cassette_fuzz.py). Each is a libFuzzer process of its own,
started from the checkout as ``python -m tests.corpus.fuzz_...``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.cassette_reading import cassette_bytes

pytestmark = pytest.mark.slow


def fuzz(harness: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"tests.corpus.{harness}", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_atheris_fuzzing_finds_no_crash_or_mismatch() -> None:
    pytest.importorskip("atheris")
    r = fuzz("fuzz_atheris", "-runs=20000", "-seed=1", timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Done 20000 runs" in r.stderr


@pytest.mark.skipif(
    sys.version_info < (3, 12),
    reason="on Python 3.11 atheris once ended a CI run with libFuzzer's 'fuzz target exited' on an "
    "input that reads cleanly when replayed (a harness flake, not a reader finding); the reader "
    "is the same code on every Python and is fuzzed on 3.12+",
)
def test_atheris_finds_no_other_exception_and_no_memory_beyond_the_bound(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for index in (False, True):
        (seeds / f"seed{int(index)}.tape").write_bytes(cassette_bytes(tmp_path, index))
    r = fuzz("fuzz_cassette", "-runs=10000", "-seed=1", "-max_len=4096", f"-artifact_prefix={tmp_path}/",
             str(seeds), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Done 10000 runs" in r.stderr
