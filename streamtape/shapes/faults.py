"""Errors in each format's own shape, for replay faults: mid-stream and non-streaming."""

from __future__ import annotations

import json
from http import HTTPStatus

from ..errors import ShapeError
from .detect import SHAPES, WIRE_OF_SHAPE
from .eventstream import exception_message


def _j(v: object) -> bytes:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode()


def _openai_type(status: int) -> str:
    if status == 429:
        return "rate_limit_exceeded"
    if status in (401, 403):
        return "authentication_error"
    if 400 <= status < 500:
        return "invalid_request_error"
    return "server_error"


_ANTHROPIC = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _anthropic_type(status: int) -> str:
    return _ANTHROPIC.get(status, "invalid_request_error" if status < 500 else "api_error")


def _tgi_type(status: int) -> str:
    return {422: "validation", 424: "generation", 429: "overloaded"}.get(status, "generation")


_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED",
                  500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def _google_error(status: int, message: str) -> dict[str, object]:
    """A Google API error object (``google.rpc.Status`` in JSON, as Gemini sends it)."""
    name = _GOOGLE_STATUS.get(status, "INVALID_ARGUMENT" if status < 500 else "INTERNAL")
    return {"error": {"code": status, "message": message, "status": name}}


_AWS_ERROR = {400: "ValidationException", 403: "AccessDeniedException",
              404: "ResourceNotFoundException", 408: "ModelTimeoutException",
              424: "ModelErrorException", 429: "ThrottlingException",
              503: "ServiceUnavailableException"}

STREAM_EXCEPTION = "modelStreamErrorException"
"""The exception type a Bedrock stream's injected error event carries."""


def _check(shape: str) -> None:
    if shape not in SHAPES:
        raise ShapeError(f"unknown shape {shape!r}: expected one of {', '.join(SHAPES)}")


def error_event(shape: str, message: str, wire: str | None = None) -> bytes:
    """A mid-stream error event (after a 200) as the format's server would send it.

    OpenAI-style and llama.cpp: ``data: {"error": {...}}``; Responses API and
    Anthropic: an ``event: error`` event; TGI: ``data: {"error": ..., "error_type": ...}``;
    Ollama / NDJSON: ``{"error": "..."}`` line; ``raw``: the message and a newline.
    Bedrock (the AWS event stream): an exception message
    (:data:`STREAM_EXCEPTION`); Gemini: its error object, as an SSE event or, on the
    JSON array (``wire="jsonarray"``, and the generic ``jsonarray``), as the next
    element and the closing ``]`` (``,`` first: it follows an element); Cohere: a
    ``message-end`` with ``finish_reason: ERROR``; the Gemini Interactions API: ``event:
    error`` with ``{"event_type": "error", "error": {"code", "message"}}``; Replicate: ``event: error``;
    the Assistants API: ``event: error``.
    """
    _check(shape)
    wire = wire or next((w for s, w in WIRE_OF_SHAPE.items() if s == shape), None)
    if wire == "eventstream":
        return exception_message(STREAM_EXCEPTION, message)
    if wire == "jsonarray":
        return b",\r\n" + _j(_google_error(500, message)) + b"\n]"
    if shape == "gemini":
        return b"data: " + _j(_google_error(500, message)) + b"\n\n"
    if shape == "gemini-interactions":  # google-genai's ErrorEvent: a code (a string) and a message
        failure: dict[str, object] = {"event_type": "error", "error": {"code": "internal", "message": message}}
        return b"event: error\ndata: " + _j(failure) + b"\n\n"
    if shape == "cohere":
        end = {"type": "message-end", "delta": {"finish_reason": "ERROR", "error": message}}
        return b"event: message-end\ndata: " + _j(end) + b"\n\n"
    if shape == "replicate":
        return b"event: error\ndata: " + _j({"detail": message}) + b"\n\n"
    if shape == "openai-assistants":
        return b"event: error\ndata: " + _j({"code": "server_error", "message": message}) + b"\n\n"
    if shape == "watsonx":
        body = {"errors": [{"code": "internal_error", "message": message}], "status_code": 500}
        return b"event: error\ndata: " + _j(body) + b"\n\n"
    if shape == "anthropic":
        body = {"type": "error", "error": {"type": "api_error", "message": message}}
        return b"event: error\ndata: " + _j(body) + b"\n\n"
    if shape == "openai-responses":
        event = {"type": "error", "code": "server_error", "message": message, "param": None}
        return b"event: error\ndata: " + _j(event) + b"\n\n"
    if shape == "tgi":
        return b"data: " + _j({"error": message, "error_type": "generation"}) + b"\n\n"
    if shape in ("ollama-chat", "ollama-generate", "ndjson"):
        return _j({"error": message}) + b"\n"
    if shape == "raw":
        return message.encode() + b"\n"
    # openai-chat, azure-openai, openai-completions, llamacpp, sse
    err = {"code": 500, "message": message, "type": "server_error"}
    return b"data: " + _j({"error": err}) + b"\n\n"


def error_body(shape: str, status: int, message: str) -> tuple[str, bytes]:
    """A non-streaming error response body (for a status fault): ``(content_type, body)``."""
    _check(shape)
    ct = "application/json"
    if shape in ("gemini", "gemini-interactions", "jsonarray"):
        return ct, _j(_google_error(status, message))
    if shape in ("bedrock-converse", "bedrock-invoke", "eventstream"):
        name = _AWS_ERROR.get(status, "ValidationException" if status < 500
                              else "InternalServerException")
        return ct, _j({"__type": name, "message": message})
    if shape == "cohere":
        return ct, _j({"message": message})
    if shape == "replicate":
        return ct, _j({"detail": message, "status": status})
    if shape == "watsonx":
        return ct, _j({"errors": [{"code": "error", "message": message}], "status_code": status})
    if shape == "anthropic":
        return ct, _j({"type": "error", "error": {"type": _anthropic_type(status),
                                                  "message": message}})
    if shape in ("openai-chat", "azure-openai", "openai-completions", "openai-responses",
                 "openai-assistants"):
        return ct, _j({"error": {"message": message, "type": _openai_type(status), "param": None,
                                 "code": None}})
    if shape == "llamacpp":
        try:
            name = HTTPStatus(status).phrase.lower().replace(" ", "_")
        except ValueError:
            name = "server_error"
        return ct, _j({"error": {"code": status, "message": message, "type": name}})
    if shape == "tgi":
        return ct, _j({"error": message, "error_type": _tgi_type(status)})
    if shape == "raw":
        return "text/plain; charset=utf-8", message.encode()
    return ct, _j({"error": message})
