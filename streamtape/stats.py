"""Timing figures of one interaction: TTFB, TTFT, gaps between tokens, rate, stalls.

Pure: computed from an Interaction and its :class:`~streamtape.shapes.Analysis`.
All times are nanoseconds from t = 0: the moment the request was handed to the
upstream, so a new connection's setup is not in them (see :class:`streamtape.cassette.Setup`;
in cassettes recorded before setup marks, t = 0 is when the proxy had the whole request).

A reasoning model streams its thinking before its answer, so "first token" has
two answers: the first reasoning token (the server started generating) and the
first answer token (the user sees something). TTFT stays the first answer token,
as it was; ``first_reasoning_ns`` stands beside it. Gaps, stalls and the decode
rate count every generated token, reasoning included: a stall while the model
thinks is a stall, and the servers' completion counts include reasoning tokens.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from .cassette.model import Interaction
from .shapes import Analysis, analyze

DEFAULT_STALL_MS = 1000.0

N = TypeVar("N", int, float)


@dataclass(frozen=True, slots=True)
class Stall:
    after_ns: int
    """When the silence began (time of the token event before it)."""
    gap_ns: int


@dataclass(frozen=True)
class Stats:
    ttfb_ns: int | None
    """First body byte."""
    ttft_ns: int | None
    """First answer token: a non-empty piece of visible text, a refusal or a tool-call
    fragment (reasoning does not count; see ``first_reasoning_ns``)."""
    gap_p50_ns: int | None
    """Gaps between consecutive token events, reasoning or answer (0 when two share
    one piece)."""
    gap_p95_ns: int | None
    gap_max_ns: int | None
    duration_ns: int | None
    pieces: int
    events: int
    """Wire events (SSE events dispatched, NDJSON lines); for a raw body, the pieces."""
    events_per_piece: float | None
    tokens: int | None
    """Completion tokens as the server counted them (usage, eval_count, tokens_predicted)."""
    tokens_per_s: float | None
    """Decode rate: (tokens - 1) over the time from the first to the last token event."""
    stalls: tuple[Stall, ...] = ()
    """Gaps between token events longer than the stall threshold."""
    stall_ms: float = DEFAULT_STALL_MS
    headers_ns: int | None = None
    content_events: int = 0
    prompt_tokens: int | None = None
    gaps_ns: tuple[int, ...] = field(default=(), repr=False)
    first_reasoning_ns: int | None = None
    """First reasoning token (thinking text or a redacted block), or None without reasoning."""
    reasoning_events: int = 0
    reasoning_tokens: int | None = None
    """Of ``tokens``, the reasoning ones, when the server counts them."""

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d.pop("gaps_ns")
        d["stalls"] = [{"after_ns": s.after_ns, "gap_ns": s.gap_ns} for s in self.stalls]
        return d


def percentile(values: Sequence[N], q: float) -> N | None:
    """Nearest-rank percentile (q in 0..100) of ``values``, or None when empty: always one
    of the values (a gap that happened), never a mean of two."""
    if not values:
        return None
    s = sorted(values)
    k = max(1, math.ceil(q / 100 * len(s)))
    return s[min(k, len(s)) - 1]


def compute(ix: Interaction, analysis: Analysis | None = None,
            stall_ms: float = DEFAULT_STALL_MS) -> Stats:
    """Figures for one interaction (``analysis`` is computed when not given)."""
    a = analysis if analysis is not None else analyze(ix)
    answer = [e.at_ns for e in a.events if e.is_content]
    reasoning = [e.at_ns for e in a.events if e.is_reasoning]
    times = [e.at_ns for e in a.events if e.is_token]
    gaps = [b - a_ for a_, b in itertools.pairwise(times)]
    limit = stall_ms * 1_000_000
    stalls = tuple(Stall(times[i], g) for i, g in enumerate(gaps) if g > limit)
    pieces = len(ix.pieces)
    events = a.events_count if a.wire is not None else pieces
    tokens = a.usage.completion_tokens if a.usage is not None else None
    rate = None
    if tokens is not None and tokens > 1 and len(times) >= 2 and times[-1] > times[0]:
        rate = (tokens - 1) / ((times[-1] - times[0]) / 1e9)
    return Stats(
        ttfb_ns=ix.first_byte_ns,
        ttft_ns=answer[0] if answer else None,
        gap_p50_ns=percentile(gaps, 50),
        gap_p95_ns=percentile(gaps, 95),
        gap_max_ns=max(gaps) if gaps else None,
        duration_ns=ix.duration_ns,
        pieces=pieces,
        events=events,
        events_per_piece=events / pieces if pieces else None,
        tokens=tokens,
        tokens_per_s=rate,
        stalls=stalls,
        stall_ms=stall_ms,
        headers_ns=ix.response.headers_at_ns if ix.response is not None else None,
        content_events=len(answer),
        prompt_tokens=a.usage.prompt_tokens if a.usage is not None else None,
        gaps_ns=tuple(gaps),
        first_reasoning_ns=reasoning[0] if reasoning else None,
        reasoning_events=len(reasoning),
        reasoning_tokens=a.usage.reasoning_tokens if a.usage is not None else None,
    )
