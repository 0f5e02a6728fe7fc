"""Replicate's prediction stream (``GET`` the prediction's ``urls.stream``): plain-text SSE.

``event: output`` events carry the text itself, not JSON (an output holding line
breaks comes as several ``data:`` lines, which SSE joins with ``\\n``);
``event: done`` ends the stream, its data ``{}`` or ``{"reason": "canceled"}`` /
``{"reason": "error"}``; ``event: error`` carries ``{"detail": ...}``. No usage.
"""

from __future__ import annotations

from collections.abc import Sequence

from .common import as_dict, as_str
from .model import Event, FinishReason, WireEvent

REASONS: dict[str, FinishReason] = {"": "stop", "canceled": "other", "error": "error"}


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w in wires:
        at, src = w.at_ns, w.index
        if w.type == "output":
            if w.data:
                out.append(Event(at, "text", text=w.data, source=src))
        elif w.type == "error":
            v = as_dict(w.value)
            out.append(Event(at, "error", error=as_str(v.get("detail")) or v or w.data, source=src))
        elif w.type == "done":
            raw = as_str(as_dict(w.value).get("reason")) or ""
            out.append(Event(at, "finish", reason=REASONS.get(raw, "other"), raw_reason=raw or None,
                             source=src))
            out.append(Event(at, "done", source=src))
    return out
