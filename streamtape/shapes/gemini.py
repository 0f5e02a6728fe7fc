"""Gemini API and Vertex AI ``streamGenerateContent``: each event a whole
``GenerateContentResponse``.

On two wires: SSE with ``?alt=sse`` (Vertex AI writes it with CRLF line endings),
or without it one JSON array streamed element by element (:mod:`.jsonarray`,
whose closing ``]`` is the only end marker; over SSE there is none: the end of the
body ends the stream, after the candidate's ``finishReason``).

Read as the servers send them:

- ``candidates[].content.parts[]``: ``text`` is answer text, unless the part says
  ``thought: true`` (then it is reasoning, a summary of the model's thinking);
  ``functionCall`` (``name``, ``args`` as a whole object, an ``id`` on newer
  servers) is one tool call, never in fragments; ``thoughtSignature`` on any part
  is the opaque signature of the thinking so far (each kept as a reasoning
  signature, in order);
  ``executableCode`` / ``codeExecutionResult`` / ``inlineData`` are not text;
- ``candidates[].index`` is the choice (``candidateCount`` > 1);
- ``finishReason``: ``STOP`` (``tool_calls`` when the candidate called a function),
  ``MAX_TOKENS``, ``SAFETY`` / ``RECITATION`` / ``BLOCKLIST`` /
  ``PROHIBITED_CONTENT`` / ``SPII`` / ``IMAGE_SAFETY`` (a content filter),
  ``MALFORMED_FUNCTION_CALL`` (an error), the raw value kept;
- ``promptFeedback.blockReason``: the prompt itself was blocked (no candidates): a
  content-filter finish;
- ``usageMetadata`` (on every event, growing): ``promptTokenCount``,
  ``candidatesTokenCount`` and ``thoughtsTokenCount``. Gemini counts the thinking
  apart from the answer; in the common terms completion tokens include the
  reasoning (as OpenAI counts them), so completion = candidates + thoughts, and
  reasoning = thoughts;
- an ``{"error": {"code", "message", "status"}}`` element is an error event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .common import as_dict, as_int, as_str, objects
from .model import Event, EventKind, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
}


def finish_reason(raw: str, called: bool) -> FinishReason:
    r = REASONS.get(raw, "other")
    return "tool_calls" if r == "stop" and called else r


def usage_event(w: WireEvent, meta: object) -> Event | None:
    """``usageMetadata`` (Gemini's names) as a usage event in the common terms."""
    if not isinstance(meta, dict):
        return None
    pt = as_int(meta.get("promptTokenCount"))
    cand = as_int(meta.get("candidatesTokenCount"))
    thoughts = as_int(meta.get("thoughtsTokenCount"))
    completion = None if cand is None and thoughts is None else (cand or 0) + (thoughts or 0)
    return Event(w.at_ns, "usage", prompt_tokens=pt, completion_tokens=completion,
                 reasoning_tokens=thoughts, source=w.index)


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    started: set[int] = set()
    calls: dict[int, int] = {}  # candidate -> function calls so far
    sigs: dict[int, int] = {}  # candidate -> thought signatures so far
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        cands = v.get("candidates")
        for pos, cand in enumerate(cands if isinstance(cands, list) else ()):
            if not isinstance(cand, dict):
                continue
            idx = as_int(cand.get("index"))
            ci = idx if idx is not None else pos
            choice = ci if ci else None
            content = as_dict(cand.get("content"))
            if ci not in started and (content or cand.get("finishReason")):
                started.add(ci)
                role = as_str(content.get("role")) or "model"
                out.append(Event(at, "start", role="assistant" if role == "model" else role,
                                 source=src, choice=choice))
            parts = content.get("parts")
            for part in parts if isinstance(parts, list) else ():
                if not isinstance(part, dict):
                    continue
                text = as_str(part.get("text"))
                if text:
                    kind: EventKind = "reasoning" if part.get("thought") is True else "text"
                    out.append(Event(at, kind, text=text, source=src, choice=choice))
                fc = part.get("functionCall")
                if isinstance(fc, dict):
                    n = calls.get(ci, 0)
                    calls[ci] = n + 1
                    args = fc.get("args")
                    out.append(Event(at, "tool_call", index=n, id=as_str(fc.get("id")),
                                     name=as_str(fc.get("name")),
                                     arguments=json.dumps(args if args is not None else {},
                                                          ensure_ascii=False),
                                     source=src, choice=choice))
                sig = as_str(part.get("thoughtSignature"))
                if sig:  # one per part that carries one: each kept, in order
                    sigs[ci] = sigs.get(ci, 0) + 1
                    out.append(Event(at, "reasoning", signature=sig, index=sigs[ci] - 1,
                                     source=src, choice=choice))
            raw = as_str(cand.get("finishReason"))
            if raw and raw != "FINISH_REASON_UNSPECIFIED":
                out.append(Event(at, "finish", reason=finish_reason(raw, bool(calls.get(ci))),
                                 raw_reason=raw, source=src, choice=choice))
        feedback = as_dict(v.get("promptFeedback"))
        block = as_str(feedback.get("blockReason"))
        if block:
            out.append(Event(at, "finish", reason="content_filter", raw_reason=block, source=src))
        u = usage_event(w, v.get("usageMetadata"))
        if u is not None:
            out.append(u)
    return out
