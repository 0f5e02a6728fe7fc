"""Parsing profile text into a :class:`~.schedule.Profile`. Pure code, no I/O.

Profile text is a preset name, or ``key=value`` items separated by ``;``::

    chunk=utf8-split;latency=scale:0.5;fault=keepalive:2

An item without ``=`` is a preset name expanded in place
(``instant;fault=cut:50%``). Later ``chunk``/``latency``/``seed`` items
override earlier ones; ``fault`` items add up. :data:`SYNTAX` is the
reference a user reads (``streamtape profiles``); every malformed item
raises one :class:`~streamtape.errors.ProfileError` naming the profile and
the item.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from ..errors import ProfileError
from .model import (
    APART_US,
    Amount,
    ChunkKind,
    FaultKind,
    FramingKind,
    Item,
    LatencyKind,
    NewlineKind,
    Unit,
)
from .schedule import Profile

__all__ = ["ADVERSARIAL", "PRESETS", "SYNTAX", "describe", "parse_profile"]

# --------------------------------------------------------------------------
# Presets and syntax

PRESETS: dict[str, str] = {
    "faithful": "chunk=recorded;latency=recorded",
    "instant": "chunk=recorded;latency=instant",
    # The harshest single profile: every byte its own piece, a keep-alive
    # comment before every event, no waiting but what keeps each piece a read
    # of its own (latency=apart). The whole set is ADVERSARIAL.
    "adversarial": "chunk=bytes:1;latency=apart;fault=keepalive:0",
}

ADVERSARIAL: dict[str, str] = {
    "bytes-1": "chunk=bytes:1;latency=apart",
    "random-1-16": "chunk=random:1-16;latency=apart",
    "utf8-split": "chunk=utf8-split;latency=apart",
    "events": "chunk=events;latency=apart",
    "split-events": "chunk=split-events;latency=apart",
    "crlf-split": "chunk=crlf-split;latency=apart",
    "coalesce-50": "chunk=coalesce:50;latency=apart",
    "whole": "chunk=whole;latency=apart",
    "keepalive": "chunk=events;latency=apart;fault=keepalive:0",
}
"""Profiles every streaming client should survive with the same assembled answer.

Each is also a preset named ``adversarial:<name>`` (e.g. ``adversarial:utf8-split``).
All are ``latency=apart``: no recorded waits, but each piece sent 1 ms
(:data:`~.model.APART_US`) after the one before it, so that each boundary
reaches the client as the end of one of its reads (pieces sent back to
back reach a Node ``fetch`` client as one read, and a cut it never sees
tests nothing). A stream of N pieces takes N ms over a socket:
``bytes-1`` on a 6 KB answer, 6 s; write ``;latency=instant`` after the
name to send everything at once. The in-process transports hand each
piece over as a read of its own and play these as instant.
"""

SYNTAX = """\
A profile is a preset name or key=value items separated by ';', e.g.
  chunk=utf8-split;latency=scale:0.5;fault=keepalive:2
An item without '=' is a preset expanded in place (instant;fault=cut:50%).
Later chunk/latency/framing/newline/seed items override earlier ones; fault
items add up. One profile serves HTTP responses and WebSocket sessions alike:
an item for the other kind of interaction ([ws] below: WebSocket sessions
only; framing= and newline=: HTTP responses only) is ignored.

chunk=      how the body is cut into pieces (joined, always the recorded body)
  recorded        the recorded pieces (default)
  bytes:N         N bytes per piece
  random:A-B      random sizes from A to B bytes (seeded)
  utf8-split      recorded pieces, plus a cut inside every multi-byte UTF-8 character
                  (an AWS event stream: inside its payloads, the messages as recorded)
  events          one SSE event / NDJSON line / event-stream message / JSON array
                  element per piece
  split-events    like events, and every event cut in the middle of its JSON
  crlf-split      recorded pieces, plus a cut between every CR and its LF
  coalesce:MS     join recorded pieces that arrived within MS of the group's first
                  ([ws]: server messages, in one write); without :MS, all of them
                  (a session: all between two client messages)
  whole           the whole body in one piece
  fragment:N      [ws] each server message in frames of N bytes (text split anywhere,
                  even inside a UTF-8 character); recorded: the recorded frames
