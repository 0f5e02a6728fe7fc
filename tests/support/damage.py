"""Recorded cassettes to damage, and the judgement of what a reader made of the damage.

A cassette is recorded the way ``streamtape record`` writes one (the
:class:`~streamtape.capture.recorder.Recorder` into a
:class:`~streamtape.cassette.writer.BackgroundWriter`), one interaction after
another or several at once; :func:`judge` loads a damaged copy and sorts each
recorded interaction into *loaded* (it must then be byte for byte what was
recorded), *reported* (left out and named by the reader) or *silently lost or
changed* (the failure the tests rule out).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import streamtape
from streamtape import DamagedRecordError, Interaction, Outcome, Request
from streamtape.capture.recorder import Recorder
from streamtape.cassette.reader import open_layout
from streamtape.cassette.writer import BackgroundWriter

MS = 1_000_000


@dataclass(frozen=True)
class Recorded:
    """A recorded cassette's bytes, its interactions as loaded undamaged, and where they lie."""

    data: bytes
    header_end: int
    interactions: list[Interaction]
    spans: list[tuple[int, int]]
    """Each interaction's first record's start and last record's end."""
    begin_ends: list[int]
    """Where each interaction's begin record ends."""


def record(path: Path, count: int, *, pieces: int = 6, at_once: int = 1, index: bool = False) -> Recorded:
    """``count`` chat streams recorded into ``path``, ``at_once`` of them interleaved, every
    piece in a data record of its own (the recorder's batches of a slow stream)."""
    w = BackgroundWriter(path)
    if index:
        w.writer.index_min_bytes = 0
    rec = Recorder(w.submit, w.new_id, flush_ns=0)
    t = 0
    for first in range(0, count, at_once):
        group = list(range(first, min(first + at_once, count)))
        for k in group:
            body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"question %d"}]}' % k
            rec.begin(k, Request("POST", "https://api.test/v1/chat/completions", body=body), t, {"k": str(k)})
            rec.response_headers(k, 200, "OK", "HTTP/1.1", (("Content-Type", "text/event-stream"),), t + MS)
        for i in range(pieces):
            for k in group:
                t += MS
                rec.piece(k, b'data: {"k":%d,"i":%d,"text":"w\xc3\xb6rd"}\n\n' % (k, i), t)
        for k in group:
            t += MS
            rec.finish(k, Outcome.COMPLETE, None, t)
    w.close()
    layout, _, fd = open_layout(path, use_index=False)
    os.close(fd)
    tab = layout.table
    spans = []
    for i in range(len(tab)):
        recs = tab.records(i)
        spans.append((min(o for o, _, _ in recs), max(o + n for o, n, _ in recs)))
    begin_ends = [tab.offsets[tab.starts[i]] + tab.lengths[tab.starts[i]] for i in range(len(tab))]
    loaded = list(streamtape.load(path))
    for ix in loaded:
        list(ix.pieces)
    header_end = min(o for o, _ in spans)
    return Recorded(path.read_bytes(), header_end, loaded, spans, begin_ends)


@dataclass
class Verdict:
    loaded: dict[int, Interaction] = field(default_factory=dict)
    reported: set[int] = field(default_factory=set)
    torn: bool = False
    """The reader dropped a torn tail (a cut file): what follows the cut is gone, and said so."""
    problems: list[str] = field(default_factory=list)


def judge(path: Path, recorded: Recorded, *, verify: bool = True, cut: int | None = None) -> Verdict:
    """Load the damaged ``path`` and hold every recorded interaction to the rules.

    ``cut``: the file was cut there. A cut that falls between two records leaves
    a file that reads as a shorter recording (nothing in it can tell): what began
    after the cut may be gone, what was under way loads ``interrupted``."""
    v = Verdict()
    cas = streamtape.load(path, verify=verify)
    v.torn = any("torn last record" in w for w in cas.warnings) or cut is not None
    for d in cas.damage:
        v.reported.update(d.interactions)
    if cas.damage and not any("damaged record" in w for w in cas.warnings):
        v.problems.append("damage found but no warning line")
    for i in range(len(cas)):
        try:
            ix = cas[i]
            list(ix.pieces)
        except DamagedRecordError as e:
            if e.interaction is None:
                v.problems.append(f"a damaged record with no interaction named: {e}")
            else:
                v.reported.add(e.interaction)
            continue
        k = int(ix.labels["k"])
        if k in v.loaded:
            v.problems.append(f"interaction {k} loaded twice")
        v.loaded[k] = ix
    # Interactions after the last one the file still shows, every record damaged: the
    # reader reports the damage, but nothing is left to say how many there were.
    last = max(v.loaded.keys() | v.reported, default=-1)
    for k, want in enumerate(recorded.interactions):
        got = v.loaded.get(k)
        if got is None:
            trailing = k > last and bool(cas.damage)
            if k not in v.reported and not trailing and not (v.torn and (cut is None or recorded.begin_ends[k] > cut)):
                v.problems.append(f"interaction {k} is gone and nobody said so")
        elif got != want:
            cut = v.torn and got.outcome == Outcome.INTERRUPTED and tuple(got.pieces) == tuple(want.pieces)[: len(got.pieces)]
            if not cut:
                v.problems.append(f"interaction {k} loaded changed: {got!r} != {want!r}")
    return v
