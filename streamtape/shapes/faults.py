"""Errors in each format's own shape, for replay faults: mid-stream and non-streaming."""

from __future__ import annotations

import json
from http import HTTPStatus

from ..errors import ShapeError
from .detect import SHAPES


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


def _check(shape: str) -> None:
    if shape not in SHAPES:
        raise ShapeError(f"unknown shape {shape!r}: expected one of {', '.join(SHAPES)}")


def error_event(shape: str, message: str) -> bytes:
    """A mid-stream error event (after a 200) as the format's server would send it.

    OpenAI-style and llama.cpp: ``data: {"error": {...}}``; Responses API and
    Anthropic: an ``event: error`` event; TGI: ``data: {"error": ..., "error_type": ...}``;
    Ollama / NDJSON: ``{"error": "..."}`` line; ``raw``: the message and a newline.
    """
    _check(shape)
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
    # openai-chat, openai-completions, llamacpp, sse
    err = {"code": 500, "message": message, "type": "server_error"}
    return b"data: " + _j({"error": err}) + b"\n\n"


def error_body(shape: str, status: int, message: str) -> tuple[str, bytes]:
    """A non-streaming error response body (for a status fault): ``(content_type, body)``."""
    _check(shape)
    ct = "application/json"
    if shape == "anthropic":
        return ct, _j({"type": "error", "error": {"type": _anthropic_type(status),
                                                  "message": message}})
    if shape in ("openai-chat", "openai-completions", "openai-responses"):
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