latency=    when pieces are sent ([ws]: server messages, each timed from the client
            message that preceded it in the recording, as that one arrives)
  recorded        as recorded (default); when the chunking cuts the recorded pieces
                  (bytes, random, utf8-split, events, split-events, crlf-split) and no
                  latency= is given, each piece also at least 1000 us after the one
                  before, as apart does
  instant         everything at once (pieces due together can reach a client as one read)
  apart[:US]      as fast as piece boundaries survive: the head at once, then each piece
                  US microseconds (default 1000) after the one before, so that each
                  reaches the client as a read of its own (on loopback a Node fetch client
                  reads pieces closer than that as one; bench/boundaries.py); N pieces
                  take N x US. In-process transports need no spacing: instant there
  scale:F         recorded times multiplied by F
  fixed:TTFT_MS:GAP_MS  first piece after TTFT_MS, then one every GAP_MS
  jitter:MS       each piece up to MS later (seeded); never reorders
fault=      (repeatable) events are counted from 1; comments do not count
  cut:P% | cut:NB       close before the body's end (see framing=) after P% / N bytes
  reset:P% | reset:NB   abort with a TCP reset after P% / N bytes
  cut-event:N     close before the body's end right after event N (0: before any)
  error-event:N   after event N, an error event in the format's own shape, then the end
                  (an AWS event stream: a modelStreamErrorException message)
  exception:N:TYPE  an AWS event stream (Bedrock): after message N, an exception
                  message of TYPE (throttlingException, modelStreamErrorException,
                  validationException...), then the end
  stall:N:S       S seconds of silence before event N
  keepalive:S     an SSE comment after every S seconds of silence (0: before every event)
  drop-done       leave out data: [DONE]
  status:CODE     fail before streaming: status CODE (400-599), an error body in the
                  format's shape, Retry-After on 429 and 503 ([ws]: the upgrade refused)
  slow-headers:MS send the response head MS later (and everything after it; [ws]: the 101)
  close:N:CODE    [ws] after server message N (0: before any), a close frame with CODE
                  (1000-1003, 1007-1014, 3000-4999)
  drop:N          [ws] after server message N, the TCP connection closed without a close frame
  ping:S          [ws] a ping every S seconds; one unanswered when the next is due closes
                  the session with 1011
framing=    how the body is delimited on the wire (HTTP responses; the status fault too)
  recorded        as recorded: chunked, Content-Length or close-delimited (default;
                  HTTP/2 recordings replay chunked)
  chunked         Transfer-Encoding: chunked, one chunk per piece; a cut leaves out the
                  last chunk, which a client notices
  close           close-delimited (also spelt close-delimited): no Content-Length, no
                  Transfer-Encoding, Connection: close; the body ends when the server
                  closes, so a cut is a close like the end: nothing tells them apart
  content-length  Content-Length: the bytes sent (keep-alives, an error event counted);
                  on a cut or reset, the whole body's, so the client is left short of it
                  (an HTTP/1.0 client gets chunked as close; HEAD, 1xx, 204, 304 no body)
newline=    the line endings of an SSE or NDJSON body (identity-encoded), rewritten
            before chunking, event counting and faults, so crlf-split has CR LF pairs
            to cut and inserted keep-alives and error events follow; other bodies are
            sent as recorded
  recorded        as recorded (default)
  lf | crlf | cr  every line ending as LF, CR LF or CR (SSE allows all three; NDJSON
                  lines end in LF or CR LF, so cr leaves NDJSON as recorded)
