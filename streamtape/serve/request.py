"""Reading one HTTP/1.1 request from an asyncio stream: just what a replay server needs.

The replay server answers SDKs, curl and test clients, never browsers or
proxies, so this is a small strict reader rather than a general parser: a
request line, header lines, then a body framed by ``Content-Length`` or
``Transfer-Encoding: chunked`` (trailers checked, then discarded), with
``Expect: 100-continue`` answered. The head is parsed by the pure
:func:`parse_head`; only :func:`read_request` touches the stream. h11 reads the
same bytes in ``tests/unit/test_request_reader_h11.py``, which lists where the
two answer differently and why.

The server sits on a port anything can connect to (a load test gone wrong, a
TLS client pointed at ``http://``, a port scanner), so every way a request can
be wrong ends in a :class:`BadRequest` carrying the answer, after which the
server closes that connection and goes on serving the others:

=========================================================  ==========
what came                                                   answer
=========================================================  ==========
a TLS handshake (the first byte is ``0x16``)                close, no answer
a malformed request line, header line or trailer line, a    400
bare CR or LF, a NUL, an obsolete line fold, a header name
with a space, a space or control character in the target
an HTTP/1.1 request without ``Host``, or any with several   400
``Content-Length`` that is not digits, several that differ, 400
or one beside ``Transfer-Encoding``; a transfer coding
other than ``chunked``; a malformed chunk
a head longer than :data:`MAX_HEAD` (64 KiB)                431
a body longer than the server's limit (:data:`MAX_BODY`)    413, before any of it is read
a request (head and body) still incomplete after the        408
client timeout (:data:`CLIENT_TIMEOUT_S`) from its first
byte
an HTTP version other than 1.0 and 1.1                      505
=========================================================  ==========

No request is ever read into memory beyond those limits: the head is bounded
by the stream reader's limit, a declared length is checked before reading,
and a chunked body is counted as it arrives. A connection that waits between
requests (keep-alive) has no timeout: SDK pools keep idle connections open.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Literal

from ..wire import TOKEN, chunk_size, header_value, keeps_alive

__all__ = [
    "CLIENT_TIMEOUT_S",
    "MAX_BODY",
    "MAX_HEAD",
    "BadRequest",
    "HTTPRequest",
    "parse_head",
    "peek_request",
    "read_request",
]

MAX_HEAD = 64 * 1024
"""The longest request head accepted (the stream reader's limit)."""

MAX_BODY = 16 * 1024 * 1024
"""The default limit on a request body (``serve --max-body``); a longer one gets a 413."""

CLIENT_TIMEOUT_S = 30.0
"""The default client timeout (``serve --client-timeout``): the longest a request may take
to arrive once its first byte has, and the longest a client may leave the bytes sent to it
unread before its connection is dropped."""

_TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a ClientHello
_BAD_IN_HEAD = re.compile(r"[\r\n\x00]")
_TARGET = re.compile(r"[\x21-\x7e\x80-\xff]+")
"""A request target: visible ASCII (RFC 9112 3.2), and raw non-ASCII bytes (a UTF-8 path
some clients send unencoded), read as Latin-1; never a space, a tab or a control
character, which another parser could take for the end of the target."""
_VERSION = re.compile(r"HTTP/\d\.\d")
_DIGITS = re.compile(r"[0-9]+")
_CHUNK_LINE = re.compile(rb"[0-9A-Fa-f]+(?:[ \t]*;[^\r\n\x00]*)?\r\n")


class BadRequest(Exception):
    """The client sent something the server does not take; the server answers and closes.

    ``status`` is the status of the answer (400, 408, 413, 431, 505), or None
    when the bytes are no HTTP at all (a TLS handshake) and the connection is
    closed without one. The message says what was wrong, for the error body.
    """

    def __init__(self, message: str, status: int | None = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class HTTPRequest:
    """One request as received: method (upper case), target, version, headers, body."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        return header_value(self.headers, name)

    @property
    def keep_alive(self) -> bool:
        """Whether the client wants the connection kept after the response."""
        return keeps_alive(self.version, self.headers)

    @property
    def chunked_ok(self) -> bool:
        """Whether the client can read a chunked response (HTTP/1.0 cannot)."""
        return self.version != "HTTP/1.0"


def parse_head(raw: bytes) -> HTTPRequest:
    """The request line and headers of ``raw`` (the head without its final blank line).

    Raises :class:`BadRequest` for anything RFC 9112 says a server must or
    ought to reject rather than guess at (see the module docstring).
    """
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if (len(parts) != 3 or not TOKEN.fullmatch(parts[0]) or not _TARGET.fullmatch(parts[1])
            or not _VERSION.fullmatch(parts[2]) or _BAD_IN_HEAD.search(lines[0])):
        raise BadRequest(f"bad request line {lines[0][:80]!r}")
    if parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(f"{parts[2]} is not supported: this server speaks HTTP/1.1", 505)
    headers = [_field(line, "header") for line in lines[1:] if line]
    hosts = sum(1 for k, _ in headers if k.lower() == "host")
    # RFC 9112 3.2: a server MUST answer 400 to either.
    if hosts > 1:
        raise BadRequest("several Host headers")
    if hosts == 0 and parts[2] == "HTTP/1.1":
        raise BadRequest("an HTTP/1.1 request without a Host header")
    return HTTPRequest(parts[0].upper(), parts[1], parts[2], headers)


def _field(line: str, what: str) -> tuple[str, str]:
    """One header (or trailer) line as a name and a value. Raises :class:`BadRequest`."""
    k, sep, v = line.partition(":")
    if not sep or not TOKEN.fullmatch(k) or _BAD_IN_HEAD.search(v):
        # No colon, a space before it, an obsolete line fold (leading space), a bare CR or LF.
        raise BadRequest(f"bad {what} line {line[:80]!r}")
    return k, v.strip(" \t")


def body_length(req: HTTPRequest) -> int | None:
    """The declared ``Content-Length`` (None: chunked, or no body). Raises :class:`BadRequest`.

    Several ``Content-Length`` values must agree, and it may not come with
    ``Transfer-Encoding`` (a request two parsers could frame two ways).
    """
    te = [v for k, v in req.headers if k.lower() == "transfer-encoding"]
    cl = [x.strip() for k, v in req.headers if k.lower() == "content-length" for x in v.split(",")]
    if te:
        if cl:
            raise BadRequest("both Content-Length and Transfer-Encoding: the body's length is ambiguous")
        codings = [c.strip().lower() for v in te for c in v.split(",") if c.strip()]
        if codings != ["chunked"]:
            raise BadRequest(f"unsupported Transfer-Encoding {', '.join(te)!r}: only chunked is read")
        return None
    if not cl:
        return 0
    if any(not _DIGITS.fullmatch(x) for x in cl) or len(set(map(int, cl))) != 1:
        raise BadRequest(f"bad Content-Length {', '.join(cl)[:80]!r}")
    return int(cl[0])


def peek_request(data: bytes, max_body: int = MAX_BODY) -> HTTPRequest | Literal["more", "no"]:
    """The first request in ``data`` (bytes a client has sent so far), read without a stream.

    ``"more"`` while its head or its ``Content-Length`` body is still
    incomplete; ``"no"`` for bytes this reader would not answer without a
    conversation (a malformed head, a chunked body, ``Expect: 100-continue``,
    a head or body over the limits). The proxy uses it to decide, before
    mitmproxy's HTTP layer takes a connection, whether the replay server
    answers it (:mod:`streamtape.mitm.direct`).
    """
    end = data.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end < 0:
        return "more" if len(data) < MAX_HEAD else "no"
    try:
        req = parse_head(data[:end])
        length = body_length(req)
    except BadRequest:
        return "no"
    if length is None or length > max_body or req.header("expect") is not None:
        return "no"
    start = end + 4
    if len(data) < start + length:
        return "more"
    req.body = data[start:start + length]
    return req


async def read_request(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    max_body: int = MAX_BODY,
    timeout: float = CLIENT_TIMEOUT_S,
) -> HTTPRequest | None:
    """One request from the connection, or None on a clean EOF between requests.

    Raises :class:`BadRequest` (see the module docstring for which answer each
    problem gets). ``max_body``: the longest body read; ``timeout``: how long
    the whole request may take from its first byte.
    """
    try:
        first = await reader.readexactly(1)
    except asyncio.IncompleteReadError:
        return None
    if first[0] == _TLS_HANDSHAKE:
        raise BadRequest("a TLS handshake on a plain-HTTP port (use http://, not https://)", None)
    try:
        async with asyncio.timeout(timeout):
            return await _read_rest(first, reader, writer, max_body)
    except TimeoutError:
        raise BadRequest(f"the request did not arrive in full within {timeout:g} s", 408) from None


async def _read_rest(first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     max_body: int) -> HTTPRequest:
    try:
        raw = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        raise BadRequest("connection closed inside the request head") from None
    except asyncio.LimitOverrunError:
        raise BadRequest(f"request head over {MAX_HEAD // 1024} KiB", 431) from None
    req = parse_head(raw[:-4])
    length = body_length(req)
    if length is not None and length > max_body:
        raise BadRequest(f"request body of {length} bytes is over the limit of {max_body} bytes", 413)
    if (req.header("expect") or "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    try:
        if length is None:
            req.body = await _read_chunked(reader, max_body)
        elif length:
            req.body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise BadRequest("connection closed inside the request body") from None
    return req


async def _read_chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.LimitOverrunError:
            raise BadRequest("bad chunk size in request body") from None
        if not _CHUNK_LINE.fullmatch(line):  # int() alone would take "-5", "0x10", "1_0"
            raise BadRequest(f"bad chunk size {line[:40]!r} in request body")
        size = chunk_size(line)
        if size == 0:
            # Trailers (bounded like a head, checked like header lines, then discarded),
            # then the blank line.
            trailers = 0
            while (line := await _line(reader)) != b"\r\n":
                trailers += len(line)
                if trailers > MAX_HEAD:
                    raise BadRequest(f"request trailers over {MAX_HEAD // 1024} KiB", 431)
                _field(line[:-2].decode("latin-1"), "trailer")
            return b"".join(parts)
        total += size
        if total > max_body:
            raise BadRequest(f"request body over the limit of {max_body} bytes", 413)
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise BadRequest("chunk data not followed by CRLF")


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise BadRequest(f"request trailers over {MAX_HEAD // 1024} KiB", 431) from None
