"""Normalizers: each format's stream becomes the same common events, under any chunking.

Corpora for formats without a server here are written from the reference docs
(../shared/reference) and fed as Interaction values built directly.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtape import Interaction
from streamtape.shapes import (
    SHAPES,
    ShapeError,
    analyze,
    detect_shape,
    error_body,
    error_event,
)
from tests.support.builders import MS, interaction


def make_ix(body: bytes | list[bytes], path: str, ct: str = "text/event-stream",
            req: dict[str, object] | None = None, headers: tuple[tuple[str, str], ...] = (),
            status: int = 200) -> Interaction:
    pieces = [body] if isinstance(body, bytes) else body
    return interaction(pieces, first_ns=MS, gap_ns=MS, head_ns=0, status=status, reason="", content_type=ct,
                       extra_headers=headers, framing_header=False, url=f"http://127.0.0.1:9{path}",
                       request_headers=(("Content-Type", "application/json"),), body=req or {"stream": True})


def split(body: bytes, cuts) -> list[bytes]:
    cuts = sorted({c for c in cuts if 0 < c < len(body)})
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


def sse(*datas: str | tuple[str, str]) -> bytes:
    out = []
    for d in datas:
        if isinstance(d, tuple):
            out.append(f"event: {d[0]}\ndata: {d[1]}\n\n")
        else:
            out.append(f"data: {d}\n\n")
    return "".join(out).encode()


def j(v) -> str:
    return json.dumps(v, ensure_ascii=False)


def chunk(delta, finish=None, **extra):
    return j({"id": "chatcmpl-1", "object": "chat.completion.chunk",
              "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})


# ---- corpora (path, content type, body) ----------------------------------------------------

OPENAI_SEED = sse(  # the first seed document's example (streaming-llm-responses-sse.md)
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Mock "}),
    chunk({}, "stop"),
    j({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
       "usage": {"prompt_tokens": 6, "completion_tokens": 10, "total_tokens": 16}}),
    "[DONE]",
)

OPENAI_REYKJAVIK = sse(  # streaming-response-shapes.txt
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Reykjav"}),
    chunk({"content": "ík ☃"}),
    chunk({}, "stop"),
    "[DONE]",
)

OPENAI_TOOLS = (
    b": keep-alive\n\n"
    + sse(
        chunk({"role": "assistant"}),  # no content at all
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Reyk'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "get_time", "arguments": '{"tz":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'javík"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": ' "UTC"}'}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
)

OPENAI_MIDSTREAM_ERROR = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Half an ans"}),
    j({"error": {"message": "The server had an error", "type": "server_error", "code": 500}}),
)

OPENAI_COMPLETIONS = sse(
    j({"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": "Hello",
                                                                 "finish_reason": None}]}),
    j({"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": " you",
                                                                 "finish_reason": "length"}],
       "usage": {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}}),
    "[DONE]",
)

RESPONSES = sse(
    ("response.created", j({"type": "response.created", "sequence_number": 0,
                            "response": {"id": "resp_1", "status": "in_progress"}})),
    ("response.output_item.added", j({"type": "response.output_item.added", "output_index": 0,
                                      "item": {"type": "message", "role": "assistant",
                                               "content": []}})),
    ("response.output_text.delta", j({"type": "response.output_text.delta", "output_index": 0,
                                      "content_index": 0, "delta": "Checking "})),
    ("response.output_text.delta", j({"type": "response.output_text.delta", "output_index": 0,
                                      "content_index": 0, "delta": "the weather."})),
    ("response.output_item.added", j({"type": "response.output_item.added", "output_index": 1,
                                      "item": {"type": "function_call", "call_id": "call_1",
                                               "name": "get_weather", "arguments": ""}})),
    ("response.function_call_arguments.delta", j({"type": "response.function_call_arguments.delta",
                                                  "output_index": 1, "delta": '{"city":'})),
    ("response.function_call_arguments.delta", j({"type": "response.function_call_arguments.delta",
                                                  "output_index": 1, "delta": '"Oslo"}'})),
    ("response.function_call_arguments.done", j({"type": "response.function_call_arguments.done",
                                                 "output_index": 1, "arguments": '{"city":"Oslo"}'})),
    ("response.completed", j({"type": "response.completed", "response": {
        "id": "resp_1", "status": "completed",
        "usage": {"input_tokens": 11, "output_tokens": 9, "total_tokens": 20}}})),
)

OLLAMA_CHAT = (  # streaming-response-shapes.txt, one object per line
    j({"model": "llama3.1", "created_at": "2026-08-11T09:00:00Z",
       "message": {"role": "assistant", "content": "Reykjav"}, "done": False}) + "\n"
    + j({"model": "llama3.1", "created_at": "2026-08-11T09:00:00Z",
         "message": {"role": "assistant", "content": "ik"}, "done": False}) + "\n"
    + j({"model": "llama3.1", "created_at": "2026-08-11T09:00:01Z",
         "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
         "total_duration": 1290000000, "prompt_eval_count": 31, "eval_count": 58})
).encode()  # no final newline

OLLAMA_GENERATE = (
    j({"model": "llama3.1", "response": "Hel", "done": False}) + "\n\n"
    + j({"model": "llama3.1", "response": "lo", "done": False}) + "\r\n"
    + j({"model": "llama3.1", "response": "", "done": True, "done_reason": "length",
         "prompt_eval_count": 3, "eval_count": 2, "eval_duration": 5000, "load_duration": 7}) + "\n"
).encode()

OLLAMA_TOOLS = (
    j({"message": {"role": "assistant", "content": "",
                   "tool_calls": [{"function": {"name": "get_weather",
                                                "arguments": {"city": "Oslo"}}}]},
       "done": False}) + "\n"
    + j({"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
         "prompt_eval_count": 5, "eval_count": 7}) + "\n"
).encode()

OLLAMA_ERROR = (j({"message": {"role": "assistant", "content": "Hi"}, "done": False}) + "\n"
                + j({"error": "model runner has unexpectedly stopped"}) + "\n").encode()

LLAMACPP_OLD = sse(  # streaming-response-shapes.txt: the older stopped_* booleans
    j({"content": "Reykjav", "stop": False}),
    j({"content": "ik", "stop": False}),
    j({"content": "", "stop": True, "stopped_eos": True, "stopped_word": False,
       "stopped_limit": False, "tokens_predicted": 58, "tokens_evaluated": 31}),
)

LLAMACPP_OLD_LIMIT = sse(
    j({"content": "abc", "stop": False}),
    j({"content": "", "stop": True, "stopped_eos": False, "stopped_word": False,
       "stopped_limit": True, "tokens_predicted": 1, "tokens_evaluated": 1}),
)

TGI = sse(  # streaming-response-shapes.txt, plus a special end token
    j({"index": 1, "token": {"id": 49444, "text": "Reykjav", "logprob": -0.31, "special": False},
       "generated_text": None, "details": None}),
    j({"index": 2, "token": {"id": 1609, "text": "ik", "logprob": -0.02, "special": False},
       "generated_text": None, "details": None}),
    j({"index": 3, "token": {"id": 128009, "text": "<|eot_id|>", "logprob": 0.0, "special": True},
       "generated_text": "Reykjavik", "details": {"finish_reason": "eos_token",
                                                  "generated_tokens": 58, "seed": None}}),
)

ANTHROPIC = (
    sse(
        ("message_start", j({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 25, "output_tokens": 1}}})),
        ("content_block_start", j({"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}})),
        ("ping", j({"type": "ping"})),
        ("content_block_delta", j({"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": "Let me check "}})),
        ("content_block_delta", j({"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": "Ōsaka."}})),
        ("content_block_stop", j({"type": "content_block_stop", "index": 0})),
        ("content_block_start", j({"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}})),
        ("content_block_delta", j({"type": "content_block_delta", "index": 1,
                                   "delta": {"type": "input_json_delta", "partial_json": ""}})),
        ("content_block_delta", j({"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": '{"location": "Ōsa'}})),
        ("content_block_delta", j({"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": 'ka"}'}})),
        ("content_block_stop", j({"type": "content_block_stop", "index": 1})),
        ("message_delta", j({"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                                "stop_sequence": None},
                             "usage": {"output_tokens": 89}})),
        ("message_stop", j({"type": "message_stop"})),
    )
)

ANTHROPIC_ERROR = sse(
    ("message_start", j({"type": "message_start", "message": {"id": "m", "role": "assistant",
                                                              "usage": {"input_tokens": 1}}})),
    ("error", j({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
)

CORPUS = {
    "openai_seed": ("/v1/chat/completions", "text/event-stream", OPENAI_SEED),
    "openai_reykjavik": ("/v1/chat/completions", "text/event-stream", OPENAI_REYKJAVIK),
    "openai_tools": ("/v1/chat/completions", "text/event-stream", OPENAI_TOOLS),
    "openai_error": ("/v1/chat/completions", "text/event-stream", OPENAI_MIDSTREAM_ERROR),
    "openai_completions": ("/v1/completions", "text/event-stream", OPENAI_COMPLETIONS),
    "responses": ("/v1/responses", "text/event-stream", RESPONSES),
    "ollama_chat": ("/api/chat", "application/x-ndjson", OLLAMA_CHAT),
    "ollama_generate": ("/api/generate", "application/x-ndjson", OLLAMA_GENERATE),
    "ollama_tools": ("/api/chat", "application/x-ndjson", OLLAMA_TOOLS),
    "ollama_error": ("/api/chat", "application/x-ndjson", OLLAMA_ERROR),
    "llamacpp_old": ("/completion", "text/event-stream", LLAMACPP_OLD),
    "llamacpp_old_limit": ("/completion", "text/event-stream", LLAMACPP_OLD_LIMIT),
    "tgi": ("/generate_stream", "text/event-stream", TGI),
    "anthropic": ("/v1/messages", "text/event-stream", ANTHROPIC),
    "anthropic_error": ("/v1/messages", "text/event-stream", ANTHROPIC_ERROR),
}

SHAPE_OF = {
    "openai_seed": "openai-chat", "openai_reykjavik": "openai-chat", "openai_tools": "openai-chat",
    "openai_error": "openai-chat", "openai_completions": "openai-completions",
    "responses": "openai-responses", "ollama_chat": "ollama-chat",
    "ollama_generate": "ollama-generate", "ollama_tools": "ollama-chat",
    "ollama_error": "ollama-chat", "llamacpp_old": "llamacpp", "llamacpp_old_limit": "llamacpp",
    "tgi": "tgi", "anthropic": "anthropic", "anthropic_error": "anthropic",
}


def analyzed(name: str, pieces=None, **kw):
    path, ct, body = CORPUS[name]
    return analyze(make_ix(pieces if pieces is not None else body, path, ct, **kw))


def timeless(a):
    """What must not depend on chunking: events without times, text, calls, finish, usage."""
    evs = [dataclasses.replace(e, at_ns=0) for e in a.events]
    fin = a.finish and (a.finish.reason, a.finish.raw)
    use = a.usage and (a.usage.prompt_tokens, a.usage.completion_tokens, a.usage.durations)
    return (a.shape, evs, a.text, a.tool_calls, fin, use, a.done, a.role, a.invalid_json,
            a.keepalives, a.events_count, [dataclasses.replace(e, at_ns=0) for e in a.errors])


# ---- per-format expectations ----------------------------------------------------------------


def test_openai_seed_example_role_text_finish_usage_done():
    a = analyzed("openai_seed")
    assert [e.kind for e in a.events] == ["start", "text", "finish", "usage", "done"]
    assert a.text == "Mock " and a.role == "assistant" and a.role_chunk
    assert a.finish.reason == "stop" and a.done and a.usage_chunk
    assert (a.usage.prompt_tokens, a.usage.completion_tokens) == (6, 10)
    assert a.events_count == 5 and a.invalid_json == []


def test_openai_tool_call_fragments_accumulate_by_index_and_parse_only_complete():
    a = analyzed("openai_tools")
    assert a.keepalives == 1 and a.text == ""
    [c0, c1] = a.tool_calls
    assert (c0.index, c0.id, c0.name, c0.arguments) == (0, "call_a", "get_weather",
                                                         '{"city": "Reykjavík"}')
    assert c0.parsed == {"city": "Reykjavík"} and c1.parsed == {"tz": "UTC"}
    assert a.finish.reason == "tool_calls"
    frags = [e.arguments for e in a.events if e.kind == "tool_call" and e.index == 0]
    assert frags == ["", '{"city": "Reyk', 'javík"}']


def test_openai_error_object_after_200_is_an_error_event_and_no_done():
    a = analyzed("openai_error")
    assert a.text == "Half an ans" and not a.done and a.finish is None
    [err] = a.errors
    assert err.error["message"] == "The server had an error"


def test_openai_legacy_completions_text():
    a = analyzed("openai_completions")
    assert a.text == "Hello you" and a.finish.reason == "length" and a.done
    assert a.usage.completion_tokens == 2


def test_responses_api_text_function_call_usage():
    a = analyzed("responses")
    assert a.text == "Checking the weather." and a.role == "assistant"
    [call] = a.tool_calls
    assert (call.index, call.id, call.name, call.parsed) == (1, "call_1", "get_weather",
                                                             {"city": "Oslo"})
    assert a.finish.reason == "tool_calls" and a.finish.raw == "completed" and a.done
    assert (a.usage.prompt_tokens, a.usage.completion_tokens) == (11, 9)


def test_responses_incomplete_and_error_event():
    body = sse(
        ("response.output_text.delta", j({"type": "response.output_text.delta", "delta": "x"})),
        ("error", j({"type": "error", "code": "server_error", "message": "boom"})),
        ("response.incomplete", j({"type": "response.incomplete", "response": {
            "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}})),
    )
    a = analyze(make_ix(body, "/v1/responses"))
    assert a.finish is not None
    assert a.finish.reason == "length" and a.finish.raw == "max_output_tokens"
    error = a.errors[0].error
    assert isinstance(error, dict) and error["message"] == "boom"


def test_ollama_chat_done_counts_durations_without_final_newline():
    a = analyzed("ollama_chat")
    assert a.wire == "ndjson" and a.text == "Reykjavik" and a.role == "assistant"
    assert a.finish.reason == "stop" and a.done and a.partial_tail == b""
    assert (a.usage.prompt_tokens, a.usage.completion_tokens) == (31, 58)
    assert a.usage.durations == {"total_duration": 1290000000}


def test_ollama_generate_response_field_length_and_crlf():
    a = analyzed("ollama_generate")
    assert a.text == "Hello" and a.finish.reason == "length" and a.finish.raw == "length"
    assert a.usage.durations == {"load_duration": 7, "eval_duration": 5000}
    assert a.line_endings == {"\n", "\r\n"}


def test_ollama_tool_calls_arguments_as_json_text():
    a = analyzed("ollama_tools")
    [call] = a.tool_calls
    assert call.name == "get_weather" and call.parsed == {"city": "Oslo"}
    assert a.finish.reason == "tool_calls" and a.finish.raw == "stop"


def test_ollama_error_line():
    a = analyzed("ollama_error")
    assert a.errors[0].error == "model runner has unexpectedly stopped" and not a.done


def test_llamacpp_older_booleans():
    a = analyzed("llamacpp_old")
    assert a.text == "Reykjavik" and a.finish.reason == "stop" and a.finish.raw == "stopped_eos"
    assert (a.usage.prompt_tokens, a.usage.completion_tokens) == (31, 58)
    b = analyzed("llamacpp_old_limit")
    assert b.finish.reason == "length" and b.finish.raw == "stopped_limit"


@pytest.mark.parametrize(("stop_type", "reason"), [("eos", "stop"), ("word", "stop"),
                                                    ("limit", "length"), ("none", "other")])
def test_llamacpp_newer_stop_type(stop_type, reason):
    body = sse(j({"content": "a", "stop": False}),
               j({"content": "", "stop": True, "stop_type": stop_type, "tokens_predicted": 1,
                  "tokens_evaluated": 2, "timings": {"prompt_ms": 1.5, "predicted_ms": 2.0}}))
    a = analyze(make_ix(body, "/completion"))
    assert a.finish is not None
    assert (a.finish.reason, a.finish.raw) == (reason, stop_type)
    assert a.usage is not None
    assert a.usage.durations == {"prompt_eval_duration": 1_500_000, "eval_duration": 2_000_000}


def test_tgi_special_tokens_flagged_and_kept_out_of_text():
    a = analyzed("tgi")
    assert a.text == "Reykjavik" and a.special_tokens == ["<|eot_id|>"]
    specials = [e for e in a.events if e.kind == "text" and e.special]
    assert len(specials) == 1 and not specials[0].is_content
    assert a.finish.reason == "stop" and a.finish.raw == "eos_token" and a.done
    assert a.usage.completion_tokens == 58


def test_anthropic_text_tool_use_stop_reason_usage():
    a = analyzed("anthropic")
    assert a.text == "Let me check Ōsaka." and a.role == "assistant"
    [call] = a.tool_calls
    assert (call.index, call.id, call.name, call.parsed) == (1, "toolu_1", "get_weather",
                                                             {"location": "Ōsaka"})
    assert a.finish.reason == "tool_calls" and a.finish.raw == "tool_use" and a.done
    assert (a.usage.prompt_tokens, a.usage.completion_tokens) == (25, 89)


def test_anthropic_error_event():
    a = analyzed("anthropic_error")
    assert a.errors[0].error == {"type": "overloaded_error", "message": "Overloaded"}
    assert not a.done


# ---- chunking invariance --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_single_split_point_gives_the_same_analysis(name):
    _, _, body = CORPUS[name]
    whole = timeless(analyzed(name))
    step = max(1, len(body) // 400)  # every point for small bodies, ~400 points for larger
    for i in range(0, len(body) + 1, step):
        assert timeless(analyzed(name, split(body, [i]))) == whole, i


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_byte_by_byte_gives_the_same_analysis_and_times_from_completing_pieces(name):
    _, _, body = CORPUS[name]
    pieces = split(body, range(len(body)))
    a = analyzed(name, pieces)
    assert timeless(a) == timeless(analyzed(name))
    # each event's time is the time of the piece holding the last byte of its wire event
    for e in a.events:
        w = a.wire_events[e.source]
        assert e.at_ns == 1_000_000 * (w.end if w.end <= len(body) else len(body)) or w.end == 0


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CORPUS)), cuts=st.lists(st.integers(0, 5000), max_size=40))
def test_hypothesis_random_chunkings_give_the_same_analysis(name, cuts):
    _, _, body = CORPUS[name]
    assert timeless(analyzed(name, split(body, cuts))) == timeless(analyzed(name))


# ---- detection ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_detect_shape_from_body_even_on_an_unknown_path(name):
    path, ct, body = CORPUS[name]
    assert detect_shape(make_ix(body, path, ct)) == SHAPE_OF[name]
    assert detect_shape(make_ix(body, "/proxy/x", ct)) == SHAPE_OF[name]


def test_detect_shape_from_path_when_the_body_does_not_tell():
    assert detect_shape(make_ix(b"", "/v1/chat/completions")) == "openai-chat"
    assert detect_shape(make_ix(b"", "/api/generate", "application/x-ndjson")) == "ollama-generate"
    assert detect_shape(make_ix(b"", "/generate_stream")) == "tgi"
    assert detect_shape(make_ix(b"", "/api/chat")) == "sse"  # wire says SSE: path does not fit
    assert detect_shape(make_ix(b"data: hello\n\n", "/x")) == "sse"
    assert detect_shape(make_ix(b"plain text", "/x", "text/plain")) == "raw"


def test_shape_override_and_unknown_shape():
    _, ct, body = CORPUS["openai_seed"]
    ix = make_ix(body, "/x", ct)
    a = analyze(ix, shape="sse")
    assert a.shape == "sse" and [e.kind for e in a.events][-1] == "done"
    assert analyze(ix, shape="openai-chat").text == "Mock "
    with pytest.raises(ShapeError, match=r"unknown shape 'nope'.*openai-chat"):
        analyze(ix, shape="nope")


def test_raw_body_text_assembled_with_incremental_decoder_and_cut_chars_counted():
    body = "naïve 日本 😀".encode()
    cuts = [3, 8, 10, 11, 15]  # all but 10 fall inside a multi-byte character
    ix = make_ix(split(body, cuts), "/x", "text/plain")
    a = analyze(ix)
    assert a.shape == "raw" and a.text == "naïve 日本 😀"
    assert a.cut_chars == 4
    assert "\ufffd" not in "".join(e.text or "" for e in a.events)


def test_cut_chars_in_sse_stream():
    body = OPENAI_REYKJAVIK
    i = body.index("í".encode()) + 1
    a = analyze(make_ix(split(body, [i]), "/v1/chat/completions"))
    assert a.cut_chars == 1 and a.text == "Reykjavík ☃"
    assert analyze(make_ix(body, "/v1/chat/completions")).cut_chars == 0


def test_invalid_json_event_is_indexed_and_does_not_stop_the_rest():
    body = sse(chunk({"content": "a"}), '{"choices": [', chunk({"content": "b"}), "[DONE]")
    a = analyze(make_ix(body, "/v1/chat/completions"))
    assert a.invalid_json == [1] and a.text == "ab" and a.done


def test_gzip_body_is_decoded_piece_by_piece():
    raw = OPENAI_SEED
    co = zlib.compressobj(wbits=31)
    comp = co.compress(raw) + co.flush()
    assert gzip.decompress(comp) == raw
    ix = make_ix(split(comp, [10, 40]), "/v1/chat/completions",
                 headers=(("Content-Encoding", "gzip"),))
    a = analyze(ix)
    assert a.text == "Mock " and a.done and a.decode_error is None
    bad = make_ix([b"not gzip at all"], "/v1/chat/completions",
                  headers=(("Content-Encoding", "gzip"),))
    assert "corrupt" in (analyze(bad).decode_error or "")
    cut = make_ix([comp[:-12]], "/v1/chat/completions", headers=(("Content-Encoding", "gzip"),))
    assert "ends early" in (analyze(cut).decode_error or "")


def test_partial_tail_of_a_cut_stream():
    body = OPENAI_SEED[:-7]
    a = analyze(make_ix(body, "/v1/chat/completions"))
    assert not a.done and a.partial_tail == b"data: ["


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=400), shape=st.sampled_from(SHAPES),
       cuts=st.lists(st.integers(0, 400), max_size=5))
def test_fuzz_analyze_never_raises_on_arbitrary_bytes(body, shape, cuts):
    a = analyze(make_ix(split(body, cuts) or [b""], "/x"), shape=shape)
    assert isinstance(a.text, str)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["choices", "delta", "content", "tool_calls", "index", "function",
                         "arguments", "finish_reason", "usage", "error", "type", "message",
                         "done", "stop", "token", "details", "text", "response", "stop_type",
                         "content_block", "partial_json", "role", "timings", "item"]),
        c, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(JSONISH, max_size=6), shape=st.sampled_from(SHAPES))
def test_fuzz_normalizers_never_raise_on_odd_json(values, shape):
    body = b"".join(b"data: " + json.dumps(v).encode() + b"\n\n" for v in values)
    body += b"".join(json.dumps(v).encode() + b"\n" for v in values)
    analyze(make_ix(body, "/x"), shape=shape)


# ---- error shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_error_event_is_read_back_as_an_error_by_the_same_shape(shape):
    data = error_event(shape, "backend exploded")
    if shape == "raw":
        assert data == b"backend exploded\n"
        return
    if shape == "jsonarray":  # the next element of an array begun before it
        data = b"[{}" + data
    _, ct, _ = next(CORPUS[n] for n in CORPUS if SHAPE_OF[n] == shape) if shape in SHAPE_OF.values() \
        else (None, "text/event-stream" if shape == "sse" else "application/x-ndjson", None)
    a = analyze(make_ix(data, "/x", ct), shape=shape)
    assert len(a.errors) == 1
    assert "backend exploded" in json.dumps(a.errors[0].error)


@pytest.mark.parametrize("shape", SHAPES)
def test_error_body_is_json_in_the_format_shape(shape):
    ct, body = error_body(shape, 429, "slow down")
    if shape == "raw":
        assert ct.startswith("text/plain") and body == b"slow down"
        return
    v = json.loads(body)
    assert ct == "application/json" and "slow down" in json.dumps(v)
    if shape == "anthropic":
        assert v["error"]["type"] == "rate_limit_error"
    if shape.startswith("openai"):
        assert v["error"]["type"] == "rate_limit_exceeded"


def test_error_helpers_reject_unknown_shape():
    with pytest.raises(ShapeError):
        error_event("nope", "x")
    with pytest.raises(ShapeError):
        error_body("nope", 500, "x")