seed=N      seed for everything random (default 0): the same seed, the same schedule
"""

# How many ':'-separated arguments each kind takes.
_CHUNK_ARITY: Mapping[ChunkKind, int] = {
    ChunkKind.RECORDED: 0,
    ChunkKind.BYTES: 1,
    ChunkKind.RANDOM: 1,
    ChunkKind.UTF8_SPLIT: 0,
    ChunkKind.EVENTS: 0,
    ChunkKind.SPLIT_EVENTS: 0,
    ChunkKind.CRLF_SPLIT: 0,
    ChunkKind.COALESCE: 1,
    ChunkKind.WHOLE: 0,
    ChunkKind.FRAGMENT: 1,
}
_LATENCY_ARITY: Mapping[LatencyKind, int] = {
    LatencyKind.RECORDED: 0,
    LatencyKind.INSTANT: 0,
    LatencyKind.SCALE: 1,
    LatencyKind.FIXED: 2,
    LatencyKind.JITTER: 1,
    LatencyKind.APART: 1,
}
_FAULT_ARITY: Mapping[FaultKind, int] = {
    FaultKind.CUT: 1,
    FaultKind.RESET: 1,
    FaultKind.CUT_EVENT: 1,
    FaultKind.ERROR_EVENT: 1,
    FaultKind.EXCEPTION: 2,
    FaultKind.STALL: 2,
    FaultKind.KEEPALIVE: 1,
    FaultKind.DROP_DONE: 0,
    FaultKind.STATUS: 1,
    FaultKind.SLOW_HEADERS: 1,
    FaultKind.CLOSE: 2,
    FaultKind.DROP: 1,
    FaultKind.PING: 1,
}
_OPTIONAL_ARGUMENT: frozenset[StrEnum] = frozenset({ChunkKind.COALESCE, LatencyKind.APART})
"""Kinds whose one argument may be left out (``coalesce``: no window; ``apart``: APART_US)."""

_RECHUNKING = frozenset({
    ChunkKind.BYTES, ChunkKind.RANDOM, ChunkKind.UTF8_SPLIT, ChunkKind.EVENTS,
    ChunkKind.SPLIT_EVENTS, ChunkKind.CRLF_SPLIT,
})
"""Chunkings that cut the recorded pieces, so that several pieces fall due at one moment:
without a ``latency=`` item they are spaced by :data:`APART_US`. Not ``coalesce`` (it
only joins: its boundaries are recorded ones, as far apart as recorded), nor ``whole``
(no boundary), nor ``recorded``."""

_SENDABLE_CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, *range(1007, 1015)})
"""Close codes RFC 6455 lets an endpoint send below 3000 (1004-1006 and 1015 are
reserved; 1016-2999 are for future protocol use); 3000-4999 are for applications."""

_K = TypeVar("_K", bound=StrEnum)

_NUM = r"\d+(?:\.\d*)?|\.\d+"


class _Bad(Exception):
    """A malformed value; the caller turns it into a ProfileError naming the item."""


def _num(s: str, what: str, *, integer: bool = False, minimum: float = 0) -> float:
    if not re.fullmatch(_NUM, s.strip()):
        if re.fullmatch(rf"\s*-\s*(?:{_NUM})\s*", s):  # a negative number: say what is allowed
            least = "positive" if minimum > 0 or integer else "positive (or 0)"
            raise _Bad(f"{what} must be {least}, not {s.strip()!r}")
        raise _Bad(f"{what} must be a {'whole ' if integer else ''}number, not {s!r}")
    v = float(s)
    if integer and v != int(v):
        raise _Bad(f"{what} must be a whole number, not {s!r}")
    if v < minimum:
        raise _Bad(f"{what} must be at least {minimum:g}, not {s!r}")
    return int(v) if integer else v


def _split_value(value: str, arity: Mapping[_K, int], key: str) -> tuple[_K, list[str]]:
    name, _, rest = value.partition(":")
    name = name.strip()
    kind = next((k for k in arity if k == name), None)
    if kind is None:
        raise _Bad(f"unknown {key} {name!r} (expected one of: {', '.join(arity)})")
    args = rest.split(":") if rest else []
    if len(args) != arity[kind] and not (kind in _OPTIONAL_ARGUMENT and not args):
        if arity[kind] == 0:
            raise _Bad(f"{key} {name!r} takes no argument")
        raise _Bad(f"{key} {name!r} needs {arity[kind]} argument(s) separated by ':'")
    return kind, args


def _parse_chunk(value: str) -> Item:
    kind, args = _split_value(value, _CHUNK_ARITY, "chunking")
    if kind is ChunkKind.BYTES:
        return Item(kind, (_num(args[0], "bytes:N", integer=True, minimum=1),), value)
    if kind is ChunkKind.RANDOM:
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", args[0])
        if not m:
            raise _Bad(f"random:A-B needs two whole numbers like 1-16, not {args[0]!r}")
        a, b = int(m.group(1)), int(m.group(2))
        if a < 1 or b < a:
            raise _Bad(f"random:A-B needs 1 <= A <= B, not {args[0]!r}")
        return Item(kind, (a, b), value)
    if kind is ChunkKind.COALESCE and args:
        return Item(kind, (_num(args[0], "coalesce:MS"),), value)
    if kind is ChunkKind.FRAGMENT:
        return Item(kind, (_num(args[0], "fragment:N", integer=True, minimum=1),), value)
    return Item(kind, (), value)


def _parse_latency(value: str) -> Item:
    kind, args = _split_value(value, _LATENCY_ARITY, "latency")
    if kind is LatencyKind.SCALE:
        return Item(kind, (_num(args[0], "scale:F"),), value)
    if kind is LatencyKind.FIXED:
        return Item(kind, (_num(args[0], "fixed:TTFT_MS"), _num(args[1], "fixed:GAP_MS")), value)
    if kind is LatencyKind.JITTER:
        return Item(kind, (_num(args[0], "jitter:MS"),), value)
    if kind is LatencyKind.APART:
        return Item(kind, (_num(args[0], "apart:US") if args else APART_US,), value)
    return Item(kind, (), value)


def _parse_amount(s: str, what: str) -> Amount:
    """``P%`` -> a percentage of the body; ``NB`` -> a byte count."""
    s = s.strip()
    if s.endswith("%"):
        p = _num(s[:-1], f"{what}:P%")
        if p > 100:
            raise _Bad(f"{what}:P% must be at most 100, not {s!r}")
        return Amount(p, Unit.PERCENT)
    if s[-1:] in ("B", "b"):
        return Amount(_num(s[:-1], f"{what}:NB", integer=True), Unit.BYTES)
    raise _Bad(f"{what} needs P% or NB (a percentage or a byte count like 100B), not {s!r}")


def _parse_fault(value: str) -> Item:
    kind, args = _split_value(value, _FAULT_ARITY, "fault")
    if kind in (FaultKind.CUT, FaultKind.RESET):
        amount = _parse_amount(args[0], kind)
        return Item(kind, (amount.value,), value, amount)
    if kind in (FaultKind.CUT_EVENT, FaultKind.ERROR_EVENT):
        return Item(kind, (_num(args[0], f"{kind}:N", integer=True),), value)
    if kind is FaultKind.EXCEPTION:
        name = args[1].strip()
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", name):
            raise _Bad(f"exception:N:TYPE needs an exception type such as "
                       f"throttlingException, not {args[1]!r}")
        return Item(kind, (_num(args[0], "exception:N", integer=True),), value, name=name)
    if kind is FaultKind.STALL:
        n = _num(args[0], "stall:N", integer=True, minimum=1)
        return Item(kind, (n, _num(args[1], "stall:S")), value)
    if kind is FaultKind.KEEPALIVE:
        return Item(kind, (_num(args[0], "keepalive:S"),), value)
    if kind is FaultKind.STATUS:
        code = _num(args[0], "status:CODE", integer=True)
        if not 400 <= code <= 599:
            raise _Bad(f"status:CODE must be an error status 400-599, not {args[0]!r}")
        return Item(kind, (code,), value)
    if kind is FaultKind.SLOW_HEADERS:
        return Item(kind, (_num(args[0], "slow-headers:MS"),), value)
    if kind is FaultKind.CLOSE:
        n = _num(args[0], "close:N", integer=True)
        code = _num(args[1], "close:CODE", integer=True)
        if code not in _SENDABLE_CLOSE_CODES and not 3000 <= code <= 4999:
            raise _Bad(
                f"close:CODE must be a close code an endpoint may send "
                f"(1000-1003, 1007-1014, 3000-4999), not {args[1]!r}"
            )
        return Item(kind, (n, code), value)
    if kind is FaultKind.DROP:
        return Item(kind, (_num(args[0], "drop:N", integer=True),), value)
    if kind is FaultKind.PING:
        seconds = _num(args[0], "ping:S")
        if seconds <= 0:
            raise _Bad(f"ping:S must be more than 0 seconds, not {args[0]!r}")
        return Item(kind, (seconds,), value)
    return Item(kind, (), value)


_ALIASES: Mapping[str, StrEnum] = {"close-delimited": FramingKind.CLOSE}
"""Other spellings of a word: ``close-delimited`` is what cassettes and ``show`` call ``close``."""


def _parse_word(value: str, key: str, kinds: type[_K]) -> _K:
    """A value that is one word of ``kinds`` (``framing=close``), with no argument."""
    name = value.lower()
    alias = _ALIASES.get(name)
    kind = alias if isinstance(alias, kinds) else next((k for k in kinds if k == name), None)
    if kind is not None:
        return kind
    word = name.partition(":")[0].strip()
    if word in _ALIASES or any(k == word for k in kinds):
        raise _Bad(f"{key} {word!r} takes no argument")
    raise _Bad(f"unknown {key} {value!r} (expected one of: {', '.join(kinds)})")


def _expand(text: str, depth: int = 0) -> list[str]:
    """Profile text -> its ``key=value`` items, presets expanded in place."""
    out: list[str] = []
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
            out.append(item)
    return out


def parse_profile(text: str) -> Profile:
    """A preset name or ``k=v;k=v`` items. Raises :class:`ProfileError` naming the bad item."""
    if not isinstance(text, str):
        raise ProfileError(f"profile must be text, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ProfileError("empty profile (use a preset such as 'faithful', or key=value items)")
    chunk = Item(ChunkKind.RECORDED)
    latency: Item | None = None  # None: no latency= item (recorded, spaced if re-chunked)
    framing, newline = FramingKind.RECORDED, NewlineKind.RECORDED
    faults: list[Item] = []
    seed: int | None = None
    for item in _expand(stripped):
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
            elif key == "framing":
                framing = _parse_word(value, "framing", FramingKind)
            elif key == "newline":
                newline = _parse_word(value, "newline", NewlineKind)
            elif key == "seed":
                if not re.fullmatch(r"-?\d+", value):
                    raise _Bad(f"seed must be a whole number, not {value!r}")
                seed = int(value)
            else:
                raise _Bad(
                    f"unknown key {key!r} (expected chunk, latency, fault, framing, newline or seed)"
                )
        except _Bad as e:
            raise ProfileError(f"profile {stripped!r}: bad item {item!r}: {e}") from None
    if latency is None:
        latency = Item(LatencyKind.RECORDED)
        apart_us: float = APART_US if chunk.kind in _RECHUNKING else 0
    else:
        apart_us = latency.args[0] if latency.kind is LatencyKind.APART else 0
    return Profile(text=stripped, chunk=chunk, latency=latency, faults=tuple(faults), seed=seed,
                   framing=framing, newline=newline, apart_ns=round(apart_us * 1000))


def describe(profile: Profile) -> str:
    """One line: the profile's effective chunking, latency (and spacing), faults and seed."""
    apart = f" (pieces at least {profile.apart_ns / 1000:g} us apart)" if profile.apart_ns else ""
    parts = [f"chunk={profile.chunk}", f"latency={profile.latency}{apart}"]
    parts += [f"fault={f}" for f in profile.faults]
    if profile.framing is not FramingKind.RECORDED:
        parts.append(f"framing={profile.framing}")
    if profile.newline is not NewlineKind.RECORDED:
        parts.append(f"newline={profile.newline}")
    if profile.seed is not None:
        parts.append(f"seed={profile.seed}")
    return ";".join(parts)


