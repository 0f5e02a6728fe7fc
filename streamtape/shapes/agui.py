"""AG-UI (Agent User Interaction protocol) run streams: SSE of typed events, one per ``data:``.

An agent streams its run to a front end as ``{"type": "RUN_STARTED", ...}``,
then messages (``TEXT_MESSAGE_START`` / ``_CONTENT`` with a ``delta`` /
``_END``, or ``TEXT_MESSAGE_CHUNK``), tool calls (``TOOL_CALL_START`` with
``toolCallId`` and ``toolCallName``, ``TOOL_CALL_ARGS`` with argument
fragments, ``TOOL_CALL_END``; or ``TOOL_CALL_CHUNK``), state
(``STATE_SNAPSHOT`` / ``STATE_DELTA``, a JSON Patch), and ends with
``RUN_FINISHED`` or ``RUN_ERROR``. Normalized: text, tool calls (one index per
``toolCallId``, in the order they started), ``state`` events carrying
``{"snapshot": ...}`` or ``{"delta": [...]}``, the finish (``stop`` at
``RUN_FINISHED``, ``error`` at ``RUN_ERROR``) and ``done`` at either.

:func:`findings` is what ``check`` adds for a run: a tool call that started
and never ended (its arguments never closed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .common import as_str, objects
from .model import Event, WireEvent

EVENT_TYPES = frozenset({
    "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "STEP_STARTED", "STEP_FINISHED",
    "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_CHUNK", "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT", "STATE_DELTA", "MESSAGES_SNAPSHOT", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA",
    "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END", "REASONING_END", "RAW", "CUSTOM",
})
"""The ``type`` values of AG-UI events (what detection recognises)."""


def is_agui(v: Any) -> bool:
    """Whether one decoded event is an AG-UI event."""
    return isinstance(v, dict) and v.get("type") in EVENT_TYPES and "jsonrpc" not in v


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    calls: dict[str, int] = {}

    def call_index(call_id: str | None) -> int:
        key = call_id or ""
        if key not in calls:
            calls[key] = len(calls)
        return calls[key]

    for w, v in objects(wires, out):
        at, src, t = w.at_ns, w.index, v.get("type")
        if t == "TEXT_MESSAGE_START":
            out.append(Event(at, "start", role=as_str(v.get("role")) or "assistant", id=as_str(v.get("messageId")),
                             source=src))
        elif t in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
            if delta := as_str(v.get("delta")):
                out.append(Event(at, "text", text=delta, id=as_str(v.get("messageId")), source=src))
        elif t == "REASONING_MESSAGE_CONTENT":
            if delta := as_str(v.get("delta")):
                out.append(Event(at, "reasoning", text=delta, id=as_str(v.get("messageId")), source=src))
        elif t in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_CHUNK"):
            cid = as_str(v.get("toolCallId"))
            out.append(Event(at, "tool_call", index=call_index(cid), id=cid,
                             name=as_str(v.get("toolCallName")),
                             arguments=as_str(v.get("delta")) or "", source=src))
        elif t == "STATE_SNAPSHOT":
            out.append(Event(at, "state", state={"snapshot": v.get("snapshot")}, source=src))
        elif t == "STATE_DELTA":
            out.append(Event(at, "state", state={"delta": v.get("delta")}, source=src))
        elif t == "RUN_FINISHED":
            out.append(Event(at, "finish", reason="stop", raw_reason="RUN_FINISHED", source=src))
            out.append(Event(at, "done", source=src))
        elif t == "RUN_ERROR":
            err: dict[str, Any] = {k: v[k] for k in ("message", "code") if k in v}
            out.append(Event(at, "error", error=err or "RUN_ERROR", source=src))
            out.append(Event(at, "finish", reason="error", raw_reason="RUN_ERROR", source=src))
            out.append(Event(at, "done", source=src))
    return out


def findings(wires: Sequence[WireEvent]) -> list[tuple[str, str, int | None]]:
    """``(code, message, event)`` for a run's own problems: ``tool-call-open`` for a tool
    call that started (``TOOL_CALL_START``) and never ended (no ``TOOL_CALL_END``)."""
    open_calls: dict[str, tuple[str | None, int, list[str]]] = {}
    for w in wires:
        v = w.value
        if not isinstance(v, dict):
            continue
        cid = as_str(v.get("toolCallId")) or ""
        t = v.get("type")
        if t == "TOOL_CALL_START":
            open_calls[cid] = (as_str(v.get("toolCallName")), w.index, [])
        elif t == "TOOL_CALL_ARGS" and cid in open_calls:
            open_calls[cid][2].append(as_str(v.get("delta")) or "")
        elif t == "TOOL_CALL_END":
            open_calls.pop(cid, None)
    out: list[tuple[str, str, int | None]] = []
    for cid, (name, index, args) in open_calls.items():
        joined = "".join(args)
        tail = joined[-40:] if len(joined) > 40 else joined
        out.append(("tool-call-open",
                    f"tool call {cid} ({name}) started at event {index} and never ended "
                    f"(no TOOL_CALL_END): its arguments stop at {tail!r}", index))
    return out
