"""Scheduling: a :class:`Profile` turns an interaction into a :class:`~.model.Schedule`.

Pure code, no I/O. The schedule is the response head, then steps "at t send
these bytes" and one final "end" / "cut" / "reset". Drivers (the replay
server, the in-process transports, ``streamtape play``) only run the steps
against absolute deadlines, so every driver plays the same thing and the
timing logic is tested without sleeping.

Rules the drivers can rely on:

- Chunkings only move piece boundaries: the bytes sent, joined, are exactly
  the recorded body unless a fault changes them. A re-cut piece is sent when
  its *last* byte was recorded as arriving (a replay never runs ahead of the
  recording), before latency is applied.
- Event boundaries come from :func:`streamtape.shapes.event_spans`. Events
  are counted from 1 and are the SSE blocks carrying ``data:`` (including
  ``[DONE]``), the NDJSON lines, the AWS event-stream messages or the JSON
  array's elements (and its closing ``]``); comments do not count.
- Faults apply in a fixed order whatever the order of the items: status
  (replaces everything else), drop-done, the earliest of cut / reset /
  cut-event / error-event / exception, stall, keepalive, slow-headers. The WebSocket
  items (``chunk=fragment``, ``fault=close`` / ``drop`` / ``ping``) are
  :mod:`.messages`'s; an HTTP schedule ignores them, so one profile serves
  a cassette of responses and sessions.
- A recording whose upstream failed (upstream_closed, upstream_error) or that
  stopped before the response did (interrupted) ends with a ``cut`` at its
  recorded end: the cut is part of what was recorded. One whose *client*
  disconnected ends cleanly: the upstream never failed, and SDKs routinely
  hang up right after ``[DONE]``, before the server's terminating chunk
  arrives, so such recordings are usually complete answers. A recording with
  no response head replays as :attr:`Schedule.status` 0 (send no head) and a cut.
- Pieces due at one moment are sent apart when the profile says so
  (:attr:`Profile.apart_ns`: ``latency=apart``, or a chunking that cuts the
  recorded pieces with no ``latency=`` item): each ``send`` step at least
  that long after the one before, the pieces a fault splits or inserts
  included, so that each boundary reaches a client as the end of one of its
  reads; a stall's silence comes on top. The first piece keeps its time.
  :attr:`Schedule.apart_ns` tells a driver to keep the spacing in real time.
- The schedule decides the *number* a ``Content-Length`` declares (the bytes
  sent, keep-alive comments and an error event included; on a cut, the whole
  body's length and always more than is sent, so the client sees a short
  body); the header itself comes from :func:`streamtape.wire.framing_headers`.
- ``framing=`` picks the framing (:attr:`Schedule.framing`): as recorded by
  default, else chunked, close-delimited or Content-Length, whatever the
  recording had; the status fault's error body follows it too. On
  close-delimited framing a cut is a close like the end: a client cannot tell
  them apart, which is what the item is for.
- ``newline=`` rewrites the line endings of an identity-encoded SSE or
  NDJSON body *before* everything else (:func:`converted_newlines`), so
  chunkings (``crlf-split``), event spans and faults all see the converted
  body, and an inserted keep-alive or error event uses its line ending too.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import operator
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..cassette.model import Interaction, Outcome, Response
from ..cassette.pieces import Piece, Pieces, PieceSequence
from ..errors import ProfileError
from ..shapes import Span, detect_shape, error_body, error_event, event_spans, wire_of
from ..shapes.eventstream import EventStreamDecoder, EventStreamMessage, exception_message
from ..wire import UPSTREAM_RESET, Framing, end_to_end, has_no_body, reason_phrase, replay_framing
from .model import (
    ChunkKind,
    FaultKind,
    FramingKind,
    Item,
    LatencyKind,
    NewlineKind,
    Schedule,
    Step,
    StepKind,
    Steps,
)

__all__ = ["ERROR_MESSAGE", "KEEPALIVE_TEXT", "Profile"]

_MS = 1_000_000
_S = 1_000_000_000

KEEPALIVE_TEXT = b": keepalive"
"""The SSE comment the ``keepalive`` fault inserts (then a blank line)."""

ERROR_MESSAGE = "streamtape fault: error-event injected"
"""The message of the error event the ``error-event`` fault inserts."""


@dataclass(slots=True)
class _Piece:
    """A piece of the outgoing body. ``start``/``end`` index the recorded body;
    an inserted piece (keep-alive, error event) has ``start == end`` and its own data."""

    at: int
    start: int
    end: int
    data: bytes

    @property
    def inserted(self) -> bool:
        return self.start == self.end


@dataclass(frozen=True)
class _Events:
    """Event spans of a body: all spans, and the counted (non-comment) ones."""

    spans: tuple[Span, ...]
    counted: tuple[Span, ...]
    wire: str


def _event_wire(ix: Interaction) -> str | None:
    """The wire of an identity-encoded stream of events (SSE, NDJSON, the AWS event
    stream, a JSON array), else None."""
    resp = ix.response
    if resp is None:
        return None
    enc = (resp.header("content-encoding") or "identity").strip().lower()
    if enc not in ("", "identity"):
        return None
    return wire_of(ix)


def _events_of(ix: Interaction, body: bytes) -> _Events | None:
    """Event spans of an identity-encoded body of events, else None."""
    wire = _event_wire(ix)
    if wire is None:
        return None
    spans = tuple(event_spans(body, wire))
    return _Events(spans, tuple(s for s in spans if s.kind != "comment"), wire)


def _need_events(ev: _Events | None, item: Item, text: str) -> _Events:
    if ev is None:
        raise ProfileError(
            f"profile {text!r}: fault {str(item)!r} needs a stream of events (SSE, NDJSON, "
            "an AWS event stream or a JSON array, identity-encoded); this response is none"
        )
    return ev


def _boundaries_to_pieces(
    body: bytes, cuts: Sequence[int], ends: list[int], times: list[int]
) -> list[_Piece]:
    """Pieces between sorted cut offsets; each sent when its last byte was recorded."""
    n = len(body)
    points = sorted({c for c in cuts if 0 < c < n} | {0, n})
    out: list[_Piece] = []
    for a, b in itertools.pairwise(points):
        k = bisect.bisect_right(ends, b - 1)
        out.append(_Piece(times[min(k, len(times) - 1)], a, b, body[a:b]))
    return out


def _json_mid(body: bytes, start: int, end: int) -> int:
    """An offset strictly inside the JSON of the event body[start:end] (else its middle)."""
    seg = body[start:end]
    a = min((i for i in (seg.find(b"{"), seg.find(b"[")) if i >= 0), default=-1)
    b = max(seg.rfind(b"}"), seg.rfind(b"]"))
    if a >= 0 and b > a:
        return start + (a + b + 1) // 2
    return start + max(1, (end - start) // 2)


_UTF8_LEAD = re.compile(rb"[\xc0-\xf7](?=[\x80-\xbf])")


def _utf8_cuts(body: bytes, wire: str | None) -> list[int]:
    """An offset inside every multi-byte UTF-8 character. In an AWS event stream only
    inside the payloads: its preludes, headers and CRCs are binary, and the messages
    (their CRCs too) stay as recorded."""
    if wire != "eventstream":
        return [m.end() for m in _UTF8_LEAD.finditer(body)]
    cuts: list[int] = []
    for m in EventStreamDecoder().feed(body):
        if isinstance(m, EventStreamMessage):
            at = m.end - 4 - len(m.payload)
            cuts.extend(at + c.end() for c in _UTF8_LEAD.finditer(m.payload))
    return cuts


def recorded_ending(ix: Interaction) -> StepKind:
    """How the recorded response ended on the wire: cleanly, cut (a FIN), or reset (an RST).

    A client that hung up after the body (SDKs close at ``[DONE]``) saw a
    clean end. The recorder marks an upstream reset in the error text
    (:data:`~streamtape.wire.UPSTREAM_RESET`), so a replay resets too.
    """
    if ix.outcome in (Outcome.COMPLETE, Outcome.CLIENT_DISCONNECTED):
        return StepKind.END
    if ix.error is not None and ix.error.startswith(UPSTREAM_RESET):
        return StepKind.RESET
    return StepKind.CUT


def _as_lf(data: bytes, wire: str) -> bytes:
    """``data`` with each line ending an LF. What ends a line: in SSE (WHATWG) CRLF, a
    lone CR and a lone LF alike; in NDJSON (and JSON Lines) an LF, with an optional CR
    before it."""
    data = data.replace(b"\r\n", b"\n")
    return data.replace(b"\r", b"\n") if wire == "sse" else data


def _newline_wire(ix: Interaction, newline: NewlineKind) -> str | None:
    """The wire whose line endings ``newline`` rewrites in ``ix``, or None (none it applies to)."""
    if newline is NewlineKind.RECORDED:
        return None
    wire = _event_wire(ix)
    if wire not in ("sse", "ndjson") or (wire == "ndjson" and newline is NewlineKind.CR):
        return None  # (binary messages, or JSON whose line breaks are only whitespace)
    return wire


def _written_so(body: bytes, wire: str, newline: NewlineKind) -> bool:
    """Whether every line ending of ``body`` is ``newline``'s already (a quick count)."""
    crlf = body.count(b"\r\n")
    if newline is NewlineKind.CRLF:
        return body.count(b"\n") == crlf and (wire != "sse" or body.count(b"\r") == crlf)
    if newline is NewlineKind.LF:
        return not crlf and (wire != "sse" or b"\r" not in body)
    return b"\n" not in body  # cr (on SSE only)


