"""What reading a damaged cassette must stay within, shared by tests/test_cassette_fuzz.py
(hypothesis) and its atheris harness, tests/corpus/fuzz_cassette.py."""

from __future__ import annotations

from pathlib import Path

import streamtape

MEMORY_FACTOR = 64
"""Peak memory while reading a file stays under this many times its size ..."""
MEMORY_FIXED = 256 * 1024
"""... plus this many bytes."""


def read_everything(path: Path) -> streamtape.Cassette:
    """Load ``path`` and touch everything in it: every interaction, its body and pieces,
    a session's messages, the timing figures."""
    cas = streamtape.load(path)
    for ix in cas:
        if ix.response is not None:
            _ = ix.response.body
        _ = [p.data for p in ix.pieces]
        _ = ix.messages
        _ = (ix.first_byte_ns, ix.duration_ns)
    return cas
