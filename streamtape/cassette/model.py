"""The values a cassette holds: :class:`Interaction`, its :class:`Request` and
:class:`Response` (body :class:`~streamtape.cassette.pieces.Piece` values), the
connection :class:`Setup`, a WebSocket connection's :class:`Message` values and
:class:`WebSocketSession`, and how an interaction ended (:class:`Outcome`).

Pure values: no file, no format. The ``.tape`` records that store them are
:mod:`streamtape.cassette.records`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

from ..wire import Framing, header_value
from .pieces import Piece, PieceSequence

Headers = tuple[tuple[str, str], ...]

REDACTED = "REDACTED"
"""What a recorder stores in place of a secret; a recorded ``REDACTED`` matches any value."""


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=3)


class Outcome(StrEnum):
    """How an interaction ended; the value is what a cassette stores.

    The first four are what the proxy saw. ``interrupted`` means the recording
    stopped (Ctrl-C, SIGKILL) before the response did: the reader gives it to
    an interaction whose ``end`` record never reached the disk.
    """

    COMPLETE = "complete"
    UPSTREAM_CLOSED = "upstream_closed"
    CLIENT_DISCONNECTED = "client_disconnected"
    UPSTREAM_ERROR = "upstream_error"
    INTERRUPTED = "interrupted"


# The members under their old module-level names.

@dataclass(frozen=True, slots=True)
class Setup:
    """How a recorded request reached the upstream: the part of the wait that is the proxy's.

    Through a proxy, a request on a new upstream connection waits for that
    connection (a TCP connect, perhaps an upstream proxy's CONNECT, a TLS
    handshake: tens to hundreds of milliseconds to a remote API) before it can
    be sent. The client would have paid a handshake of its own without the
    proxy, but not this one, at this moment: so the marks are kept here and out
    of the offsets, which count from the moment the request was handed to the
    upstream. A mark is None when that step did not happen for this request.
    """

    wait_ns: int
    """From the proxy having the whole request to t = 0 (the request handed to the upstream)."""
    tcp_ns: int | None = None
    """TCP connect (name resolution included); None when the connection was already open."""
    proxy_connect_ns: int | None = None
    """An upstream proxy's CONNECT exchange; None without one."""
    tls_ns: int | None = None
    """The TLS handshake with the upstream; None for plain HTTP or an open connection."""

    @property
    def new_connection(self) -> bool:
        """Whether the request waited for a new upstream connection (False: one was open)."""
        return self.tcp_ns is not None or self.proxy_connect_ns is not None or self.tls_ns is not None

    @property
    def marks(self) -> dict[str, int]:
        """The connection's setup steps that happened, by name (``tcp``, ``proxy_connect``, ``tls``)."""
        steps = (("tcp", self.tcp_ns), ("proxy_connect", self.proxy_connect_ns), ("tls", self.tls_ns))
        return {name: ns for name, ns in steps if ns is not None}


class Direction(StrEnum):
    """Which side sent a WebSocket message (or closed the connection)."""

    CLIENT = "client"
    SERVER = "server"


@dataclass(frozen=True, slots=True)
class Message:
    """One WebSocket message, whole (reassembled from its frames), ``at_ns`` after t = 0.

    t = 0 of a session is the moment the upgrade request was handed to the
    upstream, as for HTTP; ``at_ns`` is when the proxy had the whole message.
    """

    at_ns: int
    direction: Direction
    text: bool
    """A text message (opcode 1; ``data`` is its UTF-8); False for binary (opcode 2)."""
    data: bytes
    fragments: tuple[int, ...] = ()
    """The payload size of each wire frame the message came in, when the
    capture exposed them (mitmproxy reassembles messages and does not);
    ``()`` when unknown. A message sent in one frame is ``(len(data),)``."""

    @property
    def from_client(self) -> bool:
        return self.direction == Direction.CLIENT


@dataclass(frozen=True)
class WebSocketSession:
    """The message timeline of a WebSocket interaction and how it closed.

    The interaction's ``request`` is the upgrade request and its ``response``
    the ``101 Switching Protocols`` head. ``close_code`` is None when no close
    frame was seen (the connection dropped, or the recording stopped);
    ``closed_by`` is the side that sent the first close frame.
    """

    messages: tuple[Message, ...] = ()
    close_code: int | None = None
    close_reason: str = ""
    closed_by: Direction | None = None

    @property
    def client_messages(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.direction == Direction.CLIENT)

    @property
    def server_messages(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.direction == Direction.SERVER)


