"""The values profiles are made of and produce: vocabularies, items, steps, schedules.

Parsing (:mod:`.parse`) builds :class:`Item` values; scheduling
(:mod:`.schedule`) turns a profile and an interaction into a
:class:`Schedule` of :class:`Step` values. Both import their words from
here, so a chunking, latency, fault or step kind is spelt once. Every
vocabulary is a :class:`~enum.StrEnum` whose values are the strings of the
profile syntax (``ChunkKind.UTF8_SPLIT == "utf8-split"``), so text and
enum compare equal.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import overload

from ..cassette.model import Headers
from ..wire import Framing, framing_headers, header_value

__all__ = [
    "APART_US",
    "Amount",
    "ChunkKind",
    "FaultKind",
    "FramingKind",
    "Item",
    "LatencyKind",
    "NewlineKind",
    "Schedule",
    "Step",
    "StepKind",
    "Steps",
    "Unit",
]


# --------------------------------------------------------------------------- vocabularies


class ChunkKind(StrEnum):
    """``chunk=``: how the body is cut into pieces."""

    RECORDED = "recorded"
    BYTES = "bytes"
    RANDOM = "random"
    UTF8_SPLIT = "utf8-split"
    EVENTS = "events"
    SPLIT_EVENTS = "split-events"
    CRLF_SPLIT = "crlf-split"
    COALESCE = "coalesce"
    WHOLE = "whole"
    FRAGMENT = "fragment"
    """A WebSocket session's messages, each in frames of N bytes (HTTP responses ignore it)."""


class LatencyKind(StrEnum):
    """``latency=``: when the pieces are sent."""

    RECORDED = "recorded"
    INSTANT = "instant"
    SCALE = "scale"
    FIXED = "fixed"
    JITTER = "jitter"
    APART = "apart"
    """As fast as piece boundaries survive the trip to the client: the head at once, then
    each piece at least ``apart:US`` microseconds after the one before it (by default
    :data:`APART_US`)."""


APART_US = 1000
"""The spacing of ``latency=apart`` without a number, and of a chunking that cuts the
recorded pieces when no ``latency=`` item is given: 1 ms between two pieces.

Pieces written back to back leave ``streamtape serve`` in separate writes
(``TCP_NODELAY``), but a client reads whatever has arrived since its last
read, and Node's ``fetch`` (undici) hands its body stream all of it at once.
Measured with ``.venv/bin/python -m bench.boundaries`` (200 pieces, every cut
inside a UTF-8 character; the share of the 199 boundaries that ended a read,
median of 5 runs and their range; ``streamtape serve`` under
``latency=apart:US``, whose player keeps the spacing in real time), AMD EPYC,
2 cores, Node 20.20, Python 3.12:

============  ==========================  ===========================
spacing       Node fetch, warm             Python raw socket
============  ==========================  ===========================
0 (instant)   1.0 % (0.5-1.5), 3 runs      56 % (38-70), 3 runs
250 us        74 % (66-90)                 100 % (97-100)
500 us        98.5 % (98.0-100)            100 % (100-100)
750 us        99.5 % (98.5-100)            100 % (100-100)
1 ms          100 % (99.5-100)             100 % (100-100)
2 ms          100 % (99.5-100)             100 % (100-100)
============  ==========================  ===========================

That is on a quiet machine (load 0.8): 1 ms is the least spacing at which
every run of both clients kept 99 % of the boundaries apart (750 us only the
median). Below 250 us the server itself cannot keep them apart: its clock
releases deadlines less than 0.25 ms apart together (``streamtape/clock.py``).
On the same machine loaded by other work (load 3.3-4.5, 3 runs), 1 ms still
kept 99.5 % for both (single runs down to 94 % for Node) and 2 ms did no
better (97 %, 96.5-100): what is lost there is the client descheduled for
several milliseconds, which no spacing a test can afford rules out, so the
margin is taken against the quiet threshold (750 us) and not more: every
piece costs the spacing (a 6 KB answer under ``bytes:1``, 6 s). A Node
process's *first* request reads its first 5 to 15 ms of body late (cold
start: 95 % of the boundaries apart at 1 ms, 98.5 % at 2 ms); the ones after it
as above.
"""


