"""Scheduling a WebSocket session: a :class:`~.schedule.Profile` applied to a recorded session.

Pure code, no I/O, the twin of :mod:`.schedule` for HTTP responses: a
profile and a recorded :class:`~streamtape.cassette.WebSocketSession` give a
:class:`SessionSchedule`, and the replay server's driver
(:mod:`streamtape.serve.websocket`) only runs it, so the timing logic is
tested without a socket.

A session goes both ways, so its times cannot all count from one t = 0 as a
response's do. Each server message is timed from the client message that
preceded it in the recording (its *anchor*: ``after = k`` is the k-th client
message, 1-based; ``after = 0`` is the upgrade request): the recorded gap
between them is its ``delay_ns``. A replayed client that is slower or faster
than the recorded one then gets the recorded rhythm after each of its own
messages, and an answer never arrives before the question it answers.

Rules the driver relies on:

- Steps are in recorded order, every ``send`` carries one whole server
  message, and the last step is the only ``close`` / ``await-close`` /
  ``drop``. A step is due at its anchor's arrival plus ``delay_ns``, and never
  before the step ahead of it: the driver keeps the recorded order even when
  the client runs ahead.
- ``delay_ns`` never decreases between steps of one anchor, and a step
  anchored on the upgrade is never due before the ``101`` (``head_at_ns``).
- The ending is the recording's: a close frame the server sent (its code
  and reason, at the recorded end), a close the client sent (the server
  waits for the replayed client to close), or no close frame at all (a
  dropped connection, or a recording that stopped): the connection is
  dropped at the recorded end.

The profile items that apply (one profile text serves HTTP and WebSocket
alike: items for HTTP responses only are ignored here, as these are in
:mod:`.schedule`):

- ``latency=``: ``recorded``, ``instant``, ``scale:F`` and ``jitter:MS``
  (seeded; never reorders) act on each delay and on the ``101``;
  ``fixed:TTFT:GAP`` times the n-th server message after each anchor at
  TTFT + n * GAP; ``apart`` is ``instant`` here (WebSocket framing keeps
  every message whole whatever a read holds, so no spacing is needed).
- ``chunk=``: ``recorded`` sends each message in its recorded frames
  (one frame when the capture did not expose them); ``fragment:N`` in
  frames of N payload bytes, a text message split anywhere, even inside a
  UTF-8 character (RFC 6455 validates text per message, not per frame);
  ``coalesce`` joins the server messages between two client messages
  (``coalesce:MS``: those within MS of their group's first) into one group
  the driver writes at once, when the group's last message was recorded:
  as for HTTP pieces, a replay never runs ahead of the recording.
- ``fault=``: ``close:N:CODE`` and ``drop:N`` end the session right after
  server message N (0: before the first), with a close frame or without
  one; the earliest N applies (the first listed on a tie). ``ping:S`` makes
  the driver ping every S seconds (:attr:`SessionSchedule.ping_every_ns`).
  ``slow-headers:MS`` delays the ``101`` and everything anchored on it.
  ``status:CODE`` is not scheduled here: the server answers the upgrade
  with the HTTP error instead (:meth:`~.schedule.Profile.schedule`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ..cassette.model import Direction, Interaction, Message
from ..errors import ProfileError
from .model import ChunkKind, FaultKind, Item, LatencyKind
from .schedule import Profile

__all__ = [
    "FAULT_CLOSE_REASON",
    "SessionSchedule",
    "SessionStep",
    "SessionStepKind",
    "schedule_session",
]

_MS = 1_000_000
_S = 1_000_000_000

FAULT_CLOSE_REASON = "streamtape fault: {item}"
"""The reason of the close frame a ``close:N:CODE`` fault sends (``item`` is its text)."""


class SessionStepKind(StrEnum):
    """What the driver does at a :class:`SessionStep`. Only the last step is not ``send``."""

    SEND = "send"
    """Write one server message, in the step's frames."""
    CLOSE = "close"
    """Send a close frame (code, reason), wait for the client's, close the connection."""
    AWAIT_CLOSE = "await-close"
    """The client closed in the recording: wait for the replayed client to close."""
    DROP = "drop"
    """Close the TCP connection without a close frame."""


