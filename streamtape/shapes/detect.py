"""Which wire (SSE / NDJSON / AWS event stream / JSON array) and which LLM format an
interaction carries."""

from __future__ import annotations

import json
import re
import struct
from binascii import crc32
from typing import Any, get_args

from ..cassette.model import Interaction
from . import a2a, agui, eventstream
from .body import decoded_body
from .eventstream import EventStreamDecoder, EventStreamMessage
from .jsonarray import JSONArrayParser
from .model import ShapeName, Wire
from .ndjson import NDJSONParser
from .sse import BOM, SSEEvent, SSEParser

SHAPES: tuple[ShapeName, ...] = get_args(ShapeName)
"""Valid ``--shape`` names: the formats, then the generic wires and ``raw``."""

WIRE_OF_SHAPE: dict[ShapeName, Wire | None] = {
    "openai-chat": "sse",
    "azure-openai": "sse",
    "openai-completions": "sse",
    "openai-responses": "sse",
    "ollama-chat": "ndjson",
    "ollama-generate": "ndjson",
    "llamacpp": "sse",
    "tgi": "sse",
    "anthropic": "sse",
    "ag-ui": "sse",
    "a2a": "sse",
    "gemini": "sse",
    "gemini-interactions": "sse",
    "bedrock-converse": "eventstream",
    "bedrock-invoke": "eventstream",
    "cohere": "sse",
    "openai-assistants": "sse",
    "replicate": "sse",
    "watsonx": "sse",
    "sse": "sse",
    "ndjson": "ndjson",
    "eventstream": "eventstream",
    "jsonarray": "jsonarray",
    "raw": None,
}
"""The wire of each shape (the one a forced ``--shape`` reads when the body's own does
not fit it); :data:`OTHER_WIRES` lists the shapes that come on more than one."""

OTHER_WIRES: dict[ShapeName, tuple[Wire, ...]] = {
    "gemini": ("jsonarray",),  # streamGenerateContent without alt=sse
}


def fits(shape: ShapeName, wire: Wire | None) -> bool:
    """Whether ``shape`` can come on ``wire``."""
    return wire is not None and (WIRE_OF_SHAPE[shape] == wire or wire in OTHER_WIRES.get(shape, ()))


_NDJSON_TYPES = {
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/jsonlines",
    "application/json-lines",
}
_SSE_START = re.compile(rb"^(?:data|event|id|retry)(?::|\r|\n)|^:")
_SNIFF = 4096


def _prelude_ok(head: bytes) -> bool:
    """The body starts with a sound event-stream prelude (its CRC32 matches)."""
    total, _, pcrc = struct.unpack_from("!III", head, 0)
    return bool(crc32(head[:8]) == pcrc
                and eventstream.MIN_MESSAGE <= total <= eventstream.MAX_MESSAGE)


def _sniff_wire(head: bytes) -> Wire | None:
    if len(head) >= eventstream.PRELUDE and _prelude_ok(head):
        return "eventstream"
    head = head.removeprefix(BOM).lstrip(b"\r\n")
    if _SSE_START.match(head):
        return "sse"
    lines = [ln for ln in head.split(b"\n") if ln.strip()]
    if len(lines) >= 2 and all(ln.lstrip()[:1] in (b"{", b"[") for ln in lines[:2]):
        return "ndjson"
    if head.lstrip()[:1] == b"[":
        return "jsonarray"
    return None


def wire_of(ix: Interaction) -> Wire | None:
    """The wire of a body or None: from the response content type
    (``text/event-stream``, an NDJSON type, ``application/vnd.amazon.eventstream``), else
    by sniffing the start of the body (an event-stream prelude whose CRC32 matches;
    ``data:``/``event:``/``:`` lines; two lines that each start a JSON object; a ``[``:
    a JSON array)."""
    resp = ix.response
    if resp is None:
        return None
    ct = resp.content_type
    if ct == "text/event-stream":
        return "sse"
    if ct in _NDJSON_TYPES:
        return "ndjson"
    if ct == eventstream.CONTENT_TYPE:
        return "eventstream"
    body = decoded_body(ix)
    return _sniff_wire(body.data[:_SNIFF])


