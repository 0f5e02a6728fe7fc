"""Replay profiles: how one recorded interaction is played back. Pure code, no I/O.

A profile turns an :class:`~streamtape.cassette.Interaction` into a
:class:`Schedule`: the response head, then steps "at t send these bytes" and
one final "end" / "cut" / "reset". Drivers (the replay server, the in-process
transports, ``streamtape play``) only run the steps against absolute
deadlines, so every driver plays the same thing and the timing logic is tested
without sleeping.

Profile text is a preset name, or ``key=value`` items separated by ``;``::

    chunk=utf8-split;latency=scale:0.5;fault=keepalive:2

An item without ``=`` is a preset name expanded in place
(``instant;fault=cut:50%``). Later ``chunk``/``latency``/``seed`` items
override earlier ones; ``fault`` items add up. See :data:`SYNTAX`.

Rules the drivers can rely on:

- Chunkings only move piece boundaries: the bytes sent, joined, are exactly
  the recorded body unless a fault changes them. A re-cut piece is sent when
  its *last* byte was recorded as arriving (a replay never runs ahead of the
  recording), before latency is applied.
- Event boundaries come from :func:`streamtape.shapes.event_spans`. Events
  are counted from 1 and are the SSE blocks carrying ``data:`` (including
  ``[DONE]``) or the NDJSON lines; comments do not count.
- Faults apply in a fixed order whatever the order of the items: status
  (replaces everything else), drop-done, the earliest of cut / reset /
  cut-event / error-event, stall, keepalive, slow-headers.
- A recording whose upstream failed (upstream_closed, upstream_error) or that
  stopped before the response did (interrupted) ends with a ``cut`` at its
  recorded end: the cut is part of what was recorded. One whose *client*
  disconnected ends cleanly: the upstream never failed, and SDKs routinely
  hang up right after ``[DONE]``, before the server's terminating chunk
  arrives, so such recordings are usually complete answers. A recording with no response head
  replays as :attr:`Schedule.status` 0 (send no head) and a cut.
"""

from __future__ import annotations

import bisect
import http
import itertools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .cassette import (
    CHUNKED,
    CLIENT_DISCONNECTED,
    CLOSE_DELIMITED,
    COMPLETE,
    CONTENT_LENGTH,
    FRAMES,
    Headers,
    Interaction,
)
from .errors import ProfileError

__all__ = [
    "ADVERSARIAL",
    "PRESETS",
    "SYNTAX",
    "Item",
    "Profile",
    "Schedule",
    "Step",
    "parse_profile",
]

SEND = "send"
END = "end"
CUT = "cut"
RESET = "reset"
STEP_KINDS = (SEND, END, CUT, RESET)
TERMINAL_KINDS = (END, CUT, RESET)

NO_HEAD = "none"
"""Schedule framing when the recording has no response head: send nothing, then cut."""

_MS = 1_000_000
_S = 1_000_000_000

KEEPALIVE_TEXT = b": keepalive"
ERROR_MESSAGE = "streamtape fault: error-event injected"


# --------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class Step:
    """One thing a driver does at ``at_ns`` (absolute, from t0 = request received).

    ``send``: write ``data`` as one piece (one HTTP chunk on chunked framing).
    ``end``: finish cleanly (terminating chunk; close for close-delimited).
    ``cut``: close the connection without finishing (no terminating chunk).
    ``reset``: abort the connection with a TCP RST.
    """

    at_ns: int
    kind: str
    data: bytes = b""


