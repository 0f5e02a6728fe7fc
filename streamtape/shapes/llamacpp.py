"""llama.cpp native ``/completion`` SSE: ``content``, ``stop``, and the end reason either
as the newer ``stop_type`` (eos / word / limit) or the older ``stopped_*`` booleans."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .common import as_dict, as_int, as_str, ms_to_ns, objects
from .model import Event, FinishReason, WireEvent

STOP_TYPES: dict[str, FinishReason] = {"eos": "stop", "word": "stop", "limit": "length", "none": "other"}


def _reason(v: dict[str, Any]) -> tuple[FinishReason, str | None]:
    st = as_str(v.get("stop_type"))
    if st is not None:
        return STOP_TYPES.get(st, "other"), st
    if v.get("stopped_limit") is True:
        return "length", "stopped_limit"
    if v.get("stopped_word") is True:
        return "stop", "stopped_word"
    if v.get("stopped_eos") is True:
        return "stop", "stopped_eos"
    return "other", None


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        content = as_str(v.get("content"))
        if content:
            out.append(Event(at, "text", text=content, source=src))
        if v.get("stop") is True:
            reason, raw = _reason(v)
            out.append(Event(at, "finish", reason=reason, raw_reason=raw, source=src))
            timings = as_dict(v.get("timings"))
            durations = {}
            for key, name in (("prompt_ms", "prompt_eval_duration"),
                              ("predicted_ms", "eval_duration")):
                ns = ms_to_ns(timings.get(key))
                if ns is not None:
                    durations[name] = ns
            out.append(Event(at, "usage", prompt_tokens=as_int(v.get("tokens_evaluated")),
                             completion_tokens=as_int(v.get("tokens_predicted")),
                             durations=durations, source=src))
            out.append(Event(at, "done", source=src))
    return out
