"""Protocol findings about one interaction: pure, from its Analysis.

Each :class:`Finding` has a stable ``code`` (:data:`Code`, for scripts and
``--json``), a one-line ``message``, the wire event index it concerns
when there is one, and a :attr:`~Finding.severity` looked up by its code
(:mod:`streamtape.check.severity`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal, cast
from urllib.parse import urlsplit

from ..capture.mcp import SESSION_HEADER
from ..cassette.model import Interaction, Outcome
from ..shapes import Analysis, ShapeName, WireEvent, a2a, agui, analyze
from .severity import Severity, severity_of

# Shapes whose stream ends with a literal ``data: [DONE]``.
DONE_SENTINEL: tuple[ShapeName, ...] = ("openai-chat", "azure-openai", "openai-completions")
# The final marker each other format has.
FINAL_MARKER: dict[ShapeName, str] = {
    "openai-responses": "response.completed",
    "anthropic": "message_stop",
    "ollama-chat": '"done": true',
    "ollama-generate": '"done": true',
    "llamacpp": '"stop": true',
    "tgi": "a final event with details",
    "ag-ui": "RUN_FINISHED or RUN_ERROR",
    "a2a": "a final task state",
    "gemini-interactions": "interaction.completed",
    "bedrock-converse": "metadata",
    "bedrock-invoke": "message_stop",
    "cohere": "message-end",
    "openai-assistants": "event: done",
    "replicate": "event: done",
    "watsonx": "a result with a stop_reason",
}
# Each agent format's own findings: (code, message, event) from its wire events.
SHAPE_FINDINGS: dict[ShapeName, Callable[[Sequence[WireEvent]], list[tuple[str, str, int | None]]]] = {
    "ag-ui": agui.findings,
    "a2a": a2a.findings,
}
END_OF_BODY: tuple[ShapeName, ...] = ("gemini",)
"""Formats with no final marker over SSE (the end of the body ends the stream), whose
finish is still expected; on the JSON array wire the closing ``]`` is the marker."""
UNKNOWN: tuple[ShapeName, ...] = ("sse", "ndjson", "eventstream", "jsonarray")
"""The generic wires: a stream whose format is not known, whose meaning is not checked."""
USAGE_OPTIN: tuple[ShapeName, ...] = ("openai-chat", "azure-openai", "openai-completions")

THINK_TAG = re.compile(r"</?think>")
"""Reasoning left in the answer: what a server without a reasoning parser sends
(vLLM without ``--reasoning-parser``, llama.cpp with ``--reasoning-format none``,
older llama.cpp and Ollama builds)."""

CONTROL_TOKENS = re.compile(
    r"<\|[A-Za-z0-9_]+\|>"  # <|eot_id|> <|im_end|> <|endoftext|> <|end|> ...
    r"|</s>|<s>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>|<eos>|<bos>|<unk>|<pad>"
)

Code = Literal[
    "no-response", "http-status", "outcome", "decode-error", "not-a-stream", "no-done",
    "no-finish", "finish-length", "finish-content-filter", "error-event", "invalid-json",
    "control-token", "keepalive", "usage-missing", "cut-event", "tool-args-invalid",
    "refusal", "reasoning-inline", "crc-mismatch", "frame-error", "unknown-format",
    # WebSocket sessions (streamtape.check.websocket)
    "close-abnormal", "no-response-done",
    # agent streams (streamtape.shapes.agui, streamtape.shapes.a2a)
    "tool-call-open", "task-not-final",
    # The cassette file (a record that failed its checksum: streamtape.cassette.frames)
    "damaged-record",
]
"""A finding's code: stable, for scripts."""


@dataclass(frozen=True, slots=True)
class Finding:
    code: Code
    message: str
    event: int | None = None
    """Index of the wire event it concerns (0-based, in body order), or None."""

    @property
    def severity(self) -> Severity:
        """How much it matters (:mod:`streamtape.check.severity`: a table by code)."""
        return severity_of(self.code)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "severity": str(self.severity)}


