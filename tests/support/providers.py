"""Scripted hosted-provider upstreams on 127.0.0.1 whose streams the official SDKs accept unchanged.

One :class:`Stream` per wire format of issue 20, each with the answer an SDK must
assemble from it (written down here beside the bytes, not computed by streamtape):

- ``gemini-sse``: the Gemini API's ``streamGenerateContent?alt=sse``: each ``data:``
  a whole ``GenerateContentResponse``, no ``[DONE]`` (google-genai);
- ``gemini-crlf``: the same as Vertex AI sends it, every line ending CRLF;
- ``gemini-array``: ``streamGenerateContent`` without ``alt=sse``: one JSON array
  streamed element by element (``application/json``), read with httpx;
- ``gemini-interactions``: the Interactions API's ``POST /v1beta/interactions`` with
  ``stream``: typed ``step.*`` events, a function call in ``arguments_delta`` fragments
  (google-genai's ``client.interactions.create(..., stream=True)``);
- ``bedrock-converse``: ``converse-stream``, AWS event stream messages with real
  CRCs (boto3 ``bedrock-runtime``); ``bedrock-throttled``: the same cut by an
  exception message (``throttlingException``) after the first text;
- ``bedrock-invoke``: ``invoke-with-response-stream``, the Anthropic events base64
  in ``chunk`` payloads;
- ``cohere-chat``: Cohere v2 ``/v2/chat`` typed SSE events, with a tool call
  (``cohere.ClientV2``);
- ``mistral-chat``: Mistral's OpenAI-compatible ``/v1/chat/completions`` (mistralai);
- ``azure-chat``: Azure OpenAI ``/openai/deployments/{name}/chat/completions``, with
  the first chunk's empty ``choices`` and ``prompt_filter_results`` and a
  ``content_filter_results`` per choice (``openai.AzureOpenAI``);
- ``assistants-run``: an OpenAI Assistants run stream, ``POST /v1/threads/{id}/runs``
  (``openai.OpenAI().beta.threads.runs.stream``);
- ``watsonx-stream``: watsonx.ai ``/ml/v1/text/generation_stream`` SSE, after the IAM
  token, the project and the model specs (``ibm_watsonx_ai.ModelInference``), on HTTPS
  only (the SDK refuses any other URL);
- ``replicate-stream``: Replicate's plain-text SSE (``event: output`` with the text
  itself, ``id:`` on every event, ``event: done``), at the prediction's ``urls.stream``:
  ``POST /v1/models/{owner}/{name}/predictions`` first answers the prediction, whose
  ``urls`` are ABSOLUTE URLs on this server (``replicate.stream``).

:func:`upstream` serves them all from one :class:`~tests.support.servers.ScriptedServer`,
each at its own path, one HTTP chunk per event, :data:`GAP` seconds apart.
:func:`event_message` encodes one AWS event stream message (the encoder is written
here from the format's description; botocore's parser checks it in the tests).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import ssl
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from tests.support import hosted
from tests.support.servers import Conn, Handler, Received, ScriptedServer

GAP = 0.004
"""Seconds between two events of a scripted stream (so a recording has timing)."""

TEXT = "Hello, wörld: sunny ☀ and 晴れ"
"""The answer every text stream spells (multi-byte characters, so utf8-split cuts them)."""

WORDS = ["Hello", ", wörld", ": sunny ", "☀", " and ", "晴れ"]
assert "".join(WORDS) == TEXT

GEMINI_MODEL = "gemini-2.0-flash"
VERTEX_MODEL = "gemini-vertex-crlf"
ARRAY_MODEL = "gemini-array"
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
BEDROCK_THROTTLED = "throttled.model-v1:0"
COHERE_MODEL = "command-r-plus"
MISTRAL_MODEL = "mistral-small-latest"
AZURE_DEPLOYMENT = "gpt-4o-mini"
AZURE_API_VERSION = "2024-10-21"

WEATHER_ARGS = {"city": "Zürich", "unit": "celsius"}
"""The tool call's arguments in the Cohere stream (sent in fragments)."""