def converted_newlines(ix: Interaction, newline: NewlineKind) -> Interaction:
    """``ix`` with the line endings of its SSE or NDJSON body written as ``newline``.

    Only line endings change: an SSE field never holds a CR or an LF (they end
    its line), and JSON holds them raw only as whitespace, so the events a
    correct parser reads are the same. A lone CR does not end an NDJSON line,
    so ``cr`` leaves NDJSON as recorded. The recorded pieces keep their times;
    their boundaries move with the bytes, and one that fell between a CR and
    its LF goes before the new line ending, which is then sent with the piece
    that completed the recorded one (a replay never runs ahead of the
    recording). Anything else (``recorded``, a body that is not SSE or
    NDJSON, an encoded one, one already written so) comes back as it is: the
    same object.
    """
    wire = _newline_wire(ix, newline)
    resp = ix.response
    if wire is None or resp is None:
        return ix
    body, eol = resp.body, newline.eol
    if _written_so(body, wire, newline):
        return ix
    pieces = [c for c in resp.pieces if c.data]
    out: list[Piece] = []
    paired = False  # the piece before ended with a CR whose LF begins this one
    for i, c in enumerate(pieces):
        data, lead = c.data, b""
        if paired:  # that CR LF is one line ending, written here, where its LF came
            data, lead = data[1:], eol
        paired = data[-1:] == b"\r" and i + 1 < len(pieces) and pieces[i + 1].data[:1] == b"\n"
        if paired:
            data = data[:-1]
        data = _as_lf(data, wire)
        out.append(Piece(c.at_ns, lead + (data if eol == b"\n" else data.replace(b"\n", eol))))
    compact = Pieces.of(out)
    return dataclasses.replace(ix, response=dataclasses.replace(resp, pieces=compact))


