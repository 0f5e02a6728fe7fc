"""A WebSocket upstream on 127.0.0.1 that speaks the OpenAI Realtime event shapes.

Written for the tests from the public API reference
(/work/shared/reference/reasoning-and-realtime-shapes.md, section 9): one JSON
event per text frame, both directions. It is the ``websockets`` library's own
server (not streamtape code), run on a thread, driven by a script per
connection:

- on connect: ``session.created``;
- ``session.update`` -> ``session.updated``;
- ``conversation.item.create`` -> ``conversation.item.added`` and ``.done``
  (beta, with ``OpenAI-Beta: realtime=v1``: ``conversation.item.created``);
- ``response.create`` -> ``response.created``, ``response.output_item.added``,
  ``response.content_part.added``, one text delta per word (GA
  ``response.output_text.delta``, beta ``response.text.delta``) ``gap``
  seconds apart, the ``.done`` events, ``response.done`` and
  ``rate_limits.updated``;
- anything else -> an ``error`` event echoing the client's ``event_id`` (errors
  do not close the socket).

``?fragment=N`` sends every message in frames of N characters (a first
frame and continuation frames). ``?reject=401`` refuses the upgrade with a 401 and a JSON error body, as the
API does for a bad key. A fault can cut a response after its N-th delta (query ``?fault=...&after=N``):
``close:CODE`` (a close frame with that code), ``drop`` (the TCP connection
closed without a close frame). Every message the server sends is logged
with its ``time.monotonic()`` reading, so a test can compare recorded gaps
with the gaps the server made. ``?gap=S`` and ``?words=a,b`` override the
server's delta spacing and answer for one connection.

:func:`realtime_turn` is the other side: one text turn as the API's clients
send it (``websockets``, the key in the header, a subprotocol and a message).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.client import connect
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

KEY = "sk-live-abcdefghijklmnopqrstuvwx"
"""A key :func:`realtime_turn` sends in three places (a test checks it is never on disk)."""
WORDS = ("Nine ", "point ", "eight ", "is ", "larger.")
SESSION_GAP = 0.02
"""Seconds before ``session.created``, as a real server takes to set up a session."""
FIRST_TOKEN_GAP = 0.06
"""Seconds from ``response.created`` to the first delta: the model's time to first token."""


@dataclass
class Sent:
    at: float
    type: str


@dataclass
class Session:
    path: str
    headers: dict[str, str]
    sent: list[Sent] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    """The client's events as JSON values."""


