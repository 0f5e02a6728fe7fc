"""Reasoning streams, as each server sends its thinking beside the answer.

Every shape of the reference (../shared/reference/reasoning-and-realtime-shapes.md:
DeepSeek and llama.cpp ``delta.reasoning_content``, vLLM and Ollama's /v1
``delta.reasoning``, OpenRouter ``reasoning`` + ``reasoning_details``, Ollama's
native ``thinking``, Anthropic ``thinking_delta`` / ``signature_delta`` /
``redacted_thinking``, the Responses API's reasoning summary events) is sent by a
scripted upstream on 127.0.0.1, recorded through the real ``streamtape record``
(mitmproxy), and the cassette is what the tests analyse, show and diff. The SDKs
that have a reasoning view (openai, anthropic, ollama) are run through the
recorder too, and what they assembled must be what streamtape assembled.
A last test records llama.cpp's own server sending ``reasoning_content``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.check import check
from streamtape.diff import Metric, compare, render_text
from streamtape.shapes import analyze
from streamtape.stats import compute
from tests.support.builders import chat_ix, ndjson, sse
from tests.support.recording import Scenarios, record_scenarios, recording, run_main
from tests.support.servers import SSE_HEADERS, Conn, Handler, ScriptedServer, by_scenario

GAP = 0.015
"""Seconds between two events the upstream writes."""


@dataclass
class Scenario:
    """One recorded stream: what the upstream sends, and what it means."""

    name: str
    path: str
    events: list[bytes]
    shape: str
    reasoning: list[str]
    """The reasoning fragments, in order (joined: the assembled reasoning, unless
    ``reasoning_text`` says otherwise)."""
    answer: list[str]
    ndjson: bool = False
    reasoning_text: str | None = None
    reasoning_tokens: int | None = None
    signatures: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)

    @property
    def assembled_reasoning(self) -> str:
        return self.reasoning_text if self.reasoning_text is not None else "".join(self.reasoning)


# ---------------------------------------------------------------------------
# The streams, written from the reference's wire examples

THOUGHTS = ["Compare 9.11", " and 9.8:", " 9.8 = 9.80,", " and 80 > 11."]
OTHER_THOUGHTS = ["9.11 has", " more digits,", " but 0.8 > 0.11."]
ANSWER = ["9.8", " is", " larger."]


def _chunk(model: str, delta: dict[str, object], finish: str | None = None, **extra: object) -> bytes:
    choice: dict[str, object] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return sse({"id": "chatcmpl-r1", "object": "chat.completion.chunk", "created": 1756000000,
                "model": model, "choices": [choice], **extra})


def _usage(model: str, usage: dict[str, object], **extra: object) -> bytes:
    return sse({"id": "chatcmpl-r1", "object": "chat.completion.chunk", "created": 1756000000,
                "model": model, "choices": [], "usage": usage, **extra})


def deepseek(thoughts: Sequence[str]) -> Scenario:
    """DeepSeek ``deepseek-reasoner``: ``reasoning_content`` beside a null ``content``,
    a keep-alive comment, usage with ``reasoning_tokens`` in its own chunk."""
    m = "deepseek-reasoner"
    fp = {"system_fingerprint": "fp_7a1b"}
    events = [
        _chunk(m, {"role": "assistant", "content": None, "reasoning_content": ""}, **fp),
        *(_chunk(m, {"content": None, "reasoning_content": t}, **fp) for t in thoughts),
        b": keep-alive\n\n",
        *(_chunk(m, {"content": w, "reasoning_content": None}, **fp) for w in ANSWER),
        _chunk(m, {"content": "", "reasoning_content": None}, "stop", **fp),
        _usage(m, {"prompt_tokens": 15, "completion_tokens": 260, "total_tokens": 275,
                   "completion_tokens_details": {"reasoning_tokens": 240},
                   "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 15}, **fp),
        sse("[DONE]"),
    ]
    return Scenario("deepseek", "/v1/chat/completions", events, "openai-chat", list(thoughts),
                    ANSWER, reasoning_tokens=240)


def vllm() -> Scenario:
    """vLLM 0.11+ with ``--reasoning-parser``: ``delta.reasoning``, ``stop_reason`` on
    the finish chunk, usage without a reasoning count."""
    m = "Qwen/Qwen3-8B"
    events = [
        _chunk(m, {"role": "assistant", "content": ""}),
        *(_chunk(m, {"reasoning": t}) for t in THOUGHTS),
        *(_chunk(m, {"content": w}) for w in ANSWER),
        sse({"id": "chatcmpl-r1", "object": "chat.completion.chunk", "created": 1756000000, "model": m,
             "choices": [{"index": 0, "delta": {"content": ""}, "logprobs": None,
                          "finish_reason": "stop", "stop_reason": None}]}),
        _usage(m, {"prompt_tokens": 18, "total_tokens": 230, "completion_tokens": 212}),
        sse("[DONE]"),
    ]
    return Scenario("vllm", "/v1/chat/completions", events, "openai-chat", THOUGHTS, ANSWER)


def llamacpp() -> Scenario:
    """llama-server with ``--reasoning-format deepseek``: role chunk with null content,
    ``reasoning_content``, an empty-delta finish, usage and ``timings``."""
    m = "Qwen3-8B-Q4_K_M.gguf"
    fp = {"system_fingerprint": "b6200-1a2b3c4"}
    events = [
        _chunk(m, {"role": "assistant", "content": None}, **fp),
        *(_chunk(m, {"reasoning_content": t}, **fp) for t in THOUGHTS),
        *(_chunk(m, {"content": w}, **fp) for w in ANSWER),
        _chunk(m, {}, "stop", **fp),
        _usage(m, {"completion_tokens": 212, "prompt_tokens": 18, "total_tokens": 230,
                   "prompt_tokens_details": {"cached_tokens": 0}},
               timings={"prompt_n": 18, "prompt_ms": 41.2, "predicted_n": 212, "predicted_ms": 2301.5},
               **fp),
        sse("[DONE]"),
    ]
    return Scenario("llamacpp", "/v1/chat/completions", events, "openai-chat", THOUGHTS, ANSWER)


def openrouter() -> Scenario:
    """OpenRouter: ``: OPENROUTER PROCESSING`` comments, ``reasoning`` beside typed
    ``reasoning_details`` (one of them encrypted), ``role`` on every delta, usage on
    the finish chunk."""
    m = "deepseek/deepseek-r1"
    extra = {"provider": "DeepSeek"}

    def delta(**kw: object) -> dict[str, object]:
        return {"role": "assistant", "content": "", **kw}

    events = [
        b": OPENROUTER PROCESSING\n\n",
        *(_chunk(m, delta(reasoning=t, reasoning_details=[
            {"type": "reasoning.text", "text": t, "format": "unknown", "index": 0}]), **extra)
          for t in THOUGHTS),
        _chunk(m, delta(reasoning_details=[
            {"type": "reasoning.encrypted", "data": "gAAAAB-opaque==", "format": "unknown", "index": 1}]),
            **extra),
        *(_chunk(m, {"role": "assistant", "content": w}, **extra) for w in ANSWER),
        _chunk(m, delta(), "stop", usage={"prompt_tokens": 14, "completion_tokens": 210,
                                          "total_tokens": 224,
                                          "completion_tokens_details": {"reasoning_tokens": 190}},
               **extra),
        sse("[DONE]"),
    ]
    return Scenario("openrouter", "/v1/chat/completions", events, "openai-chat", THOUGHTS, ANSWER,
                    reasoning_tokens=190, redacted=["gAAAAB-opaque=="])


def ollama_v1() -> Scenario:
    """Ollama's OpenAI-compatible endpoint: ``delta.reasoning``, ``fp_ollama``, an
    empty-delta finish chunk."""
    m = "qwen3"
    fp = {"system_fingerprint": "fp_ollama"}
    events = [
        *(_chunk(m, {"role": "assistant", "content": "", "reasoning": t}, **fp) for t in THOUGHTS),
        *(_chunk(m, {"role": "assistant", "content": w}, **fp) for w in ANSWER),
        _chunk(m, {}, "stop", **fp),
        sse("[DONE]"),
    ]
    return Scenario("ollama-v1", "/v1/chat/completions", events, "openai-chat", THOUGHTS, ANSWER)


def ollama_chat() -> Scenario:
    """Ollama ``/api/chat`` with ``think``: ``message.thinking`` lines (content "") first."""
    base = {"model": "qwen3", "created_at": "2026-08-21T10:00:00.101Z"}
    lines = [
        *({**base, "message": {"role": "assistant", "content": "", "thinking": t}, "done": False}
          for t in THOUGHTS),
        *({**base, "message": {"role": "assistant", "content": w}, "done": False} for w in ANSWER),
        {**base, "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
         "total_duration": 1702345000, "prompt_eval_count": 18, "eval_count": 131,
         "eval_duration": 1589000000},
    ]
    return Scenario("ollama-chat", "/api/chat", [ndjson(x, compact=True) for x in lines],
                    "ollama-chat", THOUGHTS, ANSWER, ndjson=True)


def ollama_generate() -> Scenario:
    """Ollama ``/api/generate`` with ``think``: a top-level ``thinking`` field."""
    base = {"model": "qwen3", "created_at": "2026-08-21T10:00:00.101Z"}
    lines = [
        *({**base, "response": "", "thinking": t, "done": False} for t in THOUGHTS),
        *({**base, "response": w, "done": False} for w in ANSWER),
        {**base, "response": "", "done": True, "done_reason": "stop", "prompt_eval_count": 18,
         "eval_count": 131, "eval_duration": 1589000000},
    ]
    return Scenario("ollama-generate", "/api/generate", [ndjson(x, compact=True) for x in lines],
                    "ollama-generate", THOUGHTS, ANSWER, ndjson=True)


SIGNATURE = "EqQBCkgIARABGAIiQ...="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


def anthropic_thinking() -> Scenario:
    """Anthropic extended thinking: a thinking block (deltas, an empty delta, then the
    signature), a redacted thinking block (whole in its start event), a text block,
    ``thinking_tokens`` in the final usage, a ping."""

    def ev(obj: dict[str, object]) -> bytes:
        return sse(obj, event=str(obj["type"]))

    def delta(index: int, d: dict[str, object]) -> bytes:
        return ev({"type": "content_block_delta", "index": index, "delta": d})

    events = [
        ev({"type": "message_start", "message": {
            "id": "msg_01AbC", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 42, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 3}}}),
        ev({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        *(delta(0, {"type": "thinking_delta", "thinking": t}) for t in THOUGHTS),
        ev({"type": "ping"}),
        delta(0, {"type": "thinking_delta", "thinking": ""}),
        delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        ev({"type": "content_block_stop", "index": 0}),
        ev({"type": "content_block_start", "index": 1,
            "content_block": {"type": "redacted_thinking", "data": REDACTED}}),
        ev({"type": "content_block_stop", "index": 1}),
        ev({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        *(delta(2, {"type": "text_delta", "text": w}) for w in ANSWER),
        ev({"type": "content_block_stop", "index": 2}),
        ev({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 87, "output_tokens_details": {"thinking_tokens": 61}}}),
        ev({"type": "message_stop"}),
    ]
    return Scenario("anthropic", "/v1/messages", events, "anthropic", THOUGHTS, ANSWER,
                    reasoning_tokens=61, signatures=[SIGNATURE], redacted=[REDACTED])


SUMMARY_PARTS = [["**Comparing decimals**", "\n\nAlign the digits."], ["**Answer**", "\n\n9.8 wins."]]


def responses() -> Scenario:
    """The Responses API with ``reasoning.summary``: a reasoning item whose summary has
    two parts, then the message item; ``reasoning_tokens`` in the completed usage."""
    seq = iter(range(100))

    def ev(obj: dict[str, object]) -> bytes:
        return sse({**obj, "sequence_number": next(seq)}, event=str(obj["type"]))

    rs, msg = "rs_68a1", "msg_68a1"
    summary = [{"type": "summary_text", "text": "".join(p)} for p in SUMMARY_PARTS]
    text = "".join(ANSWER)
    response = {"id": "resp_68a1", "object": "response", "created_at": 1756000000, "model": "o4-mini",
                "output": [], "usage": None, "status": "in_progress"}
    events = [
        ev({"type": "response.created", "response": response}),
        ev({"type": "response.in_progress", "response": response}),
        ev({"type": "response.output_item.added", "output_index": 0,
            "item": {"id": rs, "type": "reasoning", "summary": []}}),
    ]
    for i, part in enumerate(SUMMARY_PARTS):
        events.append(ev({"type": "response.reasoning_summary_part.added", "item_id": rs,
                          "output_index": 0, "summary_index": i,
                          "part": {"type": "summary_text", "text": ""}}))
        events += [ev({"type": "response.reasoning_summary_text.delta", "item_id": rs, "output_index": 0,
                       "summary_index": i, "delta": d, "obfuscation": "x9Q"}) for d in part]
        events.append(ev({"type": "response.reasoning_summary_text.done", "item_id": rs,
                          "output_index": 0, "summary_index": i, "text": "".join(part)}))
        events.append(ev({"type": "response.reasoning_summary_part.done", "item_id": rs,
                          "output_index": 0, "summary_index": i, "part": summary[i]}))
    reasoning_item = {"id": rs, "type": "reasoning", "summary": summary, "encrypted_content": "gAAAAB..."}
    message = {"id": msg, "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    events += [
        ev({"type": "response.output_item.done", "output_index": 0, "item": reasoning_item}),
        ev({"type": "response.output_item.added", "output_index": 1,
            "item": {"id": msg, "type": "message", "status": "in_progress", "role": "assistant",
                     "content": []}}),
        ev({"type": "response.content_part.added", "item_id": msg, "output_index": 1, "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []}}),
        *(ev({"type": "response.output_text.delta", "item_id": msg, "output_index": 1, "content_index": 0,
              "delta": w, "logprobs": [], "obfuscation": "pR"}) for w in ANSWER),
        ev({"type": "response.output_text.done", "item_id": msg, "output_index": 1, "content_index": 0,
            "text": text, "logprobs": []}),
        ev({"type": "response.output_item.done", "output_index": 1, "item": message}),
        ev({"type": "response.completed", "response": {
            **response, "status": "completed", "output": [reasoning_item, message],
            "usage": {"input_tokens": 18, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 150, "output_tokens_details": {"reasoning_tokens": 128},
                      "total_tokens": 168}}}),
    ]
    fragments = [d for part in SUMMARY_PARTS for d in part]
    return Scenario("responses", "/v1/responses", events, "openai-responses", fragments, ANSWER,
                    reasoning_text="\n\n".join("".join(p) for p in SUMMARY_PARTS), reasoning_tokens=128)


SCENARIOS = [deepseek(THOUGHTS), vllm(), llamacpp(), openrouter(), ollama_v1(), ollama_chat(),
             ollama_generate(), anthropic_thinking(), responses()]
RETHOUGHT = deepseek(OTHER_THOUGHTS)
RETHOUGHT.name = "deepseek-rethought"
BY_NAME = {s.name: s for s in [*SCENARIOS, RETHOUGHT]}


# ---------------------------------------------------------------------------
# The upstream and the recording


def upstream_handler(c: Conn, s: Scenario) -> None:
    ctype = "application/x-ndjson" if s.ndjson else "text/event-stream"
    c.head(200, [("Content-Type", ctype), *SSE_HEADERS[1:]])
    c.chunked(s.events, GAP)


def scenario_server() -> ScriptedServer:
    """One upstream for every scenario: the ``X-Scenario`` header picks the stream."""

    def streams(s: Scenario) -> Handler:
        return lambda req, c: upstream_handler(c, s)

    route = by_scenario({name: streams(s) for name, s in BY_NAME.items()})
    return ScriptedServer({s.path: route for s in BY_NAME.values()})


def send(url: str, name: str) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "9.11 or 9.8?"}]}
    with httpx.stream("POST", url + BY_NAME[name].path, headers={"X-Scenario": name}, json=body, timeout=30) as r:
        assert r.status_code == 200
        r.read()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Scenarios:
    """Every scenario recorded once through ``streamtape record``, httpx as the client."""
    with scenario_server() as up:
        return record_scenarios(tmp_path_factory.mktemp("reasoning") / "reasoning.tape", up.url, list(BY_NAME), send)


# ---------------------------------------------------------------------------
# The analysis of each recorded shape


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_each_reasoning_shape_assembles_reasoning_apart_from_the_answer(recorded: Scenarios, name: str) -> None:
    s = BY_NAME[name]
    ix = recorded.interactions[name]
    assert ix.outcome == "complete"
    a = analyze(ix)
    assert a.shape == s.shape
    assert a.reasoning == s.assembled_reasoning
    assert a.text == "".join(s.answer)
    assert s.assembled_reasoning not in a.text
    assert a.finish is not None and a.finish.reason == "stop"
    assert a.done and not a.errors
    assert [e.text for e in a.events if e.kind == "reasoning" and e.text] == s.reasoning
    assert not any(e.kind == "text" and e.text in s.reasoning for e in a.events)
    assert (a.usage.reasoning_tokens if a.usage else None) == s.reasoning_tokens
    (choice,) = a.choices
    assert choice.reasoning_signatures == s.signatures
    assert choice.redacted_reasoning == s.redacted
    assert {f.code for f in check(ix, a)} <= {"keepalive"}


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_first_reasoning_token_comes_before_the_first_answer_token(recorded: Scenarios, name: str) -> None:
    s = BY_NAME[name]
    ix = recorded.interactions[name]
    a = analyze(ix)
    st = compute(ix, a)
    assert st.first_reasoning_ns is not None and st.ttft_ns is not None
    first_reasoning = next(e for e in a.events if e.kind == "reasoning" and e.text)
    first_answer = next(e for e in a.events if e.kind == "text" and e.text)
    assert (st.first_reasoning_ns, st.ttft_ns) == (first_reasoning.at_ns, first_answer.at_ns)
    # The upstream wrote one event every GAP seconds, so the answer's first word came
    # at least that many gaps after the first reasoning event.
    assert first_reasoning.source is not None and first_answer.source is not None
    between = first_answer.source - first_reasoning.source
    assert between >= len(s.reasoning) - 1 >= 2
    assert st.ttft_ns - st.first_reasoning_ns >= between * GAP * 1e9 * 0.5
    # Gaps, stalls and the rate count every generated token, reasoning included.
    tokens = [e for e in a.events if e.is_token]
    assert len(st.gaps_ns) == len(tokens) - 1
    assert st.reasoning_events == len([e for e in a.events if e.is_reasoning]) >= len(s.reasoning)
    assert st.content_events == len([e for e in a.events if e.is_content]) == len(s.answer)


def test_a_redacted_block_counts_as_reasoning_and_a_signature_does_not(recorded: Scenarios) -> None:
    a = analyze(recorded.interactions["anthropic"])
    kinds = [(e.index, e.text is not None, e.signature is not None, e.redacted is not None)
             for e in a.events if e.kind == "reasoning"]
    assert kinds == [*([(0, True, False, False)] * len(THOUGHTS)), (0, False, True, False),
                     (1, False, False, True)]
    assert [e.is_reasoning for e in a.events if e.kind == "reasoning"] == [
        *([True] * len(THOUGHTS)), False, True]


# ---------------------------------------------------------------------------
# show, check and diff on the recorded cassette


def test_show_reasoning_prints_the_reasoning_alone_and_text_the_answer_alone(
        recorded: Scenarios, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("deepseek", "responses", "anthropic"):
        s = BY_NAME[name]
        i = str(recorded.index[name])
        code, out, _ = run_main("show", recorded.path, "-i", i, "--reasoning", capsys=capsys)
        assert code == 0 and out == s.assembled_reasoning + "\n"
        code, out, _ = run_main("show", recorded.path, "-i", i, "--text", capsys=capsys)
        assert code == 0 and out == "".join(s.answer) + "\n"
    code, _, err = run_main("show", recorded.path, "-i", "0", "--text", "--reasoning", capsys=capsys)
    assert code == 2 and "--json" in err
    code, _, err = run_main("show", recorded.path, "--reasoning", capsys=capsys)
    assert code == 2 and "add -i N" in err


def test_show_prints_first_reasoning_token_beside_ttft_and_reasoning_events(
        recorded: Scenarios, capsys: pytest.CaptureFixture[str]) -> None:
    name = "deepseek"
    ix = recorded.interactions[name]
    st = compute(ix)
    assert st.first_reasoning_ns is not None and st.ttft_ns is not None
    code, out, _ = run_main("show", recorded.path, "-i", str(recorded.index[name]), "--events",
                            capsys=capsys)
    assert code == 0
    assert (f"first reasoning token {st.first_reasoning_ns / 1e6:.1f} ms  "
            f"first answer token (ttft) {st.ttft_ns / 1e6:.1f} ms") in out
    assert f"reasoning: {len(BY_NAME[name].assembled_reasoning)} characters" in out
    rows = [ln.split(None, 3) for ln in out.splitlines() if "  reasoning  " in ln]
    assert [json.loads(r[3]) for r in rows] == THOUGHTS


def test_show_json_carries_the_assembled_result_with_reasoning(
        recorded: Scenarios, capsys: pytest.CaptureFixture[str]) -> None:
    s = BY_NAME["anthropic"]
    code, out, _ = run_main("show", recorded.path, "-i", str(recorded.index[s.name]), "--json",
                            capsys=capsys)
    assert code == 0
    doc = json.loads(out)
    (choice,) = doc["result"]["choices"]
    assert choice["text"] == "".join(s.answer)
    assert choice["reasoning"] == s.assembled_reasoning
    assert choice["reasoning_signatures"] == [SIGNATURE]
    assert choice["redacted_reasoning"] == [REDACTED]
    assert choice["finish"] == {"reason": "stop", "raw": "end_turn"}
    assert doc["result"]["usage"]["reasoning_tokens"] == 61
    assert doc["stats"]["first_reasoning_ms"] < doc["stats"]["ttft_ms"]


def test_diff_compares_reasoning_apart_and_ignore_reasoning_relaxes_it(
        recorded: Scenarios, capsys: pytest.CaptureFixture[str]) -> None:
    a = f"{recorded.path}#{recorded.index['deepseek']}"
    b = f"{recorded.path}#{recorded.index['deepseek-rethought']}"
    rep = compare(recorded.interactions["deepseek"], recorded.interactions["deepseek-rethought"])
    assert rep.meaning.text.same and not rep.meaning.reasoning.same
    assert rep.meaning.differs == ("reasoning",)
    code, out, _ = run_main("diff", a, b, capsys=capsys)
    assert code == 1
    assert "meaning differs (reasoning)" in out
    assert "first reasoning token" in out
    code, out, _ = run_main("diff", a, b, "--ignore", "reasoning", capsys=capsys)
    assert code == 0 and "differs (ignored)" in out
    code, out, _ = run_main("diff", "--json", a, b, capsys=capsys)
    doc = json.loads(out)
    (pair,) = doc["pairs"]
    assert pair["meaning"]["reasoning"]["a"] == "".join(THOUGHTS)
    assert pair["meaning"]["reasoning"]["b"] == "".join(OTHER_THOUGHTS)
    usage = {c["name"]: (c["a"], c["b"]) for c in pair["meaning"]["usage"]["checks"]}
    assert usage["reasoning_tokens"] == (240, 240)
    # A plain stream against a reasoning one: only the reasoning side has the row.
    code, out, _ = run_main("diff", a, f"{recorded.path}#{recorded.index['vllm']}", capsys=capsys)
    assert "first reasoning token" in out


def test_reports_of_streams_without_reasoning_have_no_reasoning_rows() -> None:
    plain = chat_ix()
    rep = compare(plain, plain)
    assert not rep.meaning.has_reasoning and rep.same
    assert "reasoning" not in render_text(rep)
    assert Metric.FIRST_REASONING not in {r.metric for r in rep.timing_shown}
    assert compute(plain).first_reasoning_ns is None


# ---------------------------------------------------------------------------
# The SDKs' own reading of the same streams


def _sdk(name: str) -> None:
    pytest.importorskip(name, reason="the openai and anthropic SDKs need httpx2 (Python 3.12+)")


def test_openai_sdk_sees_the_reasoning_streamtape_assembles(tmp_path: Path) -> None:
    _sdk("openai")
    import openai

    out = tmp_path / "sdk.tape"
    names = ["deepseek", "vllm", "openrouter"]
    seen: dict[str, tuple[str, str]] = {}
    with scenario_server() as up, recording(out, upstream=up.url) as rec:
        client = openai.OpenAI(base_url=rec.url + "/v1", api_key="sk-test")
        for name in names:
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "9.11 or 9.8?"}], stream=True,
                extra_headers={"X-Scenario": name})
            reasoning, text = [], []
            for chunk in stream:
                for ch in chunk.choices:
                    extra = ch.delta.model_extra or {}
                    # The field each server names it by; read as the SDK exposes it.
                    reasoning.append(extra.get("reasoning") or extra.get("reasoning_content") or "")
                    text.append(ch.delta.content or "")
            seen[name] = ("".join(reasoning), "".join(text))
        stream2 = client.responses.create(model="o4-mini", input="9.11 or 9.8?", stream=True,
                                          reasoning={"summary": "auto"},
                                          extra_headers={"X-Scenario": "responses"})
        parts: dict[int, list[str]] = {}
        answer = []
        for event in stream2:
            if event.type == "response.reasoning_summary_text.delta":
                parts.setdefault(event.summary_index, []).append(event.delta)
            elif event.type == "response.output_text.delta":
                answer.append(event.delta)
        seen["responses"] = ("\n\n".join("".join(parts[k]) for k in sorted(parts)), "".join(answer))
        rec.wait_lines(len(seen))
    for name, ix in zip(seen, streamtape.load(out), strict=True):
        a = analyze(ix)
        assert (a.reasoning, a.text) == seen[name]
        assert seen[name][0] == BY_NAME[name].assembled_reasoning


def test_anthropic_sdk_final_message_matches_the_assembled_thinking(tmp_path: Path) -> None:
    _sdk("anthropic")
    import anthropic

    out = tmp_path / "anthropic.tape"
    with scenario_server() as up, recording(out, upstream=up.url) as rec:
        client = anthropic.Anthropic(base_url=rec.url, api_key="sk-ant-test")
        with client.messages.stream(model="claude-test", max_tokens=2048,
                                    thinking={"type": "enabled", "budget_tokens": 1024},
                                    messages=[{"role": "user", "content": "9.11 or 9.8?"}],
                                    extra_headers={"X-Scenario": "anthropic"}) as stream:
            final = stream.get_final_message()
        rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    a = analyze(ix)
    thinking = [b for b in final.content if b.type == "thinking"]
    redacted = [b for b in final.content if b.type == "redacted_thinking"]
    texts = [b for b in final.content if b.type == "text"]
    assert a.reasoning == "".join(b.thinking for b in thinking)
    assert a.choices[0].reasoning_signatures == [b.signature for b in thinking]
    assert a.choices[0].redacted_reasoning == [b.data for b in redacted]
    assert a.text == "".join(b.text for b in texts)


def test_ollama_client_sees_the_thinking_streamtape_assembles(tmp_path: Path) -> None:
    import ollama

    out = tmp_path / "ollama.tape"
    with scenario_server() as up, recording(out, upstream=up.url) as rec:
        client = ollama.Client(host=rec.url, headers={"X-Scenario": "ollama-chat"})
        chunks = list(client.chat(model="qwen3", messages=[{"role": "user", "content": "9.11 or 9.8?"}],
                                  think=True, stream=True))
        gen_client = ollama.Client(host=rec.url, headers={"X-Scenario": "ollama-generate"})
        gen = list(gen_client.generate(model="qwen3", prompt="9.11 or 9.8?", think=True, stream=True))
        rec.wait_lines(2)
    chat_ix, gen_ix = streamtape.load(out)
    a = analyze(chat_ix)
    assert a.reasoning == "".join(c.message.thinking or "" for c in chunks)
    assert a.text == "".join(c.message.content or "" for c in chunks)
    g = analyze(gen_ix)
    assert g.reasoning == "".join(c.thinking or "" for c in gen)
    assert g.text == "".join(c.response or "" for c in gen)


# ---------------------------------------------------------------------------
# llama.cpp's own server sending reasoning_content

# A ChatML template that wraps an assistant's reasoning_content in <think> tags and
# opens <think> in the generation prompt: llama-server reads the reasoning markers
# from the template, so with --reasoning-format deepseek what the model generates
# streams as delta.reasoning_content. (The tiny model never writes </think>, so the
# whole answer stays reasoning until max_tokens.)
THINK_TEMPLATE = """\
{%- for message in messages -%}
{%- if message.role == 'assistant' -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if message.reasoning_content is defined and message.reasoning_content -%}
{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' -}}
{%- endif -%}
{{- (message.content or '') + '<|im_end|>\\n' -}}
{%- else -%}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n<think>\\n' -}}
{%- endif -%}
"""


@pytest.mark.llama
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_llama_server_reasoning_content_is_recorded_and_assembled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.llama import llama_server

    template = tmp_path / "think.jinja"
    template.write_text(THINK_TEMPLATE)
    monkeypatch.setenv("LLAMA_SERVER_ARGS",
                       f"--jinja --chat-template-file {template} --reasoning-format deepseek")
    out = tmp_path / "llama-reasoning.tape"
    body = {"model": "tiny-llama", "stream": True, "max_tokens": 16, "seed": 3,
            "messages": [{"role": "user", "content": "Say hello."}]}
    with llama_server("tiny") as url, recording(out, upstream=url) as rec:
        with httpx.stream("POST", rec.url + "/v1/chat/completions", json=body, timeout=60) as r:
            split = r.read()
        # The same request with the reasoning left in the answer, as older servers send it.
        with httpx.stream("POST", rec.url + "/v1/chat/completions",
                          json={**body, "reasoning_format": "none"}, timeout=60) as r:
            inline = r.read()
        rec.wait_lines(2)
    split_ix, inline_ix = streamtape.load(out)
    deltas = [json.loads(line[6:])["choices"][0]["delta"]
              for line in split.decode().split("\n\n") if line.startswith("data: {")
              and json.loads(line[6:])["choices"]]
    sent = "".join(d.get("reasoning_content") or "" for d in deltas)
    a = analyze(split_ix)
    assert sent and a.reasoning == sent and a.text == ""
    st = compute(split_ix, a)
    assert st.first_reasoning_ns is not None and st.ttft_ns is None
    b = analyze(inline_ix)
    assert b.reasoning == "" and b.text.startswith("<think>") and inline.count(b"<think>") == 1
    assert b.text.removeprefix("<think>\n") == a.reasoning  # same seed, same tokens
    assert [f.code for f in check(inline_ix, b) if f.code == "reasoning-inline"] == ["reasoning-inline"]
