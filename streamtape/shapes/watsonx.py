"""IBM watsonx.ai ``/ml/v1/text/generation_stream``: SSE events whose data holds
``results[]`` (``generated_text``: this event's text; ``generated_token_count`` and
``input_token_count``: the counts so far; ``stop_reason``: ``not_finished`` until the
last, then ``eos_token``, ``stop_sequence``, ``max_tokens``, ``token_limit``,
``time_limit``, ``cancelled`` or ``error``). An error is ``{"errors": [{"code",
"message"}], "status_code": ...}``. (watsonx's ``/text/chat_stream`` is OpenAI chat.)
"""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_int, as_str, objects
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {
    "eos_token": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "token_limit": "length",
    "time_limit": "length",
    "cancelled": "other",
    "error": "error",
}


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    started = False
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        errors = v.get("errors")
        if isinstance(errors, list) and errors:
            first = errors[0]
            out.append(Event(at, "error", error=first if isinstance(first, dict) else str(first),
                             source=src))
            continue
        results = v.get("results")
        for r in results if isinstance(results, list) else ():
            if not isinstance(r, dict):
                continue
            if not started:
                started = True
                out.append(Event(at, "start", role="assistant", source=src))
            if text := as_str(r.get("generated_text")):
                out.append(Event(at, "text", text=text, source=src))
            raw = as_str(r.get("stop_reason"))
            if raw and raw != "not_finished":
                out.append(Event(at, "finish", reason=REASONS.get(raw, "other"), raw_reason=raw,
                                 source=src))
                out.append(Event(at, "usage", prompt_tokens=as_int(r.get("input_token_count")),
                                 completion_tokens=as_int(r.get("generated_token_count")),
                                 source=src))
                out.append(Event(at, "done", source=src))
    return out
