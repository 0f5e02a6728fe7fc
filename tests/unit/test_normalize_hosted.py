"""The hosted providers' formats: each stream, in its recorded shape, reads as its
provider's SDK assembles it (text, reasoning, tool calls with parsed arguments, finish
in common terms beside the server's value, usage), and ``check`` says what it says of
the others. Bytes come from ``tests/support/hosted.py``."""

from __future__ import annotations

import json

import pytest

from streamtape import Interaction
from streamtape.check import check
from streamtape.diff.compare import compare
from streamtape.shapes import analyze, detect_shape
from streamtape.stats import compute
from tests.support.hosted import (
    ANSWER,
    ARGS,
    CHAT_PATH,
    COHERE_PATH,
    CONVERSE_PATH,
    EVENTSTREAM,
    GEMINI_PATH,
    INTERACTIONS_PATH,
    INVOKE_PATH,
    JSON,
    SSE,
    anthropic_events,
    chat,
    cohere_events,
    converse_messages,
    gemini_array,
    gemini_chunks,
    gemini_sse,
    interactions_events,
    interactions_sse,
    invoke_messages,
    ix,
    j,
    openai_events,
    sse,
    throttled,
)

TEXT = "".join(ANSWER)
CALL: dict[str, object] = {"name": "get_weather", "args": ARGS}


def _codes(x) -> list[str]:
    return [f.code for f in check(x)]


# ---- Gemini and Vertex ---------------------------------------------------------------------


@pytest.mark.parametrize("wire", ["sse", "vertex-crlf", "jsonarray"])
def test_a_gemini_stream_reads_the_same_on_each_of_its_wires(wire):
    chunks = gemini_chunks(call=CALL)
    pieces = (gemini_array(chunks) if wire == "jsonarray"
              else gemini_sse(chunks, b"\r\n" if wire == "vertex-crlf" else b"\n"))
    x = ix(pieces, GEMINI_PATH + ("?alt=sse" if wire != "jsonarray" else ""),
           JSON if wire == "jsonarray" else SSE)
    a = analyze(x)
    assert (a.shape, a.wire) == ("gemini", "sse" if wire != "jsonarray" else "jsonarray")
    assert a.text == TEXT and a.reasoning == "Greeting: be kind."
    assert a.choices[0].reasoning_signatures == ["c2lnbmF0dXJl"]
    (call,) = a.tool_calls
    assert (call.name, call.parsed, call.valid_json) == ("get_weather", ARGS, True)
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == ("tool_calls", "STOP")
    assert a.usage is not None
    # completion counts the thinking, as OpenAI's does: candidates 4 + thoughts 12
    assert (a.usage.prompt_tokens, a.usage.completion_tokens, a.usage.reasoning_tokens) == (7, 16, 12)
    assert a.done is (wire == "jsonarray")
    assert _codes(x) == []
    if wire == "vertex-crlf":
        assert a.line_endings == {"\r\n"}


def test_a_gemini_stream_is_known_by_its_body_alone():
    assert detect_shape(ix(gemini_sse(gemini_chunks()), "/proxy", SSE)) == "gemini"
    assert detect_shape(ix(gemini_array(gemini_chunks()), "/proxy", JSON)) == "gemini"


@pytest.mark.parametrize(("raw", "reason", "code"), [
    ("MAX_TOKENS", "length", "finish-length"),
    ("SAFETY", "content_filter", "finish-content-filter"),
    ("RECITATION", "content_filter", "finish-content-filter"),
])
def test_a_gemini_length_or_safety_cut_is_a_finding(raw, reason, code):
    x = ix(gemini_sse(gemini_chunks(finish=raw)), GEMINI_PATH, SSE)
    a = analyze(x)
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == (reason, raw)
    assert code in _codes(x)


def test_a_gemini_stream_cut_before_its_finish_is_no_finish():
    assert "no-finish" in _codes(ix(gemini_sse(gemini_chunks())[:-1], GEMINI_PATH, SSE))


def test_a_gemini_error_after_the_200_is_an_error_event():
    err = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    x = ix([*gemini_sse(gemini_chunks())[:2], sse(err)], GEMINI_PATH, SSE)
    assert "error-event" in _codes(x)
    assert analyze(x).errors[0].error == err["error"]


