"""OpenAI chat completions chunks (``chat.completion.chunk``), as sent by OpenAI,
vLLM, llama.cpp, TGI, Ollama, DeepSeek and OpenRouter on ``/v1/chat/completions``.

Read as servers send them, not as the reference says:

- every choice is read (``n > 1`` streams interleave ``choices[].index`` 0..n-1),
  each event keeps its choice;
- a choice's structure decides what it is, not the chunk's ``object`` label:
  ``choices[].delta`` is chat, ``choices[].text`` is a legacy completion (some
  OpenAI-compatible servers label chat deltas ``"object": "text_completion"``, and
  the legacy completions normalizer is this one);
- reasoning beside the answer: ``delta.reasoning`` (vLLM 0.11+, Ollama's /v1,
  OpenRouter), else ``delta.reasoning_content`` (DeepSeek, llama.cpp, older vLLM),
  else OpenRouter's typed ``delta.reasoning_details``; its encrypted blocks are kept
  as redacted reasoning. Either field may be null or absent on any chunk;
- ``delta.refusal`` is a refusal, not answer text;
- ``logprobs`` (and ``obfuscation``, ``timings``, ``system_fingerprint``...) are
  not read, whatever their shape.

The OpenAI-compatible hosts' quirks: Azure OpenAI's first chunk has empty
``choices`` and ``prompt_filter_results`` (no event), its choices carry
``content_filter_results`` (not text) and a filtered answer ends with
``finish_reason: content_filter``; Groq sends the usage in ``x_groq.usage``;
DeepSeek's ``reasoning_content`` and ``: keep-alive`` comments, OpenRouter's
``: OPENROUTER PROCESSING`` comments (both counted as keep-alives) and its
``data: {"error": ...}`` after the 200 (an error event); Mistral and xAI send the
reference chunks (Mistral's ``tool_calls`` come whole, in one chunk).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

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
    """A usage object (chat, completions or Responses names) as a usage event."""
    if not isinstance(usage, dict):
        return None
    details = as_dict(usage.get("completion_tokens_details") or usage.get("output_tokens_details"))
    return Event(
        w.at_ns,
        "usage",
        prompt_tokens=as_int(usage.get("prompt_tokens", usage.get("input_tokens"))),
        completion_tokens=as_int(usage.get("completion_tokens", usage.get("output_tokens"))),
        reasoning_tokens=as_int(details.get("reasoning_tokens")),
        source=w.index,
    )


def _reasoning_events(w: WireEvent, delta: dict[str, Any], ci: int | None) -> list[Event]:
    out: list[Event] = []
    text = as_str(delta.get("reasoning")) or as_str(delta.get("reasoning_content"))
    details = delta.get("reasoning_details")
    for d in details if isinstance(details, list) else ():
        if not isinstance(d, dict):
            continue
        t = d.get("type")
        if t == "reasoning.encrypted" and (data := as_str(d.get("data"))):
            out.append(Event(w.at_ns, "reasoning", redacted=data, source=w.index, choice=ci))
        elif text is None:  # the plain field, when present, already says the same
            piece = as_str(d.get("text")) if t == "reasoning.text" else (
                as_str(d.get("summary")) if t == "reasoning.summary" else None)
            if piece:
                out.append(Event(w.at_ns, "reasoning", text=piece, source=w.index, choice=ci))
    if text:
        out.insert(0, Event(w.at_ns, "reasoning", text=text, source=w.index, choice=ci))
    return out


def _delta_events(w: WireEvent, delta: dict[str, Any], ci: int | None) -> list[Event]:
    out: list[Event] = []
    role = as_str(delta.get("role"))
    if role:
        out.append(Event(w.at_ns, "start", role=role, source=w.index, choice=ci))
    out.extend(_reasoning_events(w, delta, ci))
    content = as_str(delta.get("content"))
    if content:
        out.append(Event(w.at_ns, "text", text=content, source=w.index, choice=ci))
    refusal = as_str(delta.get("refusal"))
    if refusal:
        out.append(Event(w.at_ns, "refusal", text=refusal, source=w.index, choice=ci))
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
    return out


def _with_choices(wires: Sequence[WireEvent]) -> list[WireEvent]:
    """The events, with an error chunk that also carries choices read twice: OpenRouter
    ends a failed stream with ``{"error": {...}, "choices": [{"finish_reason": "error"}]}``,
    an error and a finish."""
    out: list[WireEvent] = []
    for w in wires:
        v = w.value
        out.append(w)
        if isinstance(v, dict) and v.get("error") and isinstance(v.get("choices"), list):
            out.append(dataclasses.replace(w, value={"choices": v["choices"]}))
    return out


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w, v in objects(_with_choices(wires), out):
        choices = v.get("choices")
        for ch in choices if isinstance(choices, list) else ():
            if not isinstance(ch, dict):
                continue
            ci = as_int(ch.get("index"))
            delta = ch.get("delta")
            if isinstance(delta, dict):
                out.extend(_delta_events(w, delta, ci))
            elif text := as_str(ch.get("text")):  # a legacy completion choice
                out.append(Event(w.at_ns, "text", text=text, source=w.index, choice=ci))
            raw = as_str(ch.get("finish_reason"))
            if raw:
                out.append(Event(w.at_ns, "finish", reason=finish_reason(raw), raw_reason=raw,
                                 source=w.index, choice=ci))
        u = usage_event(w, v.get("usage"))
        if u is None:  # Groq: the usage rides in x_groq on the last chunk
            u = usage_event(w, as_dict(v.get("x_groq")).get("usage"))
        if u is not None:
            out.append(u)
    return out
