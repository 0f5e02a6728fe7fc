"""analyze(ix): parse an interaction's body and normalize it to common events."""

from __future__ import annotations

import bisect
import codecs
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..cassette.model import Interaction
from ..errors import ShapeError
from . import (
    a2a,
    agui,
    anthropic,
    bedrock,
    cohere,
    gemini,
    gemini_interactions,
    generic,
    llamacpp,
    ollama,
    openai_assistants,
    openai_chat,
    openai_completions,
    openai_responses,
    replicate,
    tgi,
    watsonx,
)
from .body import decoded_body
from .detect import SHAPES, WIRE_OF_SHAPE, detect_shape, fits, wire_of
from .eventstream import EventStreamDecoder, EventStreamMessage
from .jsonarray import JSONArrayParser
from .model import (
    Analysis,
    Choice,
    Event,
    Finish,
    FrameError,
    ShapeName,
    ToolCall,
    Usage,
    Wire,
    WireEvent,
)
from .ndjson import NDJSONParser
from .sse import SSEEvent, SSEParser

Normalizer = Callable[[Sequence[WireEvent]], list[Event]]

NORMALIZERS: dict[ShapeName, Normalizer] = {
    "openai-chat": openai_chat.normalize,
    "azure-openai": openai_chat.normalize,  # OpenAI chat plus content-filter results
    "openai-completions": openai_completions.normalize,
    "openai-responses": openai_responses.normalize,
    "ollama-chat": ollama.normalize,
    "ollama-generate": ollama.normalize,
    "llamacpp": llamacpp.normalize,
    "tgi": tgi.normalize,
    "anthropic": anthropic.normalize,
    "ag-ui": agui.normalize,
    "a2a": a2a.normalize,
    "gemini": gemini.normalize,
    "gemini-interactions": gemini_interactions.normalize,
    "bedrock-converse": bedrock.normalize_converse,
    "bedrock-invoke": bedrock.normalize_invoke,
    "cohere": cohere.normalize,
    "openai-assistants": openai_assistants.normalize,
    "replicate": replicate.normalize,
    "watsonx": watsonx.normalize,
    "sse": generic.normalize,
    "ndjson": generic.normalize,
    "eventstream": generic.normalize,
    "jsonarray": generic.normalize,
}

_loads = json.loads

PLAIN_TEXT: dict[ShapeName, tuple[str, ...]] = {"replicate": ("output",)}
"""Formats whose events of these SSE names carry plain text, not JSON."""


def check_shape(shape: str) -> ShapeName:
    """Return ``shape`` if it is a known name; else ShapeError naming the valid ones."""
    for name in SHAPES:
        if name == shape:
            return name
    raise ShapeError(f"unknown shape {shape!r} (--shape): expected one of {', '.join(SHAPES)}")


@dataclass
class _Read:
    """A body read on its wire."""

    events: list[WireEvent]
    keepalives: int
    line_endings: set[str]
    tail: bytes
    frame_errors: list[FrameError] = field(default_factory=list)


def wire_events(pieces: Sequence[tuple[int, bytes]], wire: Wire) -> tuple[
    list[WireEvent], int, set[str], bytes
]:
    """Parse pieces into wire events. Returns (events, keep-alive blocks, line endings, tail)."""
    r = _read(pieces, wire)
    return r.events, r.keepalives, r.line_endings, r.tail


def _eventstream_events(pieces: Sequence[tuple[int, bytes]]) -> _Read:
    """Each message a wire event: its JSON payload as the value (an empty payload: None)."""
    d = EventStreamDecoder()
    out: list[WireEvent] = []
    errors: list[FrameError] = []
    for at, data in pieces:
        for m in d.feed(data, at):
            if not isinstance(m, EventStreamMessage):
                errors.append(FrameError("crc" if "CRC" in m.reason else "frame", m.reason))
                continue
            text = m.payload.decode("utf-8", "replace")
            val, ok = _parse_json(text) if text.strip() else (None, True)
            if not m.crc_ok:
                errors.append(FrameError("crc", f"message {len(out)} ({m.event_type or 'untyped'}"
                                                "): its CRC32 does not match its bytes", len(out)))
            out.append(WireEvent(len(out), at, m.event_type, text, val, ok, False, m.start, m.end,
                                 m.headers))
    return _Read(out, 0, set(), d.pending, errors)


def _jsonarray_events(pieces: Sequence[tuple[int, bytes]]) -> _Read:
    """Each array element a wire event; the closing ``]`` a done event."""
    p = JSONArrayParser()
    out: list[WireEvent] = []
    for at, data in pieces:
        was_closed = p.closed
        for e in p.feed(data, at):
            out.append(WireEvent(len(out), at, "", e.raw, e.value, e.valid, False, e.start, e.end))
        if p.closed and not was_closed and p.close_span is not None:
            out.append(WireEvent(len(out), at, "", "]", None, True, True, *p.close_span))
    errors = [FrameError("frame", p.error)] if p.error else []
    return _Read(out, 0, p.line_endings, p.pending, errors)