def _recorded(resp: Response) -> tuple[list[int], list[bytes]]:
    """The recorded pieces' times and bytes, empty pieces left out. Compact pieces (a
    loaded cassette's) are sliced from their joined body, no :class:`Piece` made."""
    pieces = resp.pieces
    if not isinstance(pieces, PieceSequence):
        kept = [c for c in pieces if c.data]
        return [c.at_ns for c in kept], [c.data for c in kept]
    compact = pieces.compact()
    body, ends = compact.data, compact.ends
    datas = [body[s:e] for s, e in zip(itertools.chain((0,), ends), ends, strict=False)]
    times = list(compact.at)
    if b"" in datas:
        pairs = [(t, d) for t, d in zip(times, datas, strict=True) if d]
        return [t for t, _ in pairs], [d for _, d in pairs]
    return times, datas


_RESHAPING = frozenset((
    FaultKind.DROP_DONE, FaultKind.CUT, FaultKind.RESET, FaultKind.CUT_EVENT,
    FaultKind.ERROR_EVENT, FaultKind.EXCEPTION, FaultKind.STALL, FaultKind.KEEPALIVE,
))
"""Faults that add, cut or move pieces; without them :meth:`_ScheduleBuilder.plain` applies."""

_FRAMINGS = {
    FramingKind.CHUNKED: Framing.CHUNKED,
    FramingKind.CLOSE: Framing.CLOSE_DELIMITED,
    FramingKind.CONTENT_LENGTH: Framing.CONTENT_LENGTH,
}
"""The framing each ``framing=`` kind sends (``recorded``: the recording's, absent here)."""


