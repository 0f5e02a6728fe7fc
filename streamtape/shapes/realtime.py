"""WebSocket sessions read as events: the OpenAI Realtime protocol, and any other JSON or raw messages.

Pure code: a :class:`~streamtape.cassette.WebSocketSession` in, a
:class:`SessionAnalysis` out. Every message becomes a :class:`SessionEvent`
(direction, offset, size, the JSON ``type`` when it has one); a session whose
server speaks the Realtime protocol (its first server event is
``session.created``, or its events carry Realtime names) is also assembled:

- text: the ``delta`` of every text event, per response (``response_id``),
  in the order they came. The names differ between the beta and GA APIs and
  between text and audio output (:data:`TEXT_DELTAS`): the beta
  ``response.text.delta`` and ``response.audio_transcript.delta``, the GA
  ``response.output_text.delta`` and ``response.output_audio_transcript.delta``.
  Audio itself (``response.audio.delta``, base64) is not text;
- responses: each ``response.created`` and its ``response.done`` (status,
  usage), by id; a response created and never done was cut;
- errors: ``error`` events (they do not close a Realtime socket);
- the close: code, reason, who, or none (the connection dropped).

Realtime sources: /work/shared/reference/reasoning-and-realtime-shapes.md section 9
(openai-python's ``types/realtime`` and ``types/beta/realtime``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from ..cassette.model import Direction, Interaction, Message, WebSocketSession

TEXT_DELTAS = frozenset(
    {
        "response.text.delta",  # beta
        "response.audio_transcript.delta",  # beta, audio output's transcript
        "response.output_text.delta",  # GA
        "response.output_audio_transcript.delta",  # GA
    }
)
"""The server events whose ``delta`` is text of the answer."""

REALTIME_MARKERS = frozenset(
    {"session.created", "session.updated", "response.created", "response.done", "rate_limits.updated"}
)
"""Server event types that say the session speaks the Realtime protocol."""

CLEAN_CLOSES = frozenset({1000, 1001, 1005})
"""Close codes of a session that ended as intended: normal, going away, and a
close frame without a code (1005), as the ``websockets`` library counts them
(``ConnectionClosedOK``)."""

SessionShape = Literal["realtime", "json", "raw"]
"""``realtime``: OpenAI Realtime events; ``json``: other JSON messages; ``raw``: anything else."""


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One message as ``show`` lists it."""

    index: int
    at_ns: int
    direction: Direction
    text: bool
    size: int
    type: str | None
    """The JSON ``type`` of the event (None: not JSON, or no string ``type``)."""
    doc: object
    """The message parsed as JSON (None when it is not JSON)."""


@dataclass
class RealtimeResponse:
    """One Realtime response, from ``response.created`` to ``response.done``."""

    id: str
    created_at_ns: int | None = None
    first_text_ns: int | None = None
    done_at_ns: int | None = None
    status: str | None = None
    """``response.done``'s status: completed, cancelled, incomplete, failed (None: never done)."""
    text: str = ""
    delta_ns: list[int] = field(default_factory=list)
    """When each text delta came."""
    usage: object = None

    @property
    def deltas(self) -> int:
        return len(self.delta_ns)


@dataclass
class SessionAnalysis:
    shape: SessionShape
    events: list[SessionEvent]
    responses: list[RealtimeResponse] = field(default_factory=list)
    errors: list[SessionEvent] = field(default_factory=list)
    close_code: int | None = None
    close_reason: str = ""
    closed_by: Direction | None = None
    requested: int = 0
    """How many ``response.create`` the client sent."""

    @property
    def text(self) -> str:
        """Every response's text, in order."""
        return "".join(r.text for r in self.responses)

    @property
    def server_events(self) -> list[SessionEvent]:
        return [e for e in self.events if e.direction == Direction.SERVER]

    @property
    def open_responses(self) -> list[RealtimeResponse]:
        """Responses created (or asked for) and never done: the session ended inside them."""
        return [r for r in self.responses if r.done_at_ns is None]

    @property
    def unanswered(self) -> int:
        """``response.create`` messages no ``response.created`` answered (the server never started)."""
        return max(0, self.requested - len(self.responses))

    @property
    def clean_close(self) -> bool:
        return self.close_code in CLEAN_CLOSES

    @property
    def text_deltas_ns(self) -> list[int]:
        return [e.at_ns for e in self.events if e.type in TEXT_DELTAS and e.direction == Direction.SERVER]


def _parse(m: Message) -> tuple[object, str | None]:
    if not m.text and m.data[:1] not in (b"{", b"["):
        return None, None
    try:
        doc = json.loads(m.data)
    except ValueError:
        return None, None
    kind = doc.get("type") if isinstance(doc, dict) else None
    return doc, kind if isinstance(kind, str) else None


def session_events(ws: WebSocketSession) -> list[SessionEvent]:
    out = []
    for n, m in enumerate(ws.messages):
        doc, kind = _parse(m)
        out.append(SessionEvent(n, m.at_ns, m.direction, m.text, len(m.data), kind, doc))
    return out


def analyze_session(session: WebSocketSession | Interaction) -> SessionAnalysis:
    """Read a session's messages; ``session`` may be the interaction that holds it."""
    ws = session.websocket if isinstance(session, Interaction) else session
    if ws is None:
        raise ValueError("not a WebSocket session")
    events = session_events(ws)
    server_types = {e.type for e in events if e.direction == Direction.SERVER and e.type}
    if server_types & REALTIME_MARKERS:
        shape: SessionShape = "realtime"
    elif events and all(e.doc is not None for e in events):
        shape = "json"
    else:
        shape = "raw"
    a = SessionAnalysis(shape, events, close_code=ws.close_code, close_reason=ws.close_reason,
                        closed_by=ws.closed_by)
    if shape == "realtime":
        _assemble(a)
    return a


def _assemble(a: SessionAnalysis) -> None:
    by_id: dict[str, RealtimeResponse] = {}

    def response(rid: str) -> RealtimeResponse:
        r = by_id.get(rid)
        if r is None:
            r = by_id[rid] = RealtimeResponse(rid)
            a.responses.append(r)
        return r

    for e in a.events:
        doc = e.doc if isinstance(e.doc, dict) else {}
        if e.direction == Direction.CLIENT:
            if e.type == "response.create":
                a.requested += 1
            continue
        if e.type == "error":
            a.errors.append(e)
        elif e.type in ("response.created", "response.done"):
            body = doc.get("response")
            rid = body.get("id") if isinstance(body, dict) else None
            r = response(str(rid) if rid is not None else f"#{len(a.responses)}")
            if e.type == "response.created":
                r.created_at_ns = e.at_ns
            else:
                r.done_at_ns = e.at_ns
                r.status = str(body.get("status")) if isinstance(body, dict) else None
                r.usage = body.get("usage") if isinstance(body, dict) else None
        elif e.type in TEXT_DELTAS:
            delta = doc.get("delta")
            rid = doc.get("response_id")
            r = response(str(rid) if rid is not None else (a.responses[-1].id if a.responses else "#0"))
            if isinstance(delta, str):
                r.text += delta
                r.delta_ns.append(e.at_ns)
                if r.first_text_ns is None:
                    r.first_text_ns = e.at_ns


def error_message(e: SessionEvent) -> str:
    """An ``error`` event's message (its code in front when it has one)."""
    doc = e.doc if isinstance(e.doc, dict) else {}
    err = doc.get("error")
    if not isinstance(err, dict):
        return json.dumps(err, ensure_ascii=False) if err is not None else "(no error object)"
    code, msg = err.get("code"), err.get("message")
    return f"{code}: {msg}" if code else str(msg)
