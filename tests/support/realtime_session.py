"""The recorded Realtime API session the WebSocket replay tests play (tests/unit/test_ws_replay.py
schedules it, tests/system/test_ws_replay.py serves it to real clients).

A conversation in the event shapes of the public reference (session.created,
session.update / updated, conversation.item.create / added, response.create,
response.created, response.output_text.delta ..., response.done), with realistic gaps,
built with the cassette model: :data:`MESSAGES`, and :func:`session_ix` around them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from streamtape.cassette.model import (
    Direction,
    Interaction,
    Message,
    Outcome,
    Response,
    WebSocketSession,
)
from streamtape.cassette.model import Request as HTTPRequest
from tests.support.builders import MS

PATH = "/v1/realtime?model=gpt-realtime"
URL = "https://api.openai.com" + PATH


def event(**fields: Any) -> bytes:
    """One event as the API sends it: compact JSON, UTF-8 unescaped."""
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()


SESSION_UPDATE: dict[str, Any] = {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"],
                                                        "instructions": "Answer briefly."}}
ITEM_CREATE: dict[str, Any] = {"type": "conversation.item.create", "item": {
    "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Greet me"}]}}
RESPONSE_CREATE: dict[str, Any] = {"type": "response.create"}
CLIENT_EVENTS = (SESSION_UPDATE, ITEM_CREATE, RESPONSE_CREATE)

DELTAS = ("Grüße", " und", " hallo", " ✓", "!")
TEXT = "".join(DELTAS)
RESPONSE_ID, ITEM_ID = "resp_C1", "item_C1"


def _delta(i: int, d: str) -> bytes:
    return event(type="response.output_text.delta", event_id=f"event_D{i}", response_id=RESPONSE_ID,
                  item_id=ITEM_ID, output_index=0, content_index=0, delta=d)


def _server(at_ms: int, data: bytes) -> Message:
    return Message(at_ms * MS, Direction.SERVER, True, data)


def _client(at_ms: int, obj: dict[str, Any]) -> Message:
    return Message(at_ms * MS, Direction.CLIENT, True, event(**obj, event_id=f"client_{at_ms}"))


# Recorded offsets (ms after the upgrade request): the 101 at 40; server messages follow
# the client message before them by 15 ms (session.updated, item.added) and 40 ms
# (response.created), deltas 20 ms apart.
MESSAGES = (
    _server(45, event(type="session.created", event_id="event_A1",
                       session={"type": "realtime", "object": "realtime.session", "id": "sess_1",
                                "model": "gpt-realtime", "output_modalities": ["text"]})),
    _client(60, SESSION_UPDATE),
    _server(75, event(type="session.updated", event_id="event_A2",
                       session={"type": "realtime", "output_modalities": ["text"],
                                "instructions": "Answer briefly."})),
    _client(80, ITEM_CREATE),
    _server(95, event(type="conversation.item.added", event_id="event_A3", previous_item_id=None,
                       item={"id": "item_U1", "type": "message", "role": "user", "status": "completed",
                             "content": [{"type": "input_text", "text": "Greet me"}]})),
    _client(100, RESPONSE_CREATE),
    _server(140, event(type="response.created", event_id="event_A4",
                        response={"id": RESPONSE_ID, "object": "realtime.response",
                                  "status": "in_progress", "output": []})),
    _server(150, event(type="response.output_item.added", event_id="event_A5", response_id=RESPONSE_ID,
                        output_index=0, item={"id": ITEM_ID, "type": "message", "role": "assistant",
                                              "status": "in_progress", "content": []})),
    *(_server(180 + 20 * i, _delta(i, d)) for i, d in enumerate(DELTAS)),
    _server(270, event(type="response.output_text.done", event_id="event_A6", response_id=RESPONSE_ID,
                        item_id=ITEM_ID, output_index=0, content_index=0, text=TEXT)),
    _server(280, event(type="response.done", event_id="event_A7",
                        response={"id": RESPONSE_ID, "object": "realtime.response", "status": "completed",
                                  "output": [{"id": ITEM_ID, "type": "message", "role": "assistant",
                                              "status": "completed",
                                              "content": [{"type": "output_text", "text": TEXT}]}]})),
)
SERVER_TYPES = [json.loads(m.data)["type"] for m in MESSAGES if m.direction == Direction.SERVER]
N_SERVER = len(SERVER_TYPES)


def session_ix(
    messages: Sequence[Message] = MESSAGES,
    *,
    close: tuple[int | None, str, Direction | None] = (1000, "", Direction.CLIENT),
    end_ms: int = 305,
    headers: tuple[tuple[str, str], ...] = (),
    path: str = PATH,
) -> Interaction:
    """A recorded Realtime session: the upgrade, the 101 at 40 ms, ``messages``, the close."""
    code, reason, by = close
    return Interaction(
        HTTPRequest("GET", "https://api.openai.com" + path, headers=(
            ("Host", "api.openai.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Version", "13"), ("Authorization", "REDACTED"),
        )),
        Response(101, "Switching Protocols", headers=(
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", "recorded="),
            ("x-request-id", "req_7f3a"), ("openai-processing-ms", "31"), *headers,
        ), framing="none", headers_at_ns=40 * MS),
        Outcome.COMPLETE if code is not None else Outcome.UPSTREAM_CLOSED,
        end_ns=end_ms * MS,
        websocket=WebSocketSession(tuple(messages), code, reason, by),
    )
