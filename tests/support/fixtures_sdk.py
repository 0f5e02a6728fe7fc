"""Recordings for the real-SDK tests, one per wire format, and what each SDK must assemble.

Two kinds of recording, both plain :class:`streamtape.Interaction` values:

- *captured*: raw captures from a real llama.cpp ``llama-server`` in
  ``tests/corpus`` (one line per ``recv()`` with its time and bytes), read by
  :func:`tests.corpus.capture`: the HTTP head and the chunked framing
  stripped, each read's body bytes one piece at its recorded time: real
  bytes, real boundaries, real timing. The request is replaced by the one
  the SDK sends.
- *written*: streams for formats no capture covers (OpenAI tool-call
  streaming, Anthropic ``input_json_delta``, Ollama ``/api/chat`` NDJSON, TGI
  ``/generate_stream``), written event by event in the shapes of the wire
  references, one event per piece, 8 ms apart.

The expected text and tool-call arguments are computed here from the response
bodies with ``json`` alone (no streamtape code), so the SDK tests compare each
SDK's assembled answer against an independent reading of the recording.

The requests carry exactly the JSON body each SDK sends for the calls in
``tests/system/test_sdks.py`` (found by sending them to a capturing transport).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from streamtape.cassette.model import Interaction, Outcome, Request
from streamtape.cassette.pieces import Piece
from streamtape.wire import Framing
from tests.corpus import capture
from tests.support.builders import MS, interaction, sse

# The base URLs the SDKs are pointed at (in-process) and the paths recorded.
OPENAI_BASE = "http://llm.test/v1"
ANTHROPIC_BASE = "http://llm.test"
OLLAMA_BASE = "http://llm.test"
TGI_URL = "http://llm.test/generate_stream"

PROMPT = [{"role": "user", "content": "Say hello"}]


def _json_body(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _request(url: str, body: object) -> Request:
    return Request(
        method="POST",
        url=url,
        headers=(("content-type", "application/json"), ("authorization", "REDACTED")),
        body=_json_body(body),
    )


# --------------------------------------------------------------------------
# Written recordings


def _written(
    url: str,
    body: object,
    events: list[bytes],
    content_type: str,
    *,
    gap_ms: int = 8,
    ttft_ms: int = 30,
    source: str,
) -> Interaction:
    request = _request(url, body)
    return interaction(
        events,
        first_ns=ttft_ms * MS,
        gap_ns=gap_ms * MS,
        head_ns=5 * MS,
        end_ns=(ttft_ms + (len(events) - 1) * gap_ms) * MS,
        content_type=content_type,
        url=request.url,
        request_headers=request.headers,
        body=request.body,
        labels={"source": source},
    )


WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in a time zone",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    },
]
TOOL_PROMPT = [{"role": "user", "content": "Weather and time in Reykjavík?"}]


def openai_tools() -> Interaction:
    """OpenAI chat streaming two tool calls, arguments in fragments (one cuts a UTF-8 word)."""
    base = {"id": "chatcmpl-tool1", "object": "chat.completion.chunk", "created": 1796038600, "model": "tiny-llama"}

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def frag(index: int, args: str) -> bytes:
        return chunk({"tool_calls": [{"index": index, "function": {"arguments": args}}]})

    events = [
        chunk({"role": "assistant", "content": None}),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
                ]
            }
        ),
        frag(0, '{"ci'),
        frag(0, 'ty": "Reykja'),
        frag(0, 'vík", "un'),
        frag(0, 'it": "c'),
        frag(0, 'elsius"}'),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_t2", "type": "function", "function": {"name": "get_time", "arguments": ""}}
                ]
            }
        ),
        frag(1, '{"tz": '),
        frag(1, '"Atlantic/Reykjavik"}'),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    body = {"model": "tiny-llama", "stream": True, "messages": TOOL_PROMPT, "tools": WEATHER_TOOLS}
    return _written(f"{OPENAI_BASE}/chat/completions", body, events, "text/event-stream", source="written: openai tools")


ANTHROPIC_TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


def anthropic_tools() -> Interaction:
    """Anthropic Messages: a text block, then a tool_use block whose input streams as input_json_delta."""
    events = [
        sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01tool",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "tiny-llama",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 31, "output_tokens": 1},
                },
            },
            "message_start",
        ),
        sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start"),
        sse({"type": "ping"}, "ping"),
        sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me check "}}, "content_block_delta"),
        sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reykjavík ☀"}}, "content_block_delta"),
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse(
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}},
            },
            "content_block_start",
        ),
        *[
            sse({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": p}}, "content_block_delta")
            for p in ["", '{"ci', 'ty": "Re', 'ykjavík', '"}']
        ],
        sse({"type": "content_block_stop", "index": 1}, "content_block_stop"),
        sse(
            {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 42}},
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    body = {"max_tokens": 64, "messages": TOOL_PROMPT, "model": "tiny-llama", "stream": True, "tools": ANTHROPIC_TOOLS}
    return _written(f"{ANTHROPIC_BASE}/v1/messages", body, events, "text/event-stream", source="written: anthropic tools")


def ollama_chat() -> Interaction:
    """Ollama /api/chat NDJSON: one object per line, final ``done: true`` with the counts."""
    words = ["Reykjav", "ík", " is", " the", " capital", " 日本", " 😀", "."]

    def line(obj: object) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"

    events = [
        line(
            {
                "model": "llama3.1",
                "created_at": f"2026-08-11T09:00:00.{n:03d}Z",
                "message": {"role": "assistant", "content": w},
                "done": False,
            }
        )
        for n, w in enumerate(words)
    ]
    events.append(
        line(
            {
                "model": "llama3.1",
                "created_at": "2026-08-11T09:00:01Z",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "total_duration": 1290000000,
                "load_duration": 1000000,
                "prompt_eval_count": 31,
                "prompt_eval_duration": 100000000,
                "eval_count": 8,
                "eval_duration": 900000000,
            }
        )
    )
    body = {"model": "llama3.1", "stream": True, "messages": PROMPT, "tools": []}
    return _written(f"{OLLAMA_BASE}/api/chat", body, events, "application/x-ndjson", source="written: ollama chat")


TGI_PROMPT = "Capital of Iceland?"
HF_HUB_TGI_BODY = {"inputs": TGI_PROMPT, "parameters": {"details": True, "max_new_tokens": 20}, "stream": True}
TEXT_GENERATION_TGI_BODY = {
    "inputs": TGI_PROMPT,
    "parameters": {
        "do_sample": False,
        "max_new_tokens": 20,
        "repetition_penalty": None,
        "frequency_penalty": None,
        "return_full_text": False,
        "stop": [],
        "seed": None,
        "temperature": None,
        "top_k": None,
        "top_p": None,
        "truncate": None,
        "typical_p": None,
        "best_of": None,
        "watermark": False,
        "details": True,
        "decoder_input_details": False,
        "top_n_tokens": None,
        "grammar": None,
    },
    "stream": True,
}


def tgi_events() -> list[bytes]:
    tokens = [(49444, "Reykjav"), (1609, "ík"), (374, " is"), (279, " the"), (6864, " capital"), (13, " 😀"), (128009, "<|eot_id|>")]
    text = "".join(t for _, t in tokens[:-1])
    out = []
    for n, (tid, t) in enumerate(tokens, start=1):
        last = n == len(tokens)
        out.append(
            sse(
                {
                    "index": n,
                    "token": {"id": tid, "text": t, "logprob": -0.31, "special": last},
                    "generated_text": text if last else None,
                    "details": {"finish_reason": "eos_token", "generated_tokens": n, "seed": None} if last else None,
                }
            )
        )
    return out


def tgi(body: object, source: str) -> Interaction:
    """TGI /generate_stream: per-token SSE objects, the full text and details on the last."""
    return _written(TGI_URL, body, tgi_events(), "text/event-stream", source=source)


def openai_chat() -> Interaction:
    """Captured: llama-server /v1/chat/completions, 30 tokens, UTF-8, finish_reason length."""
    body = {"model": "tiny-llama", "stream": True, "messages": PROMPT}
    return _captured("chat_stream_slow", _request(f"{OPENAI_BASE}/chat/completions", body))


def anthropic_text() -> Interaction:
    """Captured: llama-server /v1/messages (Anthropic Messages), text deltas, max_tokens."""
    body = {"max_tokens": 64, "messages": PROMPT, "model": "tiny-llama", "stream": True}
    return _captured("anthropic_messages_slow", _request(f"{ANTHROPIC_BASE}/v1/messages", body))


def _captured(name: str, request: Request) -> Interaction:
    """A capture of tests/corpus as the SDK's request would have recorded it."""
    return dataclasses.replace(capture(name), request=request, labels={"source": f"{name}.timing.txt"})