@dataclass(frozen=True)
class Profile:
    """A parsed profile. Build with :func:`~streamtape.profiles.parse_profile`."""

    text: str
    chunk: Item = field(default_factory=lambda: Item(ChunkKind.RECORDED))
    latency: Item = field(default_factory=lambda: Item(LatencyKind.RECORDED))
    faults: tuple[Item, ...] = ()
    seed: int | None = None
    framing: FramingKind = FramingKind.RECORDED
    newline: NewlineKind = NewlineKind.RECORDED
    apart_ns: int = 0
    """The least time between two pieces sent (0: none), so that each boundary reaches the
    client as the end of a read: ``latency=apart[:US]``'s, or for a chunking that cuts the
    recorded pieces and no ``latency=`` item, :data:`~.model.APART_US` (see
    :func:`~.parse.parse_profile`)."""

    def fault(self, kind: FaultKind) -> Item | None:
        """The last fault item of ``kind``, or None."""
        for f in reversed(self.faults):
            if f.kind == kind:
                return f
        return None

    @property
    def is_instant(self) -> bool:
        return self.latency.kind == LatencyKind.INSTANT

    def schedule(self, ix: Interaction, seed: int | None = None, *, apart: bool = True) -> Schedule:
        """The schedule for ``ix``. Pure; ``seed`` (else the profile's, else 0) seeds randomness.

        ``apart=False`` leaves out :attr:`apart_ns` (``latency=apart`` is then
        ``instant``): for a driver with no kernel between it and its client,
        which hands each piece over as a read of its own whatever the timing
        (the in-process transports), so that the spacing would only be a wait.

        Raises :class:`ProfileError` when the profile cannot apply to this
        interaction (an event fault on a body without events, or an event
        number past the last event).
        """
        if seed is None:
            seed = self.seed if self.seed is not None else 0
        return _ScheduleBuilder(self, ix, seed, self.apart_ns if apart else 0).run()


def _apart(times: Sequence[int], gap: int) -> list[int]:
    """``times`` with each one at least ``gap`` after the one before it (the first as it is).

    Pieces due at the same moment go out in back-to-back writes, and a client
    reads whatever has arrived since its last read: Node's ``fetch`` hands its
    body stream everything buffered, so such pieces arrive as one read and a
    re-chunking profile cuts nothing the client sees (``bench/boundaries.py``).
    """
    out = list(times)
    if gap > 0:
        for i in range(1, len(out)):
            out[i] = max(out[i], out[i - 1] + gap)
    return out


