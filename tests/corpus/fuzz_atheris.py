"""Coverage-guided fuzzing of the SSE / NDJSON parsers and every normalizer with atheris.

    .venv/bin/python -m tests.corpus.fuzz_atheris -runs=20000      (tests/system/test_fuzz_harnesses.py runs it)

Each input is split into a body and cut points. Checked: nothing raises; the
SSE events are the same fed whole, fed in pieces, and per the literal reference
parser in tests/support/sse_reference.py; NDJSON lines are the same whole and in pieces;
analyze() under every shape gives the same text whole and in pieces.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from streamtape import Interaction, Piece, Request, Response
    from streamtape.shapes import SHAPES, NDJSONParser, SSEEvent, SSEParser, analyze, event_spans

import itertools

from tests.support.sse_reference import reference_events


def pieces_of(body: bytes, cuts: list[int]) -> list[bytes]:
    cuts = sorted({c % (len(body) + 1) for c in cuts})
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def sse_events(pieces: list[bytes]):
    p = SSEParser()
    out: list[tuple[str, str, str, int | None]] = []
    for i, pc in enumerate(pieces):
        out.extend((e.event, e.data, e.id, e.retry) for e in p.feed(pc, i) if type(e) is SSEEvent)
    p.close()
    return out


def ndjson_values(pieces: list[bytes]):
    p = NDJSONParser()
    out = []
    for pc in pieces:
        out.extend(p.feed(pc))
    out.extend(p.close())
    return [(ln.valid, ln.raw) for ln in out]


def ix_of(pieces: list[bytes], ct: str) -> Interaction:
    return Interaction(Request("POST", "http://127.0.0.1/x"),
                       Response(200, headers=(("Content-Type", ct),),
                                pieces=tuple(Piece(i, p) for i, p in enumerate(pieces))))


def target(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    cuts = [fdp.ConsumeIntInRange(0, 4096) for _ in range(fdp.ConsumeIntInRange(0, 6))]
    shape = SHAPES[fdp.ConsumeIntInRange(0, len(SHAPES) - 1)]
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    split = pieces_of(body, cuts)
    whole = sse_events([body])
    assert whole == sse_events(split) == reference_events(body), (body, cuts)
    assert ndjson_values([body]) == ndjson_values(split)
    event_spans(body, "sse")
    event_spans(body, "ndjson")
    a = analyze(ix_of([body], "text/event-stream"), shape)
    b = analyze(ix_of(split, "text/event-stream"), shape)
    assert (a.text, a.events_count, a.done) == (b.text, b.events_count, b.done), (body, cuts, shape)


if __name__ == "__main__":
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()