def test_a_control_token_leaking_into_gemini_text_is_a_finding():
    x = ix(gemini_sse(gemini_chunks(["Hi", "<end_of_turn>"])), GEMINI_PATH, SSE)
    assert "control-token" in _codes(x)


def test_a_gemini_stream_has_ttft_and_gaps_from_its_answer_events():
    x = ix(gemini_sse(gemini_chunks()), GEMINI_PATH, SSE)
    st = compute(x, analyze(x))
    assert st.first_reasoning_ns == 1_000_000 and st.ttft_ns == 2_000_000
    assert st.gap_p50_ns == 1_000_000


def test_a_gemini_stream_and_an_openai_one_with_the_same_answer_agree_in_diff():
    g = ix(gemini_sse(gemini_chunks(thought=None, usage=(7, 4, 0))), GEMINI_PATH, SSE)
    o = ix(openai_events(usage=(7, 4)), CHAT_PATH, SSE)
    rep = compare(g, o)
    assert rep.same, rep.meaning.differs
    other = ix(openai_events(["Hello", ", world"], usage=(7, 4)), CHAT_PATH, SSE)
    assert not compare(g, other).same


def test_gemini_tool_calls_and_openai_fragments_of_the_same_call_agree_in_diff():
    g = ix(gemini_sse(gemini_chunks(thought=None, call=CALL, usage=(7, 4, 0))), GEMINI_PATH, SSE)
    o = ix(openai_events(call=("get_weather", j(ARGS)), finish="tool_calls", usage=(7, 4)),
           CHAT_PATH, SSE)
    assert compare(g, o).same


# ---- Bedrock ---------------------------------------------------------------------------------


def test_a_converse_stream_reads_text_reasoning_tool_input_fragments_and_usage():
    x = ix(converse_messages(reasoning="Think of the weather.", tool=True), CONVERSE_PATH,
           EVENTSTREAM)
    a = analyze(x)
    assert (a.shape, a.wire) == ("bedrock-converse", "eventstream")
    assert a.text == TEXT and a.reasoning == "Think of the weather."
    assert a.choices[0].reasoning_signatures == ["U0lH"]
    (call,) = a.tool_calls
    assert (call.id, call.name, call.parsed) == ("tooluse_1", "get_weather", ARGS)
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == ("tool_calls", "tool_use")
    assert a.usage is not None and (a.usage.prompt_tokens, a.usage.completion_tokens) == (7, 16)
    assert a.usage.durations == {"latency": 412_000_000}
    assert a.done and _codes(x) == []


def test_a_converse_stream_is_known_by_its_messages_alone():
    assert detect_shape(ix(converse_messages(), "/x", "application/octet-stream")) == "bedrock-converse"


def test_a_converse_stream_ending_in_a_throttling_exception_is_an_error_event_and_no_done():
    x = ix(throttled(converse_messages(), 3), CONVERSE_PATH, EVENTSTREAM)
    a = analyze(x)
    assert a.errors[0].error == {"type": "throttlingException",
                                 "message": "Too many requests, please wait."}
    findings = check(x)
    err = next(f for f in findings if f.code == "error-event")
    assert "throttlingException" in err.message and err.event == 3
    assert "no-done" in [f.code for f in findings]


@pytest.mark.parametrize(("raw", "code"), [("max_tokens", "finish-length"),
                                           ("guardrail_intervened", "finish-content-filter")])
def test_a_converse_length_or_guardrail_stop_is_a_finding(raw, code):
    assert code in _codes(ix(converse_messages(stop=raw), CONVERSE_PATH, EVENTSTREAM))


def test_an_invoke_stream_reads_the_models_own_events_inside_the_base64_chunks():
    x = ix(invoke_messages(anthropic_events()), INVOKE_PATH, EVENTSTREAM)
    a = analyze(x)
    assert (a.shape, a.wire) == ("bedrock-invoke", "eventstream")
    assert a.text == TEXT and a.done
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == ("stop", "end_turn")
    assert a.usage is not None and (a.usage.prompt_tokens, a.usage.completion_tokens) == (7, 16)
    assert a.usage.durations == {"latency": 380_000_000, "first_byte": 120_000_000}
    assert _codes(x) == []
    assert detect_shape(ix(invoke_messages(anthropic_events()), "/x", EVENTSTREAM)) == "bedrock-invoke"


