"""``streamtape diff`` of a shadow session, on built interactions: pairing by pair id, the
reasons a pair differs, and the summary gates of ``--fail-on``. A session recorded for real
through ``streamtape record --shadow`` and its page in Chromium are
tests/system/test_diff_shadow.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction
from streamtape.cassette.model import Outcome
from streamtape.diff import Gate, GateError, diff_many
from streamtape.diff.shadow import diff_shadow, pair_shadow
from streamtape.diff.summary import short_reason, summarize
from streamtape.diff.summary_gates import AgreeGate, DistributionGate, Stat, parse_fail_on
from streamtape.errors import OptionError
from tests.support.builders import MS, chat_events, interaction
from tests.support.recording import run_main


def labelled(role: str, pair: str, backend: str, text: str = "hi", **extra: str) -> Interaction:
    events = chat_events([text])
    ix = interaction(events, first_ns=20 * MS, gap_ns=10 * MS)
    return replace(ix, labels={"role": role, "pair": pair, "backend": backend, **extra})


def test_pairing_by_pair_id_lists_calls_with_one_side_and_leaves_them_out() -> None:
    skipped = replace(
        labelled("shadow", "r-1", "b", not_sent="in-flight-bound"),
        response=None, outcome=Outcome.UPSTREAM_ERROR, error="skipped: 16 requests already in flight to b",
    )
    items = [
        labelled("primary", "r-0", "a"),
        labelled("shadow", "r-0", "b"),
        labelled("primary", "r-1", "a"),
        skipped,
        labelled("primary", "r-2", "a"),
        labelled("shadow", "r-3", "b"),  # its primary is not in the cassette
    ]
    labels = [f"s.tape#{i}" for i in range(len(items))]
    p = pair_shadow(items, labels)
    assert p.pairs == ((0, 1, "r-0"),)
    assert [(m.pair, m.side, m.reason) for m in p.missing] == [
        ("r-1", "B", "skipped: 16 requests already in flight to b"),
        ("r-2", "B", "no recording of b"),
        ("r-3", "A", "no recording of the primary"),
    ]
    result, session = diff_shadow(items, labels, name="s.tape")
    s = summarize(result, session=session)
    assert s.agreement.compared == 1 and s.exit_status == 0


def test_a_session_with_several_shadows_needs_one_named() -> None:
    items = [labelled("primary", "r-0", "a"), labelled("shadow", "r-0", "b1"), labelled("shadow", "r-0", "b2", text="yo")]
    labels = ["x#0", "x#1", "x#2"]
    with pytest.raises(OptionError, match=r"2 shadows \(b1, b2\); choose one with --shadow NAME"):
        pair_shadow(items, labels)
    assert pair_shadow(items, labels, "b2").pairs == ((0, 2, "r-0"),)
    with pytest.raises(OptionError, match="no such shadow"):
        pair_shadow(items, labels, "c")


def test_two_cassettes_are_still_paired_by_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.tape", tmp_path / "b.tape"
    streamtape.save(a, [labelled("primary", "r-0", "a"), labelled("primary", "r-1", "a")])
    streamtape.save(b, [labelled("primary", "z-9", "b"), labelled("primary", "z-8", "b")])
    code, out, _ = run_main("diff", a, b, "--json", capsys=capsys)
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["paired_by"] == "request" and doc["summary"]["session"] is False
    assert [p["paired_by"] for p in doc["pairs"]] == ["request", "request"]


def test_one_cassette_without_pairs_is_refused_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.tape"
    streamtape.save(plain, [interaction(chat_events(["x"]))])
    code, _, err = run_main("diff", plain, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "not a shadow session" in err


def test_a_client_that_left_after_the_end_is_not_a_difference_between_backends() -> None:
    """The openai SDK stops reading at [DONE] and may close before the body's last chunk: the
    primary is then ``client_disconnected`` though its answer is whole; a shadow is read to
    its end. Compared as complete, and said so; a client that left mid-answer still counts."""
    whole = labelled("primary", "r-0", "a")
    left_after = replace(whole, outcome=Outcome.CLIENT_DISCONNECTED, error="Client disconnected.")
    cut = replace(
        left_after, response=replace(whole.response, pieces=whole.pieces[:2]) if whole.response else None
    )
    shadow = labelled("shadow", "r-0", "b")
    result, _ = diff_shadow([left_after, shadow], ["s#0", "s#1"], name="s")
    (rep,) = result.reports
    assert rep.same and rep.a.label == "s#0 (client left after the end)"
    result, _ = diff_shadow([cut, shadow], ["s#0", "s#1"], name="s")
    (rep,) = result.reports
    assert not rep.same and rep.a.label == "s#0"
    assert short_reason(rep) == "finish none vs stop"


def test_a_shadow_without_response_is_named_in_the_reason() -> None:
    a = labelled("primary", "r-0", "a")
    b = replace(labelled("shadow", "r-0", "b"), response=None, outcome=Outcome.UPSTREAM_ERROR, error="connection refused")
    result, session = diff_shadow([a, b], ["s#0", "s#1"], name="s")
    assert short_reason(result.reports[0]) == "B: no response (upstream_error: connection refused)"
    assert summarize(result, session=session).exit_status == 1


@pytest.mark.parametrize(
    ("text", "kind", "stat", "metric"),
    [
        ("ttft_p95>1.5x", DistributionGate, Stat.P95, "ttft"),
        ("first_token_p50>+100ms", DistributionGate, Stat.P50, "ttft"),
        ("tokens_per_s_p50<0.8x", DistributionGate, Stat.P50, "tokens_per_s"),
        ("p95_gap_p95>+5ms", DistributionGate, Stat.P95, "p95_gap"),
        ("gap_p95>+5ms", Gate, None, "p95_gap"),  # a pair's own gap p95, as before
        ("ttft>1.5x", Gate, None, "ttft"),
    ],
)
def test_fail_on_tells_summary_gates_from_per_pair_gates(text: str, kind: type, stat: Stat | None, metric: str) -> None:
    g = parse_fail_on(text)
    assert isinstance(g, kind)
    if isinstance(g, DistributionGate):
        assert g.stat == stat and g.gate.metric == metric and g.text == text
    elif isinstance(g, Gate):
        assert g.metric == metric


def test_agree_gate_parses_a_percentage_and_refuses_anything_else() -> None:
    assert parse_fail_on("agree<95%") == AgreeGate("agree<95%", "<", 95.0)
    for bad, why in (("agree<95", "takes a percentage"), ("agree<120%", "at most 100%"), ("ttft_p99>2x", "unknown metric")):
        with pytest.raises(GateError, match=why):
            parse_fail_on(bad)


def test_a_distribution_gate_reads_the_percentile_over_the_pairs() -> None:
    a = [interaction(chat_events(["x", "y"]), first_ns=n * 10 * MS, gap_ns=0) for n in range(1, 11)]
    b = [interaction(chat_events(["x", "y"]), first_ns=n * 20 * MS, gap_ns=0) for n in range(1, 11)]
    result = diff_many(a, b, name_a="a", name_b="b")
    g = parse_fail_on("ttft_p95>1.9x")
    assert isinstance(g, DistributionGate)
    s = summarize(result, gates=[g])
    (res,) = s.gates
    assert not res.ok and res.detail == "B/A 2.00x"
    assert s.exit_status == 1
