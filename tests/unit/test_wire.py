"""The HTTP/1.1 wire rules every replay driver shares (streamtape.wire). Pure: no sockets."""

from __future__ import annotations

import json

import pytest

from streamtape.serve.request import parse_head
from streamtape.wire import (
    FRAMING_HEADERS,
    HOP_BY_HOP,
    LAST_CHUNK,
    NOT_FORWARDED,
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
    message_head,
    reason_phrase,
    replay_framing,
    request_head,
    response_head,
    status_head,
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


def test_proxy_connection_is_hop_by_hop_and_nothing_else_is_dropped() -> None:
    assert "proxy-connection" in HOP_BY_HOP
    assert NOT_FORWARDED == HOP_BY_HOP | FRAMING_HEADERS
    sent = [("Host", "api.test"), ("Proxy-Connection", "keep-alive"), ("Upgrade", "h2c"),
            ("Proxy-Authorization", "Basic eA=="), ("Trailer", "X-Sum"), ("Authorization", "Bearer k")]
    assert end_to_end(sent) == [("Host", "api.test"), ("Authorization", "Bearer k")]


def test_a_request_head_is_its_line_its_headers_in_order_and_a_blank_line() -> None:
    head = request_head("POST", "/v1/chat", [("Host", "h"), ("x-b", "2"), ("X-A", "1")])
    assert head == b"POST /v1/chat HTTP/1.1\r\nHost: h\r\nx-b: 2\r\nX-A: 1\r\n\r\n"
    assert request_head("GET", "http://h/x", [], "HTTP/1.0") == b"GET http://h/x HTTP/1.0\r\n\r\n"


def test_the_request_reader_reads_back_what_the_head_writer_wrote() -> None:
    headers = [("Host", "h"), ("Content-Type", "caf\u00e9; q=1"), ("X-Empty", "")]
    req = parse_head(request_head("PUT", "/a?b=c", headers)[:-4])
    assert (req.method, req.target, req.version, req.headers) == ("PUT", "/a?b=c", "HTTP/1.1", headers)


def test_a_status_head_keeps_the_recorded_version_and_reason_even_empty() -> None:
    assert status_head(200, "Fine", [("A", "1")], "HTTP/1.0") == b"HTTP/1.0 200 Fine\r\nA: 1\r\n\r\n"
    assert status_head(599, "", []) == b"HTTP/1.1 599 \r\n\r\n", "RFC 9112 4: SP before the reason"


def test_a_head_is_latin1_and_a_character_outside_it_is_one_byte() -> None:
    head = message_head("GET / HTTP/1.1", [("X", "caf\u00e9 \u20ac")])
    assert head == b"GET / HTTP/1.1\r\nX: caf\xe9 ?\r\n\r\n"
    assert len(head) == len("GET / HTTP/1.1\r\nX: caf\u00e9 \u20ac\r\n\r\n")


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


def test_error_bodies_without_a_path_are_openai_shaped() -> None:
    doc = json.loads(error_body("no recording answers", ErrorType.BAD_PROFILE))
    assert doc == {"error": {"message": "no recording answers", "type": "streamtape_bad_profile",
                             "param": None, "code": None}}
    assert json.loads(error_body("x"))["error"]["type"] == "streamtape_no_match"
