"""A2A (Agent2Agent) streams: ``message/stream`` answered with SSE of JSON-RPC results.

Each event is a JSON-RPC response whose ``result`` is a Task, a Message, a
status update or an artifact update. Both wire spellings are read:

- protocol 0.3 (``message/stream``): ``result.kind`` is ``task``, ``message``,
  ``status-update`` or ``artifact-update``; states are ``working``,
  ``completed``...;
- protocol 1.0 (``SendStreamingMessage``, a2a-sdk 1.x): ``result`` holds one of
  ``task``, ``message``, ``statusUpdate``, ``artifactUpdate``; states are
  ``TASK_STATE_WORKING``... (read as ``working``).

Normalized: a ``state`` event per task status (``{"task": ID, "state": S}``
with the status message's text when there is one), the text of messages and
artifacts as ``text``, a JSON-RPC ``error`` as an error; a terminal state
finishes the stream (``completed`` is ``stop``, ``failed`` is ``error``,
others ``other``) and is its ``done``.

:func:`findings`: ``task-not-final``, a task whose last state is not final
(left in ``submitted`` or ``working``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .common import as_dict, as_str, objects
from .model import Event, FinishReason, WireEvent

KINDS = {"task": "task", "message": "message", "status-update": "statusUpdate",
         "artifact-update": "artifactUpdate"}
"""0.3's ``kind`` values and the 1.0 key of each."""

FINAL: dict[str, FinishReason] = {"completed": "stop", "failed": "error", "canceled": "other",
                                  "cancelled": "other", "rejected": "other"}
"""Terminal task states and their finish reasons."""

PAUSED = frozenset({"input-required", "auth-required"})
"""States where a task waits on its client: the stream may end there."""


def state_name(raw: Any) -> str | None:
    """``TASK_STATE_INPUT_REQUIRED`` and ``input-required`` both as ``input-required``."""
    s = as_str(raw)
    if s is None:
        return None
    return s.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _item(result: Any) -> tuple[str, dict[str, Any]] | None:
    """The result's kind (0.3 spelling) and object, or None when it is no A2A result."""
    r = as_dict(result)
    kind = r.get("kind")
    if isinstance(kind, str) and kind in KINDS:
        return kind, r
    for k03, k10 in KINDS.items():
        if isinstance(r.get(k10), dict) and len(r) == 1:
            return k03, r[k10]
    return None


def is_a2a(v: Any) -> bool:
    """Whether one decoded event is an A2A streaming result."""
    return isinstance(v, dict) and v.get("jsonrpc") == "2.0" and _item(v.get("result")) is not None


def _texts(message: Any) -> Iterator[str]:
    for p in as_dict(message).get("parts") or []:
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            yield p["text"]


def _status(at: int, src: int, task: str | None, status: Any) -> list[Event]:
    st = as_dict(status)
    state = state_name(st.get("state"))
    if state is None:
        return []
    info: dict[str, Any] = {"task": task, "state": state}
    if text := "".join(_texts(st.get("message"))):
        info["message"] = text
    out = [Event(at, "state", state=info, source=src)]
    if state in FINAL:
        out.append(Event(at, "finish", reason=FINAL[state], raw_reason=state, source=src))
        out.append(Event(at, "done", source=src))
    return out


def normalize(wires: Sequence[WireEvent]) -> list[Event]:
    out: list[Event] = []
    for w, v in objects(wires, out):
        at, src = w.at_ns, w.index
        item = _item(v.get("result"))
        if item is None:
            continue
        kind, obj = item
        if kind == "message":
            if text := "".join(_texts(obj)):
                out.append(Event(at, "text", text=text, id=as_str(obj.get("messageId")), source=src))
        elif kind == "artifact-update":
            art = as_dict(obj.get("artifact"))
            if text := "".join(_texts(art)):
                out.append(Event(at, "text", text=text, id=as_str(art.get("artifactId")), source=src))
        elif kind == "task":
            task = as_str(obj.get("id"))
            for a in obj.get("artifacts") or []:
                if text := "".join(_texts(a)):
                    out.append(Event(at, "text", text=text, id=as_str(as_dict(a).get("artifactId")),
                                     source=src))
            out.extend(_status(at, src, task, obj.get("status")))
        else:  # status-update
            out.extend(_status(at, src, as_str(obj.get("taskId")), obj.get("status")))
    return out


def findings(wires: Sequence[WireEvent]) -> list[tuple[str, str, int | None]]:
    """``task-not-final`` for each task whose last state is neither final nor waiting on the client."""
    last: dict[str, tuple[str, int]] = {}
    for e in normalize(wires):
        if e.kind == "state" and isinstance(e.state, dict):
            last[str(e.state.get("task"))] = (str(e.state.get("state")), e.source or 0)
    return [("task-not-final", f"task {task} left in {state}: the stream ended before a final state "
             "(completed, failed, canceled, rejected)", src)
            for task, (state, src) in last.items() if state not in FINAL and state not in PAUSED]
