"""Bytes in the recorded shapes of the hosted providers' streams, for unit tests.

Each builder writes a stream as the provider's server sends it (field names,
separators, line endings and framing as in its wire references), so the
normalizers and profiles are tested on what a recording holds. The AWS event
stream bytes come from :mod:`streamtape.shapes.eventstream`'s encoder, which
``tests/unit/test_eventstream.py`` pins against hand-laid bytes and botocore.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence

from streamtape import Interaction
from streamtape.shapes.eventstream import event_message, exception_message
from tests.support.builders import MS, interaction

SSE = "text/event-stream"
EVENTSTREAM = "application/vnd.amazon.eventstream"
JSON = "application/json"

ANSWER = ["Hello", ", wörld", ": sunny ☀", " and 晴れ"]
"""The answer every builder streams by default, with characters of 2 and 3 bytes in UTF-8."""
ARGS = {"city": "Zürich", "unit": "celsius"}


def j(v: object) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def ix(pieces: Sequence[bytes], path: str, ct: str, req: dict[str, object] | None = None,
       status: int = 200) -> Interaction:
    """An interaction whose response is ``pieces``, 1 ms apart, to ``path`` on 127.0.0.1."""
    return interaction(list(pieces), first_ns=MS, gap_ns=MS, head_ns=0, status=status, reason="",
                       content_type=ct, framing_header=False, url=f"http://127.0.0.1:9{path}",
                       request_headers=(("Content-Type", "application/json"),),
                       body=req or {"stream": True})


def sse(data: object | str, event: str | None = None, eol: bytes = b"\n") -> bytes:
    d = data if isinstance(data, str) else j(data)
    head = f"event: {event}".encode() + eol if event else b""
    return head + b"data: " + d.encode() + eol + eol


# ---- Gemini ------------------------------------------------------------------------------

GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


def gemini_chunks(words: Iterable[str] = ANSWER, *, thought: str | None = "Greeting: be kind.",
                  call: dict[str, object] | None = None, finish: str = "STOP",
                  usage: tuple[int, int, int] = (7, 4, 12)) -> list[dict[str, object]]:
    """``GenerateContentResponse`` s: a thought part (with a signature on the first answer
    part), the answer parts, a function call, the finish and the usage on the last."""
    out: list[dict[str, object]] = []
    if thought:
        out.append({"candidates": [{"content": {"parts": [{"text": thought, "thought": True}],
                                                "role": "model"}, "index": 0}],
                    "modelVersion": "gemini-2.5-flash"})
    ws = list(words)
    for i, w in enumerate(ws):
        part: dict[str, object] = {"text": w}
        if i == 0 and thought:
            part["thoughtSignature"] = "c2lnbmF0dXJl"
        out.append({"candidates": [{"content": {"parts": [part], "role": "model"}, "index": 0}],
                    "usageMetadata": {"promptTokenCount": usage[0]},
                    "modelVersion": "gemini-2.5-flash"})
    if call is not None:
        out.append({"candidates": [{"content": {"parts": [{"functionCall": call}],
                                                "role": "model"}, "index": 0}]})
    last = out[-1]
    cand = last["candidates"][0]  # type: ignore[index]
    cand["finishReason"] = finish
    last["usageMetadata"] = {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1],
                             "thoughtsTokenCount": usage[2],
                             "totalTokenCount": sum(usage)}
    return out


def gemini_sse(chunks: Sequence[dict[str, object]], eol: bytes = b"\n") -> list[bytes]:
    """``?alt=sse``: one ``data:`` per response, no ``[DONE]`` (Vertex: CRLF)."""
    return [sse(c, eol=eol) for c in chunks]


def gemini_array(chunks: Sequence[dict[str, object]]) -> list[bytes]:
    """Without ``alt=sse``: one JSON array, elements pretty-printed, ``,\\r\\n`` between."""
    out = []
    for i, c in enumerate(chunks):
        text = json.dumps(c, indent=2, ensure_ascii=False).encode()
        out.append((b"[" if i == 0 else b",\r\n") + text)
    out.append(b"\n]")
    return out


# ---- The Gemini Interactions API -----------------------------------------------------------

INTERACTIONS_PATH = "/v1beta/interactions"


def interactions_events(words: Iterable[str] = ANSWER, *, thought: str | None = "Greeting: be kind.",
                        call: tuple[str, str, Sequence[str]] | None = None, status: str | None = None,
                        usage: tuple[int, int, int] = (8, 6, 3),
                        interaction_id: str = "v1_ChdpbnQtMQ") -> list[dict[str, object]]:
    """The SSE events of one streamed interaction, as google-genai 3.x types them
    (``InteractionSSEEvent``) and the API's streaming page shows them: created, a status
    update, a ``thought`` step (a summary delta, then its signature), a ``model_output``
    step of text deltas, a ``function_call`` step (``call``: id, name and the
    ``arguments_delta`` fragments of its JSON), then ``interaction.completed`` with the
    status (``requires_action`` after a call, else ``completed``) and the usage."""
    def ev(t: str, **f: object) -> dict[str, object]:
        return {**f, "event_type": t}
    out = [ev("interaction.created", interaction={"id": interaction_id, "status": "in_progress",
                                                 "object": "interaction", "model": "gemini-3-flash-preview"}),
           ev("interaction.status_update", interaction_id=interaction_id, status="in_progress")]
    index = 0
    if thought:
        out += [ev("step.start", index=index, step={"type": "thought"}),
                ev("step.delta", index=index, delta={"type": "thought_summary",
                                                     "content": {"type": "text", "text": thought}}),
                ev("step.delta", index=index, delta={"type": "thought_signature", "signature": "c2lnbmF0dXJl"}),
                ev("step.stop", index=index)]
        index += 1
    out.append(ev("step.start", index=index, step={"type": "model_output"}))
    out += [ev("step.delta", index=index, delta={"type": "text", "text": w}) for w in words]
    out.append(ev("step.stop", index=index))
    if call is not None:
        index += 1
        call_id, name, fragments = call
        out.append(ev("step.start", index=index,
                      step={"type": "function_call", "id": call_id, "name": name, "arguments": {}}))
        out += [ev("step.delta", index=index, delta={"type": "arguments_delta", "arguments": f})
                for f in fragments]
        out.append(ev("step.stop", index=index))
    final = status or ("requires_action" if call is not None else "completed")
    out.append(ev("interaction.completed", interaction={
        "id": interaction_id, "status": final, "object": "interaction", "model": "gemini-3-flash-preview",
        "usage": {"total_input_tokens": usage[0], "total_output_tokens": usage[1],
                  "total_thought_tokens": usage[2], "total_tokens": sum(usage)}}))
    return out


def interactions_sse(events: Sequence[dict[str, object]]) -> list[bytes]:
    """Each event with its ``event:`` line (its ``event_type``), as the API sends it."""
    return [sse(e, str(e["event_type"])) for e in events]


# ---- Bedrock -----------------------------------------------------------------------------

CONVERSE_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
INVOKE_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke-with-response-stream"


def converse_messages(words: Iterable[str] = ANSWER, *, reasoning: str | None = None,
                      tool: bool = False, stop: str | None = None,
                      metadata: bool = True) -> list[bytes]:
    """converse-stream messages, each payload padded with ``p`` as Bedrock pads them."""
    msgs = [event_message("messageStart", {"p": "abcdefgh", "role": "assistant"})]
    block = 0
    if reasoning:
        half = len(reasoning) // 2
        for part in (reasoning[:half], reasoning[half:]):
            msgs.append(event_message("contentBlockDelta", {
                "contentBlockIndex": block, "delta": {"reasoningContent": {"text": part}},
                "p": "abc"}))
        msgs.append(event_message("contentBlockDelta", {
            "contentBlockIndex": block, "delta": {"reasoningContent": {"signature": "U0lH"}}}))
        msgs.append(event_message("contentBlockStop", {"contentBlockIndex": block}))
        block += 1
    for w in words:
        msgs.append(event_message("contentBlockDelta", {
            "contentBlockIndex": block, "delta": {"text": w}, "p": "abcdefghijk"}))
    msgs.append(event_message("contentBlockStop", {"contentBlockIndex": block, "p": "ab"}))
    if tool:
        block += 1
        args = j(ARGS)
        msgs.append(event_message("contentBlockStart", {
            "contentBlockIndex": block,
            "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}}}))
        for frag in (args[:7], args[7:15], args[15:]):
            msgs.append(event_message("contentBlockDelta", {
                "contentBlockIndex": block, "delta": {"toolUse": {"input": frag}}}))
        msgs.append(event_message("contentBlockStop", {"contentBlockIndex": block}))
    msgs.append(event_message("messageStop", {"stopReason": stop or ("tool_use" if tool else
                                                                     "end_turn"), "p": "abcd"}))
    if metadata:
        msgs.append(event_message("metadata", {
            "usage": {"inputTokens": 7, "outputTokens": 16, "totalTokens": 23},
            "metrics": {"latencyMs": 412}, "p": "abcdefghijklmnopq"}))
    return msgs


def anthropic_events(words: Iterable[str] = ANSWER) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [
        {"type": "message_start", "message": {"id": "msg_bdrk_1", "role": "assistant",
                                              "usage": {"input_tokens": 7, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    out += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}
            for w in words]
    out += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 16}},
        {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
            "inputTokenCount": 7, "outputTokenCount": 16, "invocationLatency": 380,
            "firstByteLatency": 120}},
    ]
    return out


def invoke_messages(events: Iterable[dict[str, object]]) -> list[bytes]:
    """invoke-with-response-stream: each event base64 in a ``chunk`` message's ``bytes``."""
    return [event_message("chunk", {"bytes": base64.b64encode(j(e).encode()).decode(),
                                    "p": "abcdefghij"}) for e in events]


