"""HTTP/1.1 wire details, in one place. Pure code: values in, bytes out, no I/O.

Every driver that puts a replayed response on the wire (the replay server,
the ``requests`` adapter's fake socket), every piece of code that builds or
reads a response's headers (profiles, the in-process transports) and every
one that writes or measures a request head (the replay proxy's pass-on, the
HAR export) uses this module, so a rule of the protocol is written down once:

* **Header lookup** is case-insensitive and takes the first value
  (:func:`header_value`).
* **Hop-by-hop headers** (RFC 9110 7.6.1) describe one connection, not the
  message: they are never carried over to another hop, and neither are the
  framing headers, which each hop writes for the body it sends
  (:data:`HOP_BY_HOP`, :data:`FRAMING_HEADERS`, the two together
  :data:`NOT_FORWARDED`, :func:`end_to_end`). This is the one list: the
  replay, the replay proxy's pass-on and the shadow's request all use it.
* **Message heads** have one writer, :func:`message_head` (a start line, the
  header lines, the blank line), with :func:`request_head` and
  :func:`status_head` for the two start lines; :func:`response_head` is the
  replay's own response built on it.
* **Framing headers** (``Content-Length``, ``Transfer-Encoding``) have one
  owner, :func:`framing_headers`: every other module gets them from there,
  for the :class:`Framing` it actually sends. A recorded ``Content-Length``
  is never copied through; the profile decides the number (the bytes sent, or
  more than that when a replay is cut, so the client sees a short body) and
  this module writes the header.
* **Body framing**: how a piece goes on the wire and how a body ends is a
  table keyed by framing, as in h11's ``_writers.py`` (:func:`frame`,
  :func:`body_end`). On chunked framing each piece is one HTTP chunk, so a
  recorded piece boundary is a chunk boundary on the wire; an empty piece is
  nothing at all (a zero-size chunk would end the body).
* **Which framing a connection gets** (:func:`connection_framing`): the
  profile's (``framing=``, by default the recorded one, with HTTP/2
  recordings, ``frames``, as chunked: :func:`replay_framing`); an HTTP/1.0
  client cannot read chunked and gets the body close-delimited; ``HEAD``,
  1xx, 204 and 304 responses have no body at all.
* **Reason phrases** come from :class:`http.HTTPStatus` alone
  (:func:`reason_phrase`), ``""`` for a code it does not know.
* **Error bodies** the replayer invents (no match, bad profile, bad request),
  and the recording proxy's answer when the upstream could not be reached,
  are JSON in the error shape of the API the request's path belongs to, with
  the explanation in the field its SDKs print (:func:`error_body`) and the
  ``type`` from :class:`ErrorType`; they go out with :data:`ERROR_HEADERS`.
  A request no recording answers gets :data:`NO_MATCH_STATUS` unless told
  otherwise.

The vocabulary of framings is :class:`Framing`; its values are the strings
written to cassettes, so ``Framing.CHUNKED == "chunked"``.

This module imports nothing from the rest of the package, so anything may
import it.
"""

from __future__ import annotations

import http
import json
import re
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from urllib.parse import parse_qsl

__all__ = [
    "DIRECT_HEADER",
    "ERROR_HEADERS",
    "ERROR_STATUSES",
    "FRAMING_HEADERS",
    "HOP_BY_HOP",
    "LAST_CHUNK",
    "NOT_FORWARDED",
    "NO_MATCH_STATUS",
    "PROFILE_HEADER",
    "UPSTREAM_RESET",
    "ErrorType",
    "Framing",
    "body_end",
    "chunk_size",
    "connection_framing",
    "drop_headers",
    "end_to_end",
    "error_api",
    "error_body",
    "frame",
    "framer",
    "framing_headers",
    "has_no_body",
    "header_value",
    "keeps_alive",
    "message_head",
    "reason_phrase",
    "replay_framing",
    "request_head",
    "response_head",
    "status_head",
    "status_line",
    "with_length",
]

PROFILE_HEADER = "x-streamtape-profile"
"""Request header naming the replay profile for that one request (server and transports)."""

DIRECT_HEADER = "x-streamtape-replay"
"""Internal request header: ``TOKEN:INDEX`` names the interaction to play (the proxy
addon matched already)."""


class Framing(StrEnum):
    """How a response body is delimited.

    Cassettes record ``chunked``, ``content-length``, ``close-delimited`` or
    ``frames`` (HTTP/2 and HTTP/3 DATA frames). A replay sends ``chunked``,
    ``content-length``, ``close-delimited`` or ``none`` (no body on the wire:
    ``HEAD``, 1xx, 204, 304, or no response head at all).
    """

    CHUNKED = "chunked"
    CONTENT_LENGTH = "content-length"
    CLOSE_DELIMITED = "close-delimited"
    FRAMES = "frames"
    NONE = "none"