class FaultKind(StrEnum):
    """``fault=``: what goes wrong on purpose."""

    CUT = "cut"
    RESET = "reset"
    CUT_EVENT = "cut-event"
    ERROR_EVENT = "error-event"
    EXCEPTION = "exception"
    """An AWS event stream ends after event N in an exception message of a type
    (``exception:N:throttlingException``), as Bedrock fails mid-stream."""
    STALL = "stall"
    KEEPALIVE = "keepalive"
    DROP_DONE = "drop-done"
    STATUS = "status"
    SLOW_HEADERS = "slow-headers"
    CLOSE = "close"
    """A WebSocket session closes with a code after server message N (HTTP ignores it)."""
    DROP = "drop"
    """A WebSocket session's TCP connection ends without a close frame after server message N."""
    PING = "ping"
    """A WebSocket server pings every S seconds; an unanswered ping closes with 1011."""


class FramingKind(StrEnum):
    """``framing=``: how the body is delimited on the wire (HTTP/1.1 responses)."""

    RECORDED = "recorded"
    """As recorded: chunked, Content-Length or close-delimited (HTTP/2 ``frames``: chunked)."""
    CHUNKED = "chunked"
    CLOSE = "close"
    """Close-delimited: no length, no chunks, ``Connection: close``; the close is the end."""
    CONTENT_LENGTH = "content-length"


class NewlineKind(StrEnum):
    """``newline=``: the line endings of an SSE or NDJSON body."""

    RECORDED = "recorded"
    LF = "lf"
    CRLF = "crlf"
    CR = "cr"

    @property
    def eol(self) -> bytes:
        """The line ending this kind writes (``b""`` for ``recorded``: none is written)."""
        return _EOL[self]


_EOL = {NewlineKind.RECORDED: b"", NewlineKind.LF: b"\n", NewlineKind.CRLF: b"\r\n",
        NewlineKind.CR: b"\r"}


class Unit(StrEnum):
    """The unit of a ``cut``/``reset`` amount: ``50%`` of the body or ``100B``."""

    PERCENT = "%"
    BYTES = "B"


class StepKind(StrEnum):
    """What a driver does at a :class:`Step`'s time. Only the last step is not ``send``."""

    SEND = "send"
    """Write the step's bytes as one piece (one HTTP chunk on chunked framing)."""
    END = "end"
    """Finish cleanly (the last chunk; the close on close-delimited framing)."""
    CUT = "cut"
    """Close the connection without finishing (no last chunk, a short body)."""
    RESET = "reset"
    """Abort the connection with a TCP RST."""


# --------------------------------------------------------------------------- items