def _request_json(ix: Interaction) -> dict[str, object] | None:
    """The request's JSON object body, or None (no body, not JSON, not an object)."""
    try:
        body = json.loads(ix.request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def usage_requested(ix: Interaction) -> bool:
    """The request asked for a usage chunk (``stream_options.include_usage``)."""
    body = _request_json(ix)
    if body is None:
        return False
    so = body.get("stream_options")
    return isinstance(so, dict) and so.get("include_usage") is True


_STREAM_ACCEPT = ("text/event-stream", "ndjson", "vnd.amazon.eventstream")
_OLLAMA_STREAMING_PATHS = ("/api/chat", "/api/generate")  # they stream unless told "stream": false


def stream_requested(ix: Interaction) -> bool:
    """Whether the request asked for a stream: a JSON body's ``"stream"``, else an ``Accept``
    of a streaming type, a path that names a stream (Gemini's ``streamGenerateContent``,
    Bedrock's ``converse-stream``, watsonx.ai's ``generation_stream``), or Ollama's
    chat and generate, which stream by default. A token, project or model-list call asks
    for none: its JSON answer is what it asked for."""
    req = ix.request
    body = _request_json(ix)
    if body is not None and isinstance(body.get("stream"), bool):
        return bool(body["stream"])
    accept = (req.header("accept") or "").lower()
    if any(t in accept for t in _STREAM_ACCEPT):
        return True
    path = urlsplit(req.url).path
    return "stream" in path.lower() or path.rstrip("/").endswith(_OLLAMA_STREAMING_PATHS)


CLIENT_LEFT = "client left after the end"
"""What a report says of a stream the client hung up on once it had ended (:func:`left_after_end`)."""


def left_after_end(ix: Interaction, analysis: Analysis | None = None) -> bool:
    """Whether the client hung up (``client_disconnected``) only once the stream had
    reached its end marker: then the stream is whole, and counts as complete.

    Clients stop reading at the end marker and close at once: the openai and
    mistralai SDKs after ``data: [DONE]``, before the chunked body's last chunk;
    the mcp client once the JSON-RPC answer to its request has come. The recorder
    sees the client go before the upstream's end and records
    ``client_disconnected``, though nothing was lost. ``check`` reports no
    ``outcome`` finding for such a stream, ``diff`` shows the outcome difference
    without counting it, and a shadow session compares such a primary as
    complete; the recorded outcome stays as it was (``show`` prints it). An MCP
    session's GET stream (the server's own messages) has no end marker: it
    ends when the client leaves the session, so its client hanging up is its end.

    The end marker is the format's own (:data:`DONE_SENTINEL`, :data:`FINAL_MARKER`,
    or ``data: [DONE]`` in a generic SSE stream: the analysis' ``done``), or in a
    generic SSE or NDJSON stream the JSON-RPC answer to the request's id (MCP's
    Streamable HTTP ends a POST's stream with it). A finish alone is not the
    end: a stream cut between ``finish_reason`` and ``[DONE]``, or Anthropic's
    ``message_delta`` and ``message_stop``, was cut before its end marker.
    ``analysis`` is :func:`~streamtape.shapes.analyze` of ``ix`` (made when None).
    """
    if ix.outcome is not Outcome.CLIENT_DISCONNECTED or ix.response is None:
        return False
    if ix.request.method.upper() == "GET" and ix.request.header(SESSION_HEADER) is not None:
        return True
    a = analysis if analysis is not None else analyze(ix)
    return a.done or _jsonrpc_answered(ix, a)


def _jsonrpc_answered(ix: Interaction, a: Analysis) -> bool:
    """A generic stream holds the JSON-RPC response (a result or an error) to the request's id."""
    if a.shape not in ("sse", "ndjson"):
        return False
    try:
        req = json.loads(ix.request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return False
    if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" or "method" not in req:
        return False
    rid = req.get("id")
    if not isinstance(rid, str | int) or isinstance(rid, bool):  # a notification has no answer
        return False
    for w in a.wire_events:
        v = w.value
        if (isinstance(v, dict) and v.get("jsonrpc") == "2.0" and ("result" in v or "error" in v)
                and type(v.get("id")) is type(rid) and v.get("id") == rid):
            return True
    return False


def check(ix: Interaction, analysis: Analysis | None = None, shape: str | None = None
          ) -> list[Finding]:
    """Findings about one interaction (empty when nothing is wrong). A client that hung
    up once the stream had ended (:func:`left_after_end`) is no ``outcome`` finding."""
    r = ix.response
    if r is None:
        return [Finding("no-response", f"no response head ({ix.outcome}"
                        + (f": {ix.error})" if ix.error else ")"))]
    out: list[Finding] = []
    if ix.outcome is Outcome.CLIENT_DISCONNECTED and analysis is None:
        analysis = analyze(ix, shape)  # did the stream reach its end marker?
    if ix.outcome is not Outcome.COMPLETE and not left_after_end(ix, analysis):
        out.append(Finding("outcome", f"outcome {ix.outcome}" + (f": {ix.error}" if ix.error else "")))
    if r.status >= 400:
        out.append(Finding("http-status", f"HTTP {r.status} {r.reason}".rstrip()))
        return out
    a = analysis if analysis is not None else analyze(ix, shape)
    if a.decode_error:
        out.append(Finding("decode-error", a.decode_error))
    if a.wire is None:
        if r.status == 200 and len(ix.pieces) > 0 and shape is None and stream_requested(ix):
            out.append(Finding("not-a-stream", "body is not SSE, NDJSON, an AWS event stream or "
                               f"a JSON array ({r.content_type or 'no content type'})"))
        return out
    for fe in a.frame_errors:
        out.append(Finding("crc-mismatch" if fe.kind == "crc" else "frame-error",
                           f"{a.wire}: {fe.message}", fe.event))
    if shape is None and a.shape in UNKNOWN and a.wire_events and not _jsonrpc(a):
        out.append(Finding("unknown-format",
                           f"the stream's format is not one streamtape knows (a generic {a.wire} "
                           "stream): its answer, tool calls and finish could not be checked"))
    if a.shape in DONE_SENTINEL and not a.done:
        out.append(Finding("no-done", "no data: [DONE] at the end of the stream"))
    elif a.shape in FINAL_MARKER and not a.done:
        out.append(Finding("no-done", f"no final marker ({FINAL_MARKER[a.shape]})"))
    elif a.shape in END_OF_BODY and a.wire == "jsonarray" and not a.done:
        out.append(Finding("no-done", "no closing ] of the JSON array: the stream was cut"))
    several = len(a.choices) > 1
    for ch in a.choices:
        # With n > 1 every choice has its own finish; name the choice then.
        who = f"choice {ch.index}: " if several else ""
        if a.shape in FINAL_MARKER or a.shape in DONE_SENTINEL or a.shape in END_OF_BODY:
            if ch.finish is None:
                out.append(Finding("no-finish", f"{who}no finish event (finish_reason / stop reason)"))
            elif ch.finish.reason == "length":
                out.append(Finding("finish-length",
                                   f"{who}finish reason length ({ch.finish.raw}): the answer was cut",
                                   _source_at(a, ch.finish.at_ns, "finish")))
            elif ch.finish.reason == "content_filter":
                out.append(Finding("finish-content-filter",
                                   f"{who}finish reason content_filter ({ch.finish.raw})"))
        if ch.refusal:
            out.append(Finding("refusal", f"{who}the model refused: {_short(ch.refusal)}"))
        if THINK_TAG.search(ch.text):
            out.append(Finding("reasoning-inline",
                               f"{who}the answer text holds <think> tags: the server sent the "
                               "reasoning inline, not split out (no reasoning parser?)"))
    for e in a.errors:
        msg = e.error.get("message", e.error) if isinstance(e.error, dict) else e.error
        what = "error event"
        if a.wire == "eventstream" and isinstance(e.error, dict) and e.error.get("type"):
            what = f"{e.error['type']} message"  # an exception message: its type
        out.append(Finding("error-event", f"{what} after HTTP {r.status}: {_short(msg)}",
                           e.source))
    for i in a.invalid_json:
        out.append(Finding("invalid-json", f"event {i} is not valid JSON: "
                           f"{_short(a.wire_events[i].data)}", i))
    for m in _control_tokens("".join(ch.text for ch in a.choices)):
        out.append(Finding("control-token", f"control token {m} in the text"))
    if a.keepalives:
        out.append(Finding("keepalive", f"{a.keepalives} keep-alive comment"
                           + ("s" if a.keepalives != 1 else "") + " in the stream"))
    if a.shape in USAGE_OPTIN and usage_requested(ix) and a.usage is None:
        out.append(Finding("usage-missing", "usage missing though stream_options.include_usage "
                           "was requested"))
    if (own := SHAPE_FINDINGS.get(a.shape)) is not None:
        out.extend(Finding(cast(Code, code), message, event) for code, message, event in own(a.wire_events))
    if a.partial_tail.strip():
        out.append(Finding("cut-event", f"the stream ends inside an event "
                           f"({len(a.partial_tail)} bytes after the last complete event)"))
    for ch in a.choices:
        who = f"choice {ch.index}: " if several else ""
        for c in ch.tool_calls:
            if not c.valid_json and c.arguments.strip():
                out.append(Finding("tool-args-invalid",
                                   f"{who}tool call {c.index} ({c.name}) arguments are not valid "
                                   f"JSON once joined: {_short(c.arguments)}"))
    return out


def _jsonrpc(a: Analysis) -> bool:
    """A generic stream of JSON-RPC messages (MCP's Streamable HTTP): a format known
    well enough, whose answer is the JSON-RPC result."""
    return any(isinstance(w.value, dict) and w.value.get("jsonrpc") == "2.0"
               for w in a.wire_events)


def _control_tokens(text: str) -> list[str]:
    seen: list[str] = []
    for m in CONTROL_TOKENS.finditer(text):
        if m.group(0) not in seen:
            seen.append(m.group(0))
    return seen


def _source_at(a: Analysis, at_ns: int, kind: str) -> int | None:
    for e in a.events:
        if e.kind == kind and e.at_ns == at_ns:
            return e.source
    return None


def _short(v: object, n: int = 80) -> str:
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    s = s.replace("\n", "\\n").replace("\r", "\\r")
    return s if len(s) <= n else s[: n - 1] + "…"
