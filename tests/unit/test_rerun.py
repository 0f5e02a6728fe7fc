"""The rerun's pure parts: the schedule, the request mapping, the SLO and the load figures, merge's pairing."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import replace

import pytest

from streamtape.cassette.model import REDACTED, Outcome, Request
from streamtape.commands.merge import merged
from streamtape.diff.load import distinct, parse_slo, side_load
from streamtape.errors import OptionError, RedactedValueError
from streamtape.rerun.mapping import build_target, check_sendable, parse_map, rerun_request
from streamtape.rerun.schedule import Arrivals, SchedulePlan, parse_rate, sends
from tests.support.builders import CHAT_BODY, MS, chat_events, interaction

STARTS = [100.0, 100.5, 100.5, 102.0]


def offsets(plan: SchedulePlan, starts: list[float] = STARTS) -> list[tuple[int, int, int]]:
    return [(s.item, s.round, s.at_ns) for s in sends(plan, starts)]


def test_the_default_schedule_sends_each_request_at_its_recorded_offset_from_the_first() -> None:
    assert offsets(SchedulePlan()) == [(0, 0, 0), (1, 0, 500 * MS), (2, 0, 500 * MS), (3, 0, 2000 * MS)]


def test_speed_two_halves_every_interval() -> None:
    assert [at for _, _, at in offsets(SchedulePlan(speed=2))] == [0, 250 * MS, 250 * MS, 1000 * MS]


def test_the_recorded_order_is_by_start_time_not_by_position() -> None:
    assert [i for i, _, _ in offsets(SchedulePlan(), [5.0, 1.0, 3.0])] == [1, 2, 0]


def test_repeat_loops_the_set_keeping_its_pace() -> None:
    got = offsets(SchedulePlan(repeat=2))
    assert len(got) == 8
    period = 2000 * MS + 2000 * MS // 3  # the span and one mean interval
    assert [at for _, r, at in got if r == 1] == [period + at for _, r, at in got if r == 0]


def test_duration_stops_starting_sends_once_it_has_passed() -> None:
    got = offsets(SchedulePlan(arrivals=Arrivals.FIXED, rate=10, duration_s=1.0))
    assert len(got) == 10 and got[-1][2] == 900 * MS
    assert [i for i, _, _ in got[:5]] == [0, 1, 2, 3, 0]


def test_a_fixed_rate_spaces_the_sends_evenly() -> None:
    got = offsets(SchedulePlan(arrivals=Arrivals.FIXED, rate=4, repeat=2))
    assert [at for _, _, at in got] == [k * 250 * MS for k in range(8)]


def test_poisson_arrivals_have_the_rate_on_average_and_repeat_with_the_seed() -> None:
    plan = SchedulePlan(arrivals=Arrivals.POISSON, rate=50, repeat=500)
    got = [at for _, _, at in offsets(plan)]
    gaps = [b - a for a, b in itertools.pairwise(got)]
    assert statistics.mean(gaps) == pytest.approx(20 * MS, rel=0.1)
    assert statistics.stdev(gaps) == pytest.approx(20 * MS, rel=0.15)  # exponential: sd = mean
    assert offsets(plan) == offsets(plan)
    assert offsets(replace(plan, seed=1)) != offsets(plan)


def test_a_closed_loop_has_no_due_times_and_needs_a_concurrency() -> None:
    assert {at for _, _, at in offsets(SchedulePlan(arrivals=Arrivals.CLOSED, concurrency=2))} == {0}
    with pytest.raises(OptionError, match="--concurrency"):
        SchedulePlan(arrivals=Arrivals.CLOSED)


@pytest.mark.parametrize(("text", "rate"), [("10/s", 10.0), ("0.5/s", 0.5), ("120/min", 2.0), ("7", 7.0)])
def test_rates_read_as_sends_per_second(text: str, rate: float) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "0/s", "-1/s", "10/h"])
def test_a_bad_rate_is_one_clear_error(text: str) -> None:
    with pytest.raises(OptionError, match="--rate"):
        parse_rate(text)


def test_bad_schedule_numbers_are_refused() -> None:
    for kw, word in (({"speed": 0}, "--speed"), ({"repeat": 0}, "--repeat"), ({"duration_s": -1}, "--duration"),
                     ({"concurrency": 0}, "--concurrency")):
        with pytest.raises(OptionError, match=word):
            SchedulePlan(**kw)  # type: ignore[arg-type]


RECORDED = Request(
    "POST", "https://api.openai.com/v1/chat/completions?api_key=REDACTED",
    headers=(("Content-Type", "application/json"), ("Authorization", REDACTED), ("X-Trace", "t1")),
    body=b'{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}',
)


def test_a_request_keeps_its_body_and_headers_but_not_the_recorded_credentials() -> None:
    target = build_target("http://127.0.0.1:8001", "new", parse_map(["Authorization=Bearer new-key"]))
    out = rerun_request(target, RECORDED)
    assert out.url == "http://127.0.0.1:8001/v1/chat/completions"
    assert ("Authorization", "Bearer new-key") in out.headers and ("X-Trace", "t1") in out.headers
    assert REDACTED not in {v for _, v in out.headers}
    assert out.body == RECORDED.body and out.secret_headers == {"authorization"}


def test_model_and_path_map_an_openai_chat_request_to_ollama_chat() -> None:
    import json

    target = build_target("127.0.0.1:11434", "ollama", parse_map(
        ["Authorization="], model="llama3", paths=["/v1/chat/completions=/api/chat"]))
    out = rerun_request(target, RECORDED)
    doc = json.loads(out.body)
    assert out.url == "http://127.0.0.1:11434/api/chat"
    assert doc["model"] == "llama3" and doc["messages"] == [{"role": "user", "content": "hi"}] and doc["stream"] is True


def test_a_redacted_header_without_a_header_option_is_refused_naming_it() -> None:
    target = build_target("http://127.0.0.1:8001", "new", parse_map())
    with pytest.raises(RedactedValueError, match=r"s\.tape#3: its Authorization header was redacted") as e:
        check_sendable(target, RECORDED, "s.tape#3")
    assert (e.value.kind, e.value.name) == ("header", "Authorization")
    check_sendable(build_target("http://127.0.0.1:8001", "new", parse_map(["authorization="])), RECORDED, "x")


def test_a_redacted_query_parameter_that_is_not_a_credential_is_refused() -> None:
    target = build_target("http://127.0.0.1:8001", "new", parse_map(["Authorization=k"]))
    check_sendable(target, RECORDED, "x")  # api_key is dropped as a credential anyway
    with pytest.raises(RedactedValueError, match="its session query"):
        check_sendable(target, replace(RECORDED, url=RECORDED.url + "&session=REDACTED"), "x")


@pytest.mark.parametrize(("headers", "paths", "word"), [(["NoEquals"], [], "--header"), (["Bad Name=v"], [], "--header"),
                                                         ([], ["v1=/x"], "--path")])
def test_bad_mapping_options_are_one_clear_error(headers: list[str], paths: list[str], word: str) -> None:
    with pytest.raises(OptionError, match=word):
        parse_map(headers, None, paths)


def test_an_slo_reads_its_terms_and_refuses_an_unknown_one() -> None:
    slo = parse_slo("ttft<500ms, itl<50ms,e2e<10s")
    assert [(t.metric, t.limit_ns) for t in slo.terms] == [("ttft", 500 * MS), ("itl", 50 * MS), ("e2e", 10_000 * MS)]
    with pytest.raises(OptionError, match="bad term 'tpot<5ms'"):
        parse_slo("ttft<1s,tpot<5ms")


def test_goodput_is_the_share_of_requests_meeting_every_term_of_the_slo() -> None:
    fast = interaction(chat_events(["a", "b", "c"]), first_ns=20 * MS, gap_ns=10 * MS, body=CHAT_BODY)
    slow_start = interaction(chat_events(["a", "b", "c"]), first_ns=400 * MS, gap_ns=10 * MS, body=CHAT_BODY)
    failed = replace(fast, outcome=Outcome.UPSTREAM_CLOSED)
    side = side_load("B", [fast, slow_start, failed, fast], parse_slo("ttft<300ms,itl<20ms"))
    assert side.goodput == 50.0
    assert side.errors == (("upstream_closed", 1),)
    assert side.answered == 3
    assert side.ttft_ns.p50 == 30 * MS  # the role event comes first; the first text 10 ms later


def test_the_recorded_side_counts_a_recording_copied_into_many_pairs_once() -> None:
    ix = interaction([b"x"], body=CHAT_BODY)
    other = replace(ix, request=replace(ix.request, started_at=5.0))
    assert distinct([ix, ix, other, ix]) == [ix, other]


def test_merge_keeps_pairs_and_tells_apart_a_pair_id_two_files_share() -> None:
    a = interaction([b"x"], labels={"pair": "p1", "role": "primary"})
    b = interaction([b"y"], labels={"pair": "p1", "role": "shadow"})
    got, renamed = merged([("a", [a, b]), ("b", [a, b]), ("c", [interaction([b"z"])])])
    assert [ix.labels.get("pair") for ix in got] == ["p1", "p1", "p1~1", "p1~1", None]
    assert renamed == 1


def test_filter_picks_recordings_with_record_s_mitmproxy_filter_language() -> None:
    from streamtape.commands.rerun import interaction_filter
    from streamtape.rerun.run import pick

    chat = interaction(chat_events(["a"]), body=CHAT_BODY)
    other = replace(chat, request=replace(chat.request, url="http://upstream.test/v1/embeddings"))
    shadow = replace(chat, labels={"role": "shadow", "pair": "p"})
    keep = interaction_filter("~u /v1/chat & ~m POST")
    picked = pick([("a#0", chat), ("a#1", other), ("a#2", shadow)], keep=keep)
    assert [it.label for it in picked] == ["a#0"]  # a session's shadows are never re-run
    assert [it.label for it in pick([("a#0", chat), ("a#1", other)], indices=[1])] == ["a#1"]
    with pytest.raises(OptionError, match="--filter"):
        interaction_filter("~q ((")