def test_an_invoke_stream_cut_before_message_stop_is_no_done():
    x = ix(invoke_messages(anthropic_events()[:-1]), INVOKE_PATH, EVENTSTREAM)
    assert "no-done" in _codes(x)


def test_an_invoke_chunk_that_is_not_base64_is_invalid_not_a_crash():
    from streamtape.shapes.eventstream import event_message
    bad = event_message("chunk", {"bytes": "!!not base64!!"})
    a = analyze(ix([*invoke_messages(anthropic_events()[:2]), bad], INVOKE_PATH, EVENTSTREAM))
    assert a.invalid_json == [2] and a.text == ""


# ---- Cohere ----------------------------------------------------------------------------------


def test_a_cohere_stream_reads_text_finish_and_usage():
    x = ix(cohere_events(), COHERE_PATH, SSE)
    a = analyze(x)
    assert a.shape == "cohere" and a.text == TEXT and a.done
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == ("stop", "COMPLETE")
    assert a.usage is not None and (a.usage.prompt_tokens, a.usage.completion_tokens) == (70, 16)
    assert _codes(x) == []
    assert detect_shape(ix(cohere_events(), "/x", SSE)) == "cohere"


def test_a_cohere_tool_plan_is_reasoning_and_its_call_arguments_join():
    x = ix(cohere_events(plan="I will look up the weather.", tool=True), COHERE_PATH, SSE)
    a = analyze(x)
    assert a.text == "" and a.reasoning == "I will look up the weather."
    (call,) = a.tool_calls
    assert (call.id, call.name, call.parsed) == ("get_weather_x1", "get_weather", ARGS)
    assert a.finish is not None and a.finish.reason == "tool_calls"


def test_a_cohere_max_tokens_end_is_a_length_finding_and_a_cut_stream_no_done():
    assert "finish-length" in _codes(ix(cohere_events(finish="MAX_TOKENS"), COHERE_PATH, SSE))
    assert "no-done" in _codes(ix(cohere_events()[:-1], COHERE_PATH, SSE))


# ---- OpenAI-compatible hosts -------------------------------------------------------------------

AZURE_PATH = "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"
_FILTERS = {k: {"filtered": False, "severity": "safe"} for k in ("hate", "sexual", "violence")}


