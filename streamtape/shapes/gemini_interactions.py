"""The Gemini Interactions API (``POST /v1beta/interactions`` with ``stream``): SSE
events typed by their ``event_type``.

- ``interaction.start`` (``interaction.id``), ``interaction.status_update``;
- ``content.start`` / ``content.delta`` / ``content.stop``, ``index`` per content
  block; a delta's ``type``: ``text`` (answer text), ``thought_summary`` (reasoning:
  ``text``, or ``content.text``), ``thought_signature`` (``signature``),
  ``function_call`` (``id``, ``name``, ``arguments`` as a whole object);
- ``interaction.complete``: ``interaction.status`` (``completed``,
  ``requires_action``: the client runs the function calls, ``incomplete``,
  ``failed``, ``cancelled``) and ``interaction.usage`` (``total_input_tokens``,
  ``total_output_tokens``, ``total_thought_tokens``): the end marker;
- ``error``: an error event.

Read as far as the API's reference names these fields (the API is in beta).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .common import as_dict, as_int, as_str, objects
from .model import Event, FinishReason, WireEvent

STATUS: dict[str, FinishReason] = {
    "completed": "stop",
    "requires_action": "tool_calls",
    "incomplete": "length",
    "failed": "error",
    "cancelled": "other",
}


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    called = False
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        t = as_str(v.get("event_type")) or w.type
        idx = as_int(v.get("index"))
        if t == "interaction.start":
            out.append(Event(at, "start", role="assistant",
                             id=as_str(as_dict(v.get("interaction")).get("id")), source=src))
        elif t == "content.delta":
            d = as_dict(v.get("delta"))
            dt = as_str(d.get("type"))
            if dt == "text" and (text := as_str(d.get("text"))):
                out.append(Event(at, "text", text=text, source=src))
            elif dt in ("thought_summary", "thought"):
                text = as_str(d.get("text")) or as_str(as_dict(d.get("content")).get("text"))
                if text:
                    out.append(Event(at, "reasoning", text=text, index=idx, source=src))
            elif dt == "thought_signature" and (sig := as_str(d.get("signature"))):
                out.append(Event(at, "reasoning", signature=sig, index=idx, source=src))
            elif dt == "function_call":
                called = True
                args = d.get("arguments")
                out.append(Event(at, "tool_call", index=idx, id=as_str(d.get("id")),
                                 name=as_str(d.get("name")),
                                 arguments=args if isinstance(args, str)
                                 else json.dumps(args if args is not None else {},
                                                 ensure_ascii=False),
                                 source=src))
        elif t == "interaction.complete":
            inter = as_dict(v.get("interaction"))
            raw = as_str(inter.get("status")) or "completed"
            reason = STATUS.get(raw, "other")
            if reason == "stop" and called:
                reason = "tool_calls"
            out.append(Event(at, "finish", reason=reason, raw_reason=raw, source=src))
            u = as_dict(inter.get("usage"))
            if u:
                out.append(Event(at, "usage", prompt_tokens=as_int(u.get("total_input_tokens")),
                                 completion_tokens=as_int(u.get("total_output_tokens")),
                                 reasoning_tokens=as_int(u.get("total_thought_tokens")
                                                         if "total_thought_tokens" in u
                                                         else u.get("total_reasoning_tokens")),
                                 source=src))
            out.append(Event(at, "done", source=src))
    return out
