"""OpenAI chat completions chunks (``chat.completion.chunk``), as sent by OpenAI,
vLLM, llama.cpp, TGI and Ollama on ``/v1/chat/completions``."""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_dict, as_int, as_str, objects
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


def finish_reason(raw: str) -> FinishReason:
    return REASONS.get(raw, "other")


def usage_event(w: WireEvent, usage: object) -> Event | None:
    if not isinstance(usage, dict):
        return None
    return Event(
        w.at_ns,
        "usage",
        prompt_tokens=as_int(usage.get("prompt_tokens", usage.get("input_tokens"))),
        completion_tokens=as_int(usage.get("completion_tokens", usage.get("output_tokens"))),
        source=w.index,
    )


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w, v in objects(wires, out):
        choices = v.get("choices")
        for ch in choices if isinstance(choices, list) else ():
            if not isinstance(ch, dict):
                continue
            ci = as_int(ch.get("index"))
            delta = ch.get("delta")
            if isinstance(delta, dict):
                role = as_str(delta.get("role"))
                if role:
                    out.append(Event(w.at_ns, "start", role=role, source=w.index, choice=ci))
                reasoning = as_str(delta.get("reasoning_content")) or as_str(delta.get("reasoning"))
                if reasoning:
                    out.append(Event(w.at_ns, "text", text=reasoning, channel="reasoning",
                                     source=w.index, choice=ci))
                content = as_str(delta.get("content"))
                if content:
                    out.append(Event(w.at_ns, "text", text=content, source=w.index, choice=ci))
                tcs = delta.get("tool_calls")
                for pos, tc in enumerate(tcs if isinstance(tcs, list) else ()):
                    if not isinstance(tc, dict):
                        continue
                    fn = as_dict(tc.get("function"))
                    idx = as_int(tc.get("index"))
                    out.append(Event(
                        w.at_ns, "tool_call",
                        index=idx if idx is not None else pos,
                        id=as_str(tc.get("id")),
                        name=as_str(fn.get("name")),
                        arguments=as_str(fn.get("arguments")) or "",
                        source=w.index, choice=ci,
                    ))
                fc = delta.get("function_call")
                if isinstance(fc, dict):
                    out.append(Event(w.at_ns, "tool_call", index=0, name=as_str(fc.get("name")),
                                     arguments=as_str(fc.get("arguments")) or "",
                                     source=w.index, choice=ci))
            raw = as_str(ch.get("finish_reason"))
            if raw:
                out.append(Event(w.at_ns, "finish", reason=finish_reason(raw), raw_reason=raw,
                                 source=w.index, choice=ci))
        u = usage_event(w, v.get("usage"))
        if u is not None:
            out.append(u)
    return out