@dataclass(frozen=True)
class Schedule:
    """Everything a driver needs to play one response.

    ``headers`` are final: hop-by-hop headers of the recording are dropped and
    the framing header is set (``Transfer-Encoding: chunked`` for chunked,
    ``Content-Length`` for content-length; neither for close-delimited).
    ``framing`` is ``chunked``, ``content-length``, ``close-delimited``, or
    ``none`` (status 0: the recording has no response head; send nothing).
    HTTP/2 recordings (framing ``frames``) replay as ``chunked``.
    ``steps`` are in time order and end with exactly one ``end``/``cut``/``reset``;
    every ``send`` step carries at least one byte.
    """

    status: int
    reason: str
    headers: Headers
    framing: str
    head_at_ns: int
    steps: tuple[Step, ...]
    text: str = ""

    @property
    def sends(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.kind == SEND)

    @property
    def pieces(self) -> list[bytes]:
        return [s.data for s in self.steps if s.kind == SEND]

    @property
    def body(self) -> bytes:
        """Every byte the schedule sends, joined."""
        return b"".join(s.data for s in self.steps if s.kind == SEND)

    @property
    def ending(self) -> str:
        """``end``, ``cut`` or ``reset``."""
        return self.steps[-1].kind

    @property
    def duration_ns(self) -> int:
        """When the last step happens."""
        return self.steps[-1].at_ns if self.steps else self.head_at_ns

    def header(self, name: str) -> str | None:
        lname = name.lower()
        for k, v in self.headers:
            if k.lower() == lname:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Item:
    """One parsed ``chunk``/``latency``/``fault`` value: ``kind`` and numeric ``args``."""

    kind: str
    args: tuple[float, ...] = ()
    text: str = ""

    def __str__(self) -> str:
        return self.text or self.kind


# --------------------------------------------------------------------------
# Presets and syntax

PRESETS: dict[str, str] = {
    "faithful": "chunk=recorded;latency=recorded",
    "instant": "chunk=recorded;latency=instant",
    # The harshest single profile: every byte its own piece, a keep-alive
    # comment before every event, no waiting. The whole set is ADVERSARIAL.
    "adversarial": "chunk=bytes:1;latency=instant;fault=keepalive:0",
}

ADVERSARIAL: dict[str, str] = {
    "bytes-1": "chunk=bytes:1;latency=instant",
    "random-1-16": "chunk=random:1-16;latency=instant",
    "utf8-split": "chunk=utf8-split;latency=instant",
    "events": "chunk=events;latency=instant",
    "split-events": "chunk=split-events;latency=instant",
    "crlf-split": "chunk=crlf-split;latency=instant",
    "coalesce-50": "chunk=coalesce:50;latency=instant",
    "whole": "chunk=whole;latency=instant",
    "keepalive": "chunk=events;latency=instant;fault=keepalive:0",
}
"""Profiles every streaming client should survive with the same assembled answer.

Each is also a preset named ``adversarial:<name>`` (e.g. ``adversarial:utf8-split``).
"""

SYNTAX = """\
A profile is a preset name or key=value items separated by ';', e.g.
  chunk=utf8-split;latency=scale:0.5;fault=keepalive:2
An item without '=' is a preset expanded in place (instant;fault=cut:50%).
Later chunk/latency/seed items override earlier ones; fault items add up.

chunk=      how the body is cut into pieces (joined, always the recorded body)
  recorded        the recorded pieces (default)
  bytes:N         N bytes per piece
  random:A-B      random sizes from A to B bytes (seeded)
  utf8-split      recorded pieces, plus a cut inside every multi-byte UTF-8 character
  events          one SSE event / NDJSON line per piece
  split-events    like events, and every event cut in the middle of its JSON
  crlf-split      recorded pieces, plus a cut between every CR and its LF
  coalesce:MS     join recorded pieces that arrived within MS of the group's first
  whole           the whole body in one piece
latency=    when pieces are sent
  recorded        as recorded (default)
  instant         everything at once
  scale:F         recorded times multiplied by F
  fixed:TTFT_MS:GAP_MS  first piece after TTFT_MS, then one every GAP_MS
  jitter:MS       each piece up to MS later (seeded); never reorders
fault=      (repeatable) events are counted from 1; comments do not count
  cut:P% | cut:NB       close without the terminating chunk after P% / N bytes
  reset:P% | reset:NB   abort with a TCP reset after P% / N bytes
  cut-event:N     close without the terminating chunk right after event N (0: before any)
  error-event:N   after event N, an error event in the format's own shape, then the end
  stall:N:S       S seconds of silence before event N
  keepalive:S     an SSE comment after every S seconds of silence (0: before every event)
  drop-done       leave out data: [DONE]
  status:CODE     fail before streaming: status CODE (400-599), an error body in the
                  format's shape, Retry-After on 429 and 503
  slow-headers:MS send the response head MS later (and everything after it)
seed=N      seed for everything random (default 0): the same seed, the same schedule
"""

