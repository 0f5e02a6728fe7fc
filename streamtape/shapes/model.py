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
    "azure-openai",
    "openai-completions",
    "openai-responses",
    "ollama-chat",
    "ollama-generate",
    "llamacpp",
    "tgi",
    "anthropic",
    "ag-ui",
    "a2a",
    "gemini",
    "gemini-interactions",
    "bedrock-converse",
    "bedrock-invoke",
    "cohere",
    "openai-assistants",
    "replicate",
    "watsonx",
    "sse",
    "ndjson",
    "eventstream",
    "jsonarray",
    "raw",
]
"""A ``--shape`` name: an LLM wire format, then the generic wires and ``raw`` (no wire)."""

Wire = Literal["sse", "ndjson", "eventstream", "jsonarray"]
"""How a body is cut into events: server-sent events, one JSON value per line, the AWS
binary event stream (``application/vnd.amazon.eventstream``), or one JSON array
streamed element by element (Gemini without ``alt=sse``)."""

EventKind = Literal[
    "start", "text", "reasoning", "refusal", "tool_call", "finish", "usage", "error", "done",
    "state",
]
"""What a normalized event says. ``reasoning`` (the model's thinking) and ``refusal`` (a
refusal in place of an answer) are kinds of their own, never ``text``: a consumer that
joins the ``text`` events gets the answer and nothing else, whatever the server sent
beside it."""
KINDS: tuple[EventKind, ...] = get_args(EventKind)

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error", "other"]
"""Why generation stopped, in common terms (each format's own value is kept as ``raw``)."""
REASONS: tuple[FinishReason, ...] = get_args(FinishReason)

Channel = Literal["reasoning", "refusal"]
"""Text kept out of the answer. Earlier versions put thinking and refusals in ``text``
events with this channel; they are now the event kinds of the same names, and
:attr:`Event.channel` is always None. Kept so code that reads it still runs."""


@dataclass(frozen=True, slots=True)
class WireEvent:
    """One event as the wire delivered it, before normalization.

    SSE: a dispatched event (``type`` is its ``event:`` name, "message" by
    default). NDJSON: one line (``type`` is ""). AWS event stream: one message
    (``type`` is its ``:event-type``, or ``:exception-type`` / ``:error-code``;
    ``headers`` all its headers; ``data`` the payload as text). JSON array: one
    element (``type`` is ""; the closing ``]`` is the ``done`` event). ``value`` is the parsed JSON
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
    headers: tuple[tuple[str, Any], ...] = ()
    """An event-stream message's headers (``:message-type``...); empty on other wires."""


@dataclass(frozen=True, slots=True)
class Event:
    """A normalized event. Fields not meaningful for ``kind`` are None.

    - start: ``role``
    - text: ``text``, a piece of the answer (``special`` True for tokens kept out of
      the answer, e.g. TGI special tokens)
    - reasoning: the model's thinking, apart from the answer: ``text`` (a fragment of
      the reasoning or of its summary), or ``signature`` (Anthropic: the signature of
      the thinking block so far; a later one replaces it), or ``redacted`` (the opaque
      data of a redacted thinking block). ``index`` keeps blocks or summary parts apart.
    - refusal: ``text``, a piece of a refusal given instead of an answer
    - tool_call: ``index``, ``id``, ``name``, ``arguments`` (this fragment's text)
    - finish: ``reason`` (one of REASONS), ``raw_reason`` (the server's value)
    - usage: ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``,
      ``durations`` (ns)
    - error: ``error`` (the error object or message)
    - done: the format's final marker (``[DONE]``, ``message_stop``, ``done: true``...)
    - state: an agent's state (``state``): AG-UI's ``{"snapshot": ...}`` or ``{"delta":
      [...]}``, an A2A task's ``{"task": ID, "state": "working", "message": ...}``

    ``source`` is the index of the wire event it came from; ``choice`` the
    OpenAI choice index when the format has several (None counts as choice 0).
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
    """Always None now (see :data:`Channel`)."""
    choice: int | None = None
    signature: str | None = None
    redacted: str | None = None
    reasoning_tokens: int | None = None
    state: Any = None

    @property
    def is_content(self) -> bool:
        """A non-empty piece of the answer: visible text, a refusal, or a tool-call fragment."""
        if self.kind in ("text", "refusal"):
            return bool(self.text) and not self.special
        if self.kind == "tool_call":
            return bool(self.arguments or self.name)
        return False

    @property
    def is_reasoning(self) -> bool:
        """A piece of reasoning the model produced: thinking text or a redacted block
        (a signature is a seal on reasoning already sent, not more of it)."""
        return self.kind == "reasoning" and bool(self.text or self.redacted)

    @property
    def is_token(self) -> bool:
        """Output the model generated: answer content or reasoning (what timing counts)."""
        return self.is_content or self.is_reasoning


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
    reasoning_tokens: int | None = None
    """Of the completion tokens, how many were reasoning, when the server says
    (``completion_tokens_details.reasoning_tokens``, ``output_tokens_details``)."""


@dataclass
class Choice:
    """One assembled answer. OpenAI-style servers send ``n`` of them in one stream,
    told apart by ``choices[].index``; every other format has one, choice 0."""

    index: int
    text: str = ""
    reasoning: str = ""
    """The reasoning text, blocks or summary parts separated by a blank line."""
    refusal: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: Finish | None = None
    role: str | None = None
    reasoning_signatures: list[str] = field(default_factory=list)
    """The signature of each signed thinking block (Anthropic), in block order: opaque,
    byte-exact, sent back to the server as is."""
    redacted_reasoning: list[str] = field(default_factory=list)
    """The opaque data of each redacted thinking block, in order."""


@dataclass(frozen=True, slots=True)
class FrameError:
    """A wire's framing found broken: a CRC32 that does not match (``crc``: the
    message's, or its prelude's, after which nothing can be framed), or a body the
    wire cannot frame at all (``frame``)."""

    kind: Literal["crc", "frame"]
    message: str
    event: int | None = None
    """The wire event it concerns (a message read despite its CRC), or None."""


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
    states: list[Any] = field(default_factory=list)
    """The ``state`` of every state event, in order (agent streams: AG-UI, A2A)."""
    role_chunk: bool = False
    events_count: int = 0
    pieces: int = 0
    # additions beyond the contract
    wire_events: list[WireEvent] = field(default_factory=list)
    reasoning: str = ""
    """Choice 0's reasoning (see :class:`Choice`)."""
    refusal: str = ""
    """Choice 0's refusal text."""
    choices: list[Choice] = field(default_factory=list)
    """Every choice assembled, by index; choice 0 is always there. ``text``,
    ``reasoning``, ``refusal``, ``tool_calls`` and ``finish`` above are choice 0's."""
    special_tokens: list[str] = field(default_factory=list)
    partial_tail: bytes = b""
    """Bytes after the last complete wire event (a cut event, when not empty)."""
    decode_error: str | None = None
    """Why the body could not be fully decoded (content encoding), or None."""
    detected: bool = True
    """False when the shape was forced by the caller."""
    frame_errors: list[FrameError] = field(default_factory=list)
    """Framing the wire itself reports broken (the AWS event stream: a CRC32 that does
    not match, a prelude that cannot be trusted; the JSON array: a body that is not
    one)."""
