"""Reading one HTTP/1.1 request from an asyncio stream: just what a replay server needs.

The replay server answers SDKs, curl and test clients, never browsers or
proxies, so this is a small strict reader rather than a general parser: a
request line, header lines, then a body framed by ``Content-Length`` or
``Transfer-Encoding: chunked`` (trailers skipped), with ``Expect:
100-continue`` answered. A malformed request raises :class:`BadRequest`,
which the server answers with a 400 and a close. The head is parsed by the
pure :func:`parse_head`; only :func:`read_request` touches the stream.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..wire import chunk_size, header_value, keeps_alive

__all__ = ["MAX_HEAD", "BadRequest", "HTTPRequest", "parse_head", "read_request"]

MAX_HEAD = 64 * 1024
"""The longest request head accepted (the stream reader's limit)."""


class BadRequest(Exception):
    """The client sent something that is not an HTTP/1.1 request; answered with a 400."""


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
    """The request line and headers of ``raw`` (the head without its final blank line)."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise BadRequest(f"bad request line {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if not sep or not k or k != k.strip():
            raise BadRequest(f"bad header line {line[:80]!r}")
        headers.append((k, v.strip()))
    return HTTPRequest(parts[0].upper(), parts[1], parts[2], headers)


async def read_request(reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> HTTPRequest | None:
    """One request from the connection, or None on a clean EOF between requests."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise BadRequest("connection closed inside the request head") from None
    except asyncio.LimitOverrunError:
        raise BadRequest("request head too large") from None
    req = parse_head(raw[:-4])
    if (req.header("expect") or "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in (req.header("transfer-encoding") or "").lower():
        req.body = await _read_chunked(reader)
    else:
        cl = req.header("content-length")
        if cl:
            try:
                n = int(cl)
            except ValueError:
                raise BadRequest(f"bad Content-Length {cl!r}") from None
            req.body = await reader.readexactly(n)
    return req


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        try:
            size = chunk_size(await reader.readuntil(b"\r\n"))
        except ValueError:
            raise BadRequest("bad chunk size in request body") from None
        if size == 0:
            # Trailers, then the blank line.
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
