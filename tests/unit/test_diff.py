"""``streamtape diff`` on built values: gates, pairing, JSON equality, the word diff and the
reports of built interactions. Pairs recorded through the real recorder and the command on
them are tests/system/test_diff.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from streamtape import Interaction
from streamtape.cassette.model import Outcome
from streamtape.diff import (
    GateError,
    body_key,
    compare,
    diff_many,
    json_equal,
    pair,
    parse_gate,
    render_text,
    result_json,
    word_diff,
)
from streamtape.errors import OptionError
from tests.support.builders import MS, chat_events, interaction
from tests.support.recording import run_main as run


def _ix(path: str, body: dict[str, object] | bytes, text: str = "hi", method: str = "POST") -> Interaction:
    return interaction(chat_events([text]), first_ns=MS, gap_ns=MS, head_ns=0, framing_header=False,
                       method=method, url="http://127.0.0.1:9" + path, request_headers=(), body=body)


def test_word_diff_of_two_long_different_texts_is_bounded_and_says_where_it_stops() -> None:
    a = " ".join(f"a{i}" for i in range(5000))
    b = " ".join(f"b{i}" for i in range(5000))
    ops = word_diff("Same start. " + a + " Same end.", "Same start. " + b + " Same end.", window=100)
    assert ops[0] == ("=", "Same start. ")
    assert ops[-1] == ("…", "word diff stops here; 4953 more words in A, 4953 in B")
    assert sum(len(t) for op, t in ops if op == "-") < 600


def test_word_diff_of_a_long_paragraph_keeps_only_context_around_the_change() -> None:
    a = " ".join(f"word{i}" for i in range(300))
    b = a.replace("word150", "WORD150")
    rep = compare(_ix("/x", {"q": 1}, text=a), _ix("/x", {"q": 1}, text=b))
    (line,) = [x for x in render_text(rep).splitlines() if x.strip().startswith("words:")]
    assert "[-word150-]{+WORD150+}" in line
    assert len(line) < 200 and line.count("…") == 2


@pytest.mark.parametrize(
    ("text", "metric", "op", "kind", "value"),
    [
        ("ttft>1.5x", "ttft", ">", "ratio", 1.5),
        ("p95_gap>+20ms", "p95_gap", ">", "delta", 20e6),
        ("gap_p95 > +20 ms", "p95_gap", ">", "delta", 20e6),
        ("duration>2s", "duration", ">", "absolute", 2e9),
        ("ttfb>=500us", "ttfb", ">=", "absolute", 500e3),
        ("ttft>+50%", "ttft", ">", "percent", 50.0),
        ("max_gap>-1ms", "max_gap", ">", "delta", -1e6),
        ("tokens_per_s<0.8x", "tokens_per_s", "<", "ratio", 0.8),
        ("tps<20", "tokens_per_s", "<", "absolute", 20.0),
    ],
)
def test_gates_parse(text: str, metric: str, op: str, kind: str, value: float) -> None:
    g = parse_gate(text)
    assert (g.metric, g.op, g.kind) == (metric, op, kind)
    assert g.value == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ttft", "expected METRIC OP VALUE"),
        ("ttft>>1.5x", "cannot read value"),
        ("ttft=1.5x", "expected METRIC OP VALUE"),
        ("ttfx>1.5x", "unknown metric 'ttfx'"),
        ("ttft>1.5", "needs a unit"),
        ("ttft>1.5h", "unknown unit 'h'"),
        ("ttft>+1.5x", "a factor takes no sign"),
        ("ttft>10%", "with a sign"),
        ("tps<20ms", "unknown unit 'ms'"),
        ("ttft>", "expected METRIC OP VALUE"),
    ],
)
def test_malformed_gates_raise_gate_error_naming_the_gate(text: str, why: str) -> None:
    with pytest.raises(GateError) as exc:
        parse_gate(text)
    msg = str(exc.value)
    assert isinstance(exc.value, OptionError)
    assert msg.startswith(f"bad --fail-on gate {text!r}") and why in msg and "\n" not in msg


def test_a_gate_that_cannot_be_checked_fails_and_says_why() -> None:
    silent = _ix("/v1/chat/completions", {"m": 1}, text="")
    talking = _ix("/v1/chat/completions", {"m": 1}, text="hi")
    gates = [parse_gate("ttft>1.5x"), parse_gate("duration>10s")]
    rep = compare(talking, silent, gates=gates)
    ttft, duration = rep.gates
    assert not ttft.ok and ttft.detail == "cannot check: B has no first token"
    assert duration.ok and rep.exit_status == 1
    rep = compare(silent, silent, gates=gates[:1])
    assert rep.gates[0].detail == "cannot check: A and B have no first token"
    # An absolute gate needs only B.
    assert compare(silent, talking, gates=[parse_gate("ttft>10s")]).gates[0].ok


def test_pairing_uses_method_path_and_body_as_data_then_ignores_model_then_lists_leftovers() -> None:
    a = [
        _ix("/v1/chat/completions", {"model": "x", "messages": [1]}),
        _ix("/v1/chat/completions", {"model": "x", "messages": [2]}),
        _ix("/v1/chat/completions", {"model": "x", "messages": [1]}),  # a repeat
        _ix("/api/chat", {"messages": [1]}),
    ]
    b = [
        _ix("/v1/chat/completions", {"messages": [2], "model": "x"}),
        _ix("/v1/chat/completions", b'{"messages":[1],  "model":"x"}'),
        _ix("/v1/chat/completions", {"model": "y", "messages": [1]}),
        _ix("/v1/chat/completions", {"model": "x", "messages": [3]}),
    ]
    p = pair(a, b)
    assert p.pairs == ((0, 1, "request"), (1, 0, "request"), (2, 2, "request except model"))
    assert p.unpaired_a == (3,) and p.unpaired_b == (3,)
    assert body_key(b'{"a": 1, "b": [1, 2]}') == body_key(b'{"b":[1,2],"a":1}')
    assert body_key(b"not json") == ("bytes", b"not json")


def test_pairing_does_not_pair_other_methods_or_paths() -> None:
    a = [_ix("/v1/x", {"q": 1}), _ix("/v1/y", {"q": 1})]
    b = [_ix("/v1/x", {"q": 1}, method="PUT"), _ix("/v1/y?stream=1", {"q": 1})]
    p = pair(a, b)
    assert p.pairs == () and p.unpaired_a == (0, 1) and p.unpaired_b == (0, 1)


def test_json_equal_is_data_equality_without_key_order_and_without_bool_int_confusion() -> None:
    assert json_equal({"a": 1, "b": [1, {"c": None}]}, {"b": [1, {"c": None}], "a": 1.0})
    assert not json_equal({"a": True}, {"a": 1})
    assert not json_equal([1, 2], [2, 1])
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})
    assert not json_equal("1", 1)


def test_diff_many_and_json_hold_the_same_content_as_the_text_report() -> None:
    a = [_ix("/v1/chat/completions", {"m": 1}, text="alpha beta")]
    b = [_ix("/v1/chat/completions", {"m": 1}, text="alpha gamma")]
    res = diff_many(a, b, name_a="left", name_b="right")
    assert res.exit_status == 1
    doc = result_json(res)
    json.dumps(doc)  # serializable
    text = render_text(res)
    pairs = doc["pairs"]
    assert isinstance(pairs, list)
    (p,) = pairs
    for line in p["meaning"]["text"]["unified_diff"]:
        assert line in text
    for row in p["wire"]["rows"]:
        assert row["name"] in text
    for row in p["timing"]:
        assert row["label"] in text
    assert "left#0" in text and "right#0" in text


def test_an_interaction_without_response_compares_as_differing() -> None:
    ok = _ix("/v1/chat/completions", {"m": 1})
    refused = replace(ok, response=None, outcome=Outcome.UPSTREAM_ERROR, error="connection refused", end_ns=5)
    rep = compare(ok, refused)
    assert not rep.same and rep.exit_status == 1
    assert "finish" in rep.meaning.differs
    assert "connection refused" in render_text(rep)


def test_cli_help_runs(capsys) -> None:
    code, out, _ = run("diff", "--help", capsys=capsys)
    assert code == 0 and "--fail-on" in out and "FILE#N" in out
