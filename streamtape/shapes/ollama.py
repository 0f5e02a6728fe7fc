"""Ollama native NDJSON: ``/api/chat`` (``message.content``) and ``/api/generate`` (``response``).

With ``think``, the reasoning comes first as ``message.thinking`` (chat) or a
top-level ``thinking`` (generate), on lines whose ``content``/``response`` is "".
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .common import as_int, as_str, objects
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length"}
DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    started = False
    n_calls = 0
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        msg = v.get("message")
        if isinstance(msg, dict):
            role = as_str(msg.get("role"))
            if role and not started:
                out.append(Event(at, "start", role=role, source=src))
            started = True
            thinking = as_str(msg.get("thinking"))
            if thinking:
                out.append(Event(at, "reasoning", text=thinking, source=src))
            content = as_str(msg.get("content"))
            if content:
                out.append(Event(at, "text", text=content, source=src))
            calls = msg.get("tool_calls")
            for tc in calls if isinstance(calls, list) else ():
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict):
                    continue
                args = fn.get("arguments")
                idx = as_int(fn.get("index"))
                out.append(Event(
                    at, "tool_call", index=idx if idx is not None else n_calls,
                    id=as_str(tc.get("id")), name=as_str(fn.get("name")),
                    arguments=args if isinstance(args, str)
                    else json.dumps(args, ensure_ascii=False) if args is not None else "",
                    source=src,
                ))
                n_calls += 1
        else:
            thinking = as_str(v.get("thinking"))
            if thinking:
                out.append(Event(at, "reasoning", text=thinking, source=src))
            text = as_str(v.get("response"))
            if text:
                out.append(Event(at, "text", text=text, source=src))
        if v.get("done") is True:
            raw = as_str(v.get("done_reason"))
            reason = REASONS.get(raw, "other") if raw else "stop"
            if n_calls and reason == "stop":
                reason = "tool_calls"
            out.append(Event(at, "finish", reason=reason, raw_reason=raw, source=src))
            durations = {k: d for k in DURATIONS if (d := as_int(v.get(k))) is not None}
            pt, ct = as_int(v.get("prompt_eval_count")), as_int(v.get("eval_count"))
            if pt is not None or ct is not None or durations:
                out.append(Event(at, "usage", prompt_tokens=pt, completion_tokens=ct,
                                 durations=durations, source=src))
            out.append(Event(at, "done", source=src))
    return out