# --------------------------------------------------------------------------
# What each recording says, read with json alone


@dataclass
class Expected:
    text: str = ""
    tool_args: dict[int, str] = field(default_factory=dict)  # index -> joined arguments
    tool_names: dict[int, str] = field(default_factory=dict)
    finish: str | None = None


def _sse_data(body: bytes) -> list[tuple[str | None, str]]:
    out = []
    for block in body.decode("utf-8").split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if data:
            out.append((event, "\n".join(data)))
    return out


def expected(ix: Interaction) -> Expected:
    """The assembled answer of a recording (text, tool-call arguments, finish)."""
    assert ix.response is not None
    body = ix.response.body.replace(b"\r\n", b"\n")
    exp = Expected()
    path = ix.request.path
    if path.endswith("/chat/completions"):
        for _, data in _sse_data(body):
            if data == "[DONE]":
                continue
            obj = json.loads(data)
            for ch in obj.get("choices", []):
                d = ch.get("delta") or {}
                exp.text += d.get("content") or ""
                for tc in d.get("tool_calls") or []:
                    i = tc["index"]
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        exp.tool_names[i] = fn["name"]
                    exp.tool_args[i] = exp.tool_args.get(i, "") + (fn.get("arguments") or "")
                exp.finish = ch.get("finish_reason") or exp.finish
    elif path.endswith("/v1/messages"):
        for _, data in _sse_data(body):
            obj = json.loads(data)
            if obj["type"] == "content_block_start" and obj["content_block"]["type"] == "tool_use":
                exp.tool_names[obj["index"]] = obj["content_block"]["name"]
                exp.tool_args[obj["index"]] = ""
            elif obj["type"] == "content_block_delta":
                d = obj["delta"]
                if d["type"] == "text_delta":
                    exp.text += d["text"]
                elif d["type"] == "input_json_delta":
                    exp.tool_args[obj["index"]] += d["partial_json"]
            elif obj["type"] == "message_delta":
                exp.finish = obj["delta"]["stop_reason"]
    elif path.endswith("/api/chat"):
        for line in body.decode("utf-8").splitlines():
            obj = json.loads(line)
            exp.text += obj["message"]["content"]
            if obj["done"]:
                exp.finish = obj["done_reason"]
    elif path.endswith("/generate_stream"):
        for _, data in _sse_data(body):
            obj = json.loads(data)
            if not obj["token"]["special"]:
                exp.text += obj["token"]["text"]
            if obj["details"]:
                exp.finish = obj["details"]["finish_reason"]
                assert obj["generated_text"] == exp.text
    else:  # pragma: no cover
        raise AssertionError(f"no reader for {path}")
    return exp


