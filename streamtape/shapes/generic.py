"""Generic wires without a known format.

An unknown format is said to be unknown, not guessed at: only an event whose data
is plain text (not JSON) becomes text, since nothing tells what a JSON event's
answer would be; its raw JSON is never passed off as the answer. Done markers
(``[DONE]``, the JSON array's ``]``) and ``{"error": ...}`` objects are read as in
every format.
"""

from __future__ import annotations

from collections.abc import Sequence

from .common import done_event, error_event, stream_failure
from .model import Event, WireEvent


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w in wires:
        if w.done:
            out.append(done_event(w))
            continue
        err = stream_failure(w) or error_event(w)
        if err is not None:
            out.append(err)
        elif w.data and not w.valid and not w.headers:
            out.append(Event(w.at_ns, "text", text=w.data, source=w.index))
    return out
