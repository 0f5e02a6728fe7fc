"""Scripted backends for ``streamtape rerun`` and the sessions it re-runs.

A session cassette is built as values (every request's recorded start time
is what the schedule reads), and the backends are real HTTP servers on
127.0.0.1 (tests/support/servers.py) that note when each request arrived:
one faithful (the recorded words at the recorded pace), one slower with
changed words, one that refuses connections, one that hangs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from streamtape.cassette import Interaction, save
from tests.support.builders import MS, chat_events, interaction
from tests.support.servers import Conn, Handler, Received, sse_events

WORDS = ["The", " capital", " of", " France", " is", " Paris", "."]
CHANGED = [w if w != " Paris" else " Lyon" for w in WORDS]
GAP_S = 0.01
RECORDED_URL = "https://old-backend.example/v1/chat/completions"
T0 = 1_767_000_000.0


def chat_body(n: int) -> dict[str, object]:
    return {"model": "old-model", "stream": True, "messages": [{"role": "user", "content": f"question {n}"}]}


def session_recording(n: int, start: float, *, headers: tuple[tuple[str, str], ...] = ()) -> Interaction:
    """Call ``n`` as the recorder kept it: started at ``start`` (wall clock), the faithful words."""
    ix = interaction(
        chat_events(WORDS), first_ns=20 * MS, gap_ns=round(GAP_S * 1e9), body=chat_body(n), url=RECORDED_URL,
        request_headers=(("Content-Type", "application/json"), *headers),
        labels={"backend": "old-backend"},
    )
    return replace(ix, request=replace(ix.request, started_at=start))


def write_session(path: Path, offsets_s: Sequence[float], *, headers: tuple[tuple[str, str], ...] = ()) -> Path:
    save(path, [session_recording(n, T0 + off, headers=headers) for n, off in enumerate(offsets_s)])
    return path


@dataclass
class Arrivals:
    """When each request reached a backend (``perf_counter``), what it was, and how many
    were in flight at once."""

    times: list[float] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def stamped(self, handler: Handler) -> Handler:
        def handle(req: Received, c: Conn) -> str | None:
            with self.lock:
                self.times.append(time.perf_counter())
                self.requests.append(req)
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            ended = False

            def done() -> None:
                nonlocal ended
                with self.lock:
                    if not ended:
                        ended = True
                        self.in_flight -= 1

            # Out of flight at the last chunk's write, before the client can have read it:
            # counted at the handler's return instead, a client that starts its next request
            # on that read could be seen beside this one on a busy machine.
            end_chunks = c.end_chunks

            def end_and_count() -> None:
                done()
                end_chunks()

            c.end_chunks = end_and_count  # type: ignore[method-assign]
            try:
                return handler(req, c)
            finally:
                done()

        return handle

    def offsets_ms(self) -> list[float]:
        return [(t - self.times[0]) * 1000 for t in self.times]


def faithful() -> Handler:
    """The recorded words at the recorded pace."""
    return sse_events(chat_events(WORDS), GAP_S, first_delay=0.01)


def slower(first_delay: float = 0.2) -> Handler:
    """Another word, a first token ``first_delay`` later, twice the gaps."""
    return sse_events(chat_events(CHANGED), GAP_S * 2, first_delay=first_delay)


def hanging(seconds: float) -> Handler:
    def handle(req: Received, c: Conn) -> str:
        c.sleep(seconds)
        return "close"

    return handle