_CHUNKINGS = {
    "recorded": 0,
    "bytes": 1,
    "random": 1,
    "utf8-split": 0,
    "events": 0,
    "split-events": 0,
    "crlf-split": 0,
    "coalesce": 1,
    "whole": 0,
}
_LATENCIES = {"recorded": 0, "instant": 0, "scale": 1, "fixed": 2, "jitter": 1}
_FAULTS = {
    "cut": 1,
    "reset": 1,
    "cut-event": 1,
    "error-event": 1,
    "stall": 2,
    "keepalive": 1,
    "drop-done": 0,
    "status": 1,
    "slow-headers": 1,
}

_NUM = r"\d+(?:\.\d*)?|\.\d+"


class _Bad(Exception):
    """A malformed value; the caller turns it into a ProfileError naming the item."""


def _num(s: str, what: str, *, integer: bool = False, minimum: float = 0) -> float:
    if not re.fullmatch(_NUM, s.strip()):
        raise _Bad(f"{what} must be a {'whole ' if integer else ''}number, not {s!r}")
    v = float(s)
    if integer and v != int(v):
        raise _Bad(f"{what} must be a whole number, not {s!r}")
    if v < minimum:
        raise _Bad(f"{what} must be at least {minimum:g}, not {s!r}")
    return int(v) if integer else v


def _split_value(value: str, table: dict[str, int], key: str) -> tuple[str, list[str]]:
    name, _, rest = value.partition(":")
    name = name.strip()
    if name not in table:
        raise _Bad(f"unknown {key} {name!r} (expected one of: {', '.join(table)})")
    args = rest.split(":") if rest else []
    if len(args) != table[name]:
        if table[name] == 0:
            raise _Bad(f"{key} {name!r} takes no argument")
        raise _Bad(f"{key} {name!r} needs {table[name]} argument(s) separated by ':'")
    return name, args


def _parse_chunk(value: str) -> Item:
    name, args = _split_value(value, _CHUNKINGS, "chunking")
    if name == "bytes":
        return Item(name, (_num(args[0], "bytes:N", integer=True, minimum=1),), value)
    if name == "random":
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", args[0])
        if not m:
            raise _Bad(f"random:A-B needs two whole numbers like 1-16, not {args[0]!r}")
        a, b = int(m.group(1)), int(m.group(2))
        if a < 1 or b < a:
            raise _Bad(f"random:A-B needs 1 <= A <= B, not {args[0]!r}")
        return Item(name, (a, b), value)
    if name == "coalesce":
        return Item(name, (_num(args[0], "coalesce:MS"),), value)
    return Item(name, (), value)


def _parse_latency(value: str) -> Item:
    name, args = _split_value(value, _LATENCIES, "latency")
    if name == "scale":
        return Item(name, (_num(args[0], "scale:F"),), value)
    if name == "fixed":
        return Item(name, (_num(args[0], "fixed:TTFT_MS"), _num(args[1], "fixed:GAP_MS")), value)
    if name == "jitter":
        return Item(name, (_num(args[0], "jitter:MS"),), value)
    return Item(name, (), value)


def _parse_amount(s: str, what: str) -> tuple[float, float]:
    """``P%`` -> (P, 0) as a percentage; ``NB`` -> (N, 1) as a byte count."""
    s = s.strip()
    if s.endswith("%"):
        p = _num(s[:-1], f"{what}:P%")
        if p > 100:
            raise _Bad(f"{what}:P% must be at most 100, not {s!r}")
        return p, 0
    if s[-1:] in ("B", "b"):
        return _num(s[:-1], f"{what}:NB", integer=True), 1
    raise _Bad(f"{what} needs P% or NB (a percentage or a byte count like 100B), not {s!r}")


