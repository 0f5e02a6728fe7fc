"""What reading a damaged cassette must stay within, and the cassettes the fuzzers start from:
shared by tests/unit/test_cassette_fuzz.py (hypothesis) and its atheris harness,
tests/corpus/fuzz_cassette.py (run by tests/system/test_fuzz_harnesses.py)."""

from __future__ import annotations

from pathlib import Path

import streamtape
from streamtape import Interaction
from streamtape.cassette.model import Direction, Message, Outcome, WebSocketSession
from streamtape.cassette.records import interaction_records
from streamtape.cassette.writer import CassetteWriter
from tests.support.builders import MS, chat_ix, interaction, sse

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


def session() -> Interaction:
    """A WebSocket session: a client message in two frames, a text and a binary answer, a close."""
    ws = WebSocketSession(
        (Message(5 * MS, Direction.CLIENT, True, b'{"type":"response.create"}', (26,)),
         Message(9 * MS, Direction.SERVER, True, b'{"type":"response.done"}'),
         Message(12 * MS, Direction.SERVER, False, b"\x00\x01")),
        1000, "bye", Direction.CLIENT,
    )
    base = interaction([], status=101, reason="Switching Protocols", framing="none", content_type=None,
                       method="GET", url="https://h.test/v1/realtime", body=b"")
    return Interaction(base.request, base.response, end_ns=20 * MS, websocket=ws)


def originals() -> list[Interaction]:
    """What the seed cassettes hold: a stream, a cut stream, no response, a WebSocket session."""
    return [
        chat_ix(tag="a"),
        interaction([sse({"i": i}) for i in range(4)], outcome="upstream_closed", error="cut"),
        Interaction(chat_ix().request, None, Outcome.UPSTREAM_ERROR, "refused", 3),
        session(),
    ]


def cassette_bytes(tmp: Path, index: bool) -> bytes:
    """The :func:`originals` as one cassette file in ``tmp`` (with or without an index),
    written once and read back as bytes."""
    p = tmp / ("idx.tape" if index else "plain.tape")
    if not p.exists():
        with CassetteWriter(p, index_min_bytes=0 if index else 1 << 62) as w:
            w.write([r for ix in originals() for r in interaction_records(ix, w.new_id())])
    return p.read_bytes()
