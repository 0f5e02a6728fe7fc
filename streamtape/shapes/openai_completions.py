"""OpenAI legacy completions (``text_completion``, ``choices[].text``) on ``/v1/completions``."""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_int, as_str, objects
from .model import Event, WireEvent
from .openai_chat import finish_reason, usage_event


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w, v in objects(wires, out):
        choices = v.get("choices")
        for ch in choices if isinstance(choices, list) else ():
            if not isinstance(ch, dict):
                continue
            ci = as_int(ch.get("index"))
            text = as_str(ch.get("text"))
            if text:
                out.append(Event(w.at_ns, "text", text=text, source=w.index, choice=ci))
            raw = as_str(ch.get("finish_reason"))
            if raw:
                out.append(Event(w.at_ns, "finish", reason=finish_reason(raw), raw_reason=raw,
                                 source=w.index, choice=ci))
        u = usage_event(w, v.get("usage"))
        if u is not None:
            out.append(u)
    return out