@dataclass(frozen=True, slots=True)
class Amount:
    """Where a ``cut``/``reset`` fault strikes: ``value`` percent of the body, or bytes."""

    value: float
    unit: Unit

    def offset_in(self, body_length: int) -> int:
        """The body offset this amount names, within ``[0, body_length]``."""
        if self.unit is Unit.BYTES:
            return min(int(self.value), body_length)
        return int(body_length * self.value // 100)


@dataclass(frozen=True, slots=True)
class Item:
    """One parsed ``chunk``/``latency``/``fault`` value.

    ``args`` are its numbers in the order of the syntax (``stall:N:S`` ->
    ``(N, S)``); ``amount`` is set for ``cut`` and ``reset`` only. ``text``
    is the value as written, for messages.
    """

    kind: ChunkKind | LatencyKind | FaultKind
    args: tuple[float, ...] = ()
    text: str = ""
    amount: Amount | None = None
    name: str = ""
    """The word argument of ``exception:N:TYPE`` (the exception type); "" for others."""

    def __str__(self) -> str:
        return self.text or str(self.kind)


# --------------------------------------------------------------------------- schedules


@dataclass(frozen=True, slots=True)
class Step:
    """One thing a driver does at ``at_ns`` (absolute, from t0 = request received)."""

    at_ns: int
    kind: StepKind
    data: bytes = b""


class Steps(Sequence[Step]):
    """A schedule's steps kept as columns: the times and bytes of its ``send`` steps,
    then its one ending step.

    A schedule of many pieces is built this way (a recording replayed with its
    own pieces, under a latency alone), so a 20,000-piece replay makes no
    :class:`Step` until one is asked for; drivers read :attr:`at` and
    :attr:`data` directly. It is a sequence of steps like any other, equal to
    the tuple of the same steps.
    """

    __slots__ = ("at", "data", "last")

    def __init__(self, at: Sequence[int], data: Sequence[bytes], last: Step) -> None:
        if len(at) != len(data):
            raise ValueError(f"{len(at)} times for {len(data)} pieces")
        self.at = at
        self.data = data
        self.last = last

    def __len__(self) -> int:
        return len(self.at) + 1

    @overload
    def __getitem__(self, i: int) -> Step: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Step, ...]: ...
    def __getitem__(self, i: int | slice) -> Step | tuple[Step, ...]:
        if isinstance(i, slice):
            return tuple(self)[i]
        n = len(self.at)
        k = i + n + 1 if i < 0 else i
        if k == n:
            return self.last
        if not 0 <= k < n:
            raise IndexError(i)
        return Step(self.at[k], StepKind.SEND, self.data[k])

    def __iter__(self) -> Iterator[Step]:
        yield from map(Step, self.at, itertools.repeat(StepKind.SEND), self.data)
        yield self.last

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Steps({len(self.at)} sends, then {self.last!r})"


@dataclass(frozen=True)
class Schedule:
    """Everything a driver needs to play one response.

    ``end_to_end`` are the response's own headers: the recording's, minus
    hop-by-hop and framing headers. ``headers`` adds the framing headers for
    ``framing`` and ``content_length`` (from :func:`streamtape.wire.framing_headers`,
    their one owner): what an HTTP/1.1 client receives. A driver that sends
    another framing (an HTTP/1.0 client, a ``HEAD`` request) builds its head
    from ``end_to_end`` with :func:`streamtape.wire.response_head`.

    ``framing`` is ``chunked``, ``content-length``, ``close-delimited``, or
    ``none`` (status 0: the recording has no response head; send nothing):
    the profile's ``framing=`` item, by default the recording's own framing
    (HTTP/2 recordings, framing ``frames``, replay as ``chunked``).
    ``content_length`` is the length to declare on ``content-length``
    framing: the bytes sent, or more when the schedule cuts the body short
    (the client must see a short body), or the recorded length for a
    response without a body. ``steps`` are in time order and end with
    exactly one ``end``/``cut``/``reset``; every ``send`` step carries at
    least one byte.
    """

    status: int
    reason: str
    end_to_end: Headers
    framing: Framing
    head_at_ns: int
    steps: Sequence[Step]
    text: str = ""
    content_length: int | None = None
    apart_ns: int = 0
    """The least time between two ``send`` steps (the profile's
    :attr:`~.schedule.Profile.apart_ns`; 0: none). The steps' times keep it
    already; a driver writing to a socket keeps it in real time too: one that
    wakes late writes the next piece and waits again, rather than writing
    every piece due by then back to back (they would reach the client as one
    read)."""

    @property
    def headers(self) -> Headers:
        """The headers an HTTP/1.1 client receives: ``end_to_end`` plus the framing headers."""
        return self.end_to_end + tuple(framing_headers(self.framing, self.content_length))

    @property
    def sends(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.kind == StepKind.SEND)

    @property
    def pieces(self) -> list[bytes]:
        if isinstance(self.steps, Steps):
            return list(self.steps.data)
        return [s.data for s in self.steps if s.kind == StepKind.SEND]

    @property
    def body(self) -> bytes:
        """Every byte the schedule sends, joined."""
        return b"".join(self.pieces)

    @property
    def ending(self) -> StepKind:
        """``end``, ``cut`` or ``reset``."""
        return self.steps[-1].kind

    @property
    def duration_ns(self) -> int:
        """When the last step happens."""
        return self.steps[-1].at_ns if self.steps else self.head_at_ns

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` among :attr:`headers` (case-insensitive)."""
        return header_value(self.headers, name)