def throttled(messages: list[bytes], after: int) -> list[bytes]:
    return [*messages[:after], exception_message("throttlingException",
                                                 "Too many requests, please wait.")]


# ---- Cohere ------------------------------------------------------------------------------

COHERE_PATH = "/v2/chat"


def cohere_events(words: Iterable[str] = ANSWER, *, plan: str | None = None,
                  tool: bool = False, finish: str = "COMPLETE") -> list[bytes]:
    def ev(t: str, **fields: object) -> bytes:
        return sse({"type": t, **fields}, event=t)

    out = [ev("message-start", id="c0ffee",
              delta={"message": {"role": "assistant", "content": [], "tool_plan": "",
                                 "tool_calls": [], "citations": []}})]
    if plan:
        out += [ev("tool-plan-delta", delta={"message": {"tool_plan": p}})
                for p in (plan[:10], plan[10:])]
    if tool:
        args = j(ARGS)
        out.append(ev("tool-call-start", index=0, delta={"message": {"tool_calls": {
            "id": "get_weather_x1", "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}}}))
        out += [ev("tool-call-delta", index=0,
                   delta={"message": {"tool_calls": {"function": {"arguments": frag}}}})
                for frag in (args[:9], args[9:])]
        out.append(ev("tool-call-end", index=0))
    else:
        out.append(ev("content-start", index=0,
                      delta={"message": {"content": {"type": "text", "text": ""}}}))
        out += [ev("content-delta", index=0, delta={"message": {"content": {"text": w}}})
                for w in words]
        out.append(ev("content-end", index=0))
    out.append(ev("message-end", delta={
        "finish_reason": "TOOL_CALL" if tool else finish,
        "usage": {"billed_units": {"input_tokens": 5, "output_tokens": 16},
                  "tokens": {"input_tokens": 70, "output_tokens": 16}}}))
    return out


# ---- OpenAI chat and its compatible hosts -------------------------------------------------

CHAT_PATH = "/v1/chat/completions"


def chat(choices: list[dict[str, object]], **extra: object) -> bytes:
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": choices, **extra})


def openai_events(words: Iterable[str] = ANSWER, *, call: tuple[str, str] | None = None,
                  finish: str = "stop", usage: tuple[int, int] | None = None) -> list[bytes]:
    out = [chat([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    out += [chat([{"index": 0, "delta": {"content": w}}]) for w in words]
    if call is not None:
        out.append(chat([{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": "call_1", "type": "function",
            "function": {"name": call[0], "arguments": call[1]}}]}}]))
    out.append(chat([{"index": 0, "delta": {}, "finish_reason": finish}]))
    if usage is not None:
        out.append(chat([], usage={"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                   "total_tokens": sum(usage)}))
    out.append(b"data: [DONE]\n\n")
    return out