@dataclass
class RealtimeUpstream:
    """The server; ``sessions`` holds what each connection sent and received."""

    gap: float = 0.03
    words: tuple[str, ...] = WORDS
    sessions: list[Session] = field(default_factory=list)
    server: Server | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def refuse(self, conn: ServerConnection, request: Request) -> Response | None:
        """``?reject=401``: the answer the API gives a bad key, instead of the upgrade."""
        if "reject=401" not in request.path:
            return None
        body = json.dumps({"error": {"type": "invalid_request_error", "code": "invalid_api_key",
                                     "message": "Incorrect API key provided."}}).encode()
        headers = Headers([("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return Response(401, "Unauthorized", headers, body)

    def handle(self, conn: ServerConnection) -> None:
        req = conn.request
        assert req is not None
        q = parse_qs(urlsplit(req.path).query)
        fault = q.get("fault", [""])[0]
        after = int(q.get("after", ["2"])[0])
        gap = float(q.get("gap", [self.gap])[0])
        words = tuple(q["words"][0].split(",")) if "words" in q else self.words
        s = Session(req.path, {k.lower(): v for k, v in req.headers.raw_items()})
        self.sessions.append(s)
        beta = s.headers.get("openai-beta") == "realtime=v1"
        n = {"event": 0}

        fragment = int(q.get("fragment", ["0"])[0])

        def send(event: dict[str, object]) -> None:
            n["event"] += 1
            event = {"type": event.pop("type"), "event_id": f"event_{n['event']:03d}", **event}
            s.sent.append(Sent(time.monotonic(), str(event["type"])))
            text = json.dumps(event, separators=(",", ":"))
            if fragment:  # one message in continuation frames of ``fragment`` characters
                conn.send(iter([text[i : i + fragment] for i in range(0, len(text), fragment)]))
            else:
                conn.send(text)

        time.sleep(SESSION_GAP)
        send({"type": "session.created", "session": {"type": "realtime", "object": "realtime.session",
                                                     "id": "sess_001", "model": "gpt-realtime",
                                                     "output_modalities": ["audio"], "instructions": ""}})
        responses = 0
        try:
            for raw in conn:
                ev = json.loads(raw)
                s.received.append(ev)
                kind = ev.get("type")
                if kind == "session.update":
                    asked = ev.get("session", {})
                    known = {k: asked[k] for k in ("type", "output_modalities", "instructions") if k in asked}
                    send({"type": "session.updated", "session": {**known, "id": "sess_001"}})
                elif kind == "conversation.item.create":
                    item = {**ev.get("item", {}), "id": f"item_u{len(s.received)}", "status": "completed"}
                    if beta:
                        send({"type": "conversation.item.created", "previous_item_id": None, "item": item})
                    else:
                        send({"type": "conversation.item.added", "previous_item_id": None, "item": item})
                        send({"type": "conversation.item.done", "previous_item_id": None, "item": item})
                elif kind == "response.create":
                    responses += 1
                    if not self._respond(send, conn, responses, beta, fault, after, gap, words):
                        return
                else:
                    send({"type": "error", "error": {"type": "invalid_request_error", "code": "unknown_event",
                                                     "message": f"Invalid value: '{kind}'.", "param": "type",
                                                     "event_id": ev.get("event_id")}})
        except ConnectionClosed:
            return

    def _respond(self, send: Callable[[dict[str, object]], None], conn: ServerConnection, n: int, beta: bool,
                 fault: str, after: int, gap: float, words: tuple[str, ...]) -> bool:
        """One response; False when a fault cut the connection."""
        rid, item = f"resp_{n:03d}", f"item_r{n:03d}"
        ids = {"response_id": rid, "item_id": item, "output_index": 0, "content_index": 0}
        delta = "response.text.delta" if beta else "response.output_text.delta"
        text_done = "response.text.done" if beta else "response.output_text.done"
        time.sleep(0.01)
        send({"type": "response.created", "response": {"object": "realtime.response", "id": rid,
                                                       "status": "in_progress", "output": [], "usage": None}})
        send({"type": "response.output_item.added", "response_id": rid, "output_index": 0,
              "item": {"id": item, "object": "realtime.item", "type": "message", "role": "assistant",
                       "status": "in_progress", "content": []}})
        send({"type": "response.content_part.added", **ids, "part": {"type": "text", "text": ""}})
        time.sleep(FIRST_TOKEN_GAP)
        for i, w in enumerate(words):
            if i:
                time.sleep(gap)
            send({"type": delta, **ids, "delta": w})
            if fault and i + 1 == after:
                if fault.startswith("close:"):
                    conn.close(int(fault.split(":", 1)[1]), "cut by the test server")
                else:  # drop: no close frame, a TCP reset
                    conn.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.socket.close()
                return False
        text = "".join(words)
        send({"type": text_done, **ids, "text": text})
        send({"type": "response.content_part.done", **ids, "part": {"type": "text", "text": text}})
        send({"type": "response.output_item.done", "response_id": rid, "output_index": 0,
              "item": {"id": item, "type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "text" if beta else "output_text", "text": text}]}})
        send({"type": "response.done", "response": {
            "object": "realtime.response", "id": rid, "status": "completed", "status_details": None,
            "output": [{"id": item, "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text}]}],
            "usage": {"total_tokens": 310, "input_tokens": 280, "output_tokens": 30}}})
        send({"type": "rate_limits.updated", "rate_limits": [
            {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.012}]})
        return True


@contextmanager
def realtime_upstream(gap: float = 0.03, words: tuple[str, ...] = WORDS) -> Iterator[RealtimeUpstream]:
    """The Realtime upstream running on a thread for the block."""
    up = RealtimeUpstream(gap=gap, words=words)
    with serve(up.handle, "127.0.0.1", 0, compression=None, process_request=up.refuse) as server:
        up.server = server
        up.port = server.socket.getsockname()[1]
        t = threading.Thread(target=server.serve_forever, daemon=True)
        t.start()
        try:
            yield up
        finally:
            server.shutdown()
            t.join(5)


async def realtime_turn(
    url: str, *, path: str = "/v1/realtime?model=gpt-realtime", proxy: str | None = None, bad_event: bool = True,
    beta: bool = False,
) -> list[str]:
    """One text turn as the Realtime API's clients do it (``beta``: with ``OpenAI-Beta:
    realtime=v1``); the event types the client got."""
    got: list[str] = []
    async with connect(
        url.replace("http://", "ws://") + path,
        proxy=proxy,
        additional_headers={"Authorization": f"Bearer {KEY}", **({"OpenAI-Beta": "realtime=v1"} if beta else {})},
        subprotocols=["realtime", f"openai-insecure-api-key.{KEY}"],  # type: ignore[list-item]
    ) as ws:
        got.append(json.loads(await ws.recv())["type"])
        await ws.send(json.dumps({"type": "session.update", "session": {
            "type": "realtime", "output_modalities": ["text"], "api_key": KEY}}))
        await ws.send(json.dumps({"type": "conversation.item.create", "event_id": "evt_c1", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Which is larger?"}]}}))
        if bad_event:
            await ws.send(json.dumps({"type": "session.frobnicate", "event_id": "evt_bad"}))
        await ws.send(json.dumps({"type": "response.create"}))
        async for raw in ws:
            got.append(json.loads(raw)["type"])
            if got[-1] == "rate_limits.updated":
                break
    return got