def _read(pieces: Sequence[tuple[int, bytes]], wire: Wire) -> _Read:
    if wire == "eventstream":
        return _eventstream_events(pieces)
    if wire == "jsonarray":
        return _jsonarray_events(pieces)
    out: list[WireEvent] = []
    keepalives = 0
    if wire == "sse":
        p = SSEParser()
        for at, data in pieces:
            for item in p.feed(data, at):
                if isinstance(item, SSEEvent):
                    d = item.data
                    if d == "[DONE]" or d.strip() == "[DONE]":
                        out.append(WireEvent(len(out), at, item.event, d, None, True, True,
                                             item.start, item.end))
                        continue
                    try:
                        val, ok = _loads(d), True
                    except (ValueError, RecursionError):
                        val, ok = None, False
                    out.append(WireEvent(len(out), item.at_ns, item.event, d, val, ok, False,
                                         item.start, item.end))
                elif item.is_comment:
                    keepalives += 1
        p.close()
        return _Read(out, keepalives, p.line_endings, p.pending)
    p2 = NDJSONParser()
    lines = []
    for at, data in pieces:
        lines.extend(p2.feed(data, at))
    tail = p2.pending
    last = p2.close()
    if last and last[0].valid:  # a last line without newline is complete when it parses
        lines.extend(last)
        tail = b""
    for ln in lines:
        out.append(WireEvent(len(out), ln.at_ns, "", ln.raw, ln.value, ln.valid, False,
                             ln.start, ln.end))
    return _Read(out, 0, p2.line_endings, tail)


def _cut_chars(pieces: Sequence[tuple[int, bytes]], *, text_events: bool) -> tuple[int, list[Event]]:
    """Piece boundaries that cut a UTF-8 character, and (``text_events``: for a body of no
    known wire) the pieces as text events."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    cuts = 0
    events: list[Event] = []
    last = len(pieces) - 1
    for i, (at, data) in enumerate(pieces):
        text = dec.decode(data)
        if text and text_events:
            events.append(Event(at, "text", text=text, source=i))
        if i < last and dec.getstate()[0]:
            cuts += 1
    rest = dec.decode(b"", final=True)
    if rest and pieces and text_events:
        events.append(Event(pieces[-1][0], "text", text=rest, source=last))
    return cuts, events


def _payload_cuts(pieces: Sequence[tuple[int, bytes]]) -> int:
    """Piece boundaries inside a UTF-8 character of an event-stream message's payload
    (the rest of a message is binary: its bytes are no characters)."""
    body = b"".join(p for _, p in pieces)
    bounds = list(itertools.accumulate(len(p) for _, p in pieces))[:-1]
    ranges = [(m.end - 4 - len(m.payload), m.end - 4) for m in EventStreamDecoder().feed(body)
              if isinstance(m, EventStreamMessage)]
    starts = [lo for lo, _ in ranges]
    n = 0
    for b in bounds:
        k = bisect.bisect_left(starts, b) - 1  # the last payload starting before b
        n += k >= 0 and b < ranges[k][1] and 0x80 <= body[b] <= 0xBF
    return n


def _parse_json(s: str) -> tuple[object, bool]:
    if not s.strip():
        return None, False
    try:
        return _loads(s), True
    except (ValueError, RecursionError):
        return None, False


@dataclass
class _CallParts:
    """One tool call while its fragments are collected."""

    id: str | None = None
    name: str | None = None
    args: list[str] = field(default_factory=list)


@dataclass
class _ChoiceParts:
    """One choice while its events are collected."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_part: tuple[str | None, int | None] | None = None
    """The block or summary part (item id, index) the last reasoning text belonged to."""
    signatures: dict[int, str] = field(default_factory=dict)
    redacted: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _CallParts] = field(default_factory=dict)
    finish: Finish | None = None
    role: str | None = None

    def add_reasoning(self, e: Event) -> None:
        if e.text:
            # A new thinking block or summary part starts a new paragraph, so two
            # blocks never run together into one sentence.
            part = (e.id, e.index)
            if self.reasoning and self.reasoning_part is not None and part != self.reasoning_part:
                self.reasoning.append("\n\n")
            self.reasoning.append(e.text)
            self.reasoning_part = part
        if e.signature is not None:
            # Anthropic's signature_delta replaces the block's signature, never extends it.
            self.signatures[e.index if e.index is not None else -1] = e.signature
        if e.redacted is not None:
            self.redacted.append(e.redacted)

    def add_call(self, e: Event) -> None:
        calls = self.calls
        idx = e.index if e.index is not None else (max(calls) if calls else 0)
        c = calls.setdefault(idx, _CallParts())
        if e.id and not c.id:
            c.id = e.id
        if e.name and not c.name:
            c.name = e.name
        c.args.append(e.arguments or "")

    def build(self, index: int) -> Choice:
        calls = []
        for idx in sorted(self.calls):
            c = self.calls[idx]
            args = "".join(c.args)
            parsed, ok = _parse_json(args)
            calls.append(ToolCall(idx, c.id, c.name, args, parsed, ok))
        return Choice(
            index=index,
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            refusal="".join(self.refusal),
            tool_calls=calls,
            finish=self.finish,
            role=self.role,
            reasoning_signatures=[self.signatures[k] for k in sorted(self.signatures)],
            redacted_reasoning=list(self.redacted),
        )