def test_azure_first_chunk_of_prompt_filter_results_is_no_text_and_a_filtered_end_a_finding():
    first = sse({"choices": [], "created": 0, "id": "", "model": "", "object": "",
                 "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _FILTERS}]})
    body = [first,
            chat([{"index": 0, "delta": {"role": "assistant", "content": "Hel"},
                   "content_filter_results": _FILTERS}]),
            chat([{"index": 0, "delta": {}, "finish_reason": "content_filter",
                   "content_filter_results": {"violence": {"filtered": True, "severity": "high"}}}]),
            b"data: [DONE]\n\n"]
    x = ix(body, AZURE_PATH, SSE)
    a = analyze(x)
    assert a.shape == "azure-openai" and a.text == "Hel"
    assert _codes(x) == ["finish-content-filter"]


def test_azure_is_named_from_its_filter_results_on_any_path_and_from_its_url_without_them():
    first = sse({"choices": [], "created": 0, "id": "", "model": "", "object": "",
                 "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _FILTERS}]})
    plain = openai_events()
    assert analyze(ix([first, *plain], CHAT_PATH, SSE)).shape == "azure-openai"
    assert analyze(ix(plain, AZURE_PATH, SSE)).shape == "azure-openai"
    assert analyze(ix(plain, CHAT_PATH, SSE)).shape == "openai-chat"
    a, b = analyze(ix(plain, AZURE_PATH, SSE)), analyze(ix(plain, CHAT_PATH, SSE))
    assert (a.text, a.finish, a.usage, a.done) == (b.text, b.finish, b.usage, b.done)


def test_azure_legacy_completions_with_filter_results_stay_completions():
    first = sse({"choices": [], "id": "", "object": "",
                 "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _FILTERS}]})
    body = [first,
            sse({"id": "c", "object": "text_completion", "choices": [
                {"index": 0, "text": "Hi", "finish_reason": "stop", "content_filter_results": _FILTERS}]}),
            b"data: [DONE]\n\n"]
    a = analyze(ix(body, "/openai/deployments/d/completions?api-version=2024-10-21", SSE))
    assert a.shape == "openai-completions" and a.text == "Hi"


def test_groq_usage_in_x_groq_is_the_usage():
    body = openai_events()
    body.insert(-1, chat([], x_groq={"id": "req_1", "usage": {"prompt_tokens": 9,
                                                              "completion_tokens": 5}}))
    a = analyze(ix(body, CHAT_PATH, SSE))
    assert a.usage is not None and (a.usage.prompt_tokens, a.usage.completion_tokens) == (9, 5)


def test_deepseek_reasoning_content_and_keep_alive_comments():
    body = [b": keep-alive\n\n", b": keep-alive\n\n",
            chat([{"index": 0, "delta": {"role": "assistant", "reasoning_content": "Hmm."}}]),
            *openai_events()[1:]]
    x = ix(body, CHAT_PATH, SSE)
    a = analyze(x)
    assert (a.reasoning, a.text, a.keepalives) == ("Hmm.", TEXT, 2)
    assert _codes(x) == ["keepalive"]


def test_an_openrouter_error_chunk_with_choices_is_an_error_and_an_error_finish():
    err = {"code": 502, "message": "Provider returned error"}
    body = [*openai_events()[:3], chat([{"index": 0, "delta": {"content": ""},
                                         "finish_reason": "error"}], error=err)]
    a = analyze(ix(body, CHAT_PATH, SSE))
    assert [e.error for e in a.errors] == [err]
    assert a.finish is not None and a.finish.reason == "error"


def test_openrouter_processing_comments_and_an_error_after_the_200():
    body = [b": OPENROUTER PROCESSING\n\n", *openai_events()[:3],
            sse({"error": {"code": 502, "message": "Provider returned error"}})]
    codes = _codes(ix(body, CHAT_PATH, SSE))
    assert {"keepalive", "error-event", "no-done"} <= set(codes)


# ---- The other formats ---------------------------------------------------------------------------


def test_replicate_plain_text_sse_is_the_answer_with_no_invalid_json():
    body = [b"event: output\nid: 1\ndata: Hello\n\n", b"event: output\ndata: two\ndata: lines\n\n",
            b"event: done\ndata: {}\n\n"]
    x = ix(body, "/v1/predictions/abc/stream", SSE)
    a = analyze(x)
    assert a.shape == "replicate" and a.text == "Hellotwo\nlines" and a.done
    assert a.finish is not None and a.finish.reason == "stop"
    assert _codes(x) == []
    assert detect_shape(ix(body, "/x", SSE)) == "replicate"


def test_replicate_error_event_is_an_error():
    body = [b"event: output\ndata: Hi\n\n", b'event: error\ndata: {"detail": "OOM"}\n\n']
    assert {"error-event", "no-done"} <= set(_codes(ix(body, "/v1/predictions/a/stream", SSE)))


def test_watsonx_generation_stream_reads_text_stop_reason_and_counts():
    def ev(text: str, reason: str, n: int) -> bytes:
        return f"id: {n}\nevent: message\n".encode() + sse({
            "model_id": "ibm/granite-13b-instruct-v2", "created_at": "2026-01-01T00:00:00Z",
            "results": [{"generated_text": text, "generated_token_count": n,
                         "input_token_count": 11, "stop_reason": reason}]})
    body = [ev("Hello", "not_finished", 1), ev(" there", "not_finished", 2), ev("", "max_tokens", 2)]
    x = ix(body, "/ml/v1/text/generation_stream?version=2023-05-29", SSE)
    a = analyze(x)
    assert a.shape == "watsonx" and a.text == "Hello there" and a.done
    assert a.usage is not None and (a.usage.prompt_tokens, a.usage.completion_tokens) == (11, 2)
    assert _codes(x) == ["finish-length"]


def test_an_assistants_run_stream_reads_text_tool_calls_and_requires_action():
    body = [sse({"id": "run_1", "object": "thread.run", "status": "queued"}, "thread.run.created"),
            sse({"id": "msg_1", "object": "thread.message.delta", "delta": {"content": [
                {"index": 0, "type": "text", "text": {"value": "Checking", "annotations": []}}]}},
                "thread.message.delta"),
            sse({"id": "step_1", "object": "thread.run.step.delta", "delta": {"step_details": {
                "type": "tool_calls", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                      "function": {"name": "get_weather",
                                                                   "arguments": '{"city":'}}]}}},
                "thread.run.step.delta"),
            sse({"id": "step_1", "object": "thread.run.step.delta", "delta": {"step_details": {
                "type": "tool_calls", "tool_calls": [{"index": 0, "type": "function",
                                                      "function": {"arguments": '"Zürich"}'}}]}}},
                "thread.run.step.delta"),
            sse({"id": "run_1", "object": "thread.run", "status": "requires_action",
                 "usage": None}, "thread.run.requires_action"),
            b"event: done\ndata: [DONE]\n\n"]
    x = ix(body, "/v1/threads/thread_1/runs", SSE)
    a = analyze(x)
    assert a.shape == "openai-assistants" and a.text == "Checking" and a.done
    assert a.tool_calls[0].parsed == {"city": "Zürich"}
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == ("tool_calls", "requires_action")
    assert _codes(x) == []


# ---- The Gemini Interactions API --------------------------------------------------------------

FRAGMENTS = ('{"city": "Z', 'ürich", "unit": ', '"celsius"}')
assert json.loads("".join(FRAGMENTS)) == ARGS


def _interactions(events: list[dict[str, object]], path: str = INTERACTIONS_PATH) -> Interaction:
    return ix(interactions_sse(events), path, SSE)


def test_an_interactions_stream_reads_its_steps_text_thoughts_a_call_in_fragments_and_usage():
    x = _interactions(interactions_events(call=("fc_1", "get_weather", FRAGMENTS)))
    a = analyze(x)
    assert (a.shape, a.role) == ("gemini-interactions", "assistant")
    assert (a.text, a.reasoning) == (TEXT, "Greeting: be kind.")
    assert a.choices[0].reasoning_signatures == ["c2lnbmF0dXJl"]
    (call,) = a.tool_calls
    assert (call.id, call.name, call.arguments, call.parsed) == ("fc_1", "get_weather", "".join(FRAGMENTS), ARGS)
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == ("tool_calls", "requires_action")
    assert a.usage is not None
    assert (a.usage.prompt_tokens, a.usage.completion_tokens, a.usage.reasoning_tokens) == (8, 6, 3)
    assert a.done and a.errors == []
    assert _codes(x) == []
    assert [e.id for e in a.events if e.kind == "start"] == ["v1_ChdpbnQtMQ"]


def test_a_text_delta_inside_a_thought_step_is_reasoning_not_answer():
    """The live API streams a thought step's thinking as plain ``text`` deltas."""
    events = interactions_events(["Hi"], thought=None)
    events[2:2] = [{"event_type": "step.start", "index": 5, "step": {"type": "thought"}},
                   {"event_type": "step.delta", "index": 5, "delta": {"type": "text", "text": "Thinking..."}},
                   {"event_type": "step.stop", "index": 5}]
    a = analyze(_interactions(events))
    assert (a.text, a.reasoning) == ("Hi", "Thinking...")


def test_a_step_start_that_carries_its_content_whole_is_read_too():
    """``step.start`` may hold the whole step: a thought's summary and signature, a model
    output's content, a call's arguments object."""
    events = interactions_events([], thought=None)
    events[2:-1] = [
        {"event_type": "step.start", "index": 0, "step": {
            "type": "thought", "summary": [{"type": "text", "text": "Plan."}], "signature": "c2ln"}},
        {"event_type": "step.start", "index": 1, "step": {
            "type": "model_output", "content": [{"type": "text", "text": "Hello"}]}},
        {"event_type": "step.start", "index": 2, "step": {
            "type": "function_call", "id": "fc_2", "name": "get_weather", "arguments": ARGS}}]
    a = analyze(_interactions(events))
    assert (a.text, a.reasoning, a.choices[0].reasoning_signatures) == ("Hello", "Plan.", ["c2ln"])
    assert [(c.id, c.name, c.parsed) for c in a.tool_calls] == [("fc_2", "get_weather", ARGS)]
    assert a.finish is not None and a.finish.reason == "tool_calls"  # a call was made, whatever the status


@pytest.mark.parametrize(("status", "reason", "code"), [
    ("completed", "stop", None),
    ("incomplete", "length", "finish-length"),
    ("budget_exceeded", "length", "finish-length"),
    ("requires_continuation", "length", "finish-length"),
    ("failed", "error", "error-event"),
    ("cancelled", "other", None),
])
def test_each_final_interaction_status_is_a_finish_in_common_terms(status, reason, code):
    x = _interactions(interactions_events(status=status))
    a = analyze(x)
    assert a.finish is not None and (a.finish.reason, a.finish.raw) == (reason, status)
    codes = _codes(x)
    assert (code is None and codes == []) or code in codes, codes


def test_an_error_event_mid_stream_is_an_error_and_its_message_kept():
    err = {"code": "resource_exhausted", "message": "Quota exceeded."}
    events: list[dict[str, object]] = [*interactions_events()[:8], {"event_type": "error", "error": err}]
    x = _interactions(events)
    a = analyze(x)
    assert [e.error for e in a.errors] == [err]
    assert a.text == "Hello" and not a.done
    assert {"error-event", "no-done"} <= set(_codes(x))
    failed: dict[str, object] = {"event_type": "interaction.completed",
                                 "interaction": {"id": "v1_1", "status": "failed"}}
    a = analyze(_interactions([*events, failed]))
    assert [e.error for e in a.errors] == [err] and a.done  # the failure is that error, not a second one


def test_an_injected_error_fault_is_the_error_event_the_sdk_types():
    from streamtape.shapes.faults import error_event
    raw = error_event("gemini-interactions", "boom")
    assert raw.startswith(b"event: error\ndata: ")
    x = ix([*interactions_sse(interactions_events())[:8], raw], INTERACTIONS_PATH, SSE)
    assert [e.error for e in analyze(x).errors] == [{"code": "internal", "message": "boom"}]


def test_an_interactions_stream_cut_before_interaction_completed_has_no_final_marker():
    x = _interactions(interactions_events()[:-1])
    a = analyze(x)
    assert a.text == TEXT and a.finish is None and not a.done
    findings = {f.code: f.message for f in check(x)}
    assert findings["no-done"] == "no final marker (interaction.completed)"
    assert "no-finish" in findings


def test_usage_sent_before_the_end_is_kept_when_the_completed_event_has_none():
    events = interactions_events(["Hi"], thought=None)
    events[-2]["usage"] = {"total_input_tokens": 4, "total_output_tokens": 1}  # the step.stop
    del events[-1]["interaction"]["usage"]  # type: ignore[attr-defined]
    a = analyze(_interactions(events))
    assert a.usage is not None and (a.usage.prompt_tokens, a.usage.completion_tokens) == (4, 1)


def test_an_interactions_stream_is_known_by_its_body_alone():
    assert detect_shape(_interactions(interactions_events(), "/proxy/stream")) == "gemini-interactions"
    steps_only = [e for e in interactions_events() if str(e["event_type"]).startswith("step.")]
    assert detect_shape(_interactions(steps_only, "/proxy/stream")) == "gemini-interactions"


def test_the_first_beta_revision_of_the_stream_is_still_read():
    """``interaction.start``, ``content.delta`` with a whole ``function_call``, and
    ``interaction.complete``: what the API sent before its steps."""
    def ev(t: str, **f: object) -> bytes:
        return sse({"event_type": t, **f})
    body = [ev("interaction.start", interaction={"id": "int_1", "status": "in_progress"}),
            ev("content.delta", index=0, delta={"type": "thought_summary",
                                                "content": {"type": "text", "text": "Plan."}}),
            ev("content.delta", index=1, delta={"type": "text", "text": "Hello"}),
            ev("content.delta", index=2, delta={"type": "function_call", "id": "fc_1",
                                                "name": "get_weather", "arguments": ARGS}),
            ev("interaction.complete", interaction={
                "id": "int_1", "status": "requires_action",
                "usage": {"total_input_tokens": 8, "total_output_tokens": 6,
                          "total_thought_tokens": 3}})]
    x = ix(body, INTERACTIONS_PATH, SSE)
    a = analyze(x)
    assert a.shape == "gemini-interactions" and (a.text, a.reasoning) == ("Hello", "Plan.")
    assert a.tool_calls[0].parsed == ARGS and a.done
    assert a.usage is not None and a.usage.reasoning_tokens == 3
    assert _codes(x) == []


# ---- Unknown formats ---------------------------------------------------------------------------


def test_an_unknown_sse_format_passes_no_raw_json_off_as_text_and_check_says_it_is_unknown():
    body = [sse({"foo": {"bar": "Hello"}}), sse({"foo": {"bar": " world"}})]
    x = ix(body, "/api/some-stream", SSE)
    a = analyze(x)
    assert a.shape == "sse" and a.text == ""
    findings = check(x)
    assert [f.code for f in findings] == ["unknown-format"]
    assert "could not be checked" in findings[0].message
    assert check(x, shape="sse") == []  # the user chose to read it as a generic stream


def test_an_unknown_event_stream_is_a_generic_event_stream_not_raw_bytes():
    from streamtape.shapes.eventstream import event_message
    x = ix([event_message("somethingElse", {"x": 1})], "/x", EVENTSTREAM)
    a = analyze(x)
    assert (a.shape, a.wire, a.text) == ("eventstream", "eventstream", "")
    assert _codes(x) == ["unknown-format"]


# ---- The command line ----------------------------------------------------------------------


@pytest.fixture
def hosted_tape(tmp_path):
    from streamtape.cassette.writer import save
    path = tmp_path / "hosted.tape"
    save(path, [
        ix(gemini_array(gemini_chunks(call=CALL)), GEMINI_PATH, JSON),
        ix(converse_messages(tool=True), CONVERSE_PATH, EVENTSTREAM),
        ix(throttled(converse_messages(), 2), CONVERSE_PATH, EVENTSTREAM),
        ix(cohere_events(), COHERE_PATH, SSE),
    ])
    return path


def test_show_names_the_format_and_its_wire_and_gives_the_result(hosted_tape, capsys):
    import json

    from tests.support.recording import run_main
    code, out, _ = run_main("show", hosted_tape, "-i", 1, capsys=capsys)
    assert code == 0 and "shape: bedrock-converse (eventstream)  finish: tool_calls (tool_use)" in out
    code, out, _ = run_main("show", hosted_tape, "-i", 0, "--text", capsys=capsys)
    assert out == TEXT + "\n"
    code, out, _ = run_main("show", hosted_tape, "-i", 0, "--reasoning", capsys=capsys)
    assert out == "Greeting: be kind.\n"
    code, out, _ = run_main("show", hosted_tape, "-i", 0, "--json", capsys=capsys)
    doc = json.loads(out)
    assert (doc["analysis"]["shape"], doc["analysis"]["wire"]) == ("gemini", "jsonarray")
    (choice,) = doc["result"]["choices"]
    assert choice["finish"] == {"reason": "tool_calls", "raw": "STOP"}
    assert choice["tool_calls"][0]["parsed"] == ARGS
    assert doc["result"]["usage"]["reasoning_tokens"] == 12
    assert doc["stats"]["ttft_ms"] == 2.0


def test_check_reports_the_throttled_stream_and_passes_the_others(hosted_tape, capsys):
    from tests.support.recording import run_main
    code, out, _ = run_main("check", hosted_tape, capsys=capsys)
    assert code == 1
    assert "error-event: throttlingException message after HTTP 200" in out
    assert out.count("  ok\n") == 3
