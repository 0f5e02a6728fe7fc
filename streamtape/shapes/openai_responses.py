"""OpenAI Responses API event stream (``event: response.*``, typed JSON events).

Reasoning is an output item of its own (``rs_...``): its summary comes as
``response.reasoning_summary_text.delta`` (one ``summary_index`` per part), raw
reasoning text (gpt-oss and other self-hosted servers) as
``response.reasoning_text.delta``. Both become ``reasoning`` events carrying the
item id and the part index, so parts assemble as paragraphs. A refusal comes as
``response.refusal.delta``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_dict, as_int, as_str, done_event
from .model import Event, FinishReason, WireEvent
from .openai_chat import usage_event

INCOMPLETE: dict[str, FinishReason] = {"max_output_tokens": "length", "content_filter": "content_filter"}
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    saw_call = False
    for w in wires:
        if w.done:
            out.append(done_event(w))
            continue
        v = w.value
        if not isinstance(v, dict):
            if w.type == "error":
                out.append(Event(w.at_ns, "error", error=w.data, source=w.index))
            continue
        t = as_str(v.get("type")) or w.type
        at, src = w.at_ns, w.index
        if t == "error" or (t not in TERMINAL and isinstance(v.get("error"), dict | str)):
            err = v.get("error") if v.get("error") is not None else v
            out.append(Event(at, "error", error=err, source=src))
        elif t == "response.created":
            out.append(Event(at, "start", role="assistant", source=src))
        elif t == "response.output_text.delta":
            d = as_str(v.get("delta"))
            if d:
                out.append(Event(at, "text", text=d, source=src))
        elif t in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            d = as_str(v.get("delta"))
            part = v.get("summary_index") if t.endswith("summary_text.delta") else v.get("content_index")
            if d:
                out.append(Event(at, "reasoning", text=d, id=as_str(v.get("item_id")),
                                 index=as_int(part), source=src))
        elif t == "response.refusal.delta":
            d = as_str(v.get("delta"))
            if d:
                out.append(Event(at, "refusal", text=d, source=src))
        elif t == "response.output_item.added":
            item = as_dict(v.get("item"))
            if item.get("type") == "function_call":
                saw_call = True
                out.append(Event(
                    at, "tool_call", index=as_int(v.get("output_index")),
                    id=as_str(item.get("call_id")) or as_str(item.get("id")),
                    name=as_str(item.get("name")), arguments=as_str(item.get("arguments")) or "",
                    source=src,
                ))
        elif t == "response.function_call_arguments.delta":
            out.append(Event(at, "tool_call", index=as_int(v.get("output_index")),
                             arguments=as_str(v.get("delta")) or "", source=src))
        elif t in TERMINAL:
            resp = as_dict(v.get("response"))
            status = as_str(resp.get("status"))
            if t == "response.failed":
                out.append(Event(at, "error", error=resp.get("error") or v, source=src))
                out.append(Event(at, "finish", reason="error", raw_reason=status or "failed",
                                 source=src))
            elif t == "response.incomplete":
                det = resp.get("incomplete_details")
                raw = as_str(det.get("reason")) if isinstance(det, dict) else None
                out.append(Event(at, "finish", reason=INCOMPLETE.get(raw or "", "other"),
                                 raw_reason=raw or status, source=src))
            else:
                out.append(Event(at, "finish", reason="tool_calls" if saw_call else "stop",
                                 raw_reason=status or "completed", source=src))
            u = usage_event(w, resp.get("usage"))
            if u is not None:
                out.append(u)
            out.append(Event(at, "done", source=src))
    return out