class _ScheduleBuilder:
    """One profile applied to one interaction: the pipeline of :meth:`Profile.schedule`."""

    def __init__(self, profile: Profile, ix: Interaction, seed: int, apart_ns: int = 0) -> None:
        self.p = profile
        self.gap = apart_ns
        self.ix = converted_newlines(ix, profile.newline)
        self.seed = seed
        self.text = profile.text
        self.body = self.ix.response.body if self.ix.response is not None else b""

    def rng(self, purpose: str) -> random.Random:
        return random.Random(f"{self.seed}:{purpose}")

    def err(self, item: Item, message: str) -> ProfileError:
        return ProfileError(f"profile {self.text!r}: fault {str(item)!r}: {message}")

    @functools.cached_property
    def events(self) -> _Events | None:
        return _events_of(self.ix, self.body)

    @functools.cached_property
    def eol(self) -> bytes:
        """The line ending of what the schedule inserts (keep-alives, an error event):
        ``newline=``'s where it applies, else the body's own (CRLF, CR, else LF)."""
        if _newline_wire(self.ix, self.p.newline) is not None:
            return self.p.newline.eol
        body = self.body
        return b"\r\n" if b"\r\n" in body else b"\r" if b"\r" in body else b"\n"

    def framing(self, recorded: Framing) -> Framing:
        """The framing to send: ``framing=``'s, or (``recorded``) what was recorded."""
        return _FRAMINGS.get(self.p.framing) or replay_framing(recorded)

    # -- pipeline ---------------------------------------------------------------

    def run(self) -> Schedule:
        ix = self.ix
        resp = ix.response
        status_fault = self.p.fault(FaultKind.STATUS)
        if status_fault is not None:
            return self.status_schedule(status_fault)
        if resp is None:
            head, _, end = self.latency(0, [], ix.end_ns or 0)
            head += self.slow_headers()
            end = max(end + self.slow_headers(), head)
            return Schedule(0, "", (), Framing.NONE, head, (Step(end, recorded_ending(ix)),), self.text)
        plain = not any(f.kind in _RESHAPING for f in self.p.faults)
        if plain and self.p.chunk.kind == ChunkKind.RECORDED:
            times, datas = _recorded(resp)
            return self.plain(resp, times, datas, self.recorded_end(resp, times))
        recorded = [c for c in resp.pieces if c.data]
        times = [c.at_ns for c in recorded]
        rec_end = self.recorded_end(resp, times)
        ends = list(itertools.accumulate(len(c.data) for c in recorded))
        pieces = self.chunk(recorded, ends, times)
        if plain:
            return self.plain(resp, [p.at for p in pieces], [p.data for p in pieces], rec_end)

        # Latency: the head, each piece and the recorded end are time points.
        head, ptimes, end = self.latency(resp.headers_at_ns, [p.at for p in pieces], rec_end)
        for p, t in zip(pieces, _apart([max(t, head) for t in ptimes], self.gap), strict=True):
            p.at = t
        end = max(end, pieces[-1].at if pieces else head, head)

        terminal = recorded_ending(ix)
        terminal_offset = len(self.body)
        extra: list[_Piece] = []

        if self.p.fault(FaultKind.DROP_DONE) is not None:
            pieces = self.drop_done(pieces)

        trunc = self.truncation()
        if trunc is not None:
            kind, offset, _item = trunc
            kept: list[_Piece] = []
            for p in pieces:
                if p.end <= offset:
                    kept.append(p)
                elif p.start < offset:
                    kept.append(_Piece(p.at, p.start, offset, p.data[: offset - p.start]))
            at = kept[-1].at if kept else head
            if kind in (FaultKind.ERROR_EVENT, FaultKind.EXCEPTION):
                data = self.error_data(_item, offset)
                if data:
                    extra.append(_Piece(at, offset, offset, data))
                terminal = StepKind.END
            else:
                terminal = StepKind.RESET if kind == FaultKind.RESET else StepKind.CUT
            pieces = kept
            end = at
            terminal_offset = offset

        pieces.extend(extra)
        term = _Piece(end, terminal_offset, terminal_offset, b"")

        stall = self.p.fault(FaultKind.STALL)
        if stall is not None:
            pieces, term = self.stall(stall, pieces, term)

        keepalive = self.p.fault(FaultKind.KEEPALIVE)
        if keepalive is not None:
            pieces = self.keepalive(keepalive, head, pieces, term)

        slow = self.slow_headers()
        head += slow
        steps: list[Step] = []
        last = head
        gap = 0  # none before the first piece; then the spacing, again, for the pieces the
        for p in pieces:  # faults split or inserted (keep-alives, drop-done) after the first pass
            if not p.data:
                continue
            last = max(last + gap, p.at + slow)
            gap = self.gap
            steps.append(Step(last, StepKind.SEND, p.data))
        steps.append(Step(max(last, term.at + slow), terminal))
        return self.finish(resp, head, steps, terminal, sum(len(s.data) for s in steps))

    def finish(self, resp: Response, head: int, steps: Sequence[Step], terminal: StepKind,
               sent: int) -> Schedule:
        """The :class:`Schedule` of ``resp`` with these steps (``sent`` body bytes)."""
        framing = self.framing(resp.framing)
        return Schedule(
            resp.status,
            resp.reason or reason_phrase(resp.status),
            tuple(end_to_end(resp.headers)),
            framing,
            head,
            steps if isinstance(steps, Steps) else tuple(steps),
            self.text,
            self.content_length(framing, terminal, sent),
            apart_ns=self.gap,
        )

    def recorded_end(self, resp: Response, times: list[int]) -> int:
        """When the recording ended: its end mark, and never before its last piece."""
        last_at = times[-1] if times else resp.headers_at_ns
        return max(self.ix.end_ns if self.ix.end_ns is not None else last_at, last_at)

    def plain(self, resp: Response, ats: list[int], datas: list[bytes], rec_end: int) -> Schedule:
        """The pipeline of :meth:`run` for a profile with no fault that reshapes pieces
        (only latency and slow-headers apply): the same schedule, without a
        :class:`_Piece` per piece. Every stream replayed under a chunking and
        latency alone comes this way (20,000 recorded pieces: 22 ms instead
        of 35 ms, most of what is left being the steps themselves).

        Equivalences with :meth:`run`: a piece goes out at the running maximum
        of ``max(t, head) + slow``, which (starting from ``head + slow``) is the
        running maximum of ``t + slow``; the end is at least the last piece's
        and the head's time. The spacing (:attr:`Profile.apart_ns`) applies
        after that, as in :meth:`run`'s one pass (no fault adds pieces here).
        """
        ix = self.ix
        head, ptimes, end = self.latency(resp.headers_at_ns, ats, rec_end)
        end = max(end, ptimes[-1] if ptimes else head, head)
        terminal = recorded_ending(ix)
        if not all(datas):  # pieces are never empty here; keep run()'s rule if one were
            kept = [(t, d) for t, d in zip(ptimes, datas, strict=True) if d]
            ptimes, datas = [t for t, _ in kept], [d for _, d in kept]
        slow = self.slow_headers()
        head += slow
        at = ptimes if not slow else [t + slow for t in ptimes]
        if at and (at[0] < head or not all(map(operator.le, at, itertools.islice(at, 1, None)))):
            at = list(itertools.accumulate(at, max, initial=head))  # (not so when instant)
            del at[0]
        if self.gap and len(at) > 1:
            at = _apart(at, self.gap)
        ending = Step(max(at[-1] if at else head, end + slow), terminal)
        return self.finish(resp, head, Steps(at, datas, ending), terminal, sum(map(len, datas)))

    # -- chunking ---------------------------------------------------------------

    def chunk(self, given: Sequence[Piece], ends: list[int], times: list[int]) -> list[_Piece]:
        """The recorded pieces cut again as the profile's chunking says."""
        body = self.body
        if not body:
            return []
        kind = self.p.chunk.kind
        args = self.p.chunk.args
        recorded = ends[:-1]
        if kind in (ChunkKind.RECORDED, ChunkKind.FRAGMENT):  # fragment: WebSocket frames only
            return [
                _Piece(c.at_ns, e - len(c.data), e, c.data)
                for c, e in zip(given, ends, strict=True)
            ]
        if kind == ChunkKind.BYTES:
            n = int(args[0])
            cuts: Sequence[int] = range(n, len(body), n)
        elif kind == ChunkKind.RANDOM:
            a, b = int(args[0]), int(args[1])
            rng = self.rng("chunk")
            cuts = []
            pos = 0
            while True:
                pos += rng.randint(a, b)
                if pos >= len(body):
                    break
                cuts.append(pos)
        elif kind == ChunkKind.UTF8_SPLIT:
            cuts = [*recorded, *_utf8_cuts(body, _event_wire(self.ix))]
        elif kind == ChunkKind.CRLF_SPLIT:
            cuts = [*recorded, *(m.start() + 1 for m in re.finditer(rb"\r\n", body))]
        elif kind in (ChunkKind.EVENTS, ChunkKind.SPLIT_EVENTS):
            ev = self.events
            if ev is None:
                spans = [(0, len(body), "event")]
            else:
                spans = [(s.start, s.end, s.kind) for s in ev.spans]
            cuts = []
            for start, end, skind in spans:
                cuts.append(start)
                cuts.append(end)
                if kind == ChunkKind.SPLIT_EVENTS and skind != "comment" and end - start > 1:
                    cuts.append(_json_mid(body, start, end))
        elif kind == ChunkKind.COALESCE:
            window = int(args[0] * _MS) if args else None  # None: no limit, one group
            cuts = []
            group_first = None
            for i, c in enumerate(given):
                if group_first is None or (window is not None and c.at_ns - group_first > window):
                    if i:
                        cuts.append(ends[i - 1])
                    group_first = c.at_ns
        elif kind == ChunkKind.WHOLE:
            cuts = []
        else:  # pragma: no cover - parse_profile only builds known kinds
            raise ProfileError(f"profile {self.text!r}: unknown chunking {kind!r}")
        return _boundaries_to_pieces(body, cuts, ends, times)

    # -- latency ----------------------------------------------------------------

    def latency(self, head: int, ts: list[int], end: int) -> tuple[int, list[int], int]:
        kind = self.p.latency.kind
        args = self.p.latency.args
        if kind == LatencyKind.RECORDED:
            return head, list(ts), end
        if kind in (LatencyKind.INSTANT, LatencyKind.APART):  # apart: spaced by self.gap
            return 0, [0] * len(ts), 0
        if kind == LatencyKind.SCALE:
            f = args[0]
            return round(head * f), [round(t * f) for t in ts], round(end * f)
        if kind == LatencyKind.FIXED:
            ttft, gap = int(args[0] * _MS), int(args[1] * _MS)
            out = [ttft + i * gap for i in range(len(ts))]
            return 0, out, out[-1] if out else 0
        if kind == LatencyKind.JITTER:
            ms = int(args[0] * _MS)
            rng = self.rng(LatencyKind.JITTER)
            out = []
            prev = head
            for t in ts:
                prev = max(prev, t + rng.randint(0, ms))
                out.append(prev)
            return head, out, max(end, prev)
        raise ProfileError(f"profile {self.text!r}: unknown latency {kind!r}")  # pragma: no cover

    # -- faults -----------------------------------------------------------------

    def drop_done(self, pieces: list[_Piece]) -> list[_Piece]:
        ev = self.events
        if ev is None:
            return pieces
        for span in (s for s in ev.spans if s.kind == "done"):
            out: list[_Piece] = []
            for p in pieces:
                if p.end <= span.start or p.start >= span.end:
                    out.append(p)
                    continue
                if p.start < span.start:
                    out.append(_Piece(p.at, p.start, span.start, p.data[: span.start - p.start]))
                if p.end > span.end:
                    out.append(_Piece(p.at, span.end, p.end, p.data[span.end - p.start :]))
            pieces = out
        return pieces

    def event_end(self, item: Item, n: int) -> int:
        """Offset right after counted event ``n`` (1-based; 0 = before the first event)."""
        ev = _need_events(self.events, item, self.text)
        if n > len(ev.counted):
            raise self.err(item, f"the response has only {len(ev.counted)} events")
        if n == 0:
            return ev.counted[0].start if ev.counted else 0
        return ev.counted[n - 1].end

    def truncation(self) -> tuple[FaultKind, int, Item] | None:
        """The earliest of the cut / reset / cut-event / error-event faults: (kind, offset, item)."""
        best: tuple[FaultKind, int, Item] | None = None
        for f in self.p.faults:
            if f.kind in (FaultKind.CUT, FaultKind.RESET):
                assert f.amount is not None, "parse_profile gives cut and reset an amount"
                offset = f.amount.offset_in(len(self.body))
            elif f.kind in (FaultKind.CUT_EVENT, FaultKind.ERROR_EVENT, FaultKind.EXCEPTION):
                offset = self.event_end(f, int(f.args[0]))
            else:
                continue
            if best is None or offset < best[1]:
                best = (FaultKind(f.kind), offset, f)
        return best

    def error_data(self, item: Item, offset: int) -> bytes:
        """The error event an ``error-event`` or ``exception`` fault sends at ``offset``."""
        ix = self.ix
        wire = self.events.wire if self.events is not None else None
        if item.kind == FaultKind.EXCEPTION:
            if wire != "eventstream":
                raise self.err(item, "needs an AWS event stream (Bedrock); this response is "
                               f"{wire or 'not a stream of events'}")
            return exception_message(item.name, f"streamtape fault: {item.name} injected")
        data = error_event(detect_shape(ix), ERROR_MESSAGE, wire)
        if wire == "jsonarray" and offset == 0:  # no element before it: the array opens here
            data = b"[" + data[1:]
        if _newline_wire(ix, self.p.newline) is not None:
            data = data.replace(b"\n", self.eol)  # the converted body's line ending
        return data

    def stall(self, item: Item, pieces: list[_Piece], term: _Piece) -> tuple[list[_Piece], _Piece]:
        ev = _need_events(self.events, item, self.text)
        n, seconds = int(item.args[0]), item.args[1]
        if n > len(ev.counted):
            raise self.err(item, f"the response has only {len(ev.counted)} events")
        y = ev.counted[n - 1].start
        delay = int(seconds * _S)
        out: list[_Piece] = []
        for p in pieces:
            if p.start < y < p.end:
                out.append(_Piece(p.at, p.start, y, p.data[: y - p.start]))
                out.append(_Piece(p.at + delay, y, p.end, p.data[y - p.start :]))
            elif p.start >= y:
                out.append(_Piece(p.at + delay, p.start, p.end, p.data))
            else:
                out.append(p)
        if term.start >= y:
            term = _Piece(term.at + delay, term.start, term.end, b"")
        return out, term

    def keepalive(
        self, item: Item, head: int, pieces: list[_Piece], term: _Piece
    ) -> list[_Piece]:
        ev = self.events
        if ev is None or ev.wire != "sse":
            return pieces  # keep-alive comments exist only in SSE
        eol = self.eol
        comment = KEEPALIVE_TEXT + eol + eol
        every = int(item.args[0] * _S)
        bounds = {0, *(s.start for s in ev.spans), *(s.end for s in ev.spans)}
        starts = {s.start for s in ev.counted}
        out: list[_Piece] = []
        prev_at = head
        prev_end = 0
        for p in [*pieces, term]:
            at_boundary = p.start in bounds and p.start == prev_end
            if at_boundary and (not p.inserted or p is term):
                if every == 0:
                    if p is not term and p.start in starts:
                        out.append(_Piece(p.at, p.start, p.start, comment))
                else:
                    t = prev_at + every
                    while t < p.at:
                        out.append(_Piece(t, p.start, p.start, comment))
                        t += every
            if p is not term:
                out.append(p)
                prev_at = p.at
                if not p.inserted:
                    prev_end = p.end
        return out

    def slow_headers(self) -> int:
        f = self.p.fault(FaultKind.SLOW_HEADERS)
        return int(f.args[0] * _MS) if f is not None else 0

    def status_schedule(self, item: Item) -> Schedule:
        code = int(item.args[0])
        ix = self.ix
        shape = detect_shape(ix) if ix.response is not None else "raw"
        ctype, body = error_body(shape, code, f"streamtape fault: status {code}")
        head_rec = ix.response.headers_at_ns if ix.response is not None else 0
        head, _, _ = self.latency(head_rec, [], head_rec)
        head += self.slow_headers()
        headers: list[tuple[str, str]] = [("Content-Type", ctype)]
        if code in (429, 503):
            headers.append(("Retry-After", "1"))
        steps = [Step(head, StepKind.SEND, body)] if body else []
        steps.append(Step(head, StepKind.END))
        framing = self.framing(Framing.CONTENT_LENGTH)
        return Schedule(
            code, reason_phrase(code), tuple(headers), framing, head, tuple(steps),
            self.text, len(body) if framing is Framing.CONTENT_LENGTH else None,
        )

    def content_length(self, framing: Framing, terminal: StepKind, sent: int) -> int | None:
        """The length a ``content-length`` response declares; None on other framings."""
        if framing != Framing.CONTENT_LENGTH:
            return None
        resp = self.ix.response
        assert resp is not None
        recorded = (resp.header("content-length") or "").strip()
        recorded_n = int(recorded) if recorded.isdigit() else None
        if has_no_body(resp.status, self.ix.request.method) and recorded_n is not None:
            return recorded_n  # the length of the body not sent
        if terminal == StepKind.END:
            return sent
        # A cut: declare the whole body, and more than is sent, so the client sees a short body.
        return max(recorded_n or 0, len(self.body), sent + 1)
