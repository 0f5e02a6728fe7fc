"""Coverage-guided fuzzing of the cassette reader with atheris.

    .venv/bin/python -m tests.corpus.fuzz_cassette -runs=4000 SEED_DIR   (tests/system/test_fuzz_harnesses.py runs it)

Each input is written to a file and read all the way through (every interaction,
its body and pieces, a session's messages) under tracemalloc. Checked: the only
exception is CassetteError, naming the file on one line, and the peak memory
stays within 64 times the file's size plus 256 KiB. Seed it with a directory of
real cassettes (the test passes two: with and without an index).
"""

from __future__ import annotations

import os
import sys
import tempfile
import tracemalloc
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from streamtape import CassetteError
    from tests.support.cassette_reading import MEMORY_FACTOR, MEMORY_FIXED, read_everything

PATH = Path(tempfile.mkdtemp(prefix="streamtape-fuzz-")) / "input.tape"


def target(data: bytes) -> None:
    PATH.write_bytes(data)
    tracemalloc.start()
    try:
        try:
            read_everything(PATH)
        except CassetteError as e:
            assert str(PATH) in str(e) and "\n" not in str(e), str(e)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= MEMORY_FACTOR * len(data) + MEMORY_FIXED, (peak, len(data))


if __name__ == "__main__":
    atheris.Setup(sys.argv, target)
    try:
        atheris.Fuzz()
    finally:
        if PATH.exists():
            os.unlink(PATH)
