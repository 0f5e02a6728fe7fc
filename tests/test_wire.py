"""The HTTP/1.1 wire rules every replay driver shares (streamtape.wire). Pure: no sockets."""

from __future__ import annotations

import json

import pytest

from streamtape.wire import (
    LAST_CHUNK,
    ErrorType,
    Framing,
    body_end,
    chunk_size,
    connection_framing,
    end_to_end,
    error_body,
    frame,
    framing_headers,
    header_value,
    keeps_alive,
    reason_phrase,
    replay_framing,
    response_head,
)


def _head_lines(head: bytes) -> list[str]:
    assert head.endswith(b"\r\n\r\n")
    return head[:-4].decode("latin-1").split("\r\n")


@pytest.mark.parametrize(
    ("framing", "length", "expected"),
    [
        ("chunked", None, [("Transfer-Encoding", "chunked")]),
        ("frames", None, [("Transfer-Encoding", "chunked")]),
        ("content-length", 12, [("Content-Length", "12")]),
        ("content-length", None, [("Content-Length", "0")]),
        ("close-delimited", 12, []),
        ("none", None, []),
        ("none", 7, [("Content-Length", "7")]),
    ],
)
def test_framing_headers_follow_the_framing_actually_sent(
    framing: str, length: int | None, expected: list[tuple[str, str]]
) -> None:
    assert framing_headers(framing, length) == expected


def test_recorded_hop_by_hop_and_framing_headers_are_never_passed_on() -> None:
    recorded = [("Content-Type", "text/event-stream"), ("connection", "keep-alive"),
                ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"),
                ("Content-Length", "99"), ("TE", "trailers"), ("X-Request-Id", "r1")]
    assert end_to_end(recorded) == [("Content-Type", "text/event-stream"), ("X-Request-Id", "r1")]


def test_header_lookup_is_case_insensitive_and_takes_the_first_value() -> None:
    headers = [("x-a", "1"), ("X-A", "2")]
    assert header_value(headers, "X-a") == "1"
    assert header_value(headers, "x-b") is None


def test_http2_and_unknown_recorded_framings_replay_chunked() -> None:
    assert replay_framing("frames") is Framing.CHUNKED
    assert replay_framing("something-new") is Framing.CHUNKED
    assert replay_framing("close-delimited") is Framing.CLOSE_DELIMITED


def test_an_http10_client_gets_a_chunked_recording_close_delimited() -> None:
    head, used, keep = response_head(200, "OK", [], "chunked", chunked_ok=False)
    assert used is Framing.CLOSE_DELIMITED and keep is False
    assert _head_lines(head) == ["HTTP/1.1 200 OK", "Connection: close"]


@pytest.mark.parametrize(("status", "method"), [(200, "HEAD"), (204, "GET"), (304, "GET"), (101, "GET")])
def test_responses_without_a_body_are_framed_none(status: int, method: str) -> None:
    assert connection_framing("chunked", status=status, method=method) is Framing.NONE


def test_a_head_response_declares_the_recorded_length_of_the_body_it_does_not_send() -> None:
    head, used, _ = response_head(200, "OK", [], "content-length", content_length=42, method="HEAD")
    assert used is Framing.NONE
    assert "Content-Length: 42" in _head_lines(head)
    head, _, _ = response_head(204, "", [], "content-length", content_length=42)
    assert not any(line.startswith("Content-Length") for line in _head_lines(head))


def test_the_head_uses_the_standard_reason_when_none_was_recorded() -> None:
    head, _, _ = response_head(429, "", [("Retry-After", "1")], "content-length", content_length=0)
    assert _head_lines(head) == ["HTTP/1.1 429 Too Many Requests", "Retry-After: 1", "Content-Length: 0"]
    assert reason_phrase(599) == ""
    head, _, _ = response_head(599, "", [], "content-length", content_length=0)
    assert _head_lines(head)[0] == "HTTP/1.1 599"


def test_one_piece_is_one_chunk_and_an_empty_piece_is_nothing() -> None:
    assert frame("chunked", b"hello") == b"5\r\nhello\r\n"
    assert frame("chunked", b"x" * 26) == b"1a\r\n" + b"x" * 26 + b"\r\n"
    assert frame("chunked", b"") == b"", "a zero-size chunk would end the body"
    assert frame("content-length", b"hello") == b"hello"
    assert frame("none", b"hello") == b""


def test_only_a_chunked_body_has_closing_bytes() -> None:
    assert body_end("chunked") == LAST_CHUNK == b"0\r\n\r\n"
    assert body_end("frames") == LAST_CHUNK
    assert body_end("content-length") == body_end("close-delimited") == b""


def test_keep_alive_defaults_differ_between_http10_and_http11() -> None:
    assert keeps_alive("HTTP/1.1", [])
    assert not keeps_alive("HTTP/1.1", [("Connection", "close")])
    assert not keeps_alive("HTTP/1.0", [])
    assert keeps_alive("HTTP/1.0", [("Connection", "Keep-Alive")])


def test_chunk_size_lines_ignore_extensions_and_reject_garbage() -> None:
    assert chunk_size(b"1A;name=value\r\n") == 26
    with pytest.raises(ValueError):
        chunk_size(b"zz\r\n")


def test_error_bodies_are_openai_shaped() -> None:
    doc = json.loads(error_body("no recording answers", ErrorType.BAD_PROFILE))
    assert doc == {"error": {"message": "no recording answers", "type": "streamtape_bad_profile"}}
    assert json.loads(error_body("x"))["error"]["type"] == "streamtape_no_match"
