"""Real llama.cpp llama-server streams (tests/corpus, captured from ../shared/llama):
what the normalizers make of them, and that cutting them into other pieces changes nothing."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtape import Piece
from streamtape.shapes import analyze, detect_shape, event_spans
from tests.corpus import NAMES, capture

SHAPES = {
    "chat_stream_slow": "openai-chat", "chat_stream_usage_slow": "openai-chat",
    "chat_limit_tiny": "openai-chat", "chat_eos_stop_tiny": "openai-chat",
    "native_completion_slow": "llamacpp", "native_limit_mid_utf8_tiny": "llamacpp",
    "native_stopword_tiny": "llamacpp", "v1_completions_tiny": "openai-completions",
    "anthropic_messages_slow": "anthropic", "native_random_model_tiny": "llamacpp",
}


def recut(ix, cuts):
    body = ix.response.body
    cuts = sorted({c for c in cuts if 0 < c < len(body)})
    bounds = list(zip([0, *cuts], [*cuts, len(body)], strict=True))
    pieces = tuple(Piece(i, body[a:b]) for i, (a, b) in enumerate(bounds))
    return dataclasses.replace(ix, response=dataclasses.replace(ix.response, pieces=pieces))


def timeless(a):
    return ([dataclasses.replace(e, at_ns=0) for e in a.events], a.text, a.tool_calls,
            a.finish and (a.finish.reason, a.finish.raw), a.done, a.events_count)


@pytest.mark.parametrize("name", NAMES)
def test_detected_shape(name):
    assert detect_shape(capture(name)) == SHAPES[name]


def test_chat_first_http_chunk_holds_role_chunk_with_null_content_and_first_token():
    a = analyze(capture("chat_stream_slow"))
    first = [e for e in a.events if e.at_ns == a.events[0].at_ns]
    assert [e.kind for e in first] == ["start", "text"]
    assert a.wire_events[0].value["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert a.role_chunk and a.role == "assistant"


def test_chat_multibyte_character_arrives_whole_in_one_event():
    a = analyze(capture("chat_stream_slow"))
    assert "日" in [e.text for e in a.events if e.kind == "text"]
    assert a.cut_chars == 0


def test_chat_cut_at_limit_finish_length_then_done():
    a = analyze(capture("chat_limit_tiny"))
    kinds = [e.kind for e in a.events]
    assert kinds[-2:] == ["finish", "done"]
    assert a.finish is not None
    assert a.finish.reason == "length" and a.usage is None and not a.usage_chunk


def test_chat_with_include_usage_usage_event_in_same_http_chunk_as_finish():
    ix = capture("chat_stream_usage_slow")
    a = analyze(ix)
    assert a.usage is not None
    assert a.usage_chunk and a.usage.completion_tokens == 30 and a.usage.prompt_tokens == 24
    assert a.finish is not None
    assert a.usage.at_ns == a.finish.at_ns
    assert ix.pieces[-1].data.count(b"data: ") >= 2


def test_chat_ends_on_its_own_with_stop():
    a = analyze(capture("chat_eos_stop_tiny"))
    assert a.finish is not None
    assert a.finish.reason == "stop" and a.done


def test_native_completion_stop_type_limit_with_counts_and_timings():
    a = analyze(capture("native_completion_slow"))
    assert a.finish is not None
    assert (a.finish.reason, a.finish.raw) == ("length", "limit")
    assert a.usage is not None
    assert (a.usage.prompt_tokens, a.usage.completion_tokens) == (2, 24)
    assert a.usage.durations["eval_duration"] == 221_672_000
    assert a.done  # the stop:true event is the final marker; no [DONE] on /completion


def test_native_stopword_events_with_empty_content_then_word():
    a = analyze(capture("native_stopword_tiny"))
    assert a.finish is not None
    assert (a.finish.reason, a.finish.raw) == ("stop", "word")
    assert any(w.value.get("content") == "" for w in a.wire_events[:-1])


def test_native_limit_inside_a_character_drops_the_dangling_byte():
    a = analyze(capture("native_limit_mid_utf8_tiny"))
    assert a.text.endswith("The caf") and "\ufffd" not in a.text


def test_random_model_lone_bytes_become_replacement_characters():
    a = analyze(capture("native_random_model_tiny"))
    assert "\ufffd" in a.text and a.invalid_json == []


def test_anthropic_messages_from_llama_server():
    a = analyze(capture("anthropic_messages_slow"))
    assert a.finish is not None
    assert (a.finish.reason, a.finish.raw) == ("length", "max_tokens") and a.done
    assert a.usage is not None
    assert a.text.startswith(" Hello, world!") and a.usage.completion_tokens == 12


def test_v1_completions_legacy_stream():
    a = analyze(capture("v1_completions_tiny"))
    assert a.finish is not None
    assert a.finish.reason == "length" and a.done and a.text


@pytest.mark.parametrize("name", NAMES)
def test_spans_cover_every_event(name):
    ix = capture(name)
    assert ix.response is not None
    body = ix.response.body
    spans = event_spans(body, "sse")
    assert spans and spans[0].start == 0 and spans[-1].end == len(body)
    assert len([s for s in spans if s.kind != "comment"]) == analyze(ix).events_count
    assert (spans[-1].kind == "done") == name.startswith(("chat", "v1_"))


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(NAMES), cuts=st.lists(st.integers(0, 9000), max_size=60))
def test_recut_captures_give_the_same_analysis(name, cuts):
    ix = capture(name)
    assert timeless(analyze(recut(ix, cuts))) == timeless(analyze(ix))


@pytest.mark.parametrize("name", ["chat_stream_slow", "native_limit_mid_utf8_tiny"])
def test_recut_byte_by_byte(name):
    ix = capture(name)
    assert ix.response is not None
    a = analyze(recut(ix, range(len(ix.response.body))))
    assert timeless(a) == timeless(analyze(ix))
    # byte by byte, every boundary inside a multi-byte character cuts it
    assert a.cut_chars == sum(len(c.encode()) - 1 for c in ix.response.body.decode()) > 0
