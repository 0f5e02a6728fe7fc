"""OpenAI Assistants run streams (``POST /v1/threads/{id}/runs`` with ``stream``):
SSE events named ``thread.*``, each with its object as data.

- ``thread.run.created`` and the run's other status events: the run object;
- ``thread.message.delta``: ``delta.content[]`` parts, ``type: text`` with
  ``text.value`` (answer text; ``annotations`` are not text);
- ``thread.run.step.delta``: ``delta.step_details.tool_calls[]`` (``index``, ``id``,
  ``function.name``, ``function.arguments`` in fragments); ``code_interpreter`` and
  ``file_search`` calls are the server's own tools, not the client's;
- the end: ``thread.run.completed`` (``usage``), ``thread.run.requires_action``
  (the client must run the tool calls: finish ``tool_calls``),
  ``thread.run.incomplete`` (``incomplete_details.reason``:
  ``max_completion_tokens`` / ``max_prompt_tokens``: length), ``thread.run.failed``
  (``last_error``: an error), ``thread.run.cancelled``, ``thread.run.expired``;
  then ``event: done`` with ``data: [DONE]``, the end marker;
- ``event: error``: an error event.
"""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_dict, as_int, as_str, objects
from .model import Event, FinishReason, WireEvent
from .openai_chat import usage_event

ENDS: dict[str, FinishReason] = {
    "thread.run.completed": "stop",
    "thread.run.requires_action": "tool_calls",
    "thread.run.incomplete": "length",
    "thread.run.failed": "error",
    "thread.run.cancelled": "other",
    "thread.run.expired": "error",
}


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    started = False
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        t = w.type if w.type.startswith("thread.") else as_str(v.get("object")) or w.type
        if t == "thread.run.created" and not started:
            started = True
            out.append(Event(at, "start", role="assistant", id=as_str(v.get("id")), source=src))
        elif t == "thread.message.delta":
            content = as_dict(v.get("delta")).get("content")
            for part in content if isinstance(content, list) else ():
                if isinstance(part, dict) and part.get("type") == "text":
                    text = as_str(as_dict(part.get("text")).get("value"))
                    if text:
                        out.append(Event(at, "text", text=text, source=src))
        elif t == "thread.run.step.delta":
            details = as_dict(as_dict(v.get("delta")).get("step_details"))
            calls = details.get("tool_calls")
            for pos, tc in enumerate(calls if isinstance(calls, list) else ()):
                if not isinstance(tc, dict) or tc.get("type", "function") != "function":
                    continue
                fn = as_dict(tc.get("function"))
                idx = as_int(tc.get("index"))
                out.append(Event(at, "tool_call", index=idx if idx is not None else pos,
                                 id=as_str(tc.get("id")), name=as_str(fn.get("name")),
                                 arguments=as_str(fn.get("arguments")) or "", source=src))
        elif t in ENDS:
            reason = ENDS[t]
            raw = as_str(v.get("status")) or t.rsplit(".", 1)[-1]
            if t == "thread.run.incomplete":
                raw = as_str(as_dict(v.get("incomplete_details")).get("reason")) or raw
            if t == "thread.run.failed":
                err = v.get("last_error")
                out.append(Event(at, "error", error=err if isinstance(err, dict | str) else raw,
                                 source=src))
            out.append(Event(at, "finish", reason=reason, raw_reason=raw, source=src))
            u = usage_event(w, v.get("usage"))
            if u is not None:
                out.append(u)
    return out
