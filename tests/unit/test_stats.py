"""Timing figures from recorded piece times."""

from __future__ import annotations

import json

import pytest

from streamtape import Interaction, Request
from streamtape.cassette.model import Outcome
from streamtape.shapes import analyze
from streamtape.stats import compute, percentile
from tests.corpus import capture
from tests.support.builders import MS, interaction, sse


def chat_ix(times_and_contents: list[tuple[int, str]], usage: dict[str, int] | None = None,
            end_ns: int | None = None) -> Interaction:
    """A chat stream: the role event at 5 ms, then each content at its time in ms (and the usage
    event with the last); the end at ``end_ns`` (by default 1 ms after the last piece)."""
    pieces = [sse({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    times = [5 * MS]
    for t, c in times_and_contents:
        ev = {"object": "chat.completion.chunk",
              "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
        pieces.append(sse(ev, compact=False))
        times.append(t * MS)
    if usage:
        pieces.append(sse({"object": "chat.completion.chunk", "choices": [], "usage": usage}, compact=False))
        times.append(times[-1])
    return interaction(pieces, times=times, head_ns=2 * MS, end_ns=end_ns, reason="", framing_header=False,
                       url="http://127.0.0.1/v1/chat/completions", request_headers=(), body=b"")


def test_ttfb_is_first_byte_ttft_is_first_non_empty_content():
    s = compute(chat_ix([(10, ""), (20, "a"), (30, "b")]))
    assert s.ttfb_ns == 5 * MS and s.headers_ns == 2 * MS
    assert s.ttft_ns == 20 * MS and s.content_events == 2


def test_gaps_percentiles_and_max():
    times = [(10 + 10 * i, "x") for i in range(20)] + [(300, "y")]
    s = compute(chat_ix(times))
    assert s.gap_p50_ns == 10 * MS and s.gap_max_ns == 100 * MS
    assert s.gap_p95_ns == 10 * MS  # 20 gaps: the 95th percentile by nearest rank is the 19th
    assert len(s.gaps_ns) == 20
    times[-1] = (200, "y")  # now two in one piece-time: a gap of 0
    assert compute(chat_ix(times)).gap_max_ns == 10 * MS


def test_stalls_over_threshold():
    s = compute(chat_ix([(10, "a"), (20, "b"), (1500, "c"), (1510, "d")]), stall_ms=500)
    assert [(st.after_ns, st.gap_ns) for st in s.stalls] == [(20 * MS, 1480 * MS)]
    assert compute(chat_ix([(10, "a"), (1500, "c")]), stall_ms=2000).stalls == ()


def test_tokens_from_usage_and_decode_rate():
    s = compute(chat_ix([(100, "a"), (200, "b"), (300, "c")],
                        usage={"prompt_tokens": 4, "completion_tokens": 3}))
    assert s.tokens == 3 and s.prompt_tokens == 4
    assert s.tokens_per_s == pytest.approx(10.0)  # 2 tokens after the first in 200 ms
    assert compute(chat_ix([(100, "a")])).tokens is None


def test_pieces_events_duration():
    ix = chat_ix([(10, "a"), (20, "b")], end_ns=50 * MS)
    s = compute(ix, analyze(ix))
    assert (s.pieces, s.events, s.events_per_piece, s.duration_ns) == (3, 3, 1.0, 50 * MS)


def test_no_response_and_empty_body():
    s = compute(Interaction(Request("GET", "http://127.0.0.1/"), None, outcome=Outcome.UPSTREAM_ERROR))
    assert (s.ttfb_ns, s.ttft_ns, s.gap_p50_ns, s.pieces, s.events_per_piece) == (
        None, None, None, 0, None)


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5], 95) == 5
    assert percentile([1, 2, 3, 4], 50) == 2 and percentile([1, 2, 3, 4], 100) == 4


def test_real_capture_rate_matches_the_servers_own_timing():
    ix = capture("native_completion_slow")
    a = analyze(ix)
    s = compute(ix, a)
    server_rate = a.wire_events[-1].value["timings"]["predicted_per_second"]
    assert s.tokens == 24
    assert s.tokens_per_s == pytest.approx(server_rate, rel=0.1)
    assert s.ttft_ns == ix.pieces[0].at_ns
    assert s.gap_p50_ns is not None and 5 * MS < s.gap_p50_ns < 15 * MS  # the slow model: about 10 ms per token
    d = s.to_dict()
    assert d["tokens"] == 24 and "gaps_ns" not in d and json.dumps(d)
