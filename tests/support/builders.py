"""What the tests build: recorded interactions, the stream bodies in them, ``MS``; and ``wait_until``.

Every test module used to write its own ``Interaction(Request(...), Response(...))``
with its own idea of when the head came and when the stream ended. Here there is
one :func:`interaction` (body pieces, their times, the framing and the request
around them) and a few named streams built on it:

- :func:`chat_ix`: the default OpenAI chat stream (:data:`EVENTS`, the words
  :data:`WORDS`), one event per piece, ``gap_ms`` apart, as a recording of
  ``POST /v1/chat/completions`` with :data:`CHAT_BODY`;
- body encoders: :func:`sse` (one event), :func:`chat_events` (a whole chat
  stream), :func:`ndjson` (one line).

Times are integer nanoseconds after the request started (``at_ns``, as in a
cassette); :data:`MS` and :data:`S` spell them. JSON inside events keeps its
UTF-8 unescaped, as vLLM and llama.cpp send it, so a stream can be cut inside a
character.

:func:`wait_until` (and :func:`async_wait_until` inside a coroutine) is the one
way a test waits for something to happen in another thread or process: a
bounded poll of a condition, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from streamtape.cassette.model import Interaction, Outcome, Request, Response
from streamtape.cassette.pieces import Piece
from streamtape.wire import Framing

MS = 1_000_000
"""One millisecond in nanoseconds."""
S = 1_000 * MS
"""One second in nanoseconds."""

Headers = tuple[tuple[str, str], ...]
JSON_REQUEST: Headers = (("content-type", "application/json"),)

# --------------------------------------------------------------------------
# Bodies

DONE = b"data: [DONE]\n\n"


def _json(obj: object, compact: bool) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":") if compact else None)


def sse(data: object, event: str | None = None, *, compact: bool = True) -> bytes:
    """One SSE event: ``data`` as is when it is a str, else as JSON (compact unless asked)."""
    payload = data if isinstance(data, str) else _json(data, compact)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def ndjson(obj: object, *, compact: bool = False) -> bytes:
    """One NDJSON line (Ollama's framing): the object as JSON and a newline."""
    return _json(obj, compact).encode() + b"\n"


def chat_chunk(content: str | None = None, *, role: str | None = None, finish: str | None = None) -> dict[str, object]:
    """One OpenAI ``chat.completion.chunk`` object with one choice."""
    delta: dict[str, object] = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1786000000,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def chat_events(words: Iterable[str], finish: str = "stop") -> list[bytes]:
    """A whole OpenAI chat stream: the role chunk, one event per word, the finish, ``[DONE]``."""
    return [
        sse(chat_chunk("", role="assistant")),
        *(sse(chat_chunk(w)) for w in words),
        sse(chat_chunk(finish=finish)),
        DONE,
    ]


# --------------------------------------------------------------------------
# Interactions

UPSTREAM_URL = "http://upstream.test/v1/chat/completions"


def framing_headers(framing: Framing | str, pieces: Sequence[bytes]) -> Headers:
    """The header a server sends for ``framing``: Transfer-Encoding or Content-Length (none
    for a close-delimited body, whose end is the close)."""
    if framing == "chunked":
        return (("Transfer-Encoding", "chunked"),)
    if framing == "content-length":
        return (("Content-Length", str(sum(map(len, pieces)))),)
    return ()


def interaction(
    pieces: Sequence[bytes],
    *,
    times: Sequence[int] | None = None,
    first_ns: int = 20 * MS,
    gap_ns: int = 10 * MS,
    head_ns: int = 5 * MS,
    end_ns: int | None = None,
    status: int = 200,
    reason: str = "OK",
    content_type: str | None = "text/event-stream",
    extra_headers: Headers = (),
    framing: Framing | str = Framing.CHUNKED,
    framing_header: bool = True,
    outcome: Outcome | str = Outcome.COMPLETE,
    error: str | None = None,
    method: str = "POST",
    url: str = UPSTREAM_URL,
    request_headers: Headers = JSON_REQUEST,
    body: object = b'{"stream": true}',
    labels: dict[str, str] | None = None,
) -> Interaction:
    """A recorded interaction whose response body is ``pieces``, one recorded piece each.

    Piece ``i`` arrived at ``times[i]``, or by default at ``first_ns + i * gap_ns``;
    the head at ``head_ns``; the stream ended at ``end_ns``, by default 1 ms after
    the last piece. The response headers are Content-Type, then ``extra_headers``, then
    the framing's own header (unless ``framing_header`` is false). ``body`` is the
    request body: bytes as they are, anything else as JSON.
    """
    at_ns = list(times) if times is not None else [first_ns + i * gap_ns for i in range(len(pieces))]
    recorded = tuple(Piece(t, p) for t, p in zip(at_ns, pieces, strict=True))
    response_headers: Headers = (
        *((("Content-Type", content_type),) if content_type else ()),
        *extra_headers,
        *(framing_headers(framing, pieces) if framing_header else ()),
    )
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Interaction(
        Request(method, url, headers=request_headers, body=raw),
        Response(status, reason, headers=response_headers, framing=framing, pieces=recorded, headers_at_ns=head_ns),
        outcome=Outcome(outcome),
        error=error,
        end_ns=end_ns if end_ns is not None else (at_ns[-1] if at_ns else head_ns) + MS,
        labels=labels or {},
    )


WORDS = ["Hel", "lo", ", ", "wör", "ld", "!"]
"""The words of the default chat stream ("Hello, wörld!")."""
EVENTS = chat_events(WORDS)
"""The default chat stream: the role event, one event per word, the finish, ``[DONE]``."""
CHAT_URL = "https://api.openai.com/v1/chat/completions"
CHAT_BODY = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def chat_ix(
    gap_ms: int = 20,
    *,
    body: object = None,
    outcome: Outcome | str = Outcome.COMPLETE,
    events: Sequence[bytes] = EVENTS,
    extra_headers: Headers = (),
    framing: Framing | str = Framing.CHUNKED,
    tag: str = "",
) -> Interaction:
    """A recorded OpenAI chat stream: one event per piece, the first ``gap_ms`` after the
    request and each next ``gap_ms`` later, the head half a gap in; the request is
    ``POST /v1/chat/completions`` with ``body`` (default :data:`CHAT_BODY`), labelled
    ``tag``."""
    return interaction(
        events,
        first_ns=gap_ms * MS,
        gap_ns=gap_ms * MS,
        head_ns=gap_ms * MS // 2,
        extra_headers=(("Cache-Control", "no-cache"), *extra_headers),
        framing=framing,
        outcome=outcome,
        url=CHAT_URL,
        request_headers=(*JSON_REQUEST, ("authorization", "REDACTED")),
        body=CHAT_BODY if body is None else body,
        labels={"tag": tag} if tag else {},
    )


# --------------------------------------------------------------------------
# Waiting

T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.01) -> T:
    """Poll ``condition`` until it returns something true, and return that.

    For what happens in another thread or process (a log line, a file on disk, a
    port open): the test goes on as soon as the condition holds, and fails with
    a clear message after ``timeout`` seconds instead of sleeping a fixed time
    that is too long on a quiet machine and too short on a loaded one.
    """
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(interval)


async def async_wait_until(condition: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.005) -> T:
    """:func:`wait_until` for a coroutine: polls without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        await asyncio.sleep(interval)

