"""Agent event streams made by the protocols' own packages, served by a scripted upstream.

- AG-UI: events built from ``ag_ui.core``'s models and encoded by
  ``ag_ui.encoder.EventEncoder`` (what an AG-UI agent server writes);
- A2A: ``SendStreamingMessage`` results built from a2a-sdk's protobuf types
  (``a2a.types.a2a_pb2``) and written as the SDK's JSON (``MessageToDict``),
  each a JSON-RPC response echoing the request's id, as an A2A server sends them.

:func:`agent_routes` gives the routes of a :class:`tests.support.servers.ScriptedServer`:
``/agui/run`` (a whole run), ``/agui/cut`` (a run that stops inside a tool call, with
no ``RUN_FINISHED``), ``/a2a`` (a task to ``completed``), ``/a2a/stuck`` (a task left
in ``working``).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import a2a_pb2 as a2a
from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from google.protobuf import json_format

from tests.support.servers import SSE_HEADERS, Conn, Handler, Received

GAP_S = 0.01

AGUI_RUN: list[BaseEvent] = [
    RunStartedEvent(thread_id="t1", run_id="r1"),
    StateSnapshotEvent(snapshot={"step": "plan", "items": []}),
    TextMessageStartEvent(message_id="m1", role="assistant"),
    TextMessageContentEvent(message_id="m1", delta="Looking up "),
    TextMessageContentEvent(message_id="m1", delta="the café"),
    TextMessageEndEvent(message_id="m1"),
    ToolCallStartEvent(tool_call_id="c1", tool_call_name="search", parent_message_id="m1"),
    ToolCallArgsEvent(tool_call_id="c1", delta='{"q": "ca'),
    ToolCallArgsEvent(tool_call_id="c1", delta='fé 5€"}'),
    ToolCallEndEvent(tool_call_id="c1"),
    StateDeltaEvent.model_validate({"type": "STATE_DELTA",
                                    "delta": [{"op": "replace", "path": "/step", "value": "done"}]}),
    RunFinishedEvent(thread_id="t1", run_id="r1"),
]
AGUI_CUT = AGUI_RUN[:8]
"""Up to the first argument fragment of the tool call: no TOOL_CALL_END, no RUN_FINISHED."""


def agui_events(events: list[BaseEvent]) -> list[bytes]:
    encoder = EventEncoder()
    return [encoder.encode(e).encode() for e in events]


def _status(state: int, message: str | None = None) -> a2a.TaskStatus:
    status = a2a.TaskStatus(state=state)  # type: ignore[arg-type]
    if message is not None:
        status.message.CopyFrom(a2a.Message(message_id="s1", role=a2a.ROLE_AGENT,
                                            parts=[a2a.Part(text=message)]))
    return status


A2A_DONE: list[a2a.StreamResponse] = [
    a2a.StreamResponse(task=a2a.Task(id="task-1", context_id="ctx-1",
                                     status=_status(a2a.TASK_STATE_SUBMITTED))),
    a2a.StreamResponse(status_update=a2a.TaskStatusUpdateEvent(
        task_id="task-1", context_id="ctx-1", status=_status(a2a.TASK_STATE_WORKING, "looking it up"))),
    a2a.StreamResponse(artifact_update=a2a.TaskArtifactUpdateEvent(
        task_id="task-1", context_id="ctx-1",
        artifact=a2a.Artifact(artifact_id="a1", parts=[a2a.Part(text="The answer is 42")]))),
    a2a.StreamResponse(status_update=a2a.TaskStatusUpdateEvent(
        task_id="task-1", context_id="ctx-1", status=_status(a2a.TASK_STATE_COMPLETED))),
]
A2A_STUCK = A2A_DONE[:2]
"""Submitted, then working, then the stream ends."""


def a2a_handler(results: list[a2a.StreamResponse]) -> Handler:
    """SSE of JSON-RPC responses to the request's id, one per result."""

    def handle(req: Received, c: Conn) -> None:
        rid: Any = json.loads(req.body or b"{}").get("id")
        events = [b"data: " + json.dumps({"jsonrpc": "2.0", "id": rid,
                                          "result": json_format.MessageToDict(r)}).encode() + b"\n\n"
                  for r in results]
        c.head(200, SSE_HEADERS)
        c.chunked(events, GAP_S)

    return handle


def agui_handler(events: list[BaseEvent]) -> Handler:
    def handle(req: Received, c: Conn) -> None:
        c.head(200, SSE_HEADERS)
        c.chunked(agui_events(events), GAP_S)

    return handle


def agent_routes() -> dict[str, Handler]:
    return {"/agui/run": agui_handler(AGUI_RUN), "/agui/cut": agui_handler(AGUI_CUT),
            "/a2a": a2a_handler(A2A_DONE), "/a2a/stuck": a2a_handler(A2A_STUCK)}