@dataclass(frozen=True)
class Request:
    """A recorded request, as the client sent it (after redaction).

    ``method`` is the HTTP method (``"POST"``); ``url`` the absolute URL,
    scheme and host included (``"https://api.openai.com/v1/chat/completions"``);
    ``http_version`` the version of the client's request line (``"HTTP/2.0"``
    for an HTTP/2 client). ``headers`` are the client's headers as
    ``(name, value)`` pairs in the order sent, names as sent and repeated
    names kept; secrets (``authorization``, ``x-api-key``, ...) hold
    :data:`REDACTED`. ``body`` is the whole body as sent (bytes: JSON is
    kept as the client's text, not re-encoded). Look up a header with
    :meth:`header` (case-insensitive, the first value).

    Time: ``started_at`` is the one wall-clock value of an interaction, in
    seconds since the epoch, when the proxy began to receive the request (0.0
    when unknown, as in a request built by hand). It only places the recording
    in the day; every offset of the interaction is monotonic nanoseconds after
    t = 0 (see :class:`Interaction`).

    Replay matches a request against this one by method, path and query
    (scheme, host and port ignored), the body (JSON as data), and headers
    only when asked (:mod:`streamtape.match.matcher`). So a test builds just
    what matching looks at::

        Request("POST", "http://llm.test/v1/chat/completions",
                headers=(("content-type", "application/json"),),
                body=b'{"model": "m", "stream": true}')
    """

    method: str
    url: str
    http_version: str = "HTTP/1.1"
    headers: Headers = ()
    body: bytes = b""
    started_at: float = 0.0
    """Wall-clock time (seconds since the epoch) the request started."""

    @property
    def path(self) -> str:
        """Path with query, as sent on an HTTP/1.1 request line."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)


@dataclass(frozen=True, init=False)
class Response:
    """A recorded response head and its body pieces.

    ``framing`` may be given as its string value. ``chunks=``, the old name of
    ``pieces=``, still works with a :class:`DeprecationWarning` (and wins when
    both are given, which is what ``dataclasses.replace(r, chunks=...)`` does).
    """

    status: int
    reason: str = ""
    http_version: str = "HTTP/1.1"
    headers: Headers = ()
    framing: Framing = Framing.CHUNKED
    pieces: Sequence[Piece] = ()
    """A tuple, or compact :class:`~streamtape.cassette.pieces.Pieces` (what a loaded cassette gives)."""
    headers_at_ns: int = 0
    """When the response headers reached the proxy, after t = 0."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        http_version: str = "HTTP/1.1",
        headers: Headers = (),
        framing: Framing | str = Framing.CHUNKED,
        pieces: Sequence[Piece] = (),
        headers_at_ns: int = 0,
        *,
        chunks: Sequence[Piece] | None = None,
    ) -> None:
        init = object.__setattr__  # frozen: the one place fields are set
        init(self, "status", status)
        init(self, "reason", reason)
        init(self, "http_version", http_version)
        init(self, "headers", headers)
        init(self, "framing", Framing(framing))
        if chunks is not None:
            _deprecated("Response(chunks=...)", "Response(pieces=...)")
            pieces = chunks
        init(self, "pieces", pieces)
        init(self, "headers_at_ns", headers_at_ns)

    @property
    def chunks(self) -> Sequence[Piece]:
        """The old name of :attr:`pieces` (deprecated)."""
        _deprecated(f"{type(self).__name__}.chunks", f"{type(self).__name__}.pieces")
        return self.pieces

    @property
    def body(self) -> bytes:
        """All pieces joined: the body exactly as the upstream sent it (encoding kept).

        Compact pieces hold it joined already; a tuple's join is kept. A loaded
        cassette's body is not kept here, so an interaction held for matching
        does not pin the body it once played.
        """
        ps = self.pieces
        if isinstance(ps, PieceSequence):
            return ps.joined
        cached: bytes | None = self.__dict__.get("_body")
        if cached is None:
            cached = b"".join(p.data for p in ps)
            self.__dict__["_body"] = cached
        return cached

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()


