"""Amazon Bedrock's streams, on the AWS event stream (:mod:`.eventstream`).

``converse-stream`` (the Converse API, one shape for every model): each message's
``:event-type`` names it and its JSON payload says it (Bedrock pads payloads
with a ``p`` field of filler, not read):

- ``messageStart`` (``role``);
- ``contentBlockStart`` (``contentBlockIndex``, ``start.toolUse``: ``toolUseId``,
  ``name``): a tool call begins;
- ``contentBlockDelta``: ``delta.text`` (answer text), ``delta.toolUse.input``
  (a fragment of the arguments' JSON text), ``delta.reasoningContent`` (``text``:
  reasoning; ``signature``; ``redactedContent``: opaque bytes, base64);
- ``contentBlockStop``;
- ``messageStop`` (``stopReason``: ``end_turn``, ``tool_use``, ``max_tokens``,
  ``stop_sequence``, ``guardrail_intervened``, ``content_filtered``);
- ``metadata`` (``usage``: ``inputTokens``, ``outputTokens``; ``metrics.latencyMs``):
  the last message, Converse's end marker.

``invoke-with-response-stream`` carries the model's own events: each ``chunk``
message's payload is ``{"bytes": "<base64>"}``, the base64 of one JSON event in the
model's own format (Anthropic's ``message_start`` ... ``message_stop`` for Claude,
read by :mod:`.anthropic`). Its last event adds
``amazon-bedrock-invocationMetrics`` (token counts, latencies).

On both, a failure mid-stream is an exception message (``:message-type
exception``, ``:exception-type`` e.g. ``throttlingException``,
``modelStreamErrorException``, ``validationException``; payload
``{"message": ...}``), or an error message (``:message-type error``,
``:error-code`` / ``:error-message`` headers): an error event each.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Sequence

from . import anthropic
from .common import as_dict, as_int, as_str, header, ms_to_ns
from .common import stream_failure as failure
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


def normalize_converse(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w in wires:
        at, src = w.at_ns, w.index
        err = failure(w)
        if err is not None:
            out.append(err)
            continue
        v = w.value
        if not isinstance(v, dict):
            continue
        t = w.type
        idx = as_int(v.get("contentBlockIndex"))
        if t == "messageStart":
            out.append(Event(at, "start", role=as_str(v.get("role")) or "assistant", source=src))
        elif t == "contentBlockStart":
            tu = as_dict(as_dict(v.get("start")).get("toolUse"))
            if tu:
                out.append(Event(at, "tool_call", index=idx, id=as_str(tu.get("toolUseId")),
                                 name=as_str(tu.get("name")), arguments="", source=src))
        elif t == "contentBlockDelta":
            d = as_dict(v.get("delta"))
            if text := as_str(d.get("text")):
                out.append(Event(at, "text", text=text, source=src))
            part = d.get("toolUse")
            if isinstance(part, dict):
                out.append(Event(at, "tool_call", index=idx,
                                 arguments=as_str(part.get("input")) or "", source=src))
            rc = d.get("reasoningContent")
            if isinstance(rc, dict):
                if text := as_str(rc.get("text")):
                    out.append(Event(at, "reasoning", text=text, index=idx, source=src))
                if (sig := as_str(rc.get("signature"))) is not None:
                    out.append(Event(at, "reasoning", signature=sig, index=idx, source=src))
                if (red := as_str(rc.get("redactedContent"))) is not None:
                    out.append(Event(at, "reasoning", redacted=red, index=idx, source=src))
        elif t == "messageStop":
            raw = as_str(v.get("stopReason"))
            if raw:
                out.append(Event(at, "finish", reason=REASONS.get(raw, "other"), raw_reason=raw,
                                 source=src))
        elif t == "metadata":
            u = as_dict(v.get("usage"))
            latency = ms_to_ns(as_dict(v.get("metrics")).get("latencyMs"))
            out.append(Event(at, "usage", prompt_tokens=as_int(u.get("inputTokens")),
                             completion_tokens=as_int(u.get("outputTokens")),
                             durations={"latency": latency} if latency is not None else None,
                             source=src))
            out.append(Event(at, "done", source=src))
    return out


def inner_events(wires: Sequence[WireEvent]) -> list[WireEvent]:
    """The model's own events out of ``chunk`` messages (base64 ``bytes``), each keeping
    the index, time and range of the message it came in; other messages as they are."""
    out: list[WireEvent] = []
    for w in wires:
        v = w.value
        b64 = as_str(v.get("bytes")) if isinstance(v, dict) and w.type == "chunk" else None
        if b64 is None:
            out.append(w)
            continue
        try:
            text = base64.b64decode(b64, validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            out.append(dataclasses.replace(w, valid=False, value=None))
            continue
        try:
            inner, ok = json.loads(text), True
        except (ValueError, RecursionError):
            inner, ok = None, False
        t = as_str(inner.get("type")) if isinstance(inner, dict) else None
        out.append(dataclasses.replace(w, type=t or "chunk", data=text, value=inner, valid=ok))
    return out


def normalize_invoke(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    inner = inner_events(wires)
    model: list[WireEvent] = []
    for w in inner:
        err = failure(w)
        if err is not None:
            out.append(err)
        elif header(w, ":message-type") in (None, "event"):
            model.append(w)
    out.extend(anthropic.normalize(model))
    for w in model:  # Bedrock's own counts ride on the last event
        metrics = as_dict(w.value).get("amazon-bedrock-invocationMetrics") if isinstance(
            w.value, dict) else None
        if isinstance(metrics, dict):
            latency = ms_to_ns(metrics.get("invocationLatency"))
            first = ms_to_ns(metrics.get("firstByteLatency"))
            durations = {k: d for k, d in (("latency", latency), ("first_byte", first))
                         if d is not None}
            out.append(Event(w.at_ns, "usage", prompt_tokens=as_int(metrics.get("inputTokenCount")),
                             completion_tokens=as_int(metrics.get("outputTokenCount")),
                             durations=durations or None, source=w.index))
    out.sort(key=lambda e: (e.source if e.source is not None else -1))
    return out