def assemble(a: Analysis) -> Analysis:
    """Fill the choices, text, reasoning, tool calls, finish, usage, errors, done and
    role from ``a.events``.

    Every choice is assembled on its own (an event without a choice belongs to
    choice 0); the analysis's own ``text``, ``reasoning``, ``tool_calls`` and
    ``finish`` are choice 0's, as they always were. Reasoning and refusals are
    assembled apart from the answer text.
    """
    parts: dict[int, _ChoiceParts] = {0: _ChoiceParts()}
    for e in a.events:
        k = e.kind
        ch = parts.setdefault(e.choice if e.choice is not None else 0, _ChoiceParts())
        if k == "text":
            if e.special:
                if e.choice in (None, 0):
                    a.special_tokens.append(e.text or "")
            elif e.channel == "reasoning":  # the older spelling of a reasoning event
                ch.add_reasoning(e)
            elif e.channel == "refusal":
                ch.refusal.append(e.text or "")
            else:
                ch.text.append(e.text or "")
        elif k == "reasoning":
            ch.add_reasoning(e)
        elif k == "refusal":
            ch.refusal.append(e.text or "")
        elif k == "tool_call":
            ch.add_call(e)
        elif k == "finish":
            ch.finish = Finish(e.reason or "other", e.raw_reason, e.at_ns)
        elif k == "usage":
            prev = a.usage
            a.usage = Usage(
                e.prompt_tokens if e.prompt_tokens is not None
                else (prev.prompt_tokens if prev else None),
                e.completion_tokens if e.completion_tokens is not None
                else (prev.completion_tokens if prev else None),
                dict(e.durations or (prev.durations if prev else {})),
                e.at_ns,
                e.reasoning_tokens if e.reasoning_tokens is not None
                else (prev.reasoning_tokens if prev else None),
            )
        elif k == "error":
            a.errors.append(e)
        elif k == "done":
            a.done = True
        elif k == "state":
            a.states.append(e.state)
        elif k == "start" and ch.role is None:
            ch.role = e.role
    a.choices = [parts[i].build(i) for i in sorted(parts)]
    first = a.choices[0]
    a.text = first.text
    a.reasoning = first.reasoning
    a.refusal = first.refusal
    a.tool_calls = first.tool_calls
    a.finish = first.finish
    a.role = first.role
    return a


def analyze(ix: Interaction, shape: str | None = None) -> Analysis:
    """Parse and normalize one interaction.

    ``shape`` forces a format (one of :data:`SHAPES`); by default it is
    detected (:func:`detect_shape`). Raises :class:`ShapeError` for an unknown
    name. Never raises on the body's content.
    """
    name: ShapeName
    wire: Wire | None
    actual = wire_of(ix)
    if shape is not None:
        name = check_shape(shape)
        wire = actual if fits(name, actual) else WIRE_OF_SHAPE[name]
    else:
        name = detect_shape(ix)
        wire = actual if fits(name, actual) else WIRE_OF_SHAPE[name]
        if name == "raw":
            wire = None
    body = decoded_body(ix)
    pieces = body.pieces
    a = Analysis(shape=name, wire=wire, pieces=len(ix.pieces), decode_error=body.error)
    raw_events: list[Event] = []
    if wire == "eventstream":
        a.cut_chars = _payload_cuts(pieces)
    else:
        a.cut_chars, raw_events = _cut_chars(pieces, text_events=wire is None)
    if wire is None:
        a.events = raw_events
        return assemble(a)
    r = _read(pieces, wire)
    wires, a.keepalives, a.line_endings, a.partial_tail = r.events, r.keepalives, r.line_endings, r.tail
    a.frame_errors = r.frame_errors
    a.wire_events = wires
    a.events_count = len(wires)
    if name == "bedrock-invoke":  # the model's own events, base64 inside the messages
        a.invalid_json = [w.index for w in bedrock.inner_events(wires) if not w.valid]
    elif name not in PLAIN_TEXT:
        a.invalid_json = [w.index for w in wires if not w.valid and not w.done]
    else:  # its text events are not JSON; its other events are
        a.invalid_json = [w.index for w in wires if not w.valid and not w.done
                          and w.type not in PLAIN_TEXT[name]]
    a.events = NORMALIZERS[name](wires)
    for w in wires:
        v = w.value
        if isinstance(v, dict) and v.get("choices") == [] and v.get("usage") is not None:
            a.usage_chunk = True
    srcs_with_content = {e.source for e in a.events if e.is_content}
    for e in a.events:
        if e.kind == "start":
            a.role_chunk = e.source not in srcs_with_content
            break
    return assemble(a)