class ErrorType(StrEnum):
    """The ``error.type`` of an error body streamtape invents."""

    NO_MATCH = "streamtape_no_match"
    BAD_PROFILE = "streamtape_bad_profile"
    BAD_REQUEST = "streamtape_bad_request"
    UPSTREAM_ERROR = "streamtape_upstream_error"
    """The recording proxy's 502 when the upstream could not be reached or sent no
    response head (:mod:`streamtape.mitm.error_answer`)."""


NO_MATCH_STATUS = 422
"""The status of the answer to a request no recording answers (``serve --no-match-status``,
``streamtape_no_match_status``, the transports' ``no_match=``).

Not 404: SDKs turn a 404 into "not found" (``openai.NotFoundError``; Ollama's
clients read it as a model to pull), so a test failed on a changed request
reads as a missing model. Not a 5xx either: SDKs and the code around them
retry server errors (the openai and anthropic SDKs, unless told not to; the
Vercel AI SDK; llama-index's and many applications' own retry loops), so
the failure would come late, after backoff, with the request counted several
times. 422 (Unprocessable Content: a well-formed request this server cannot
answer) is retried by none of them, and each SDK names it after the request
(``openai.UnprocessableEntityError``), with the explanation as its message.
"""

ERROR_STATUSES = range(400, 600)
"""The statuses a no-match answer may have: an error (a 2xx or 3xx would have clients
read the explanation as an answer, or follow it)."""

ERROR_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Type", "application/json"),
    ("X-Should-Retry", "false"),
)
"""The headers of an error the replayer invents: a JSON body, and ``X-Should-Retry:
false``, which the openai and anthropic SDKs obey (they retry 408, 409, 429 and 5xx
otherwise), so even a 5xx chosen for the no-match answer is asked once."""


HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
"""Hop-by-hop header names (lower case): ``Connection`` and the ones RFC 9110 7.6.1
names (``Proxy-Connection``, which old clients still send, RFC 7230 A.1.2; ``Keep-Alive``,
``TE``, ``Transfer-Encoding``, ``Upgrade``), and the rest of RFC 2616 13.5.1's list
(``Proxy-Authenticate``, ``Proxy-Authorization``, ``Trailers`` and, as its errata spell
it, ``Trailer``). Never replayed as recorded, never passed on."""

FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding"})
"""The headers :func:`framing_headers` owns (lower case)."""

NOT_FORWARDED = HOP_BY_HOP | FRAMING_HEADERS
"""What a message never carries over to the next hop (lower case): its connection's
headers and its body's framing, which the next hop writes for its own connection and
the body it sends (:func:`end_to_end`)."""

TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP token (RFC 9110 5.6.2): methods and header names (match it whole, with
``fullmatch``). The replay server's request parser and the ``--header`` /
``--shadow-header`` options read names by it."""

LAST_CHUNK = b"0\r\n\r\n"
"""The zero-size chunk and the empty trailer section that end a chunked body."""

UPSTREAM_RESET = "the upstream reset the connection (TCP RST)"
"""How a recording's error begins when the upstream aborted with a reset rather than a
close (:mod:`streamtape.mitm.faults`): the outcome is ``upstream_closed`` either way, and
this says which, for a replay that resets where the upstream did."""


# --------------------------------------------------------------------------- headers


def header_value(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` (case-insensitive), or None."""
    lname = name.lower()
    for k, v in headers:
        if k.lower() == lname:
            return v
    return None


def drop_headers(headers: Iterable[tuple[str, str]], *names: str) -> tuple[tuple[str, str], ...]:
    """``headers`` without those named (case-insensitive)."""
    lower = {n.lower() for n in names}
    return tuple((k, v) for k, v in headers if k.lower() not in lower)


def with_length(headers: Iterable[tuple[str, str]], length: int) -> tuple[tuple[str, str], ...]:
    """``Content-Length`` set to ``length`` where the headers have one (first kept, in place)."""
    out: list[tuple[str, str]] = []
    seen = False
    for k, v in headers:
        if k.lower() == "content-length":
            if seen:
                continue
            seen = True
            v = str(length)
        out.append((k, v))
    return tuple(out)


FORM = "application/x-www-form-urlencoded"
"""The content type of an HTML form body (``a=1&b=2``): OAuth 2.0 and IBM IAM token calls use it."""


def is_form(content_type: str | None) -> bool:
    """Whether a body of this content type is form-urlencoded (parameters ignored)."""
    return (content_type or "").split(";")[0].strip().lower() == FORM