def _parse_fault(value: str) -> Item:
    name, args = _split_value(value, _FAULTS, "fault")
    if name in ("cut", "reset"):
        return Item(name, _parse_amount(args[0], name), value)
    if name in ("cut-event", "error-event"):
        return Item(name, (_num(args[0], f"{name}:N", integer=True),), value)
    if name == "stall":
        n = _num(args[0], "stall:N", integer=True, minimum=1)
        return Item(name, (n, _num(args[1], "stall:S")), value)
    if name == "keepalive":
        return Item(name, (_num(args[0], "keepalive:S"),), value)
    if name == "status":
        code = _num(args[0], "status:CODE", integer=True)
        if not 400 <= code <= 599:
            raise _Bad(f"status:CODE must be an error status 400-599, not {args[0]!r}")
        return Item(name, (code,), value)
    if name == "slow-headers":
        return Item(name, (_num(args[0], "slow-headers:MS"),), value)
    return Item(name, (), value)


def _expand(text: str, depth: int = 0) -> list[tuple[str, str]]:
    """Profile text -> (item text, preset-or-user text) pairs with presets expanded."""
    out: list[tuple[str, str]] = []
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        if "=" not in item:
            name = item.lower()
            sub = PRESETS.get(name)
            if sub is None and name.startswith("adversarial:"):
                sub = ADVERSARIAL.get(name.partition(":")[2])
            if sub is None or depth > 3:
                known = [*PRESETS, *(f"adversarial:{n}" for n in ADVERSARIAL)]
                raise ProfileError(
                    f"profile {text!r}: unknown preset {item!r} "
                    f"(presets: {', '.join(known)}; or key=value items, see 'streamtape profiles')"
                )
            out.extend(_expand(sub, depth + 1))
        else:
            out.append((item, text))
    return out


