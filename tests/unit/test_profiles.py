"""Profiles: parsing, chunkings, latencies, faults and the properties every schedule keeps.

Everything here is pure: schedules are computed and inspected, nothing sleeps.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streamtape import Interaction, Piece, ProfileError, Request, Response
from streamtape.cassette.model import Outcome
from streamtape.profiles import (
    ADVERSARIAL,
    APART_US,
    PRESETS,
    SYNTAX,
    Schedule,
    Step,
    StepKind,
    parse_profile,
)
from streamtape.shapes import event_spans
from streamtape.wire import UPSTREAM_RESET
from tests.support.builders import MS, S, interaction, sse

# --------------------------------------------------------------------------
# Building interactions


def sse_event(text: str) -> bytes:
    return sse({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]},
               compact=False)


def chat(texts: list[str], done: bool = True, **kw) -> Interaction:
    events = [sse_event(t) for t in texts] + ([b"data: [DONE]\n\n"] if done else [])
    return interaction(events, **kw)


def ndjson(texts: list[str], **kw) -> Interaction:
    lines = [
        json.dumps({"model": "m", "message": {"role": "assistant", "content": t}, "done": False}).encode() + b"\n"
        for t in texts
    ]
    lines.append(b'{"model":"m","message":{"role":"assistant","content":""},"done":true}\n')
    return interaction(lines, content_type="application/x-ndjson", url="http://upstream.test/api/chat", **kw)


def sched(profile: str, ix: Interaction, seed: int | None = None) -> Schedule:
    return parse_profile(profile).schedule(ix, seed=seed)


def boundaries(s: Schedule) -> set[int]:
    out, pos = set(), 0
    for p in s.pieces:
        pos += len(p)
        out.add(pos)
    return out


def check_shape(s: Schedule) -> None:
    """What every schedule promises its drivers."""
    assert s.steps, "a schedule has at least its final step"
    kinds = [st.kind for st in s.steps]
    assert kinds[-1] in ("end", "cut", "reset")
    assert all(k == "send" for k in kinds[:-1]), kinds
    assert all(st.data for st in s.steps[:-1]), "no empty send"
    times = [s.head_at_ns] + [st.at_ns for st in s.steps]
    assert times == sorted(times), "steps are in time order and never before the head"
    assert all(t >= 0 for t in times)


# --------------------------------------------------------------------------
# Strategies

texts = st.text(
    alphabet=st.sampled_from([*list('ab xyz\n"\\{}'), "é", "ß", "€", "中", "😀", "𝄞", "\r"]),
    min_size=0,
    max_size=12,
)


@st.composite
def split_body(draw, body: bytes) -> list[bytes]:
    """``body`` cut into non-empty recorded pieces at drawn offsets."""
    if not body:
        return []
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=12))))
    cuts = [c for c in cuts if 0 < c < len(body)]
    points = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points)]


@st.composite
def recorded_chats(draw) -> Interaction:
    words = draw(st.lists(texts, min_size=0, max_size=8))
    done = draw(st.booleans())
    crlf = draw(st.booleans())
    body = b"".join(sse_event(w) for w in words) + (b"data: [DONE]\n\n" if done else b"")
    if crlf:
        body = body.replace(b"\n\n", b"\r\n\r\n")
    assume(body)
    pieces = draw(split_body(body))
    gaps = draw(st.lists(st.integers(0, 80 * MS), min_size=len(pieces), max_size=len(pieces)))
    times, t = [], draw(st.integers(0, 50 * MS))
    head = t
    for g in gaps:
        t += g
        times.append(t)
    return interaction(pieces, times=times, head_ns=head)


@st.composite
def recorded_bytes(draw) -> Interaction:
    body = draw(st.binary(min_size=1, max_size=300))
    pieces = draw(split_body(body))
    gaps = draw(st.lists(st.integers(0, 80 * MS), min_size=len(pieces), max_size=len(pieces)))
    times, t = [], 0
    for g in gaps:
        t += g
        times.append(t)
    return interaction(pieces, times=times, head_ns=0, content_type="application/octet-stream")


CHUNKINGS = [
    "recorded",
    "bytes:1",
    "bytes:7",
    "random:1-16",
    "random:3-5",
    "utf8-split",
    "events",
    "split-events",
    "crlf-split",
    "coalesce:0",
    "coalesce:50",
    "whole",
]
LATENCIES = ["recorded", "instant", "scale:0.5", "scale:3", "fixed:100:10", "jitter:25"]

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------
# Properties


@PROPS
@given(ix=st.one_of(recorded_chats(), recorded_bytes()), chunk=st.sampled_from(CHUNKINGS),
       latency=st.sampled_from(LATENCIES), seed=st.integers(0, 2**32))
def test_every_chunking_and_latency_joins_to_exactly_the_recorded_body(ix, chunk, latency, seed):
    s = sched(f"chunk={chunk};latency={latency}", ix, seed=seed)
    assert s.body == ix.response.body
    assert s.ending == "end"
    check_shape(s)


@PROPS
@given(ix=st.one_of(recorded_chats(), recorded_bytes()))
def test_faithful_reproduces_recorded_pieces_and_offsets_exactly(ix):
    s = sched("faithful", ix)
    assert [(st.at_ns, st.data) for st in s.sends] == [(c.at_ns, c.data) for c in ix.pieces]
    assert s.head_at_ns == ix.response.headers_at_ns
    assert s.steps[-1] == Step(ix.end_ns, StepKind.END)
    assert s.status == 200


@PROPS
@given(ix=recorded_chats())
def test_utf8_split_leaves_no_multibyte_character_whole_in_one_piece(ix):
    s = sched("chunk=utf8-split", ix)
    cuts = boundaries(s)
    body = ix.response.body
    pos = 0
    for ch in body.decode("utf-8"):
        n = len(ch.encode())
        if n > 1:
            assert any(pos < b < pos + n for b in cuts), f"{ch!r} at {pos} arrived whole"
        pos += n
    # and every recorded boundary is kept
    assert boundaries(sched("faithful", ix)) <= cuts


@PROPS
@given(ix=recorded_chats())
def test_events_puts_exactly_one_event_in_each_piece(ix):
    body = ix.response.body
    spans = event_spans(body, "sse")
    assume(spans and spans[-1].end == len(body))
    s = sched("chunk=events", ix)
    assert s.pieces == [body[sp.start : sp.end] for sp in spans]
    for piece in s.pieces:
        assert len(event_spans(piece, "sse")) == 1


@PROPS
@given(ix=recorded_chats())
def test_split_events_cuts_every_event_inside_its_json(ix):
    body = ix.response.body
    s = sched("chunk=split-events", ix)
    cuts = boundaries(s) | {0}
    for sp in event_spans(body, "sse"):
        assert sp.start in cuts and sp.end in cuts
        seg = body[sp.start : sp.end]
        if sp.kind == "event":
            lo, hi = sp.start + seg.index(b"{"), sp.start + seg.rindex(b"}")
            assert any(lo < b <= hi for b in cuts), seg


@PROPS
@given(ix=recorded_chats())
def test_crlf_split_cuts_between_every_cr_and_its_lf(ix):
    body = ix.response.body
    cuts = boundaries(sched("chunk=crlf-split", ix))
    for m in re.finditer(rb"\r\n", body):
        assert m.start() + 1 in cuts


@PROPS
@given(ix=st.one_of(recorded_chats(), recorded_bytes()), a=st.integers(1, 10), extra=st.integers(0, 10),
       seed=st.integers())
def test_random_chunking_sizes_stay_in_range_and_the_same_seed_gives_the_same_schedule(ix, a, extra, seed):
    b = a + extra
    s = sched(f"chunk=random:{a}-{b};latency=jitter:30", ix, seed=seed)
    sizes = [len(p) for p in s.pieces]
    assert all(a <= n <= b for n in sizes[:-1])
    assert 1 <= sizes[-1] <= b
    assert s == sched(f"chunk=random:{a}-{b};latency=jitter:30", ix, seed=seed)
    assert s.steps == sched(f"chunk=random:{a}-{b};latency=jitter:30;seed={seed}", ix).steps


@PROPS
@given(ix=st.one_of(recorded_chats(), recorded_bytes()), ms=st.integers(0, 200), seed=st.integers())
def test_jitter_never_reorders_and_delays_each_piece_by_at_most_ms(ix, ms, seed):
    s = sched(f"latency=jitter:{ms}", ix, seed=seed)
    assert s.pieces == [c.data for c in ix.pieces]
    prev = 0
    for st_, c in zip(s.sends, ix.pieces, strict=True):
        assert c.at_ns <= st_.at_ns <= c.at_ns + ms * MS
        assert st_.at_ns >= prev
        prev = st_.at_ns


@PROPS
@given(ix=recorded_chats(), chunk=st.sampled_from(CHUNKINGS), latency=st.sampled_from(LATENCIES),
       faults=st.lists(st.sampled_from(["cut:50%", "cut:7B", "reset:30%", "cut-event:1", "stall:1:0.5",
                                        "keepalive:0.01", "keepalive:0", "drop-done", "slow-headers:30"]),
                       max_size=3))
def test_every_schedule_is_well_formed_under_any_mix_of_faults(ix, chunk, latency, faults):
    n_events = len([s for s in event_spans(ix.response.body, "sse") if s.kind != "comment"])
    assume(n_events >= 1)
    text = ";".join([f"chunk={chunk}", f"latency={latency}", *(f"fault={f}" for f in faults)])
    s = sched(text, ix)
    check_shape(s)
    sent = s.body.replace(b": keepalive\r\n\r\n", b"").replace(b": keepalive\n\n", b"")
    body = ix.response.body
    if "drop-done" not in faults:
        assert body.startswith(sent)


# --------------------------------------------------------------------------
# Chunkings, by example


def test_bytes_chunking_sends_n_bytes_per_piece_when_the_last_byte_arrived():
    ix = interaction([b"abcde", b"fgh"], times=[10 * MS, 30 * MS])
    s = sched("chunk=bytes:3;latency=recorded", ix)  # recorded exactly: not spaced apart
    assert [(st.at_ns, st.data) for st in s.sends] == [
        (10 * MS, b"abc"),
        (30 * MS, b"def"),  # its last byte arrived with the second recorded piece
        (30 * MS, b"gh"),
    ]


def test_coalesce_joins_pieces_within_the_window_of_the_groups_first_piece():
    ix = interaction([b"a", b"b", b"c", b"d", b"e"], times=[0, 20 * MS, 45 * MS, 60 * MS, 200 * MS], head_ns=0)
    s = sched("chunk=coalesce:50", ix)
    assert [(st.at_ns, st.data) for st in s.sends] == [(45 * MS, b"abc"), (60 * MS, b"d"), (200 * MS, b"e")]


def test_whole_sends_one_piece_when_the_last_byte_arrived():
    ix = chat(["a", "b"])
    s = sched("chunk=whole", ix)
    assert len(s.sends) == 1 and s.sends[0].at_ns == ix.pieces[-1].at_ns


def test_events_chunking_on_ndjson_puts_one_line_in_each_piece():
    ix = ndjson(["Hel", "lo"])
    assert ix.response is not None
    lines = ix.response.body.splitlines(keepends=True)
    merged = interaction([b"".join(lines)], content_type="application/x-ndjson")
    assert sched("chunk=events", merged).pieces == lines


def test_event_chunkings_on_a_body_without_events_send_it_whole_or_halved():
    ix = interaction([b'{"a": ', b'"b"}'], content_type="application/json")
    assert sched("chunk=events", ix).pieces == [b'{"a": "b"}']
    assert len(sched("chunk=split-events", ix).pieces) == 2


def test_crlf_split_on_a_recording_without_crlf_is_the_recorded_chunking():
    ix = chat(["x", "y"])
    assert sched("chunk=crlf-split", ix).pieces == [c.data for c in ix.pieces]


# --------------------------------------------------------------------------
# Latency


def test_instant_sends_everything_at_zero():
    s = sched("instant", chat(["a", "b"]))
    assert s.head_at_ns == 0 and {st.at_ns for st in s.steps} == {0}


def test_scale_multiplies_every_time():
    ix = chat(["a", "b"])
    s = sched("latency=scale:0.5", ix)
    assert ix.response is not None
    assert s.head_at_ns == ix.response.headers_at_ns // 2
    assert [st.at_ns for st in s.sends] == [c.at_ns // 2 for c in ix.pieces]
    assert ix.end_ns is not None and s.steps[-1].at_ns == ix.end_ns // 2


def test_fixed_sends_the_first_piece_after_ttft_then_one_every_gap():
    s = sched("latency=fixed:100:10", chat(["a", "b"]))
    assert s.head_at_ns == 0
    assert [st.at_ns for st in s.sends] == [100 * MS, 110 * MS, 120 * MS]
    assert s.steps[-1] == Step(120 * MS, StepKind.END)


def test_different_seeds_give_different_random_schedules():
    ix = chat(["some words " * 5] * 5)
    a = sched("chunk=random:1-16", ix, seed=1)
    b = sched("chunk=random:1-16", ix, seed=2)
    assert a.pieces != b.pieces
    assert sched("chunk=random:1-16", ix).steps == sched("chunk=random:1-16;seed=0", ix).steps


# --------------------------------------------------------------------------
# Faults


def test_cut_percent_closes_without_finishing_after_that_share_of_the_body():
    ix = chat(["hello", "world"])
    assert ix.response is not None
    body = ix.response.body
    s = sched("fault=cut:50%", ix)
    assert s.body == body[: len(body) // 2]
    assert s.ending == "cut"
    assert s.steps[-1].at_ns == s.sends[-1].at_ns


def test_cut_bytes_and_reset_percent():
    ix = chat(["hello", "world"])
    s = sched("fault=cut:10B", ix)
    assert ix.response is not None
    assert s.body == ix.response.body[:10] and s.ending == "cut"
    r = sched("fault=reset:100%", ix)
    assert r.body == ix.response.body and r.ending == "reset"
    z = sched("fault=cut:0%", ix)
    assert z.body == b"" and z.steps == (Step(ix.response.headers_at_ns, StepKind.CUT),)


def test_cut_event_closes_right_after_event_n():
    ix = chat(["a", "b", "c"])
    assert ix.response is not None
    spans = event_spans(ix.response.body, "sse")
    s = sched("chunk=bytes:5;fault=cut-event:2", ix)
    assert s.body == ix.response.body[: spans[1].end]
    assert s.ending == "cut"
    assert sched("fault=cut-event:0", ix).body == b""


def test_the_earliest_truncation_wins_whatever_the_item_order():
    ix = chat(["a", "b", "c"])
    a = sched("fault=cut-event:2;fault=reset:5B", ix)
    b = sched("fault=reset:5B;fault=cut-event:2", ix)
    assert a.steps == b.steps and a.ending == "reset" and len(a.body) == 5


def test_an_event_number_past_the_last_event_is_a_profile_error_naming_the_item():
    with pytest.raises(ProfileError, match=r"cut-event:9.*only 4 events"):
        sched("fault=cut-event:9", chat(["a", "b", "c"]))
    with pytest.raises(ProfileError, match=r"stall:9:1"):
        sched("fault=stall:9:1", chat(["a"]))


def test_event_faults_on_a_body_without_events_are_a_profile_error():
    ix = interaction([b'{"a": 1}'], content_type="application/json")
    with pytest.raises(ProfileError, match=r"cut-event:1.*SSE, NDJSON"):
        sched("fault=cut-event:1", ix)


def test_stall_delays_event_n_and_everything_after_it():
    ix = chat(["a", "b", "c"])
    s = sched("fault=stall:2:1.5", ix)
    f = sched("faithful", ix)
    assert s.pieces == f.pieces
    assert s.sends[0].at_ns == f.sends[0].at_ns
    for a, b in zip(s.sends[1:], f.sends[1:], strict=True):
        assert a.at_ns == b.at_ns + 1500 * MS
    assert s.steps[-1].at_ns == f.steps[-1].at_ns + 1500 * MS


def test_stall_splits_a_piece_so_the_silence_falls_exactly_before_the_event():
    ix = chat(["a", "b"])
    assert ix.response is not None
    merged = interaction([ix.response.body], times=[10 * MS])
    spans = event_spans(ix.response.body, "sse")
    s = sched("latency=instant;fault=stall:2:2", merged)
    assert [(st.at_ns, st.data) for st in s.sends] == [
        (0, ix.response.body[: spans[1].start]),
        (2 * S, ix.response.body[spans[1].start :]),
    ]


def test_keepalive_sends_a_comment_after_every_s_seconds_of_silence_at_event_boundaries():
    ix = chat(["a", "b"], times=[100 * MS, 2_600 * MS, 2_700 * MS], head_ns=0)
    s = sched("fault=keepalive:1", ix)
    comments = [st.at_ns for st in s.sends if st.data == b": keepalive\n\n"]
    assert comments == [1_100 * MS, 2_100 * MS]
    assert ix.response is not None
    assert s.body.replace(b": keepalive\n\n", b"") == ix.response.body
    # the comments sit between events, where SSE allows them
    assert [sp.kind for sp in event_spans(s.body, "sse")] == ["event", "comment", "comment", "event", "done"]


def test_keepalive_zero_puts_a_comment_before_every_event_even_with_instant_latency():
    ix = chat(["a", "b"])
    s = sched("adversarial:keepalive", ix)
    kinds = [sp.kind for sp in event_spans(s.body, "sse")]
    assert kinds == ["comment", "event", "comment", "event", "comment", "done"]


def test_keepalive_never_lands_inside_an_event():
    ix = chat(["a", "b"], times=[0, 3 * S, 6 * S], head_ns=0)
    s = sched("chunk=bytes:4;fault=keepalive:0.5", ix)
    assert ix.response is not None
    assert s.body.replace(b": keepalive\n\n", b"") == ix.response.body
    assert all(sp.kind in ("event", "comment", "done") for sp in event_spans(s.body, "sse"))
    assert event_spans(s.body, "sse")[-1].end == len(s.body)


def test_keepalive_leaves_ndjson_alone():
    ix = ndjson(["a", "b"], gap_ns=3 * S)
    assert sched("fault=keepalive:1", ix).pieces == sched("faithful", ix).pieces


def test_keepalive_uses_crlf_when_the_stream_does():
    body = b"".join(sse_event(t) for t in "ab").replace(b"\n\n", b"\r\n\r\n")
    ix = interaction([body])
    assert b": keepalive\r\n\r\n" in sched("fault=keepalive:0", ix).body


def test_drop_done_leaves_out_the_done_marker_and_ends_cleanly():
    ix = chat(["a", "b"])
    s = sched("fault=drop-done", ix)
    assert ix.response is not None
    assert s.body == ix.response.body.replace(b"data: [DONE]\n\n", b"")
    assert s.ending == "end"
    # bytes:1 splits [DONE] over many pieces: all of them go
    assert sched("chunk=bytes:1;fault=drop-done", ix).body == s.body
    one_line = ndjson(["a"])
    assert one_line.response is not None
    assert sched("fault=drop-done", one_line).body == one_line.response.body


def test_slow_headers_delays_the_head_and_everything_after_it():
    ix = chat(["a"])
    s = sched("fault=slow-headers:250", ix)
    f = sched("faithful", ix)
    assert s.head_at_ns == f.head_at_ns + 250 * MS
    assert [st.at_ns for st in s.steps] == [st.at_ns + 250 * MS for st in f.steps]


def test_a_recording_whose_upstream_closed_early_replays_with_a_cut_at_its_recorded_end():
    for outcome in ("upstream_closed", "interrupted", "upstream_error"):
        ix = chat(["a", "b"], done=False, outcome=outcome, end_ns=900 * MS)
        s = sched("faithful", ix)
        assert s.steps[-1] == Step(900 * MS, StepKind.CUT), outcome
        assert ix.response is not None
        assert s.body == ix.response.body
        assert sched("instant", ix).ending == "cut"


def test_a_recording_whose_upstream_reset_replays_with_a_reset_under_every_chunking():
    ix = chat(["a", "b"], done=False, outcome="upstream_closed", end_ns=900 * MS,
              error=f"{UPSTREAM_RESET}: peer closed connection without sending complete message body")
    assert sched("faithful", ix).steps[-1] == Step(900 * MS, StepKind.RESET)
    assert sched("adversarial:bytes-1", ix).ending == "reset"
    assert sched("instant", ix).ending == "reset"


def test_a_recording_whose_client_hung_up_replays_with_a_clean_end():
    # The openai SDK closes the connection at [DONE], often before the server's
    # terminating chunk: the upstream did not fail, so replay does not cut.
    ix = chat(["a", "b"], outcome="client_disconnected", end_ns=900 * MS)
    s = sched("faithful", ix)
    assert s.steps[-1] == Step(900 * MS, StepKind.END)
    assert ix.response is not None
    assert s.body == ix.response.body


def test_a_recording_without_a_response_head_replays_as_no_head_then_a_cut():
    ix = Interaction(Request("GET", "http://x/"), None, outcome=Outcome.UPSTREAM_ERROR, error="refused", end_ns=3 * MS)
    s = sched("faithful", ix)
    assert (s.status, s.framing, s.steps) == (0, "none", (Step(3 * MS, StepKind.CUT),))


def test_hop_by_hop_headers_are_dropped_and_the_framing_header_is_set():
    ix = chat(["a"], extra_headers=(("Connection", "keep-alive"), ("Keep-Alive", "timeout=5"), ("X-Request-Id", "r1")))
    s = sched("faithful", ix)
    names = [k.lower() for k, _ in s.headers]
    assert "connection" not in names and "keep-alive" not in names
    assert names.count("transfer-encoding") == 1 and "x-request-id" in names
    assert s.framing == "chunked"


def test_content_length_is_recomputed_for_a_clean_end_and_overstated_for_a_cut():
    ix = chat(["a", "b"], framing="content-length")
    assert ix.response is not None
    n = len(ix.response.body)
    assert sched("faithful", ix).header("content-length") == str(n)
    dropped = sched("fault=drop-done", ix)
    assert dropped.header("content-length") == str(len(dropped.body))
    cut = sched("fault=cut:100%", ix)
    declared = cut.header("content-length")
    assert declared is not None and int(declared) > len(cut.body) == n


def test_http2_recordings_replay_chunked():
    ix = chat(["a"], framing="frames")
    s = sched("faithful", ix)
    assert s.framing == "chunked" and s.header("transfer-encoding") == "chunked"


# --------------------------------------------------------------------------
# Parsing


def test_presets_and_every_adversarial_profile_parse_and_adversarial_ones_are_apart():
    for text in [*PRESETS, *PRESETS.values(), *ADVERSARIAL.values()]:
        parse_profile(text)
    for name, text in ADVERSARIAL.items():
        p = parse_profile(text)
        assert p.latency.kind == "apart" and p.apart_ns == APART_US * 1000, name
        assert parse_profile(f"adversarial:{name}") == dataclasses.replace(p, text=f"adversarial:{name}")


def test_the_adversarial_set_holds_at_least_the_profiles_the_issue_names():
    chunks = {parse_profile(t).chunk.text for t in ADVERSARIAL.values()}
    assert {"bytes:1", "random:1-16", "utf8-split", "split-events", "crlf-split", "coalesce:50", "whole"} <= chunks
    assert any(f.kind == "keepalive" for t in ADVERSARIAL.values() for f in parse_profile(t).faults)


def test_later_items_override_earlier_ones_and_faults_add_up():
    p = parse_profile("instant;chunk=bytes:1;fault=cut:50%;fault=stall:1:2")
    assert (p.chunk.kind, p.latency.kind) == ("bytes", "instant")
    assert [f.kind for f in p.faults] == ["cut", "stall"]
    assert parse_profile(" chunk = whole ; seed=7 ").seed == 7


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("nosuchpreset", "nosuchpreset"),
        ("chunk=bytes:0", "chunk=bytes:0"),
        ("chunk=bytes:x", "chunk=bytes:x"),
        ("chunk=bites:3", "chunk=bites:3"),
        ("chunk=random:5-2", "chunk=random:5-2"),
        ("chunk=random:5", "chunk=random:5"),
        ("chunk=whole:3", "chunk=whole:3"),
        ("latency=scale", "latency=scale"),
        ("latency=fixed:1", "latency=fixed:1"),
        ("latency=jitter:-3", "latency=jitter:-3"),
        ("fault=cut:5", "fault=cut:5"),
        ("fault=cut:150%", "fault=cut:150%"),
        ("fault=stall:0:1", "fault=stall:0:1"),
        ("fault=status:200", "fault=status:200"),
        ("fault=explode", "fault=explode"),
        ("speed=fast", "speed=fast"),
        ("seed=abc", "seed=abc"),
        ("chunk=", "chunk="),
        ("faithful;fault=nope:1", "fault=nope:1"),
    ],
)
def test_a_malformed_profile_is_one_profile_error_naming_the_bad_item(text, named):
    with pytest.raises(ProfileError) as e:
        parse_profile(text)
    msg = str(e.value)
    assert named in msg and "\n" not in msg


def test_an_empty_profile_is_a_profile_error():
    with pytest.raises(ProfileError):
        parse_profile("  ")


def test_the_syntax_text_mentions_every_chunking_latency_and_fault():
    for word in ["recorded", "bytes:N", "random:A-B", "utf8-split", "events", "split-events", "crlf-split",
                 "coalesce:MS", "whole", "instant", "scale:F", "fixed:TTFT_MS:GAP_MS", "jitter:MS", "cut:P%",
                 "cut-event:N", "reset:P%", "stall:N:S", "keepalive:S", "error-event:N", "drop-done",
                 "status:CODE", "slow-headers:MS", "seed=N"]:
        assert word in SYNTAX, word


# --------------------------------------------------------------------------
# Faults that speak the format's own error shape (streamtape.shapes.error_event / error_body)

def test_error_event_sends_an_error_in_the_formats_shape_after_event_n_then_ends():
    from streamtape.profiles import ERROR_MESSAGE
    from streamtape.shapes import analyze, error_event

    ix = chat(["a", "b", "c"])
    assert ix.response is not None
    spans = event_spans(ix.response.body, "sse")
    s = sched("chunk=bytes:3;fault=error-event:2", ix)
    assert s.body == ix.response.body[: spans[1].end] + error_event("openai-chat", ERROR_MESSAGE)
    assert s.ending == "end"
    played = Interaction(ix.request, Response(200, headers=ix.response.headers,
                                              pieces=tuple(Piece(st.at_ns, st.data) for st in s.sends)))
    a = analyze(played)
    assert a.text == "ab" and a.errors

    nd = ndjson(["x", "y"])
    s2 = sched("fault=error-event:1", nd)
    assert s2.body.endswith(error_event("ollama-chat", ERROR_MESSAGE))


@pytest.mark.parametrize(("code", "retry"), [(429, "1"), (503, "1"), (500, None), (400, None)])
def test_status_fails_before_streaming_with_an_error_body_in_the_formats_shape(code, retry):
    from streamtape.shapes import error_body

    ix = chat(["a"])
    s = sched(f"latency=instant;fault=status:{code};fault=cut:50%", ix)
    ctype, body = error_body("openai-chat", code, f"streamtape fault: status {code}")
    assert (s.status, s.framing, s.body, s.ending) == (code, "content-length", body, "end")
    assert s.header("content-type") == ctype
    assert s.header("content-length") == str(len(body))
    assert s.header("retry-after") == retry
    assert s.reason


def test_status_also_answers_a_recording_without_a_response():
    ix = Interaction(Request("GET", "http://x/"), None, outcome=Outcome.UPSTREAM_ERROR, end_ns=MS)
    assert sched("fault=status:502", ix).status == 502


# --------------------------------------------------------------------------
# What a client assembles is what was recorded


def as_played(ix: Interaction, s: Schedule) -> Interaction:
    assert ix.response is not None
    return Interaction(ix.request, Response(s.status, headers=ix.response.headers,
                                            pieces=tuple(Piece(st.at_ns, st.data) for st in s.sends)))


@st.composite
def recorded_ndjson(draw) -> Interaction:
    words = draw(st.lists(texts, min_size=1, max_size=6))
    ix = ndjson(words)
    assert ix.response is not None
    pieces = draw(split_body(ix.response.body))
    return interaction(pieces, content_type="application/x-ndjson", url="http://upstream.test/api/chat")


@PROPS
@given(ix=st.one_of(recorded_chats(), recorded_ndjson()), chunk=st.sampled_from(CHUNKINGS),
       faults=st.lists(st.sampled_from(["keepalive:0", "keepalive:0.01", "stall:1:0.2", "slow-headers:5"]),
                       max_size=2),
       seed=st.integers(0, 1000))
def test_no_chunking_and_no_timing_fault_changes_what_a_client_assembles(ix, chunk, faults, seed):
    from streamtape.shapes import analyze

    want = analyze(ix)
    assume(want.events_count >= 1)
    text = ";".join([f"chunk={chunk}", *(f"fault={f}" for f in faults)])
    got = analyze(as_played(ix, sched(text, ix, seed=seed)))
    assert (got.text, got.done, got.invalid_json) == (want.text, want.done, want.invalid_json)
    assert got.events_count == want.events_count


# --------------------------------------------------------------------------
# framing= and newline=: the body's framing on the wire, its line endings


def _eols(body: bytes) -> set[bytes]:
    """The line endings in an SSE body (WHATWG: CRLF, a lone CR, a lone LF)."""
    return {m.group() for m in re.finditer(rb"\r\n|\r|\n", body)}


def _events(body: bytes) -> list[tuple[str, str]]:
    """What a conforming SSE parser dispatches: (event, data) of each event."""
    from streamtape.shapes import SSEEvent, SSEParser

    parser = SSEParser()
    items = parser.feed(body)
    return [(i.event, i.data) for i in items if isinstance(i, SSEEvent)]


def test_framing_and_newline_are_as_recorded_unless_an_item_says_otherwise_and_the_last_one_wins():
    from streamtape.profiles import FramingKind, NewlineKind, describe

    p = parse_profile("faithful")
    assert (p.framing, p.newline) == (FramingKind.RECORDED, NewlineKind.RECORDED)
    assert describe(p) == "chunk=recorded;latency=recorded"
    p = parse_profile("framing=chunked;newline=cr;instant;framing=close;newline=crlf")
    assert (p.framing, p.newline) == ("close", "crlf")
    assert describe(p) == "chunk=recorded;latency=instant;framing=close;newline=crlf"
    assert parse_profile("framing=close-delimited").framing == "close"
    assert parse_profile("framing=content-length;newline=lf").framing == "content-length"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("framing=bogus", "unknown framing 'bogus' (expected one of: recorded, chunked, close, content-length)"),
        ("framing=close:3", "framing 'close' takes no argument"),
        ("framing=close-delimited:1", "framing 'close-delimited' takes no argument"),
        ("newline=dos", "unknown newline 'dos' (expected one of: recorded, lf, crlf, cr)"),
        ("newline=crlf:2", "newline 'crlf' takes no argument"),
        ("newline=", "has no value"),
    ],
)
def test_a_malformed_framing_or_newline_is_a_profile_error_naming_the_item(text, says):
    with pytest.raises(ProfileError) as e:
        parse_profile(f"instant;{text}")
    assert f"bad item {text!r}: {says}" in str(e.value)


def test_the_syntax_text_explains_framing_and_newline():
    for word in ["framing=", "chunked", "close", "content-length", "Connection: close", "newline=", "lf | crlf | cr"]:
        assert word in SYNTAX, word


@pytest.mark.parametrize("recorded", ["chunked", "content-length", "close-delimited", "frames"])
@pytest.mark.parametrize(
    ("framing", "sent", "headers"),
    [
        ("recorded", None, None),
        ("chunked", "chunked", {"transfer-encoding": "chunked"}),
        ("close", "close-delimited", {}),
        ("content-length", "content-length", {"content-length": "LENGTH"}),
    ],
)
def test_framing_sends_the_body_framed_so_whatever_the_recording_had(recorded, framing, sent, headers):
    ix = chat(["a", "b"], framing=recorded)
    assert ix.response is not None
    s = sched(f"framing={framing}", ix)
    if sent is None:  # as recorded (HTTP/2 frames: chunked)
        sent = "chunked" if recorded == "frames" else recorded
        headers = {"chunked": {"transfer-encoding": "chunked"}, "close-delimited": {},
                   "content-length": {"content-length": "LENGTH"}}[sent]
    assert s.framing == sent
    framing_of = {k.lower(): v for k, v in s.headers if k.lower() in ("content-length", "transfer-encoding")}
    want = {k: str(len(ix.response.body)) if v == "LENGTH" else v for k, v in headers.items()}
    assert framing_of == want
    assert s.body == ix.response.body and s.ending == "end"


def test_on_close_framing_a_cut_after_event_3_is_a_close_with_nothing_that_tells_it_from_the_end():
    ix = chat(["Hel", "lo", ", ", "world"])
    assert ix.response is not None
    spans = event_spans(ix.response.body, "sse")
    s = sched("framing=close;fault=cut-event:3", ix)
    assert s.body == ix.response.body[: spans[2].end]
    assert (s.framing, s.ending, s.content_length) == ("close-delimited", "cut", None)
    assert s.header("content-length") is None and s.header("transfer-encoding") is None
    whole = sched("framing=close", ix)
    assert whole.headers == s.headers and whole.ending == "end"


def test_on_content_length_framing_a_cut_or_reset_declares_the_whole_body_and_sends_less():
    ix = chat(["Hel", "lo", ", ", "world"])  # recorded chunked: no length of its own
    assert ix.response is not None
    n = len(ix.response.body)
    for fault in ["cut-event:3", "cut:50%", "reset:10B", "cut:100%"]:
        s = sched(f"framing=content-length;fault={fault}", ix)
        assert s.ending in ("cut", "reset")
        assert int(s.header("content-length") or 0) == max(n, len(s.body) + 1) > len(s.body), fault
    # a recording its upstream cut stays short of what it declares
    short = chat(["a", "b"], done=False, outcome="upstream_closed")
    s = sched("framing=content-length", short)
    assert s.ending == "cut" and int(s.header("content-length") or 0) > len(s.body)


@pytest.mark.parametrize("fault", ["keepalive:0", "error-event:2", "drop-done", "keepalive:0;fault=drop-done"])
def test_on_content_length_framing_the_length_counts_exactly_the_bytes_sent_when_not_cut(fault):
    ix = chat(["a", "b", "c"])
    s = sched(f"framing=content-length;chunk=bytes:7;fault={fault}", ix)
    assert s.ending == "end"
    assert s.header("content-length") == str(len(s.body)) and s.content_length == len(s.body)
    assert ix.response is not None and s.body != ix.response.body


def test_the_status_fault_follows_the_framing_too():
    ix = chat(["a"])
    default = sched("fault=status:503", ix)
    assert default.framing == "content-length" and default.header("content-length") == str(len(default.body))
    close = sched("framing=close;fault=status:503", ix)
    assert close.framing == "close-delimited" and close.content_length is None and close.body == default.body
    assert sched("framing=chunked;fault=status:429", ix).header("transfer-encoding") == "chunked"


@PROPS
@given(ix=recorded_chats(), newline=st.sampled_from(["lf", "crlf", "cr"]), chunk=st.sampled_from(CHUNKINGS),
       seed=st.integers(0, 1000))
def test_newline_rewrites_every_line_ending_and_a_parser_reads_the_same_events(ix, newline, chunk, seed):
    eol = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}[newline]
    assert ix.response is not None
    body = ix.response.body
    s = sched(f"newline={newline};chunk={chunk}", ix, seed=seed)
    check_shape(s)
    assert _eols(s.body) <= {eol}
    assert _events(s.body) == _events(body)
    assert re.sub(rb"\r\n|\r|\n", b"\n", s.body) == re.sub(rb"\r\n|\r|\n", b"\n", body)
    # the pieces keep their recorded times: the body is done when the recording's was
    # (latency=recorded: without a latency item a re-chunking is spaced apart, and a converted
    # body cut into more pieces takes longer)
    rec = f"chunk={chunk};latency=recorded"
    assert sched(f"newline={newline};{rec}", ix, seed=seed).sends[-1].at_ns == sched(rec, ix, seed=seed).sends[-1].at_ns


def test_crlf_split_has_nothing_to_cut_on_an_lf_recording_until_newline_crlf_gives_it_pairs():
    ix = chat(["a", "b"])  # one event per recorded piece, LF line endings
    assert ix.response is not None
    assert sched("chunk=crlf-split", ix).pieces == [p.data for p in ix.pieces]
    s = sched("newline=crlf;chunk=crlf-split", ix)
    assert s.body == ix.response.body.replace(b"\n", b"\r\n")
    assert not any(b"\r\n" in piece for piece in s.pieces)  # every pair cut in two
    assert len(s.pieces) == 3 * len(ix.pieces)  # each event: "...}\r", "\n\r", "\n"


@pytest.mark.parametrize("newline", ["crlf", "cr"])
def test_event_chunking_and_event_faults_count_events_on_the_converted_body(newline):
    eol = {"crlf": b"\r\n", "cr": b"\r"}[newline]
    ix = chat(["a", "b", "c"])
    assert ix.response is not None
    converted = ix.response.body.replace(b"\n", eol)
    spans = event_spans(converted, "sse")
    assert len(spans) == 4 and spans[-1].end == len(converted)
    assert sched(f"newline={newline};chunk=events", ix).pieces == [converted[p.start : p.end] for p in spans]
    cut = sched(f"newline={newline};chunk=bytes:5;fault=cut-event:3", ix)
    assert cut.body == converted[: spans[2].end] and cut.body.endswith(eol + eol)
    dropped = sched(f"newline={newline};fault=drop-done", ix)
    assert dropped.body == converted[: spans[-1].start]


def test_keepalives_and_an_error_event_take_the_converted_line_ending():
    ix = chat(["a", "b"])
    s = sched("newline=cr;latency=instant;fault=keepalive:0;fault=error-event:2", ix)
    assert b"\n" not in s.body
    assert s.pieces[0] == b": keepalive\r\r"
    assert s.body.endswith(b"\r\r") and b"streamtape fault" in s.pieces[-1]
    kinds = [sp.kind for sp in event_spans(s.body, "sse")]
    assert kinds == ["comment", "event", "comment", "event", "event"]
    assert event_spans(s.body, "sse")[-1].end == len(s.body)
    # without newline=, a keep-alive follows the recording's own line ending, CR included
    cr = interaction([b"data: 1\r\r", b"data: 2\r\r"])
    assert sched("fault=keepalive:0", cr).pieces[0] == b": keepalive\r\r"


def test_a_line_ending_whose_cr_and_lf_were_recorded_apart_is_sent_when_its_lf_was():
    ix = interaction([b"data: 1\r", b"\n\r\ndata: 2\r\n\r", b"\n"], times=[10 * MS, 20 * MS, 30 * MS])
    s = sched("newline=lf", ix)
    assert s.pieces == [b"data: 1", b"\n\ndata: 2\n", b"\n"]
    assert [st.at_ns for st in s.sends] == [10 * MS, 20 * MS, 30 * MS]
    assert sched("newline=cr", ix).pieces == [b"data: 1", b"\r\rdata: 2\r", b"\r"]


def test_newline_on_ndjson_rewrites_lf_and_crlf_and_leaves_it_for_cr():
    ix = ndjson(["a", "b"])
    assert ix.response is not None
    body = ix.response.body
    crlf = sched("newline=crlf;chunk=events", ix)
    assert crlf.body == body.replace(b"\n", b"\r\n")
    assert crlf.pieces == crlf.body.splitlines(keepends=True)
    assert sched("newline=crlf;newline=lf", interaction([crlf.body], content_type="application/x-ndjson")).body == body
    assert sched("newline=cr", ix).body == body  # a lone CR does not end an NDJSON line


def test_newline_leaves_a_body_that_is_not_sse_or_ndjson_as_recorded():
    raw = interaction([b"line one\nline two\n"], content_type="text/plain")
    assert sched("newline=crlf", raw).body == b"line one\nline two\n"
    gz = chat(["a"], extra_headers=(("Content-Encoding", "gzip"),))
    assert gz.response is not None
    assert sched("newline=crlf", gz).body == gz.response.body


def test_content_length_declares_the_converted_body():
    ix = chat(["a", "b"], framing="content-length")
    assert ix.response is not None
    s = sched("newline=crlf", ix)
    assert len(s.body) > len(ix.response.body)
    assert s.header("content-length") == str(len(s.body))


# --------------------------------------------------------------------------
# Pieces kept apart: latency=apart, and the spacing of a re-chunking without a latency item


US = 1_000
RECHUNKINGS = ["bytes:1", "bytes:7", "random:1-16", "utf8-split", "events", "split-events", "crlf-split"]


def _gaps(s: Schedule) -> list[int]:
    sends = s.sends
    return [b.at_ns - a.at_ns for a, b in itertools.pairwise(sends)]


def test_apart_sends_the_head_at_once_then_each_piece_us_after_the_one_before():
    ix = interaction([b"abcde", b"fgh"], times=[10 * MS, 30 * MS])
    s = sched("chunk=bytes:3;latency=apart:250", ix)
    assert s.head_at_ns == 0 and s.apart_ns == 250 * US
    assert [(st.at_ns, st.data) for st in s.sends] == [(0, b"abc"), (250 * US, b"def"), (500 * US, b"gh")]
    assert s.steps[-1] == Step(500 * US, StepKind.END)


def test_apart_without_a_number_keeps_pieces_apart_us_default_and_describe_says_so():
    from streamtape.profiles import describe

    p = parse_profile("latency=apart")
    assert p.apart_ns == APART_US * US
    assert _gaps(sched("latency=apart", chat(["a", "b", "c"]))) == [APART_US * US] * 3
    assert describe(p) == f"chunk=recorded;latency=apart (pieces at least {APART_US} us apart)"
    assert describe(parse_profile("latency=apart:300")).endswith("latency=apart:300 (pieces at least 300 us apart)")
    assert parse_profile("latency=apart:0").apart_ns == 0  # instant, spelt otherwise


def test_a_rechunking_without_a_latency_item_keeps_the_recorded_times_and_spaces_pieces_due_together():
    ix = interaction([b"abcdef", b"gh"], times=[10 * MS, 30 * MS])
    s = sched("chunk=bytes:2", ix)
    assert s.apart_ns == APART_US * US
    gap = APART_US * US
    # the three pieces of the first recorded piece: from its time on, one gap apart; the last
    # one at its own recorded time (it is later than the spacing needs)
    assert [st.at_ns for st in s.sends] == [10 * MS, 10 * MS + gap, 10 * MS + 2 * gap, 30 * MS]
    assert ix.response is not None and s.head_at_ns == ix.response.headers_at_ns


@pytest.mark.parametrize("latency", ["recorded", "instant", "scale:0.5", "fixed:100:10", "jitter:25"])
def test_a_latency_item_written_out_overrides_the_spacing(latency):
    for text in [f"chunk=utf8-split;latency={latency}", f"adversarial:utf8-split;latency={latency}",
                 f"latency={latency};chunk=bytes:1"]:
        assert parse_profile(text).apart_ns == 0, text
    ix = chat(["中文", "é"])
    assert sched(f"chunk=utf8-split;latency={latency}", ix) == sched(f"chunk=utf8-split;latency={latency}", ix,
                                                                      seed=0)
    if latency == "instant":  # everything at once, as written: back to back
        s = sched("adversarial:utf8-split;latency=instant", ix)
        assert len(s.sends) > len(ix.pieces) and {st.at_ns for st in s.steps} == {0}


@pytest.mark.parametrize("chunk", ["recorded", "coalesce:50", "coalesce", "whole"])
def test_chunkings_that_do_not_cut_recorded_pieces_are_not_spaced(chunk):
    assert parse_profile(f"chunk={chunk}").apart_ns == 0
    assert parse_profile("faithful").apart_ns == parse_profile("instant").apart_ns == 0


@pytest.mark.parametrize("chunk", RECHUNKINGS)
def test_every_chunking_that_cuts_recorded_pieces_is_spaced_by_default(chunk):
    assert parse_profile(f"chunk={chunk}").apart_ns == APART_US * US
    assert parse_profile(f"faithful;chunk={chunk}").apart_ns == 0  # faithful says latency=recorded


@pytest.mark.parametrize(("text", "named"), [("latency=apart:x", "apart:US"), ("latency=apart:1:2", "1 argument"),
                                             ("latency=apart:-5", "apart:US")])
def test_a_malformed_apart_is_a_profile_error_naming_the_item(text, named):
    with pytest.raises(ProfileError) as e:
        parse_profile(text)
    assert text in str(e.value) and named in str(e.value)


def test_the_syntax_says_the_spacing_and_what_it_applies_to():
    assert "apart[:US]" in SYNTAX and f"(default {APART_US})" in SYNTAX
    assert f"at least {APART_US} us after the one" in SYNTAX
    for chunk in RECHUNKINGS:
        assert chunk.partition(":")[0] in SYNTAX.partition("\nlatency=")[2].partition("instant")[0], chunk


def test_in_process_schedules_leave_the_spacing_out():
    ix = chat(["Grüße", " 中文"])
    plain = parse_profile("chunk=utf8-split").schedule(ix, apart=False)
    recorded = sched("chunk=utf8-split;latency=recorded", ix)
    assert plain == dataclasses.replace(recorded, text="chunk=utf8-split") and plain.apart_ns == 0
    adversarial = parse_profile("adversarial:utf8-split").schedule(ix, apart=False)
    assert {st.at_ns for st in adversarial.steps} == {0}
    assert adversarial.pieces == sched("adversarial:utf8-split", ix).pieces


def test_a_stall_keeps_its_whole_silence_when_the_pieces_before_it_were_spaced_late():
    ix = interaction([b"".join(sse_event(w) for w in ["a", "b", "c"])], times=[10 * MS])
    s = sched("chunk=bytes:1;fault=stall:2:0.5", ix)
    sends = s.sends
    body_at = list(itertools.accumulate(len(st.data) for st in sends))
    assert ix.response is not None
    event2 = event_spans(ix.response.body, "sse")[1].start
    k = body_at.index(event2)  # the piece ending right before event 2
    assert sends[k + 1].at_ns - sends[k].at_ns >= 500 * MS


def test_keepalives_and_split_pieces_inserted_by_faults_are_spaced_too():
    ix = chat(["a", "b", "c"])
    from streamtape.profiles import KEEPALIVE_TEXT

    s = sched("chunk=events;latency=apart;fault=keepalive:0;fault=drop-done", ix)
    assert any(KEEPALIVE_TEXT in p for p in s.pieces)
    assert min(_gaps(s)) >= APART_US * US


def test_a_websocket_session_plays_apart_as_instant():
    from streamtape.profiles.websocket import schedule_session
    from tests.support.realtime_session import session_ix

    apart = schedule_session(parse_profile("latency=apart"), session_ix())
    instant = schedule_session(parse_profile("latency=instant"), session_ix())
    assert apart == dataclasses.replace(instant, text="latency=apart")


@PROPS
@given(ix=st.one_of(recorded_chats(), recorded_bytes()), chunk=st.sampled_from(CHUNKINGS),
       us=st.sampled_from([None, 1, 250, 1000, 2000]), seed=st.integers(0, 2**32))
def test_apart_keeps_every_piece_at_least_us_after_the_previous_and_the_body_exact(ix, chunk, us, seed):
    latency = "apart" if us is None else f"apart:{us}"
    s = sched(f"chunk={chunk};latency={latency}", ix, seed=seed)
    gap = (APART_US if us is None else us) * US
    assert s.body == ix.response.body and s.ending == "end" and s.apart_ns == gap
    check_shape(s)
    assert all(g >= gap for g in _gaps(s))
    assert s.sends[0].at_ns == 0 if s.sends else True
    assert s.pieces == sched(f"chunk={chunk};latency=instant", ix, seed=seed).pieces


@PROPS
@given(ix=st.one_of(recorded_chats(), recorded_bytes()), chunk=st.sampled_from(RECHUNKINGS),
       seed=st.integers(0, 2**32))
def test_a_default_spaced_rechunking_never_runs_ahead_of_the_recording_and_keeps_its_pieces(ix, chunk, seed):
    s = sched(f"chunk={chunk}", ix, seed=seed)
    recorded = sched(f"chunk={chunk};latency=recorded", ix, seed=seed)
    assert s.pieces == recorded.pieces and s.head_at_ns == recorded.head_at_ns
    check_shape(s)
    assert all(g >= APART_US * US for g in _gaps(s))
    assert all(a.at_ns >= b.at_ns for a, b in zip(s.sends, recorded.sends, strict=True))


@PROPS
@given(ix=recorded_chats(), chunk=st.sampled_from(CHUNKINGS),
       faults=st.lists(st.sampled_from(["cut:50%", "reset:10B", "cut-event:1", "error-event:1", "stall:1:0.2",
                                        "keepalive:0", "keepalive:0.01", "drop-done", "slow-headers:5"]),
                       max_size=3))
def test_apart_keeps_pieces_apart_under_any_mix_of_faults(ix, chunk, faults):
    text = ";".join([f"chunk={chunk}", "latency=apart:500", *(f"fault={f}" for f in faults)])
    try:
        s = sched(text, ix)
    except ProfileError:
        assume(False)
    check_shape(s)
    assert all(g >= 500 * US for g in _gaps(s))
