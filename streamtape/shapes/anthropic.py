"""Anthropic Messages stream (``event: message_start`` ... ``message_stop``).

Extended thinking arrives in ``thinking`` content blocks apart from the ``text``
blocks: ``thinking_delta`` fragments, then one ``signature_delta`` just before
the block stops (it replaces the block's signature; the SDK does the same). A
``redacted_thinking`` block has no deltas at all: its opaque ``data`` comes whole
in ``content_block_start``. All three become ``reasoning`` events carrying the
block index, so blocks assemble apart. Thinking tokens are counted inside
``output_tokens``; newer servers also send ``output_tokens_details.thinking_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .common import as_dict, as_int, as_str, done_event
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    prompt_tokens: int | None = None
    for w in wires:
        if w.done:
            out.append(done_event(w))
            continue
        v = w.value
        at, src = w.at_ns, w.index
        if not isinstance(v, dict):
            if w.type == "error":
                out.append(Event(at, "error", error=w.data, source=src))
            continue
        t = as_str(v.get("type")) or w.type
        if t == "error" or w.type == "error":
            err = v.get("error") if v.get("error") is not None else v
            out.append(Event(at, "error", error=err, source=src))
        elif t == "message_start":
            msg = as_dict(v.get("message"))
            out.append(Event(at, "start", role=as_str(msg.get("role")) or "assistant",
                             id=as_str(msg.get("id")), source=src))
            u = msg.get("usage")
            if isinstance(u, dict):
                prompt_tokens = as_int(u.get("input_tokens"))
        elif t == "content_block_start":
            block = as_dict(v.get("content_block"))
            bt = block.get("type")
            if bt in ("tool_use", "server_tool_use"):
                inp = block.get("input")
                out.append(Event(at, "tool_call", index=as_int(v.get("index")),
                                 id=as_str(block.get("id")), name=as_str(block.get("name")),
                                 arguments="" if not inp else _json(inp), source=src))
            elif bt == "text" and (text := as_str(block.get("text"))):
                out.append(Event(at, "text", text=text, source=src))
            elif bt == "thinking" and (text := as_str(block.get("thinking"))):
                out.append(Event(at, "reasoning", text=text, index=as_int(v.get("index")),
                                 source=src))
            elif bt == "redacted_thinking":
                out.append(Event(at, "reasoning", redacted=as_str(block.get("data")) or "",
                                 index=as_int(v.get("index")), source=src))
        elif t == "content_block_delta":
            d = as_dict(v.get("delta"))
            dt = d.get("type")
            if dt == "text_delta":
                text = as_str(d.get("text"))
                if text:
                    out.append(Event(at, "text", text=text, source=src))
            elif dt == "input_json_delta":
                out.append(Event(at, "tool_call", index=as_int(v.get("index")),
                                 arguments=as_str(d.get("partial_json")) or "", source=src))
            elif dt == "thinking_delta":
                text = as_str(d.get("thinking"))
                if text:
                    out.append(Event(at, "reasoning", text=text, index=as_int(v.get("index")),
                                     source=src))
            elif dt == "signature_delta":
                sig = as_str(d.get("signature"))
                if sig is not None:
                    out.append(Event(at, "reasoning", signature=sig, index=as_int(v.get("index")),
                                     source=src))
        elif t == "message_delta":
            d = as_dict(v.get("delta"))
            raw = as_str(d.get("stop_reason"))
            if raw:
                out.append(Event(at, "finish", reason=REASONS.get(raw, "other"), raw_reason=raw,
                                 source=src))
            u = v.get("usage")
            if isinstance(u, dict):
                pt = as_int(u.get("input_tokens"))
                details = as_dict(u.get("output_tokens_details"))
                out.append(Event(at, "usage", prompt_tokens=pt if pt is not None else prompt_tokens,
                                 completion_tokens=as_int(u.get("output_tokens")),
                                 reasoning_tokens=as_int(details.get("thinking_tokens")
                                                         if "thinking_tokens" in details
                                                         else details.get("reasoning_tokens")),
                                 source=src))
        elif t == "message_stop":
            out.append(Event(at, "done", source=src))
    return out


def _json(v: object) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
