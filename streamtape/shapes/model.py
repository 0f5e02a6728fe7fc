"""Values of the normalized view: common events, tool calls, finish, usage, analysis.

The vocabularies are :data:`~typing.Literal` types, so a normalizer that
writes ``Event(at, "txt")`` fails type checking, while the values stay the
plain strings every output (``show --json``, ``diff``) has always printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..errors import ShapeError as ShapeError  # its old import path

ShapeName = Literal[
    "openai-chat",
    "openai-completions",
    "openai-responses",
    "ollama-chat",
    "ollama-generate",
    "llamacpp",
    "tgi",
    "anthropic",
    "sse",
    "ndjson",
    "raw",
]
"""A ``--shape`` name: an LLM wire format, then the generic wires and ``raw`` (no wire)."""

Wire = Literal["sse", "ndjson"]
"""How a body is cut into events: server-sent events, or one JSON value per line."""

EventKind = Literal["start", "text", "tool_call", "finish", "usage", "error", "done"]
KINDS: tuple[EventKind, ...] = get_args(EventKind)

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error", "other"]
"""Why generation stopped, in common terms (each format's own value is kept as ``raw``)."""
REASONS: tuple[FinishReason, ...] = get_args(FinishReason)

Channel = Literal["reasoning", "refusal"]
"""Text kept out of the answer: thinking, or a refusal (Responses API)."""


@dataclass(frozen=True, slots=True)
class WireEvent:
    """One event as the wire delivered it, before normalization.

    SSE: a dispatched event (``type`` is its ``event:`` name, "message" by
    default). NDJSON: one line (``type`` is ""). ``value`` is the parsed JSON
    (None when ``valid`` is False or for ``[DONE]``); ``done`` marks ``data: [DONE]``.
    """

    index: int
    at_ns: int
    type: str
    data: str
    value: Any = None
    """Parsed JSON: any JSON value."""
    valid: bool = True
    done: bool = False
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Event:
    """A normalized event. Fields not meaningful for ``kind`` are None.

    - start: ``role``
    - text: ``text`` (``special`` True for tokens kept out of the answer, e.g. TGI
      special tokens; ``channel`` "reasoning" for thinking text, also kept out)
    - tool_call: ``index``, ``id``, ``name``, ``arguments`` (this fragment's text)
    - finish: ``reason`` (one of REASONS), ``raw_reason`` (the server's value)
    - usage: ``prompt_tokens``, ``completion_tokens``, ``durations`` (ns)
    - error: ``error`` (the error object or message)
    - done: the format's final marker (``[DONE]``, ``message_stop``, ``done: true``...)

    ``source`` is the index of the wire event it came from; ``choice`` the
    OpenAI choice index when the format has several.
    """

    at_ns: int
    kind: EventKind
    role: str | None = None
    text: str | None = None
    index: int | None = None
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    reason: FinishReason | None = None
    raw_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    durations: dict[str, int] | None = None
    error: dict[str, Any] | str | None = None
    source: int | None = None
    special: bool | None = None
    channel: Channel | None = None
    choice: int | None = None

    @property
    def is_content(self) -> bool:
        """A non-empty piece of the answer: visible text or a tool-call fragment."""
        if self.kind == "text":
            return bool(self.text) and not self.special and self.channel is None
        if self.kind == "tool_call":
            return bool(self.arguments or self.name)
        return False


@dataclass(frozen=True, slots=True)
class ToolCall:
    index: int
    id: str | None
    name: str | None
    arguments: str
    """All fragments joined."""
    parsed: Any = None
    """The arguments as JSON, or None when they are not valid JSON (or empty)."""
    valid_json: bool = False


@dataclass(frozen=True, slots=True)
class Finish:
    reason: FinishReason
    raw: str | None
    at_ns: int


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    durations: dict[str, int]
    at_ns: int


@dataclass
class Analysis:
    shape: ShapeName
    wire: Wire | None
    events: list[Event] = field(default_factory=list)
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: Finish | None = None
    usage: Usage | None = None
    errors: list[Event] = field(default_factory=list)
    done: bool = False
    role: str | None = None
    keepalives: int = 0
    line_endings: set[str] = field(default_factory=set)
    cut_chars: int = 0
    invalid_json: list[int] = field(default_factory=list)
    usage_chunk: bool = False
    role_chunk: bool = False
    events_count: int = 0
    pieces: int = 0
    # additions beyond the contract
    wire_events: list[WireEvent] = field(default_factory=list)
    reasoning: str = ""
    special_tokens: list[str] = field(default_factory=list)
    partial_tail: bytes = b""
    """Bytes after the last complete wire event (a cut event, when not empty)."""
    decode_error: str | None = None
    """Why the body could not be fully decoded (content encoding), or None."""
    detected: bool = True
    """False when the shape was forced by the caller."""
