"""Helpers shared by the normalizers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .model import Event, WireEvent


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def as_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def as_dict(v: Any) -> dict[str, Any]:
    """``v`` when it is a JSON object, else an empty one (so ``.get`` always works)."""
    return v if isinstance(v, dict) else {}


def ms_to_ns(v: Any) -> int | None:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return round(v * 1_000_000)
    return None


def error_event(w: WireEvent) -> Event | None:
    """An ``{"error": ...}`` object (any format) as an error event."""
    v = w.value
    if isinstance(v, dict):
        err = v.get("error")
        if err is not None and err is not False:
            if isinstance(err, dict | str):
                return Event(w.at_ns, "error", error=err, source=w.index)
            return Event(w.at_ns, "error", error=str(err), source=w.index)
        if v.get("type") == "error" or w.type == "error":
            return Event(w.at_ns, "error", error=v, source=w.index)
    elif w.type == "error":
        return Event(w.at_ns, "error", error=w.data, source=w.index)
    return None


def header(w: WireEvent, name: str) -> str | None:
    """An event-stream message's header as text (None when it has none of that name)."""
    for k, v in w.headers:
        if k == name:
            return v if isinstance(v, str) else str(v)
    return None


def stream_failure(w: WireEvent) -> Event | None:
    """An AWS event-stream exception or error message as an error event (``type``: the
    exception type or error code; ``message``: what the payload or the headers say),
    else None."""
    mt = header(w, ":message-type")
    if mt not in ("exception", "error"):
        return None
    v = as_dict(w.value)
    if mt == "exception":
        msg = as_str(v.get("message")) or as_str(v.get("Message")) or w.data
    else:
        msg = header(w, ":error-message") or w.data
    return Event(w.at_ns, "error", error={"type": w.type or mt, "message": msg}, source=w.index)


def done_event(w: WireEvent) -> Event:
    return Event(w.at_ns, "done", source=w.index)


def objects(wires: Iterable[WireEvent], out: list[Event]) -> Iterator[tuple[WireEvent, dict[str, Any]]]:
    """The JSON-object events of a stream, for a normalizer's own fields.

    The parts every format shares are handled here: a done marker
    (``data: [DONE]``) and an error object become events in ``out``, and
    anything that is not a JSON object is skipped.
    """
    for w in wires:
        if w.done:
            out.append(done_event(w))
            continue
        err = error_event(w)
        if err is not None:
            out.append(err)
            continue
        if isinstance(w.value, dict):
            yield w, w.value