def _choices_shape(choices: list[Any]) -> ShapeName | None:
    """What OpenAI choices hold: ``delta`` is chat, ``text`` a legacy completion."""
    kinds = [c for c in choices if isinstance(c, dict)]
    if any(isinstance(c.get("delta"), dict) for c in kinds):
        return "openai-chat"
    if any("text" in c for c in kinds):
        return "openai-completions"
    return None


def _is_azure(v: dict[str, Any]) -> bool:
    """Azure OpenAI's own marks on a chat chunk: ``prompt_filter_results`` (its first
    chunk, with empty ``choices``) or ``content_filter_results`` on a choice."""
    if "prompt_filter_results" in v:
        return True
    choices = v.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and "content_filter_results" in c for c in choices)


def shape_of_value(v: Any, event: str = "message") -> ShapeName | None:
    """The format one decoded JSON event belongs to, or None when it does not tell.

    The payload's structure decides before any label: OpenAI-compatible servers
    are not all truthful about ``object`` (some send chat deltas as
    ``"object": "text_completion"``), so ``choices[].delta`` means chat and
    ``choices[].text`` a legacy completion whatever ``object`` says. The label
    only decides when the choices do not tell (``choices: []`` on a usage chunk or
    Azure's first ``prompt_filter_results`` chunk).
    """
    if not isinstance(v, dict):
        return None
    if agui.is_agui(v):
        return "ag-ui"
    if a2a.is_a2a(v):
        return "a2a"
    choices = v.get("choices")
    if isinstance(choices, list) and (s := _choices_shape(choices)) is not None:
        return s
    obj = v.get("object")
    if obj == "chat.completion.chunk":
        return "openai-chat"
    if obj == "text_completion":
        return "openai-completions"
    if isinstance(obj, str) and obj.startswith("thread."):
        return "openai-assistants"
    t = v.get("type")
    if isinstance(t, str):
        if t.startswith("response."):
            return "openai-responses"
        if t in ("message_start", "content_block_start", "content_block_delta", "message_delta",
                 "message_stop", "ping"):
            return "anthropic"
        if t in _COHERE_TYPES:
            return "cohere"
    if event.startswith("response."):
        return "openai-responses"
    if event.startswith("thread."):
        return "openai-assistants"
    if event in _CONVERSE_EVENTS:
        return "bedrock-converse"
    if event == "chunk" and isinstance(v.get("bytes"), str):
        return "bedrock-invoke"
    et = v.get("event_type")
    if isinstance(et, str) and et.split(".")[0] in ("interaction", "step", "content"):
        return "gemini-interactions"
    if isinstance(v.get("candidates"), list) or (
            isinstance(v.get("usageMetadata"), dict) and "modelVersion" in v):
        return "gemini"
    results = v.get("results")
    if isinstance(results, list) and any(isinstance(r, dict) and "generated_text" in r
                                         for r in results):
        return "watsonx"
    if isinstance(v.get("token"), dict):
        return "tgi"
    if "done" in v and ("message" in v or "response" in v):
        return "ollama-chat" if "message" in v else "ollama-generate"
    if "content" in v and "stop" in v:
        return "llamacpp"
    return None


_COHERE_TYPES = frozenset((
    "message-start", "content-start", "content-delta", "content-end", "tool-plan-delta",
    "tool-call-start", "tool-call-delta", "tool-call-end", "citation-start", "citation-end",
    "message-end", "debug",
))
_CONVERSE_EVENTS = frozenset((
    "messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop",
    "messageStop", "metadata",
))


_AZURE_PATH = re.compile(r"/openai/deployments/[^/]+/chat/completions$")
"""Azure OpenAI's deployment URL (``?api-version=`` follows it)."""