def is_form_body(body: bytes, content_type: str | None) -> bool:
    """Whether a request body is read as a form: its content type says so and it is not
    JSON sent under that label (``curl -d`` and Python's urllib label every body they
    send form-urlencoded, JSON included; a form's first field never starts with ``{``
    or ``[``)."""
    return is_form(content_type) and body.lstrip()[:1] not in (b"{", b"[")


def form_pairs(body: bytes) -> tuple[tuple[str, str], ...]:
    """A form body's fields, decoded, in the order sent (a body that is not UTF-8 is read as
    Latin-1: every byte stays one character, so two bodies differ exactly when their bytes do)."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        text = body.decode("latin-1")
    return tuple(parse_qsl(text, keep_blank_values=True))


def end_to_end(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``headers`` without hop-by-hop and framing headers (:data:`NOT_FORWARDED`): what a
    replay, or a request passed on, may carry over."""
    return [(k, v) for k, v in headers if k.lower() not in NOT_FORWARDED]


def framing_headers(framing: str, content_length: int | None = None) -> list[tuple[str, str]]:
    """The framing headers for a body sent with ``framing``. The one place they are decided.

    ``chunked`` gets ``Transfer-Encoding: chunked``; ``content-length`` gets
    ``Content-Length: content_length`` (0 when None); ``none`` gets
    ``Content-Length`` only when a length is given (a ``HEAD`` response
    declares the length of the body it does not send); ``close-delimited``
    gets neither.
    """
    f = replay_framing(framing)
    if f is Framing.CHUNKED:
        return [("Transfer-Encoding", "chunked")]
    if f is Framing.CONTENT_LENGTH:
        return [("Content-Length", str(content_length or 0))]
    if f is Framing.NONE and content_length is not None:
        return [("Content-Length", str(content_length))]
    return []


def keeps_alive(version: str, headers: Iterable[tuple[str, str]]) -> bool:
    """Whether the client of a request with this version and headers wants the connection kept."""
    conn = (header_value(headers, "connection") or "").lower()
    if version == "HTTP/1.0":
        return "keep-alive" in conn
    return "close" not in conn


def chunk_size(line: bytes) -> int:
    """The size in a chunk-size line (extensions ignored). Raises ValueError if malformed."""
    return int(line.split(b";", 1)[0].strip(), 16)


# --------------------------------------------------------------------------- status


