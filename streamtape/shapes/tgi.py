"""Text Generation Inference ``/generate_stream``: one ``token`` per event, special tokens
flagged (kept out of the text), ``generated_text`` and ``details`` on the last event."""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_int, as_str, objects
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {"eos_token": "stop", "stop_sequence": "stop", "length": "length"}


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        tok = v.get("token")
        if isinstance(tok, dict):
            text = as_str(tok.get("text"))
            if text:
                special = tok.get("special") is True
                out.append(Event(at, "text", text=text, special=True if special else None,
                                 index=as_int(v.get("index")), id=_s(tok.get("id")), source=src))
        details = v.get("details")
        if isinstance(details, dict) or v.get("generated_text") is not None:
            details = details if isinstance(details, dict) else {}
            raw = as_str(details.get("finish_reason"))
            out.append(Event(at, "finish", reason=REASONS.get(raw or "", "other"), raw_reason=raw,
                             source=src))
            gen = as_int(details.get("generated_tokens"))
            prompt = details.get("prefill")
            pt = len(prompt) if isinstance(prompt, list) and prompt else None
            if gen is not None or pt is not None:
                out.append(Event(at, "usage", prompt_tokens=pt, completion_tokens=gen, source=src))
            out.append(Event(at, "done", source=src))
    return out


def _s(v: object) -> str | None:
    return None if v is None else str(v)
