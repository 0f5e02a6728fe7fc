"""The Gemini Interactions API (``POST /v1beta/interactions`` with ``stream``): SSE
events typed by their ``event_type`` (the ``event:`` line repeats it).

The stream as google-genai 3.x types it (``InteractionSSEEvent``, the union its
``client.interactions.create(..., stream=True)`` yields):

- ``interaction.created``: ``interaction`` (``id``, ``status``, ``model``);
- ``interaction.status_update``: ``interaction_id``, ``status``, an optional ``usage``;
- ``step.start`` (``index``, ``step``), ``step.delta`` (``index``, ``delta``, an optional
  ``metadata.total_usage``), ``step.stop`` (``index``, optional ``usage`` and
  ``step_usage``). A step's ``type``: ``thought`` (``summary``, ``signature``),
  ``model_output`` (``content``, ``error``), ``function_call`` (``id``, ``name``,
  ``arguments`` as an object), and server-side tool steps. A delta's ``type``:
  ``text`` (the answer; reasoning inside a ``thought`` step), ``thought_summary``
  (``content``: ``{"type": "text", "text": ...}``), ``thought_signature``
  (``signature``), ``arguments_delta`` (``arguments``: a fragment of the call's JSON
  text), and the media and tool deltas, which carry no text;
- ``interaction.completed``: ``interaction`` with its final ``status`` and ``usage``
  (``total_input_tokens``, ``total_output_tokens``, ``total_thought_tokens``): the end
  marker. ``status``: ``completed``; ``requires_action`` (the client runs the function
  calls); ``incomplete``, ``budget_exceeded`` and ``requires_continuation`` (cut short;
  the SDK's ``automatic_continuation`` asks for the rest); ``failed``; ``cancelled``;
- ``error``: ``error`` (``code``, ``message``).

A delta's meaning depends on its step (a ``text`` delta in a ``thought`` step is
thinking), so the step types are kept by index while the stream is read.

The API's first beta revision is read too: ``interaction.start``,
``content.start`` / ``content.delta`` / ``content.stop`` (a ``function_call`` delta with
the whole ``arguments`` object) and ``interaction.complete``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .common import as_dict, as_int, as_str, objects
from .model import Event, FinishReason, WireEvent

STATUS: dict[str, FinishReason] = {
    "completed": "stop",
    "requires_action": "tool_calls",
    "incomplete": "length",
    "budget_exceeded": "length",
    "requires_continuation": "length",
    "failed": "error",
    "cancelled": "other",
}

START = ("interaction.created", "interaction.start")
COMPLETE = ("interaction.completed", "interaction.complete")
END_MARKERS = COMPLETE
"""The final events: ``interaction.completed`` (``interaction.complete`` in the first beta)."""


def _arguments(args: Any) -> str:
    """A call's arguments as JSON text: an object is dumped, an empty one (a call whose
    arguments follow in ``arguments_delta`` fragments) is no text at all."""
    if isinstance(args, str):
        return args
    if args is None or args == {}:
        return ""
    return json.dumps(args, ensure_ascii=False)


def _usage(at: int, u: dict[str, Any], src: int) -> Event:
    thought = u.get("total_thought_tokens") if "total_thought_tokens" in u else u.get("total_reasoning_tokens")
    return Event(at, "usage", prompt_tokens=as_int(u.get("total_input_tokens")),
                 completion_tokens=as_int(u.get("total_output_tokens")),
                 reasoning_tokens=as_int(thought), source=src)


def _texts(content: Any) -> list[str]:
    """The texts of a content list (or of one content object)."""
    items = content if isinstance(content, list) else [content]
    return [t for c in items if (t := as_str(as_dict(c).get("text")))]


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    called = False
    steps: dict[int | None, str] = {}
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        t = as_str(v.get("event_type")) or w.type
        idx = as_int(v.get("index"))
        if t in START:
            out.append(Event(at, "start", role="assistant",
                             id=as_str(as_dict(v.get("interaction")).get("id")), source=src))
        elif t == "step.start":
            step = as_dict(v.get("step"))
            kind = as_str(step.get("type")) or ""
            steps[idx] = kind
            if kind == "function_call":
                called = True
                out.append(Event(at, "tool_call", index=idx, id=as_str(step.get("id")),
                                 name=as_str(step.get("name")),
                                 arguments=_arguments(step.get("arguments")), source=src))
            elif kind == "thought":
                for text in _texts(step.get("summary")):
                    out.append(Event(at, "reasoning", text=text, index=idx, source=src))
                if sig := as_str(step.get("signature")):
                    out.append(Event(at, "reasoning", signature=sig, index=idx, source=src))
            elif kind == "model_output":
                for text in _texts(step.get("content")):
                    out.append(Event(at, "text", text=text, source=src))
                if step.get("error"):
                    out.append(Event(at, "error", error=step["error"], source=src))
        elif t in ("step.delta", "content.delta"):
            d = as_dict(v.get("delta"))
            dt = as_str(d.get("type"))
            if dt == "text" and (piece := as_str(d.get("text"))):
                if steps.get(idx) == "thought":
                    out.append(Event(at, "reasoning", text=piece, index=idx, source=src))
                else:
                    out.append(Event(at, "text", text=piece, source=src))
            elif dt in ("thought_summary", "thought"):
                texts = [s] if (s := as_str(d.get("text"))) else _texts(d.get("content"))
                for text in texts:
                    out.append(Event(at, "reasoning", text=text, index=idx, source=src))
            elif dt == "thought_signature" and (sig := as_str(d.get("signature"))):
                out.append(Event(at, "reasoning", signature=sig, index=idx, source=src))
            elif dt == "arguments_delta":
                called = True
                out.append(Event(at, "tool_call", index=idx, arguments=as_str(d.get("arguments")) or "",
                                 source=src))
            elif dt == "function_call":  # the first beta: the whole call in one delta
                called = True
                out.append(Event(at, "tool_call", index=idx, id=as_str(d.get("id")),
                                 name=as_str(d.get("name")),
                                 arguments=_arguments(d.get("arguments")) or "{}", source=src))
            if u := as_dict(as_dict(v.get("metadata")).get("total_usage")):
                out.append(_usage(at, u, src))
        elif t in ("step.stop", "interaction.status_update"):
            if u := as_dict(v.get("usage")):
                out.append(_usage(at, u, src))
        elif t in COMPLETE:
            inter = as_dict(v.get("interaction"))
            raw = as_str(inter.get("status")) or "completed"
            reason = STATUS.get(raw, "other")
            if reason == "stop" and called:
                reason = "tool_calls"
            if raw == "failed" and not any(e.kind == "error" for e in out):
                # a failure with no error event before it: still an error to report
                out.append(Event(at, "error", error={"status": raw, "message": "the interaction failed"},
                                 source=src))
            out.append(Event(at, "finish", reason=reason, raw_reason=raw, source=src))
            if u := as_dict(inter.get("usage")):
                out.append(_usage(at, u, src))
            out.append(Event(at, "done", source=src))
    return out