def _json(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Stream:
    """One scripted response: where it is served, its bytes (one HTTP chunk each), and the
    answer an SDK must assemble from them."""

    name: str
    path: str
    content_type: str
    pieces: tuple[bytes, ...]
    text: str = TEXT
    finish: str = ""
    """The finish the SDK reports, in the provider's own vocabulary."""
    tool_calls: tuple[tuple[str, dict[str, object]], ...] = ()
    """(name, parsed arguments) of each tool call, in order."""
    reasoning: str = ""
    error: str | None = None
    """The exception a stream ends in (``bedrock-throttled``), or None."""
    headers: tuple[tuple[str, str], ...] = field(default=())
    before: tuple[tuple[str, Handler], ...] = ()
    """(path, handler) of the calls the SDK makes before the stream, in order: each one
    interaction of a recording, before the stream's own (Replicate's prediction)."""

    @property
    def body(self) -> bytes:
        return b"".join(self.pieces)


# --------------------------------------------------------------------------
# Gemini (google-genai) and Vertex


def _gemini_chunk(text: str, *, finish: str | None = None, thought: bool = False) -> dict[str, object]:
    part: dict[str, object] = {"text": text}
    if thought:
        part["thought"] = True
    cand: dict[str, object] = {"content": {"parts": [part], "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    out: dict[str, object] = {"candidates": [cand], "modelVersion": GEMINI_MODEL, "responseId": "resp-1"}
    if finish:
        out["usageMetadata"] = {"promptTokenCount": 4, "candidatesTokenCount": 9,
                                "thoughtsTokenCount": 3, "totalTokenCount": 16}
    else:
        out["usageMetadata"] = {"promptTokenCount": 4, "totalTokenCount": 4}
    return out


GEMINI_REASONING = "The user greets; answer kindly."


def gemini_chunks() -> list[dict[str, object]]:
    """A thought part first, then the words, the last with ``finishReason: STOP`` and full usage."""
    out = [_gemini_chunk(GEMINI_REASONING, thought=True)]
    out += [_gemini_chunk(w, finish="STOP" if i == len(WORDS) - 1 else None) for i, w in enumerate(WORDS)]
    return out


def gemini_sse(newline: bytes = b"\n") -> tuple[bytes, ...]:
    return tuple(b"data: " + _json(c).encode() + newline + newline for c in gemini_chunks())


def gemini_array() -> tuple[bytes, ...]:
    """The JSON array as the REST API streams it: ``[`` with the first element, then
    ``,\\r\\n`` and each next one, ``]`` last (as generativelanguage.googleapis.com writes it)."""
    elems = [json.dumps(c, ensure_ascii=False, indent=2).encode() for c in gemini_chunks()]
    pieces = [b"[" + elems[0]] + [b",\r\n" + e for e in elems[1:]]
    pieces.append(b"]")
    return tuple(pieces)


def _gemini_path(model: str) -> str:
    return f"/v1beta/models/{model}:streamGenerateContent"


INTERACTIONS_MODEL = "gemini-3-flash-preview"


def interactions_events() -> tuple[bytes, ...]:
    """A streamed interaction (:func:`tests.support.hosted.interactions_events`): a thought
    step, the words, a function call whose JSON arguments come in three
    ``arguments_delta`` fragments, then ``interaction.completed`` with ``requires_action``."""
    args = _json(WEATHER_ARGS)
    call = ("fc_get_weather_1", "get_weather", (args[:5], args[5:17], args[17:]))
    return tuple(hosted.interactions_sse(hosted.interactions_events(WORDS, thought=GEMINI_REASONING, call=call)))


# --------------------------------------------------------------------------
# The AWS event stream (Bedrock)

_STRING = 7  # the header value type of a UTF-8 string


def event_message(headers: Sequence[tuple[str, str]], payload: bytes) -> bytes:
    """One AWS event stream message: prelude (total length, headers length, CRC32 of the
    two), string headers (name length byte, name, type 7, value length, value), the
    payload, and the CRC32 of all that came before."""
    hdr = b"".join(
        struct.pack(">B", len(k.encode())) + k.encode() + struct.pack(">BH", _STRING, len(v.encode())) + v.encode()
        for k, v in headers
    )
    total = 12 + len(hdr) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hdr))
    head = prelude + struct.pack(">I", binascii.crc32(prelude)) + hdr + payload
    return head + struct.pack(">I", binascii.crc32(head))


def bedrock_event(event_type: str, payload: dict[str, object]) -> bytes:
    """An ``event`` message of type ``event_type`` with a JSON payload (and Bedrock's ``p``
    padding field, which varies the length of every message)."""
    body = {**payload, "p": "abcdefghijklmnopqrstuvwxyz"[: 3 + len(event_type) % 7]}
    return event_message(
        [(":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")],
        _json(body).encode(),
    )


def bedrock_exception(kind: str, message: str) -> bytes:
    return event_message(
        [(":exception-type", kind), (":content-type", "application/json"), (":message-type", "exception")],
        _json({"message": message}).encode(),
    )


def converse_events(words: Iterable[str] = WORDS, *, tool: bool = True) -> list[bytes]:
    """Text in block 0 (no ``contentBlockStart``: Bedrock sends one for tool use only), then a
    ``toolUse`` in block 1 whose input comes in three fragments, ``stopReason: tool_use``."""
    out = [bedrock_event("messageStart", {"role": "assistant"})]
    out += [bedrock_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": w}}) for w in words]
    out.append(bedrock_event("contentBlockStop", {"contentBlockIndex": 0}))
    if tool:
        args = _json(WEATHER_ARGS)
        out.append(bedrock_event("contentBlockStart", {"contentBlockIndex": 1, "start": {
            "toolUse": {"toolUseId": "tooluse_w1", "name": "get_weather"}}}))
        out += [bedrock_event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": f}}})
                for f in (args[:6], args[6:15], args[15:])]
        out.append(bedrock_event("contentBlockStop", {"contentBlockIndex": 1}))
    out += [
        bedrock_event("messageStop", {"stopReason": "tool_use" if tool else "end_turn"}),
        bedrock_event("metadata", {"usage": {"inputTokens": 5, "outputTokens": 9, "totalTokens": 14},
                                   "metrics": {"latencyMs": 321}}),
    ]
    return out


def throttled_events() -> list[bytes]:
    """Converse events cut after the first two words by a ``throttlingException``."""
    start = converse_events(WORDS[:2], tool=False)[:3]
    return [*start, bedrock_exception("throttlingException", "Too many requests, please wait before trying again.")]


def anthropic_events() -> list[dict[str, object]]:
    """The Anthropic Messages events a Claude model on Bedrock streams (in ``chunk`` payloads)."""
    return [
        {"type": "message_start", "message": {"id": "msg_bdrk_1", "type": "message", "role": "assistant",
                                              "model": "claude-3-haiku-20240307", "content": [],
                                              "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}} for w in WORDS),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
            "inputTokenCount": 5, "outputTokenCount": 9, "invocationLatency": 321, "firstByteLatency": 40}},
    ]


def invoke_events() -> list[bytes]:
    return [bedrock_event("chunk", {"bytes": base64.b64encode(_json(e).encode()).decode()})
            for e in anthropic_events()]


def _bedrock_path(model: str, op: str) -> str:
    """The path boto3 sends: the model id percent-encoded (``:`` as ``%3A``)."""
    return f"/model/{quote(model, safe='')}/{op}"


# --------------------------------------------------------------------------
# Cohere v2


def _cohere(event: str, data: dict[str, object]) -> bytes:
    return f"event: {event}\ndata: {_json({'type': event, **data})}\n\n".encode()


COHERE_PLAN = "I will look up the weather in Zürich."


def cohere_events() -> list[bytes]:
    """Text, then a tool plan and one tool call whose arguments come in three fragments."""
    args = _json(WEATHER_ARGS)
    frags = [args[:5], args[5:17], args[17:]]
    out = [
        _cohere("message-start", {"id": "c0ffee-1", "delta": {"message": {
            "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}}),
        _cohere("content-start", {"index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}}),
        *(_cohere("content-delta", {"index": 0, "delta": {"message": {"content": {"text": w}}}}) for w in WORDS),
        _cohere("content-end", {"index": 0}),
        *(_cohere("tool-plan-delta", {"delta": {"message": {"tool_plan": p}}})
          for p in (COHERE_PLAN[:10], COHERE_PLAN[10:])),
        _cohere("tool-call-start", {"index": 0, "delta": {"message": {"tool_calls": {
            "id": "get_weather_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}}}}),
        *(_cohere("tool-call-delta", {"index": 0, "delta": {"message": {"tool_calls": {
            "function": {"arguments": f}}}}}) for f in frags),
        _cohere("tool-call-end", {"index": 0}),
        _cohere("message-end", {"delta": {"finish_reason": "TOOL_CALL", "usage": {
            "billed_units": {"input_tokens": 12, "output_tokens": 20},
            "tokens": {"input_tokens": 80, "output_tokens": 20}}}}),
    ]
    return out


# --------------------------------------------------------------------------
# OpenAI-compatible: Mistral, Azure OpenAI


def _chat_chunk(choices: list[dict[str, object]], **extra: object) -> bytes:
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1733100000,
           "model": extra.pop("model", MISTRAL_MODEL), "choices": choices, **extra}
    return b"data: " + _json(obj).encode() + b"\n\n"


def mistral_events() -> list[bytes]:
    out = [_chat_chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    out += [_chat_chunk([{"index": 0, "delta": {"content": w}, "finish_reason": None}]) for w in WORDS]
    out.append(_chat_chunk([{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}],
                           usage={"prompt_tokens": 5, "total_tokens": 14, "completion_tokens": 9}))
    out.append(b"data: [DONE]\n\n")
    return out


_FILTER_OK = {k: {"filtered": False, "severity": "safe"} for k in ("hate", "self_harm", "sexual", "violence")}


def azure_events() -> list[bytes]:
    model = "gpt-4o-mini-2024-07-18"
    out = [b"data: " + _json({"choices": [], "created": 0, "id": "", "model": "", "object": "",
                              "prompt_filter_results": [{"prompt_index": 0,
                                                         "content_filter_results": _FILTER_OK}]}).encode() + b"\n\n"]
    out.append(_chat_chunk([{"content_filter_results": {}, "delta": {"content": "", "refusal": None, "role": "assistant"},
                             "finish_reason": None, "index": 0, "logprobs": None}], model=model,
                           system_fingerprint="fp_azure"))
    out += [_chat_chunk([{"content_filter_results": _FILTER_OK, "delta": {"content": w}, "finish_reason": None,
                          "index": 0, "logprobs": None}], model=model, system_fingerprint="fp_azure")
            for w in WORDS]
    out.append(_chat_chunk([{"content_filter_results": {}, "delta": {}, "finish_reason": "stop", "index": 0,
                             "logprobs": None}], model=model, system_fingerprint="fp_azure"))
    out.append(b"data: [DONE]\n\n")
    return out


ASSISTANTS_THREAD = "thread_abc123"
ASSISTANTS_ASSISTANT = "asst_abc123"


def _run_object(status: str, **extra: object) -> dict[str, object]:
    return {"id": "run_abc123", "object": "thread.run", "created_at": 1733000000,
            "assistant_id": ASSISTANTS_ASSISTANT, "thread_id": ASSISTANTS_THREAD, "status": status,
            "model": "gpt-4o-mini", "instructions": "", "tools": [], "metadata": {},
            "parallel_tool_calls": True, "response_format": "auto", "tool_choice": "auto",
            "truncation_strategy": {"type": "auto", "last_messages": None}, "usage": None, **extra}


def _assistants(event: str, data: dict[str, object] | str) -> bytes:
    body = data if isinstance(data, str) else _json(data)
    return f"event: {event}\ndata: {body}\n\n".encode()


def assistants_events() -> list[bytes]:
    """An Assistants run stream as the API documents it (``thread.run.*``,
    ``thread.message.*`` events, each with its object, then ``event: done``)."""
    msg = {"id": "msg_abc123", "object": "thread.message", "created_at": 1733000001,
           "assistant_id": ASSISTANTS_ASSISTANT, "thread_id": ASSISTANTS_THREAD, "run_id": "run_abc123",
           "role": "assistant", "content": [], "attachments": [], "metadata": {}, "status": "in_progress"}
    out = [_assistants("thread.run.created", _run_object("queued")),
           _assistants("thread.run.queued", _run_object("queued")),
           _assistants("thread.run.in_progress", _run_object("in_progress")),
           _assistants("thread.message.created", msg),
           _assistants("thread.message.in_progress", msg)]
    out += [_assistants("thread.message.delta", {"id": "msg_abc123", "object": "thread.message.delta", "delta": {
        "content": [{"index": 0, "type": "text", "text": {"value": w, "annotations": []}}]}}) for w in WORDS]
    done = {**msg, "status": "completed", "completed_at": 1733000002,
            "content": [{"type": "text", "text": {"value": TEXT, "annotations": []}}]}
    out += [_assistants("thread.message.completed", done),
            _assistants("thread.run.completed", _run_object(
                "completed", completed_at=1733000002,
                usage={"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21})),
            _assistants("done", "[DONE]")]
    return out


# --------------------------------------------------------------------------
# Replicate


REPLICATE_MODEL = "meta/meta-llama-3-8b-instruct"
REPLICATE_PREDICTION = "ufawqhfynnddngldkgtslldrkq"


def replicate_events() -> list[bytes]:
    """The stream as Replicate sends it: ``event``, then ``id`` (the SDK drops an event
    without one), then the text itself as ``data``; ``event: done`` with ``{}`` last."""
    out = [f"event: output\nid: 1733100000:{i}\ndata: {w}\n\n".encode() for i, w in enumerate(WORDS)]
    out.append(f"event: done\nid: 1733100000:{len(WORDS)}\ndata: {{}}\n\n".encode())
    return out


def replicate_prediction(origin: str) -> dict[str, object]:
    """The prediction ``POST .../predictions`` answers (status ``starting``), its ``urls``
    absolute on ``origin`` (Replicate names its own hosts there)."""
    base = f"{origin}/v1/predictions/{REPLICATE_PREDICTION}"
    return {"id": REPLICATE_PREDICTION, "model": REPLICATE_MODEL, "version": "dp-4d2b1c2e0f3a",
            "input": {"prompt": "Say hello"}, "logs": "", "output": None, "data_removed": False,
            "error": None, "status": "starting", "created_at": "2026-12-02T10:00:00.000Z",
            "urls": {"cancel": f"{base}/cancel", "get": base, "stream": f"{base}/stream",
                     "web": f"https://replicate.com/p/{REPLICATE_PREDICTION}"}}


def _replicate_create(req: Received, c: Conn) -> None:
    """201 with the prediction as one Content-Length JSON body, its URLs on the origin the
    request named (``Host``), as a server that knows its public address writes them."""
    body = _json(replicate_prediction(f"http://{req.header('host')}")).encode()
    c.head(201, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], "Created")
    c.raw(body)


# --------------------------------------------------------------------------
# IBM watsonx.ai


WATSONX_MODEL = "ibm/granite-3-8b-instruct"
WATSONX_PROJECT = "0f3c7a2e-5b1d-4c8e-9a6f-2d4b8e1c7a90"
WATSONX_TOKEN_SIGNATURE = "c2NyaXB0ZWQtc2lnbmF0dXJlLW9mLXRoZS10ZXN0LWlhbS10b2tlbg"
WATSONX_TOKEN = (
    "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDAsImlhbV9pZCI6IklCTWlkLXRlc3QifQ." + WATSONX_TOKEN_SIGNATURE
)
"""The IAM access token the scripted token endpoint hands out (expiring in 2100; its
signature, made up, is what the recorder masks)."""


def watsonx_events() -> list[bytes]:
    """``/ml/v1/text/generation_stream`` as watsonx.ai writes it: ``id``, ``event: message``
    and one ``results`` object per event, counts so far, ``stop_reason`` last."""
    out: list[bytes] = []
    for i, w in enumerate(WORDS):
        last = i == len(WORDS) - 1
        doc = {"model_id": WATSONX_MODEL, "model_version": "1.1.0", "created_at": "2026-12-02T10:00:00.000Z",
               "results": [{"generated_text": w, "generated_token_count": i + 1, "input_token_count": 3,
                            "stop_reason": "eos_token" if last else "not_finished"}]}
        out.append(f"id: {i + 1}\nevent: message\ndata: {_json(doc)}\n\n".encode())
    return out


def _json_answer(doc: dict[str, object], *, gzip_if_accepted: bool = False) -> Handler:
    """One JSON body with a Content-Length; gzipped when asked to and the client accepts it
    (httpx and requests send ``Accept-Encoding: gzip`` by default, and a server or the
    gateway before it may take them up on it)."""

    def handle(req: Received, c: Conn) -> None:
        body = _json(doc).encode()
        head = [("Content-Type", "application/json")]
        if gzip_if_accepted and "gzip" in (req.header("accept-encoding") or ""):
            body = gzip.compress(body)
            head.append(("Content-Encoding", "gzip"))
        c.head(200, [*head, ("Content-Length", str(len(body)))])
        c.raw(body)

    return handle


WATSONX_BEFORE: tuple[tuple[str, Handler], ...] = (
    ("/identity/token", _json_answer({"access_token": WATSONX_TOKEN, "refresh_token": "not_supported",
                                      "token_type": "Bearer", "expires_in": 3600, "expiration": 4102444800,
                                      "scope": "ibm openid"}, gzip_if_accepted=True)),
    (f"/v2/projects/{WATSONX_PROJECT}", _json_answer({
        "metadata": {"guid": WATSONX_PROJECT}, "entity": {"name": "streamtape", "storage": {"type": "assetfiles"},
                                                          "compute": [], "type": "wx"}})),
    ("/ml/v1/foundation_model_specs", _json_answer({"total_count": 1, "limit": 200, "resources": [
        {"model_id": WATSONX_MODEL, "label": "granite-3-8b-instruct", "provider": "IBM",
         "functions": [{"id": "text_generation"}, {"id": "text_chat"}]}]})),
)
"""What ``ModelInference(...).generate_text_stream`` asks first, in order: an IAM token
(``POST /identity/token``, the API key in a form body), the project, the model specs."""


# --------------------------------------------------------------------------
# All of them


SSE = "text/event-stream"
EVENTSTREAM = "application/vnd.amazon.eventstream"


def streams() -> dict[str, Stream]:
    """Every scripted stream by name."""
    amz = (("x-amzn-RequestId", "0b1c2d3e-0000-4000-8000-000000000001"),)
    items = [
        Stream("gemini-sse", _gemini_path(GEMINI_MODEL), SSE, gemini_sse(), finish="STOP",
               reasoning=GEMINI_REASONING),
        Stream("gemini-crlf", _gemini_path(VERTEX_MODEL), SSE, gemini_sse(b"\r\n"), finish="STOP",
               reasoning=GEMINI_REASONING),
        Stream("gemini-array", _gemini_path(ARRAY_MODEL), "application/json; charset=UTF-8", gemini_array(),
               finish="STOP", reasoning=GEMINI_REASONING),
        Stream("gemini-interactions", hosted.INTERACTIONS_PATH, SSE, interactions_events(),
               finish="requires_action", tool_calls=(("get_weather", dict(WEATHER_ARGS)),),
               reasoning=GEMINI_REASONING),
        Stream("bedrock-converse", _bedrock_path(BEDROCK_MODEL, "converse-stream"), EVENTSTREAM,
               tuple(converse_events()), finish="tool_use", tool_calls=(("get_weather", dict(WEATHER_ARGS)),),
               headers=amz),
        Stream("bedrock-throttled", _bedrock_path(BEDROCK_THROTTLED, "converse-stream"), EVENTSTREAM,
               tuple(throttled_events()), text="".join(WORDS[:2]), error="throttlingException", headers=amz),
        Stream("bedrock-invoke", _bedrock_path(BEDROCK_MODEL, "invoke-with-response-stream"), EVENTSTREAM,
               tuple(invoke_events()), finish="end_turn",
               headers=(*amz, ("X-Amzn-Bedrock-Content-Type", "application/json"))),
        Stream("cohere-chat", "/v2/chat", SSE, tuple(cohere_events()), finish="TOOL_CALL",
               tool_calls=(("get_weather", dict(WEATHER_ARGS)),), reasoning=COHERE_PLAN),
        Stream("mistral-chat", "/v1/chat/completions", SSE, tuple(mistral_events()), finish="stop"),
        Stream("azure-chat", f"/openai/deployments/{AZURE_DEPLOYMENT}/chat/completions", SSE,
               tuple(azure_events()), finish="stop"),
        Stream("assistants-run", f"/v1/threads/{ASSISTANTS_THREAD}/runs", SSE, tuple(assistants_events()),
               finish="completed"),
        Stream("replicate-stream", f"/v1/predictions/{REPLICATE_PREDICTION}/stream", SSE,
               tuple(replicate_events()), finish="done",
               before=((f"/v1/models/{REPLICATE_MODEL}/predictions", _replicate_create),)),
        Stream("watsonx-stream", "/ml/v1/text/generation_stream", SSE, tuple(watsonx_events()),
               finish="eos_token", before=WATSONX_BEFORE),
    ]
    return {s.name: s for s in items}


def handler(stream: Stream, gap: float = GAP) -> Handler:
    """Chunked: the head, then each piece as one HTTP chunk ``gap`` seconds apart."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, [("Content-Type", stream.content_type), ("Transfer-Encoding", "chunked"), *stream.headers])
        c.chunked(stream.pieces, gap)

    return handle


def upstream(gap: float = GAP, tls: ssl.SSLContext | None = None) -> ScriptedServer:
    """One server answering every stream of :func:`streams` at its path (not started); over
    HTTPS with ``tls`` (the HTTPS-only SDKs')."""
    routes = {s.path: handler(s, gap) for s in streams().values()}
    for s in streams().values():
        routes.update(s.before)
    return ScriptedServer(routes, tls=tls)
