"""Cohere v2 ``/v2/chat`` stream: SSE events typed by their JSON ``type``.

- ``message-start`` (``delta.message.role``);
- ``content-start`` / ``content-delta`` / ``content-end``: ``delta.message.content.text``
  is answer text, ``delta.message.content.thinking`` reasoning (reasoning models);
- ``tool-plan-delta``: ``delta.message.tool_plan``, the model's plan before it calls
  tools: reasoning, not answer;
- ``tool-call-start`` (``delta.message.tool_calls``: ``id``, ``function.name``, the
  start of ``function.arguments``), ``tool-call-delta`` (more of the arguments),
  ``tool-call-end``; ``index`` tells the calls apart;
- ``citation-start`` / ``citation-end``: sources of the text, not text;
- ``message-end``: ``delta.finish_reason`` (``COMPLETE``, ``STOP_SEQUENCE``,
  ``MAX_TOKENS``, ``TOOL_CALL``, ``ERROR``, ``TIMEOUT``) and ``delta.usage``
  (``tokens`` and ``billed_units``: ``input_tokens``, ``output_tokens``; ``tokens``
  read first): the end marker.
"""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_dict, as_int, as_str, objects
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
    "ERROR": "error",
    "TIMEOUT": "error",
}


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        t = as_str(v.get("type")) or w.type
        delta = as_dict(v.get("delta"))
        msg = as_dict(delta.get("message"))
        idx = as_int(v.get("index"))
        if t == "message-start":
            out.append(Event(at, "start", role=as_str(msg.get("role")) or "assistant",
                             id=as_str(v.get("id")), source=src))
        elif t in ("content-start", "content-delta"):
            content = as_dict(msg.get("content"))
            if text := as_str(content.get("text")):
                out.append(Event(at, "text", text=text, source=src))
            if thinking := as_str(content.get("thinking")):
                out.append(Event(at, "reasoning", text=thinking, index=idx, source=src))
        elif t == "tool-plan-delta":
            if plan := as_str(msg.get("tool_plan")):
                out.append(Event(at, "reasoning", text=plan, index=-1, source=src))
        elif t in ("tool-call-start", "tool-call-delta"):
            tc = as_dict(msg.get("tool_calls"))
            fn = as_dict(tc.get("function"))
            out.append(Event(at, "tool_call", index=idx, id=as_str(tc.get("id")),
                             name=as_str(fn.get("name")),
                             arguments=as_str(fn.get("arguments")) or "", source=src))
        elif t == "message-end":
            raw = as_str(delta.get("finish_reason"))
            if raw:
                out.append(Event(at, "finish", reason=REASONS.get(raw, "other"), raw_reason=raw,
                                 source=src))
            if raw == "ERROR" and (err := delta.get("error")):
                out.append(Event(at, "error", error=err if isinstance(err, dict | str) else str(err),
                                 source=src))
            usage = as_dict(delta.get("usage"))
            tokens = as_dict(usage.get("tokens")) or as_dict(usage.get("billed_units"))
            if tokens:
                out.append(Event(at, "usage", prompt_tokens=as_int(tokens.get("input_tokens")),
                                 completion_tokens=as_int(tokens.get("output_tokens")), source=src))
            out.append(Event(at, "done", source=src))
    return out
