"""What keeps one bad client from hurting the others, and the server from its network.

A replay server under a load test meets clients that send garbage, send too
much, or stop reading. Each gets bounded resources and a bounded time, then
its connection is closed and logged; the other streams never notice:

* a refused request (:class:`~.request.BadRequest`) gets its error answer,
  then :func:`answer_and_close` half-closes and discards what the client is
  still sending for a moment (a client blocked writing a 1 GiB body would
  otherwise meet a TCP reset and lose the 413 it was sent), then closes;
* a client that stops reading: the player stops writing once the socket's
  buffer holds a high-water mark (:mod:`.player`), so the server's memory for
  it stays bounded; :func:`drain_within` gives it the client timeout to read
  on, then the server drops the connection (outcome ``client_stalled``).

And where the server listens: :func:`exposure_warning` says what it means to
listen beyond the loopback interface (a replay server hands out recorded
responses, and the requests, to whoever asks).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress

from ..wire import ErrorType, Framing, error_body, response_head
from .request import BadRequest

__all__ = [
    "LINGER_S", "answer_and_close", "drain_within", "exposure_warning", "refusal", "stalled_note",
]

LINGER_S = 2.0
"""How long a refused client's further bytes are read and discarded before the close."""


def refusal(e: BadRequest) -> bytes:
    """The whole answer to a refused request (empty when the connection just closes)."""
    if e.status is None:
        return b""
    body = error_body(str(e), ErrorType.BAD_REQUEST)
    head, _, _ = response_head(
        e.status, "", [("Content-Type", "application/json")], Framing.CONTENT_LENGTH,
        content_length=len(body), keep_alive=False,
    )
    return head + body


async def answer_and_close(e: BadRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           linger_s: float = LINGER_S) -> None:
    """Answer a refused request and close its connection without losing the answer.

    Closing a socket that still has unread input sends a TCP reset, and a
    client that is still writing (a body over the limit) may see the reset
    before the answer. So: the answer, a FIN after it, then read and discard
    until the client closes too or ``linger_s`` passes; then close.
    """
    transport = writer.transport
    if transport.is_closing():
        return
    answer = refusal(e)
    if not answer:  # not HTTP: nothing to say
        transport.abort()
        return
    writer.write(answer)
    with contextlib.suppress(OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()
    with contextlib.suppress(TimeoutError, ConnectionError, OSError):
        async with asyncio.timeout(linger_s):
            while await reader.read(65536):
                pass
    if transport.get_write_buffer_size():
        transport.abort()  # the client never took the answer: do not wait on it
    else:
        transport.close()


async def drain_within(writer: asyncio.StreamWriter, timeout: float) -> bool:
    """``await writer.drain()``, for at most ``timeout`` seconds; False when it did not drain.

    ``drain`` returns once the transport's buffer is below its low-water mark,
    that is once the client has read most of what was waiting. A client that
    reads nothing for ``timeout`` seconds (or reads slower than ~48 KiB per
    ``timeout``) gets False, and the caller drops it.
    """
    try:
        async with asyncio.timeout(timeout):
            await writer.drain()
    except TimeoutError:
        return False
    return True


def stalled_note(timeout: float, waiting: int) -> str:
    """The log line's detail for a client dropped because it stopped reading."""
    return (f"the client read nothing for {timeout:g} s with {waiting} bytes waiting; "
            "connection dropped")


def exposure_warning(host: str) -> str | None:
    """A warning when ``host`` is not a loopback address (None for 127.0.0.1, ::1, localhost)."""
    if host == "localhost":
        return None
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return (f"listening on {host}, which is not a loopback address: other machines may reach "
                "the recorded responses (and their requests); the default is 127.0.0.1")
    if addr.is_loopback:
        return None
    if addr.is_unspecified:
        return (f"listening on every interface ({host}): any machine that can reach this one can "
                "read the recorded responses (and their requests); the default is 127.0.0.1")
    return (f"listening on {host}, which is not a loopback address: other machines on that network "
            "can read the recorded responses (and their requests); the default is 127.0.0.1")