@dataclass(frozen=True, slots=True)
class SessionStep:
    """One thing the driver does, ``delay_ns`` after its anchor (``after``) arrived.

    ``after`` is 0 for the upgrade request (the moment it was received) or the
    1-based number of the client message whose arrival starts the clock.
    A ``send`` carries one whole message: ``data``, ``text`` (else binary),
    ``frames`` (the payload size of each wire frame; ``()``: one frame) and
    ``number``, its 1-based place among the recording's server messages;
    ``group`` numbers a coalesced group (steps of one group are written
    together), else 0. A ``close`` carries ``code`` and ``reason``.
    """

    kind: SessionStepKind
    after: int
    delay_ns: int
    data: bytes = b""
    text: bool = True
    frames: tuple[int, ...] = ()
    number: int = 0
    code: int | None = None
    reason: str = ""
    group: int = 0


@dataclass(frozen=True)
class SessionSchedule:
    """Everything the driver needs to play one session.

    ``head_at_ns``: when the ``101`` goes out, after the upgrade request was
    received. ``steps``: the server's side (see :class:`SessionStep`).
    ``expected``: the recorded client messages in order, for the driver to
    compare each arriving message with. ``ping_every_ns``: the ``ping:S``
    fault's period, or None. ``faulted``: whether the ending is a fault's
    (``close:N:CODE`` / ``drop:N``) rather than the recording's.
    """

    head_at_ns: int
    steps: tuple[SessionStep, ...]
    expected: tuple[Message, ...]
    ping_every_ns: int | None = None
    faulted: bool = False
    text: str = ""

    @property
    def sends(self) -> tuple[SessionStep, ...]:
        return tuple(s for s in self.steps if s.kind == SessionStepKind.SEND)

    @property
    def ending(self) -> SessionStep:
        """The last step: ``close``, ``await-close`` or ``drop``."""
        return self.steps[-1]


@dataclass(slots=True)
class _Out:
    """A server message (or the ending) on its way to a step: its anchor and delay."""

    after: int
    delay: int
    message: Message | None
    number: int = 0
    group: int = 0


def schedule_session(profile: Profile, ix: Interaction, seed: int | None = None) -> SessionSchedule:
    """The schedule for the WebSocket session ``ix``. Pure; ``seed`` (else the profile's, else 0)
    seeds ``jitter``.

    Raises :class:`ValueError` when ``ix`` is not a session, and
    :class:`~streamtape.errors.ProfileError` when a fault names a server
    message the session does not have.
    """
    ws = ix.websocket
    if ws is None:
        raise ValueError("not a WebSocket session")
    if seed is None:
        seed = profile.seed if profile.seed is not None else 0
    messages = sorted(ws.messages, key=lambda m: m.at_ns)  # stable: recorded order on ties
    expected = tuple(m for m in messages if m.direction == Direction.CLIENT)
    anchors = [0, *(m.at_ns for m in expected)]

    # Server messages with their anchor and recorded delay.
    outs: list[_Out] = []
    k = 0
    for m in messages:
        if m.direction == Direction.CLIENT:
            k += 1
        else:
            outs.append(_Out(k, m.at_ns - anchors[k], m, len(outs) + 1))

    head = ix.response.headers_at_ns if ix.response is not None else 0
    last_at = messages[-1].at_ns if messages else head
    end_at = max(ix.end_ns if ix.end_ns is not None else last_at, last_at)
    end_after = sum(1 for a in anchors[1:] if a <= end_at)
    ending = _Out(end_after, end_at - anchors[end_after], None)

    kind, code, reason = _recorded_ending(ix)
    fault = _earliest_cut(profile, len(outs))
    if fault is not None:
        n, item = fault
        outs = outs[:n]
        ending = _Out(outs[-1].after, outs[-1].delay, None) if outs else _Out(0, head, None)
        if item.kind == FaultKind.CLOSE:
            kind, code, reason = SessionStepKind.CLOSE, int(item.args[1]), FAULT_CLOSE_REASON.format(item=item)
        else:
            kind, code, reason = SessionStepKind.DROP, None, ""

    _coalesce(profile.chunk, outs)
    head = _latency(profile, seed, head, outs, ending)
    slow = profile.fault(FaultKind.SLOW_HEADERS)
    if slow is not None:
        shift = int(slow.args[0] * _MS)
        head += shift
        for o in (*outs, ending):
            if o.after == 0:
                o.delay += shift

    steps: list[SessionStep] = []
    floor = {0: head}  # per anchor: the delay no later step may go below
    for o in outs:
        assert o.message is not None
        o.delay = max(o.delay, floor.get(o.after, 0))
        floor[o.after] = o.delay
        m = o.message
        steps.append(SessionStep(
            SessionStepKind.SEND, o.after, o.delay, m.data, m.text, _frames(profile.chunk, m),
            o.number, group=o.group,
        ))
    delay = max(ending.delay, floor.get(ending.after, 0))
    steps.append(SessionStep(kind, ending.after, delay, code=code, reason=reason))

    ping = profile.fault(FaultKind.PING)
    return SessionSchedule(
        head,
        tuple(steps),
        expected,
        int(ping.args[0] * _S) if ping is not None else None,
        fault is not None,
        profile.text,
    )