def parse_profile(text: str) -> Profile:
    """A preset name or ``k=v;k=v`` items. Raises :class:`ProfileError` naming the bad item."""
    if not isinstance(text, str):
        raise ProfileError(f"profile must be text, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ProfileError("empty profile (use a preset such as 'faithful', or key=value items)")
    chunk = Item("recorded")
    latency = Item("recorded")
    faults: list[Item] = []
    seed: int | None = None
    for item, _src in _expand(stripped):
        key, _, value = item.partition("=")
        key = key.strip().lower()
        value = value.strip()
        try:
            if not value:
                raise _Bad("has no value")
            if key == "chunk":
                chunk = _parse_chunk(value)
            elif key == "latency":
                latency = _parse_latency(value)
            elif key == "fault":
                faults.append(_parse_fault(value))
            elif key == "seed":
                if not re.fullmatch(r"-?\d+", value):
                    raise _Bad(f"seed must be a whole number, not {value!r}")
                seed = int(value)
            else:
                raise _Bad(f"unknown key {key!r} (expected chunk, latency, fault or seed)")
        except _Bad as e:
            raise ProfileError(f"profile {stripped!r}: bad item {item!r}: {e}") from None
    return Profile(text=stripped, chunk=chunk, latency=latency, faults=tuple(faults), seed=seed)


# --------------------------------------------------------------------------
# Scheduling


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

    spans: tuple  # tuple[Span, ...]
    counted: tuple
    wire: str


def _events_of(ix: Interaction, body: bytes) -> _Events | None:
    """Event spans of an identity-encoded SSE/NDJSON body, else None."""
    resp = ix.response
    if resp is None:
        return None
    enc = (resp.header("content-encoding") or "identity").strip().lower()
    if enc not in ("", "identity"):
        return None
    from .shapes import event_spans, wire_of

    wire = wire_of(ix)
    if wire not in ("sse", "ndjson"):
        return None
    spans = tuple(event_spans(body, wire))
    return _Events(spans, tuple(s for s in spans if s.kind != "comment"), wire)


def _need_events(ev: _Events | None, item: Item, text: str) -> _Events:
    if ev is None:
        raise ProfileError(
            f"profile {text!r}: fault {str(item)!r} needs an SSE or NDJSON stream "
            "(identity-encoded); this response is neither"
        )
    return ev


def _boundaries_to_pieces(
    body: bytes, cuts: Sequence[int], ends: list[int], times: list[int]
) -> list[_Piece]:
    """Pieces between sorted cut offsets; each sent when its last byte was recorded."""
    n = len(body)
    points = sorted({c for c in cuts if 0 < c < n} | {0, n})
    out = []
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


@dataclass(frozen=True)
class Profile:
    """A parsed profile. Build with :func:`parse_profile`."""

    text: str
    chunk: Item = field(default_factory=lambda: Item("recorded"))
    latency: Item = field(default_factory=lambda: Item("recorded"))
    faults: tuple[Item, ...] = ()
    seed: int | None = None

    def fault(self, kind: str) -> Item | None:
        """The last fault item of ``kind``, or None."""
        for f in reversed(self.faults):
            if f.kind == kind:
                return f
        return None

    @property
    def is_instant(self) -> bool:
        return self.latency.kind == "instant"

    def schedule(self, ix: Interaction, seed: int | None = None) -> Schedule:
        """The schedule for ``ix``. Pure; ``seed`` (else the profile's, else 0) seeds randomness.

        Raises :class:`ProfileError` when the profile cannot apply to this
        interaction (an event fault on a body without events, or an event
        number past the last event).
        """
        if seed is None:
            seed = self.seed if self.seed is not None else 0
        return _Scheduler(self, ix, seed).run()


class _Scheduler:
    def __init__(self, profile: Profile, ix: Interaction, seed: int) -> None:
        self.p = profile
        self.ix = ix
        self.seed = seed
        self.text = profile.text
        self._events: _Events | bool | None = False  # False: not computed yet

    def rng(self, purpose: str) -> random.Random:
        return random.Random(f"{self.seed}:{purpose}")

    def err(self, item: Item, message: str) -> ProfileError:
        return ProfileError(f"profile {self.text!r}: fault {str(item)!r}: {message}")

    @property
    def events(self) -> _Events | None:
        if self._events is False:
            self._events = _events_of(self.ix, self.body)
        return self._events  # type: ignore[return-value]

    # -- pipeline ---------------------------------------------------------------

    def run(self) -> Schedule:
        ix = self.ix
        resp = ix.response
        status_fault = self.p.fault("status")
        if status_fault is not None:
            return self.status_schedule(status_fault)
        if resp is None:
            head, _, end = self.latency(0, [], ix.end_ns or 0)
            head += self.slow_headers()
            end = max(end + self.slow_headers(), head)
            return Schedule(0, "", (), NO_HEAD, head, (Step(end, CUT),), self.text)
        self.body = resp.body
        chunks = [c for c in resp.chunks if c.data]
        ends: list[int] = []
        pos = 0
        for c in chunks:
            pos += len(c.data)
            ends.append(pos)
        times = [c.at_ns for c in chunks]
        pieces = self.chunk(chunks, ends, times)

        # Latency: the head, each piece and the recorded end are time points.
        last_at = times[-1] if times else resp.headers_at_ns
        rec_end = max(ix.end_ns if ix.end_ns is not None else last_at, last_at)
        head, ptimes, end = self.latency(resp.headers_at_ns, [p.at for p in pieces], rec_end)
        for p, t in zip(pieces, ptimes, strict=True):
            p.at = max(t, head)
        end = max(end, pieces[-1].at if pieces else head, head)

        terminal = END if ix.outcome in (COMPLETE, CLIENT_DISCONNECTED) else CUT
        terminal_offset = len(self.body)
        extra: list[_Piece] = []

        if self.p.fault("drop-done") is not None:
            pieces = self.drop_done(pieces)

        trunc = self.truncation()
        if trunc is not None:
            kind, offset, _item = trunc
            kept = []
            for p in pieces:
                if p.end <= offset:
                    kept.append(p)
                elif p.start < offset:
                    kept.append(_Piece(p.at, p.start, offset, p.data[: offset - p.start]))
            at = kept[-1].at if kept else head
            if kind == "error-event":
                shape = _shapes("detect_shape")(ix)
                data = _shapes("error_event")(shape, ERROR_MESSAGE)
                if data:
                    extra.append(_Piece(at, offset, offset, data))
                terminal = END
            else:
                terminal = RESET if kind == "reset" else CUT
            pieces = kept
            end = at
            terminal_offset = offset

        pieces.extend(extra)
        term = _Piece(end, terminal_offset, terminal_offset, b"")

        stall = self.p.fault("stall")
        if stall is not None:
            pieces, term = self.stall(stall, pieces, term)

        keepalive = self.p.fault("keepalive")
        if keepalive is not None:
            pieces = self.keepalive(keepalive, head, pieces, term)

        slow = self.slow_headers()
        head += slow
        steps: list[Step] = []
        last = head
        for p in pieces:
            if not p.data:
                continue
            last = max(last, p.at + slow)
            steps.append(Step(last, SEND, p.data))
        steps.append(Step(max(last, term.at + slow), terminal))
        sent = sum(len(s.data) for s in steps)
        framing, headers = self.headers(resp.framing, terminal, sent)
        return Schedule(
            resp.status,
            resp.reason or _reason(resp.status),
            headers,
            framing,
            head,
            tuple(steps),
            self.text,
        )

    # -- chunking ---------------------------------------------------------------

    def chunk(self, chunks: list, ends: list[int], times: list[int]) -> list[_Piece]:
        body = self.body
        if not body:
            return []
        kind = self.p.chunk.kind
        args = self.p.chunk.args
        recorded = ends[:-1]
        if kind == "recorded":
            return [
                _Piece(c.at_ns, e - len(c.data), e, c.data)
                for c, e in zip(chunks, ends, strict=True)
            ]
        if kind == "bytes":
            n = int(args[0])
            cuts: Sequence[int] = range(n, len(body), n)
        elif kind == "random":
            a, b = int(args[0]), int(args[1])
            rng = self.rng("chunk")
            cuts = []
            pos = 0
            while True:
                pos += rng.randint(a, b)
                if pos >= len(body):
                    break
                cuts.append(pos)
        elif kind == "utf8-split":
            cuts = [*recorded, *(m.end() for m in _UTF8_LEAD.finditer(body))]
        elif kind == "crlf-split":
            cuts = [*recorded, *(m.start() + 1 for m in re.finditer(rb"\r\n", body))]
        elif kind in ("events", "split-events"):
            ev = self.events
            if ev is None:
                spans = [(0, len(body), "event")]
            else:
                spans = [(s.start, s.end, s.kind) for s in ev.spans]
            cuts = []
            for start, end, skind in spans:
                cuts.append(start)
                cuts.append(end)
                if kind == "split-events" and skind != "comment" and end - start > 1:
                    cuts.append(_json_mid(body, start, end))
        elif kind == "coalesce":
            window = int(args[0] * _MS)
            cuts = []
            group_first = None
            for i, c in enumerate(chunks):
                if group_first is None or c.at_ns - group_first > window:
                    if i:
                        cuts.append(ends[i - 1])
                    group_first = c.at_ns
        elif kind == "whole":
            cuts = []
        else:  # pragma: no cover - parse_profile only builds known kinds
            raise ProfileError(f"profile {self.text!r}: unknown chunking {kind!r}")
        return _boundaries_to_pieces(body, cuts, ends, times)

    # -- latency ----------------------------------------------------------------

    def latency(self, head: int, ts: list[int], end: int) -> tuple[int, list[int], int]:
        kind = self.p.latency.kind
        args = self.p.latency.args
        if kind == "recorded":
            return head, list(ts), end
        if kind == "instant":
            return 0, [0] * len(ts), 0
        if kind == "scale":
            f = args[0]
            return round(head * f), [round(t * f) for t in ts], round(end * f)
        if kind == "fixed":
            ttft, gap = int(args[0] * _MS), int(args[1] * _MS)
            out = [ttft + i * gap for i in range(len(ts))]
            return 0, out, out[-1] if out else 0
        if kind == "jitter":
            ms = int(args[0] * _MS)
            rng = self.rng("jitter")
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
            out = []
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

    def truncation(self) -> tuple[str, int, Item] | None:
        best: tuple[str, int, Item] | None = None
        n = len(self.body)
        for f in self.p.faults:
            if f.kind in ("cut", "reset"):
                amount, is_bytes = f.args
                offset = min(int(amount), n) if is_bytes else int(n * amount // 100)
            elif f.kind in ("cut-event", "error-event"):
                offset = self.event_end(f, int(f.args[0]))
            else:
                continue
            if best is None or offset < best[1]:
                best = (f.kind, offset, f)
        return best

    def stall(self, item: Item, pieces: list[_Piece], term: _Piece) -> tuple[list[_Piece], _Piece]:
        ev = _need_events(self.events, item, self.text)
        n, seconds = int(item.args[0]), item.args[1]
        if n > len(ev.counted):
            raise self.err(item, f"the response has only {len(ev.counted)} events")
        y = ev.counted[n - 1].start
        delay = int(seconds * _S)
        out = []
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
        eol = b"\r\n" if b"\r\n" in self.body else b"\n"
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
        f = self.p.fault("slow-headers")
        return int(f.args[0] * _MS) if f is not None else 0

    def status_schedule(self, item: Item) -> Schedule:
        detect_shape, error_body = _shapes("detect_shape"), _shapes("error_body")
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
        headers.append(("Content-Length", str(len(body))))
        steps = [Step(head, SEND, body)] if body else []
        steps.append(Step(head, END))
        return Schedule(
            code, _reason(code), tuple(headers), CONTENT_LENGTH, head, tuple(steps), self.text
        )

    def headers(self, framing: str, terminal: str, sent: int) -> tuple[str, Headers]:
        resp = self.ix.response
        assert resp is not None
        recorded_length = resp.header("content-length")
        kept = [(k, v) for k, v in resp.headers if k.lower() not in HOP_BY_HOP]
        if framing == FRAMES:
            framing = CHUNKED
        if framing == CHUNKED:
            kept.append(("Transfer-Encoding", "chunked"))
        elif framing == CONTENT_LENGTH:
            no_body = self.ix.request.method.upper() == "HEAD" or resp.status in (204, 304)
            if no_body and recorded_length is not None:
                length = recorded_length.strip()  # the length of the body not sent
            elif terminal == END:
                length = str(sent)
            else:  # a cut: declare more than is sent, so the client sees a short body
                rec = (recorded_length or "").strip()
                length = str(max(int(rec) if rec.isdigit() else 0, sent + 1))
            kept.append(("Content-Length", length))
        elif framing != CLOSE_DELIMITED:
            framing = CHUNKED
            kept.append(("Transfer-Encoding", "chunked"))
        return framing, tuple(kept)


# Hop-by-hop headers (RFC 9110 7.6.1) and the framing headers a replayer owns.
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
        "content-length",
    }
)


def _shapes(name: str) -> Any:
    """A function from :mod:`streamtape.shapes` (imported late: shapes imports cassette)."""
    from . import shapes

    fn = getattr(shapes, name, None)
    if fn is None:
        raise ProfileError(f"this profile needs streamtape.shapes.{name}, which is not available")
    return fn


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


# Public helper for drivers and tests.
def describe(profile: Profile) -> str:
    """One line: the profile's effective chunking, latency, faults and seed."""
    parts = [f"chunk={profile.chunk}", f"latency={profile.latency}"]
    parts += [f"fault={f}" for f in profile.faults]
    if profile.seed is not None:
        parts.append(f"seed={profile.seed}")
    return ";".join(parts)