def all_recordings() -> list[Interaction]:
    """Every recording, as one cassette's worth of interactions."""
    return [
        openai_chat(),
        openai_tools(),
        anthropic_text(),
        anthropic_tools(),
        ollama_chat(),
        tgi(HF_HUB_TGI_BODY, "written: tgi (huggingface_hub request)"),
        tgi(TEXT_GENERATION_TGI_BODY, "written: tgi (text-generation request)"),
    ]


def close_delimited(ix: Interaction) -> Interaction:
    """The same recording as a close-delimited body (no Transfer-Encoding, the end is the close),
    as HTTP/1.0-style servers and some proxies send streams."""
    assert ix.response is not None
    headers = tuple((k, v) for k, v in ix.response.headers if k.lower() not in ("transfer-encoding", "connection"))
    resp = dataclasses.replace(ix.response, framing=Framing.CLOSE_DELIMITED, headers=(*headers, ("Connection", "close")))
    return dataclasses.replace(ix, response=resp)


def crlf(ix: Interaction) -> Interaction:
    """The same recording with CRLF line endings (as some SSE servers write them)."""
    assert ix.response is not None
    pieces = tuple(Piece(p.at_ns, p.data.replace(b"\n", b"\r\n")) for p in ix.response.pieces)
    resp = dataclasses.replace(ix.response, pieces=pieces)
    return dataclasses.replace(ix, response=resp, labels={**ix.labels, "source": ix.labels["source"] + " (CRLF)"})


def upstream_closed(ix: Interaction) -> Interaction:
    """The recording as if the upstream had closed halfway (outcome ``upstream_closed``)."""
    assert ix.response is not None
    keep = ix.response.pieces[: len(ix.response.pieces) // 2]
    resp = dataclasses.replace(ix.response, pieces=keep)
    return dataclasses.replace(
        ix, response=resp, outcome=Outcome.UPSTREAM_CLOSED, error="incomplete chunked read", end_ns=keep[-1].at_ns
    )