def _recorded_ending(ix: Interaction) -> tuple[SessionStepKind, int | None, str]:
    ws = ix.websocket
    assert ws is not None
    if ws.close_code is None:
        return SessionStepKind.DROP, None, ""
    if ws.closed_by == Direction.CLIENT:
        return SessionStepKind.AWAIT_CLOSE, ws.close_code, ws.close_reason
    return SessionStepKind.CLOSE, ws.close_code, ws.close_reason


def _earliest_cut(profile: Profile, count: int) -> tuple[int, Item] | None:
    """The ``close:N`` / ``drop:N`` fault with the smallest N (the first listed on a tie)."""
    best: tuple[int, Item] | None = None
    for f in profile.faults:
        if f.kind not in (FaultKind.CLOSE, FaultKind.DROP):
            continue
        n = int(f.args[0])
        if n > count:
            raise ProfileError(
                f"profile {profile.text!r}: fault {str(f)!r}: the session has only "
                f"{count} server message{'s' if count != 1 else ''}"
            )
        if best is None or n < best[0]:
            best = (n, f)
    return best


def _coalesce(chunk: Item, outs: Sequence[_Out]) -> None:
    """``chunk=coalesce[:MS]``: group server messages of one anchor; each group is
    due when its last message was recorded."""
    if chunk.kind != ChunkKind.COALESCE:
        return
    window = int(chunk.args[0] * _MS) if chunk.args else None
    groups: list[list[_Out]] = []
    for o in outs:
        g = groups[-1] if groups else None
        if (
            g is not None
            and g[0].after == o.after
            and (window is None or o.delay - g[0].delay <= window)
        ):
            g.append(o)
        else:
            groups.append([o])
    for number, g in enumerate(groups, 1):
        last = g[-1].delay
        for o in g:
            o.delay = last
            o.group = number


def _latency(profile: Profile, seed: int, head: int, outs: Sequence[_Out], ending: _Out) -> int:
    """Apply ``latency=`` to every delay in place; returns the ``101``'s time."""
    kind, args = profile.latency.kind, profile.latency.args
    if kind == LatencyKind.RECORDED:
        return head
    if kind in (LatencyKind.INSTANT, LatencyKind.APART):  # apart: a message is never merged
        for o in (*outs, ending):
            o.delay = 0
        return 0
    if kind == LatencyKind.SCALE:
        for o in (*outs, ending):
            o.delay = round(o.delay * args[0])
        return round(head * args[0])
    if kind == LatencyKind.FIXED:
        ttft, gap = int(args[0] * _MS), int(args[1] * _MS)
        n_after: dict[int, int] = {}
        last: dict[int, int] = {}
        previous_group = 0
        for o in outs:
            if o.group and o.group == previous_group:
                o.delay = last[o.after]  # a coalesced group stays together
                continue
            previous_group = o.group
            n = n_after.get(o.after, 0)
            n_after[o.after] = n + 1
            o.delay = ttft + n * gap
            last[o.after] = o.delay
        ending.delay = last.get(ending.after, 0)
        return 0
    if kind == LatencyKind.JITTER:
        rng = random.Random(f"{seed}:{LatencyKind.JITTER}")
        ms = int(args[0] * _MS)
        prev: dict[int, int] = {}
        group_delay: dict[int, int] = {}
        for o in outs:
            if o.group and o.group in group_delay:
                o.delay = group_delay[o.group]
                continue
            o.delay = max(prev.get(o.after, 0), o.delay + rng.randint(0, ms))
            prev[o.after] = o.delay
            if o.group:
                group_delay[o.group] = o.delay
        ending.delay = max(ending.delay, prev.get(ending.after, 0))
        return head
    raise ProfileError(f"profile {profile.text!r}: unknown latency {kind!r}")  # pragma: no cover


def _frames(chunk: Item, m: Message) -> tuple[int, ...]:
    """The payload size of each frame message ``m`` goes out in (``()``: one frame)."""
    size = len(m.data)
    if chunk.kind == ChunkKind.FRAGMENT:
        n = int(chunk.args[0])
        if size <= n:
            return ()
        return tuple(min(n, size - i) for i in range(0, size, n))
    if len(m.fragments) > 1 and sum(m.fragments) == size:
        return m.fragments
    return ()