def reason_phrase(status: int) -> str:
    """The standard reason phrase for ``status``, or ``""`` for a code without one."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def status_line(status: int, reason: str = "") -> str:
    """``HTTP/1.1 <status> <reason>``; the standard phrase when ``reason`` is empty."""
    return f"HTTP/1.1 {status} {reason or reason_phrase(status)}".rstrip()


def has_no_body(status: int, method: str) -> bool:
    """Whether a response to ``method`` with ``status`` carries no body (RFC 9112 6.3)."""
    return method.upper() == "HEAD" or status in (204, 304) or 100 <= status < 200


# --------------------------------------------------------------------------- framing


def replay_framing(framing: str) -> Framing:
    """The framing a recorded response is sent with: HTTP/2 ``frames`` and anything
    unknown become ``chunked``, which keeps every recorded piece boundary."""
    try:
        f = Framing(framing)
    except ValueError:
        return Framing.CHUNKED
    return Framing.CHUNKED if f is Framing.FRAMES else f


def connection_framing(framing: str, *, status: int, method: str = "GET",
                       chunked_ok: bool = True) -> Framing:
    """The framing actually used for this response on this connection.

    ``none`` when the response has no body (:func:`has_no_body`); chunked
    becomes close-delimited for a client that cannot read it (HTTP/1.0).
    """
    if has_no_body(status, method):
        return Framing.NONE
    f = replay_framing(framing)
    if f is Framing.CHUNKED and not chunked_ok:
        return Framing.CLOSE_DELIMITED
    return f


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


def _as_is(data: bytes) -> bytes:
    return data


def _nothing(data: bytes) -> bytes:
    return b""


_FRAMERS: Mapping[Framing, Callable[[bytes], bytes]] = {
    Framing.CHUNKED: _chunk,
    Framing.CONTENT_LENGTH: _as_is,
    Framing.CLOSE_DELIMITED: _as_is,
    Framing.NONE: _nothing,
}

_ENDINGS: Mapping[Framing, bytes] = {
    Framing.CHUNKED: LAST_CHUNK,
    Framing.CONTENT_LENGTH: b"",
    Framing.CLOSE_DELIMITED: b"",  # the close is the end
    Framing.NONE: b"",
}


def frame(framing: str, data: bytes) -> bytes:
    """One body piece as it goes on the wire: one HTTP chunk, or the bytes themselves."""
    return _FRAMERS[replay_framing(framing)](data)


def framer(framing: str) -> Callable[[bytes], bytes]:
    """:func:`frame` for one framing, looked up once: for a driver that frames
    piece by piece (the ``requests`` adapter), where the lookup would cost
    as much as the framing."""
    return _FRAMERS[replay_framing(framing)]


def body_end(framing: str) -> bytes:
    """The bytes that end a body cleanly (the last chunk on chunked framing)."""
    return _ENDINGS[replay_framing(framing)]


# --------------------------------------------------------------------------- heads and bodies


def message_head(start_line: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """An HTTP/1.x message head: ``start_line``, one ``Name: value`` line per header in
    order, each ending CRLF, then the blank line. The one writer of heads.

    Latin-1, the octets the reader decoded them from (a character outside it becomes
    ``?``, one byte, so a size computed from the head stays the size). Headers are
    written as given: callers pass headers a parser already checked, or heads that are
    only measured (a HAR ``headersSize``).
    """
    lines = [start_line, *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


def request_head(method: str, target: str, headers: Iterable[tuple[str, str]],
                 version: str = "HTTP/1.1") -> bytes:
    """A request head: ``METHOD target version`` and ``headers`` (:func:`message_head`)."""
    return message_head(f"{method} {target} {version}", headers)


def status_head(status: int, reason: str, headers: Iterable[tuple[str, str]],
                version: str = "HTTP/1.1") -> bytes:
    """A response head with the status line as it was: ``version status reason``, the
    reason as given (a recorded one, even empty: RFC 9112 4 keeps the space before an
    empty reason). For the replay's own heads, with the standard reason, see
    :func:`response_head`."""
    return message_head(f"{version} {status} {reason}", headers)


def response_head(
    status: int,
    reason: str,
    headers: Iterable[tuple[str, str]],
    framing: str,
    *,
    content_length: int | None = None,
    keep_alive: bool = True,
    method: str = "GET",
    chunked_ok: bool = True,
) -> tuple[bytes, Framing, bool]:
    """The response head to send, the framing actually used, and whether to keep the connection.

    Hop-by-hop and framing headers among ``headers`` are dropped; the framing
    headers for the framing actually used (:func:`connection_framing`) come
    from :func:`framing_headers`. ``content_length`` is the length to declare
    on ``content-length`` framing (the bytes sent, or the recorded length when
    the body will be cut short); a ``HEAD`` response to a ``content-length``
    recording declares it too. A close-delimited body, or ``keep_alive=False``,
    adds ``Connection: close``.
    """
    used = connection_framing(framing, status=status, method=method, chunked_ok=chunked_ok)
    declared = content_length
    if used is Framing.NONE and not (
        method.upper() == "HEAD" and replay_framing(framing) is Framing.CONTENT_LENGTH
    ):
        declared = None
    if used is Framing.CLOSE_DELIMITED:
        keep_alive = False
    sent = end_to_end(headers) + framing_headers(used, declared)
    if not keep_alive:
        sent.append(("Connection", "close"))
    return message_head(status_line(status, reason), sent), used, keep_alive


_OLLAMA_PATH = re.compile(r"(?:^|/)api/(?!v\d+(?:/|$))[^/]")
"""Ollama's native API (``/api/chat``, ``/api/tags``...), not an OpenAI-style one under
``/api/v1/`` (OpenRouter's ``/api/v1/chat/completions``)."""


def error_api(path: str) -> str:
    """Whose error shape a request to ``path`` expects: ``anthropic`` (``/v1/messages``
    and below), ``ollama`` (``/api/...``), else ``openai`` (every OpenAI-style server,
    llama.cpp's and TGI's included)."""
    p = path.split("?", 1)[0]
    if re.search(r"/v1/messages(?:/|$)", p):
        return "anthropic"
    if _OLLAMA_PATH.search(p):
        return "ollama"
    return "openai"


def error_body(message: str, type_: str = ErrorType.NO_MATCH, *, path: str = "") -> bytes:
    """A JSON error body in the shape the API of ``path`` uses (:func:`error_api`), with
    ``message`` where its SDKs look for the text they show:

    - OpenAI: ``{"error": {"message": ..., "type": ..., "param": null, "code": null}}``
      (``openai.APIStatusError`` shows ``error.message``);
    - Anthropic: ``{"type": "error", "error": {"type": ..., "message": ...}}``;
    - Ollama: ``{"error": "..."}`` (``ollama.ResponseError`` shows the string).

    No ``path`` (a request not read, a control endpoint) gives the OpenAI shape.
    """
    api = error_api(path)
    body: dict[str, object]
    if api == "anthropic":
        body = {"type": "error", "error": {"type": str(type_), "message": message}}
    elif api == "ollama":
        body = {"error": message}
    else:
        body = {"error": {"message": message, "type": str(type_), "param": None, "code": None}}
    return json.dumps(body).encode()