@dataclass(frozen=True)
class Interaction:
    """One recorded exchange: the request, the response as it streamed, and how it ended.

    ``request`` is the :class:`Request`. ``response`` is the :class:`Response`:
    its head (status, reason, headers, ``framing``: how the body was
    delimited on the wire) and its body ``pieces``, each
    :class:`~streamtape.cassette.pieces.Piece` the bytes of one delivery (an
    HTTP chunk, a socket read) exactly as the upstream sent them (chunk
    boundaries, split UTF-8 characters and content encoding kept), at the
    time it arrived.
    ``response`` is None when no head arrived (the upstream refused the
    connection or closed before answering). ``outcome`` says how it ended
    (:class:`Outcome`: ``complete``, or the upstream closed early, the client
    went away, the upstream failed, the recording stopped), with ``error``
    saying what happened for anything but ``complete`` (mitmproxy's message,
    or the reader's for ``interrupted``). ``labels`` are
    ``KEY=VALUE`` tags stored with the recording (``record --label``, a
    shadow pair, an importer's ``source``). ``setup`` is the upstream
    connection's setup, ``websocket`` the messages of a WebSocket session.

    Time base: t = 0 is the moment the request was handed to the upstream
    (the proxy's own wait and the upstream connection's setup are kept out,
    in ``setup``), and every offset is integer nanoseconds after it, read
    from one monotonic clock: ``response.headers_at_ns`` (the head arrived),
    each piece's ``at_ns``, each WebSocket message's ``at_ns`` and
    ``end_ns`` (the interaction ended, or failed; None when unknown, then
    :attr:`duration_ns` is the last piece's offset). ``request.started_at``
    is the only wall-clock value. Replay keeps these offsets (or reshapes
    them, per profile) from the moment the replayed request arrives.

    Loaded cassettes give interactions (``streamtape.load(path)[0]``); a
    test can build one by hand, with times in nanoseconds::

        from streamtape import Interaction, Piece, ReplayTransport, Request, Response

        MS = 1_000_000
        ix = Interaction(
            Request("POST", "http://llm.test/v1/chat/completions", body=b'{"stream": true}'),
            Response(
                200,
                headers=(("content-type", "text/event-stream"),),
                pieces=(
                    Piece(40 * MS, b'data: {"choices": [{"delta": {"content": "Hi"}}]}\\n\\n'),
                    Piece(55 * MS, b"data: [DONE]\\n\\n"),
                ),
                headers_at_ns=30 * MS,
            ),
            end_ns=56 * MS,
        )
        transport = ReplayTransport([ix], "instant")

    ``framing`` defaults to chunked, ``outcome`` to ``complete``; give
    ``outcome="upstream_closed"`` (with ``error``) for a stream the upstream
    cut short. Values are frozen: derive variants with :func:`dataclasses.replace`.
    """

    request: Request
    response: Response | None
    """None when no response head arrived (for example the upstream refused)."""
    outcome: Outcome = Outcome.COMPLETE
    """May be given as its string value; always an :class:`Outcome` once built."""
    error: str | None = None
    """mitmproxy's message for any outcome but ``complete``."""
    end_ns: int | None = None
    """When the interaction ended (or the error happened), after t = 0."""
    labels: dict[str, str] = field(default_factory=dict)
    setup: Setup | None = None
    """The upstream connection's setup, kept out of the offsets; None when not
    recorded (an older cassette, or the request never reached the upstream)."""
    websocket: WebSocketSession | None = None
    """The messages and close of a WebSocket connection (the upgrade request in
    ``request``, the 101 head in ``response``); None for an HTTP interaction."""

    def __post_init__(self) -> None:
        if type(self.outcome) is not Outcome:
            object.__setattr__(self, "outcome", Outcome(self.outcome))

    @property
    def messages(self) -> tuple[Message, ...]:
        """A WebSocket session's messages (none for an HTTP interaction)."""
        return self.websocket.messages if self.websocket else ()

    @property
    def pieces(self) -> Sequence[Piece]:
        """The response's body pieces (none without a response)."""
        return self.response.pieces if self.response else ()

    @property
    def chunks(self) -> Sequence[Piece]:
        """The old name of :attr:`pieces` (deprecated)."""
        _deprecated(f"{type(self).__name__}.chunks", f"{type(self).__name__}.pieces")
        return self.pieces

    @property
    def first_byte_ns(self) -> int | None:
        """The first body piece's offset; for a WebSocket session, the first server message's."""
        ps = self.pieces
        if ps:
            return ps[0].at_ns
        if self.websocket is not None:
            return next((m.at_ns for m in self.websocket.messages if not m.from_client), None)
        return None

    @property
    def duration_ns(self) -> int | None:
        if self.end_ns is not None:
            return self.end_ns
        ps = self.pieces
        return ps[-1].at_ns if ps else None
