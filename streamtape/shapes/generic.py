"""Generic wires without a known format: each event's data becomes a text event."""

from __future__ import annotations

from collections.abc import Sequence

from .common import done_event, error_event
from .model import Event, WireEvent


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w in wires:
        if w.done:
            out.append(done_event(w))
            continue
        err = error_event(w)
        if err is not None:
            out.append(err)
        elif w.data:
            out.append(Event(w.at_ns, "text", text=w.data, source=w.index))
    return out
