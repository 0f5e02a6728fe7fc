"""Recordings that more than one test module builds: the transport tests' Reykjavík stream,
``play``'s chat answers, and the numbered cassettes of the index tests (each once, for a
unit module and the system module beside it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamtape import Interaction
from streamtape.cassette.records import interaction_records
from streamtape.cassette.writer import CassetteWriter
from tests.support import builders
from tests.support.builders import MS, interaction

# -- the in-process transports' stream (tests/unit and tests/system test_transport.py)

URL = "http://llm.test/v1/chat/completions"
BODY: dict[str, Any] = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

EVENTS = [
    b'data: {"choices":[{"delta":{"content":"Reykjav"}}]}\n\n',
    'data: {"choices":[{"delta":{"content":"ík 日本"}}]}\n\n'.encode(),
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


def sse_ix(
    pieces: list[bytes] = EVENTS,
    gap_ms: int = 20,
    framing: str = "chunked",
    headers: tuple[tuple[str, str], ...] = (),
    url: str = URL,
    body: object = BODY,
) -> Interaction:
    """The Reykjavík stream, the first piece 10 ms in and each next ``gap_ms`` later; a
    close-delimited recording says ``Connection: close``."""
    close = (("Connection", "close"),) if framing == "close-delimited" else ()
    return interaction(
        pieces, first_ns=10 * MS, gap_ns=gap_ms * MS, head_ns=2 * MS,
        end_ns=(10 + len(pieces) * gap_ms) * MS, extra_headers=(*headers, *close),
        framing=framing, url=url, body=body,
    )


# -- play's chat answers (tests/unit and tests/system test_play.py)

OPENAI = "https://api.openai.com/v1/chat/completions"


def sse(doc: object) -> bytes:
    """An SSE event as play's tests write it (spaced JSON)."""
    return builders.sse(doc, compact=False)


def delta(**d: object) -> bytes:
    return sse({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d}]})


def openai_chat(words=("Héllo", " wörld", "!"), *, gap_ms: int = 40, outcome: str = "complete",
                done: bool = True) -> Interaction:
    events = [delta(role="assistant", content="")] + [delta(content=w) for w in words]
    if outcome == "complete":
        events.append(sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        if done:
            events.append(b"data: [DONE]\n\n")
    return interaction(events, first_ns=gap_ms * MS, gap_ns=gap_ms * MS, head_ns=5 * MS, framing_header=False,
                       outcome=outcome, url=OPENAI, request_headers=())


def binary() -> Interaction:
    return interaction([b"\x00\x01plain", b" bytes\xff"], times=[MS, 2 * MS], head_ns=0, end_ns=3 * MS,
                       content_type="application/octet-stream", framing_header=False, method="GET",
                       url="https://h/blob", request_headers=(), body=b"")


# -- the index tests' cassettes (tests/unit and tests/system test_cassette_index.py)


def numbered(k: int, pieces: int = 5) -> Interaction:
    """A chat recording whose request asks question ``k`` and whose answer names it."""
    return interaction(
        [builders.sse({"k": k, "i": i}) for i in range(pieces)],
        url="https://api.openai.com/v1/chat/completions",
        body={"model": "m", "stream": True, "messages": [{"role": "user", "content": f"question {k}"}]},
        labels={"k": str(k)},
    )


def write(path: Path, interactions: list[Interaction], *, index: bool = True) -> None:
    """Through the writer in one write (one fsync), with or without the index on close."""
    with CassetteWriter(path, index_min_bytes=0 if index else 1 << 62) as w:
        w.write([rec for ix in interactions for rec in interaction_records(ix, w.new_id())])