def _shape_of_path(path: str) -> ShapeName | None:
    p = path.split("?")[0].rstrip("/")
    if p.endswith(":streamGenerateContent") or p.endswith(":generateContent"):
        return "gemini"
    if p.endswith("/interactions") or "/interactions/" in p:
        return "gemini-interactions"
    if p.endswith("/converse-stream"):
        return "bedrock-converse"
    if p.endswith("/invoke-with-response-stream"):
        return "bedrock-invoke"
    if p.endswith("/v2/chat"):
        return "cohere"
    if p.endswith("/runs") or ("/runs/" in p and p.endswith("/submit_tool_outputs")):
        return "openai-assistants"
    if p.endswith("/generation_stream"):
        return "watsonx"
    if (p.endswith("/stream") and "/predictions/" in p) or p.startswith("/v1/streams/"):
        return "replicate"
    if p.endswith("/chat/completions"):
        return "azure-openai" if _AZURE_PATH.search(p) else "openai-chat"
    if p.endswith("/v1/completions"):
        return "openai-completions"
    if p.endswith("/responses"):
        return "openai-responses"
    if p.endswith("/messages"):
        return "anthropic"
    if p.endswith("/api/chat"):
        return "ollama-chat"
    if p.endswith("/api/generate"):
        return "ollama-generate"
    if p.endswith("/completion") or p.endswith("/completions"):
        return "llamacpp"
    if p.endswith("/generate_stream") or p.endswith("/generate"):
        return "tgi"
    return None


def _json_or_none(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _first_values(data: bytes, wire: Wire, limit: int = 4) -> list[tuple[Any, str]]:
    """The first JSON values of a body and the name of the event each came in (SSE
    ``event:``, an event-stream ``:event-type``; else "message"). A Replicate
    ``event: output`` whose data is plain text counts as its name with no value."""
    out: list[tuple[Any, str]] = []
    if wire == "sse":
        for item in SSEParser().feed(data):
            if isinstance(item, SSEEvent) and item.data.strip() != "[DONE]":
                v = _json_or_none(item.data)
                if v is None and item.event != "output":
                    continue
                out.append((v, item.event))
                if len(out) >= limit:
                    break
    elif wire == "eventstream":
        for m in EventStreamDecoder().feed(data):
            if isinstance(m, EventStreamMessage):
                out.append((_json_or_none(m.payload), m.event_type))
            if len(out) >= limit:
                break
    elif wire == "jsonarray":
        out = [(e.value, "message") for e in JSONArrayParser().feed(data)[:limit] if e.valid]
    else:
        p = NDJSONParser()
        for ln in [*p.feed(data), *p.close()]:
            if ln.valid:
                out.append((ln.value, "message"))
            if len(out) >= limit:
                break
    return out


def detect_shape(ix: Interaction) -> ShapeName:
    """The format of an interaction's stream (one of :data:`SHAPES`).

    The body decides when its first events are recognisable (an event's
    ``object``/``type`` or characteristic fields); otherwise the request path
    (``/v1/chat/completions``, ``/api/chat``, ``/completion``, ``/generate_stream``...)
    if it fits the wire; otherwise the generic wire (``sse``, ``ndjson``, ``eventstream``,
    ``jsonarray``), or ``raw``. OpenAI chat is ``azure-openai`` when it comes from an
    Azure deployment URL or carries Azure's content-filter results (its chunks are
    otherwise OpenAI's, and so is their meaning: Azure's legacy completions carry the
    same filter results and stay ``openai-completions``).
    """
    wire = wire_of(ix)
    if wire is None:
        return "raw"
    body = decoded_body(ix).data
    by_path = _shape_of_path(ix.request.path)
    values = _first_values(body[:65536], wire)
    for v, ev in values:
        s = "replicate" if ev == "output" and wire == "sse" else shape_of_value(v, ev)
        if s == "openai-chat" and (by_path == "azure-openai"
                                   or any(isinstance(w, dict) and _is_azure(w) for w, _ in values)):
            return "azure-openai"
        if s is not None and fits(s, wire):
            return s
    s = by_path
    if s is not None and fits(s, wire):
        return s
    return wire