def _syntax_table() -> dict[tuple[str, str], str]:
    """What :data:`SYNTAX` says of each (key, kind): its one owner, read back, so the
    explanation ``streamtape profiles PROFILE`` prints is the help text's own."""
    table: dict[tuple[str, str], str] = {}
    key = ""
    last: tuple[str, str] | None = None
    for line in SYNTAX.splitlines():
        head = re.match(r"^([a-z]+)=\s", line)
        if head:
            key, last = head.group(1), None
            continue
        entry = re.match(r"^  (\S.*?)(?:\s{2,}(\S.*))?$", line)
        if key and entry and not line.startswith(" " * 4):
            names, text = entry.group(1), entry.group(2) or ""
            for name in names.split(" | "):
                kind = re.split(r"[:\[\s]", name.strip(), maxsplit=1)[0]
                table[(key, kind)] = text
            last = (key, re.split(r"[:\[\s]", names.split(" | ")[0].strip(), maxsplit=1)[0])
            continue
        if last is not None and line.startswith(" " * 4) and line.strip():
            for k in [k for k in table if k[0] == last[0] and table[k] == table[last]]:
                table[k] = f"{table[k]} {line.strip()}".strip()
    return table


def explain(profile: Profile) -> list[str]:
    """One line per item of the effective profile: the item and what the syntax says it does."""
    table = _syntax_table()
    items: list[tuple[str, str, str]] = [
        ("chunk", str(profile.chunk.kind), str(profile.chunk)),
        ("latency", str(profile.latency.kind), str(profile.latency)),
        *(("fault", str(f.kind), str(f)) for f in profile.faults),
        ("framing", str(profile.framing), str(profile.framing)),
        ("newline", str(profile.newline), str(profile.newline)),
    ]
    width = max(len(f"{k}={v}") for k, _, v in items)
    out = [f"  {f'{k}={v}':<{width}}  {table.get((k, kind), '')}".rstrip() for k, kind, v in items]
    seed = "the default" if profile.seed is None else str(profile.seed)
    out.append(f"  {'seed=' + ('0' if profile.seed is None else str(profile.seed)):<{width}}  "
               f"seed for everything random ({seed})")
    return out
