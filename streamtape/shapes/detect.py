"""Which wire (SSE / NDJSON) and which LLM format an interaction carries."""

from __future__ import annotations

import json
import re
from typing import Any, get_args

from ..cassette.model import Interaction
from . import a2a, agui
from .body import decoded_body
from .model import ShapeName, Wire
from .ndjson import NDJSONParser
from .sse import BOM, SSEEvent, SSEParser

SHAPES: tuple[ShapeName, ...] = get_args(ShapeName)
"""Valid ``--shape`` names: the formats, then the generic wires and ``raw``."""

WIRE_OF_SHAPE: dict[ShapeName, Wire | None] = {
    "openai-chat": "sse",
    "openai-completions": "sse",
    "openai-responses": "sse",
    "ollama-chat": "ndjson",
    "ollama-generate": "ndjson",
    "llamacpp": "sse",
    "tgi": "sse",
    "anthropic": "sse",
    "ag-ui": "sse",
    "a2a": "sse",
    "sse": "sse",
    "ndjson": "ndjson",
    "raw": None,
}

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


def _sniff_wire(head: bytes) -> Wire | None:
    head = head.removeprefix(BOM).lstrip(b"\r\n")
    if _SSE_START.match(head):
        return "sse"
    lines = [ln for ln in head.split(b"\n") if ln.strip()]
    if len(lines) >= 2 and all(ln.lstrip()[:1] in (b"{", b"[") for ln in lines[:2]):
        return "ndjson"
    return None


def wire_of(ix: Interaction) -> Wire | None:
    """``"sse"``, ``"ndjson"`` or None, from the response content type, else by
    sniffing the start of the body (``data:``/``event:``/``:`` lines, or two
    lines that each start a JSON object)."""
    resp = ix.response
    if resp is None:
        return None
    ct = resp.content_type
    if ct == "text/event-stream":
        return "sse"
    if ct in _NDJSON_TYPES:
        return "ndjson"
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
    t = v.get("type")
    if isinstance(t, str):
        if t.startswith("response."):
            return "openai-responses"
        if t in ("message_start", "content_block_start", "content_block_delta", "message_delta",
                 "message_stop", "ping"):
            return "anthropic"
    if event.startswith("response."):
        return "openai-responses"
    if isinstance(v.get("token"), dict):
        return "tgi"
    if "done" in v and ("message" in v or "response" in v):
        return "ollama-chat" if "message" in v else "ollama-generate"
    if "content" in v and "stop" in v:
        return "llamacpp"
    return None


def _shape_of_path(path: str) -> ShapeName | None:
    p = path.split("?")[0].rstrip("/")
    if p.endswith("/chat/completions"):
        return "openai-chat"
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


def _first_values(data: bytes, wire: Wire, limit: int = 4) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    if wire == "sse":
        for item in SSEParser().feed(data):
            if isinstance(item, SSEEvent) and item.data.strip() != "[DONE]":
                try:
                    out.append((json.loads(item.data), item.event))
                except ValueError:
                    continue
                if len(out) >= limit:
                    break
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
    if it fits the wire; otherwise the generic ``sse`` / ``ndjson`` / ``raw``.
    """
    wire = wire_of(ix)
    if wire is None:
        return "raw"
    body = decoded_body(ix).data
    for v, ev in _first_values(body[:65536], wire):
        s = shape_of_value(v, ev)
        if s is not None and WIRE_OF_SHAPE[s] == wire:
            return s
    s = _shape_of_path(ix.request.path)
    if s is not None and WIRE_OF_SHAPE[s] == wire:
        return s
    return wire
