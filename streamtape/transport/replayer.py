"""What the in-process drivers play, and when: matching, scheduling, body actions.

No client package is imported here: this is the part the httpx faces
(:mod:`.httpx_transport`) and the ``requests`` adapter (:mod:`.requests_adapter`)
share. :class:`Replayer` turns a request into a :class:`ReplayPlan` (the
matched interaction and the profile's :class:`~streamtape.profiles.Schedule`);
:func:`head_failure` and :func:`play_actions` say, given the client's read
timeout, when the head is due and what the client sees after it. They are
pure, so every face fails the same way at the same virtual time; a face only
waits for each deadline and turns an ending into its package's exception.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, TypedDict, Unpack
from urllib.parse import urlsplit

from ..cassette.model import Interaction
from ..cassette.reader import Cassette, load, load_many
from ..errors import NoMatchError, OptionError, ProfileError, SessionError
from ..match.matcher import Matcher
from ..profiles import Profile, Schedule, Step, StepKind, Steps, parse_profile
from ..wire import (
    ERROR_HEADERS,
    ERROR_STATUSES,
    NO_MATCH_STATUS,
    PROFILE_HEADER,
    ErrorType,
    Framing,
    error_body,
    header_value,
    reason_phrase,
)

__all__ = [
    "TIMEOUT",
    "Action",
    "ActionKind",
    "CassetteSource",
    "MatchOptions",
    "NoMatchMode",
    "ReplayPlan",
    "Replayer",
    "Timeline",
    "head_failure",
    "no_match_status",
    "play_actions",
]

TIMEOUT: Final = "timeout"
"""The one action kind a schedule does not have: the client's read timeout expires first."""

ActionKind = StepKind | Literal["timeout"]
"""``send`` (hand a piece to the client), ``end``, ``cut``, ``reset`` or ``timeout``."""

NoMatchMode = int | Literal["raise", "404"]
"""What a request that matches nothing (or a profile that cannot apply) gets: an error
response, as from the replay server, its status the number given (by default
:data:`~streamtape.wire.NO_MATCH_STATUS`, 422; a string of digits, such as the
``"404"`` of old, is taken too), or ``"raise"``: a raised library error."""


def no_match_status(mode: object, name: str = "no_match") -> int | None:
    """The status of the no-match answer for ``mode`` (None: ``"raise"``), or
    :class:`OptionError` naming ``name`` for anything but ``"raise"`` or an error status."""
    if mode == "raise":
        return None
    status = int(mode) if isinstance(mode, str) and mode.strip().isdigit() else mode
    if isinstance(status, bool) or not isinstance(status, int) or status not in ERROR_STATUSES:
        raise OptionError(f"{name}={mode!r}: expected 'raise' or an error status "
                          f"({ERROR_STATUSES.start} to {ERROR_STATUSES.stop - 1})")
    return status

CassetteSource = (
    Cassette | Interaction | str | os.PathLike[str] | Iterable[Interaction | Cassette | str | os.PathLike[str]]
)
"""What a replayer accepts as its recordings: a loaded cassette, a ``.tape`` file or
a folder of them, interactions, or a mix of these."""


class MatchOptions(TypedDict, total=False):
    """The :class:`Replayer` options every driver passes through (see its docstring)."""

    ignore_fields: Sequence[str]
    match_headers: Sequence[str]
    strict: bool
    strict_nulls: bool
    seed: int | None
    no_match: NoMatchMode


class Action(NamedTuple):
    """One thing the client sees, ``at_ns`` after the request arrived.

    A schedule's :class:`~streamtape.profiles.Step` as the client meets it:
    ``send`` hands ``data`` over as one piece; ``end``, ``cut`` and ``reset``
    end the body; ``timeout`` (:data:`TIMEOUT`) is the client giving up first.
    """

    at_ns: int
    kind: ActionKind
    data: bytes = b""


_SEND, _END = StepKind.SEND, StepKind.END
_ENDINGS = frozenset((StepKind.END, StepKind.CUT, StepKind.RESET))
_PLANS_KEPT = 256  # (profile, interaction) plans a Replayer keeps


def play_actions(
    steps: Sequence[Step], head_at_ns: int, read_timeout_ns: int | None
) -> Iterator[Action]:
    """The body actions of a schedule, given the client's read timeout. Pure.

    A read timeout fires when the silence since the head or the last piece is
    longer than the timeout: the client gives up before the next step.
    """
    last = head_at_ns
    for step in steps:
        kind = step.kind
        if kind is _SEND and not step.data:
            continue
        if read_timeout_ns is not None and step.at_ns - last > read_timeout_ns:
            yield Action(last + read_timeout_ns, TIMEOUT)
            return
        if kind is _SEND:
            yield Action(step.at_ns, _SEND, step.data)
            last = max(last, step.at_ns)
            continue
        if kind not in _ENDINGS:
            raise OptionError(f"replay schedule has an unknown step kind {kind!r}")
        yield Action(step.at_ns, kind)
        return
    # A schedule always ends with end/cut/reset; be safe if one does not.
    yield Action(last, _END)


@dataclass(frozen=True, slots=True)
class Timeline:
    """A schedule's body as :func:`play_actions` gives it when no read timeout fires.

    ``at`` and ``datas`` are the times and bytes of every non-empty ``send``
    step, in order; ``ending`` the final step; ``sent`` their bytes;
    ``longest_silence_ns`` the longest wait a client meets (from the head or a
    piece to the next piece or the ending). A read timeout at least that long
    never fires, and :func:`play_actions` is then exactly the sends and
    ``ending``: the faces walk these two columns instead of building an
    :class:`Action` per piece, and a plan's timeline is computed once however
    many requests play it.
    """

    at: Sequence[int]
    datas: Sequence[bytes]
    ending: Action
    sent: int
    longest_silence_ns: int

    @classmethod
    def of(cls, schedule: Schedule) -> Timeline | None:
        """The timeline of ``schedule``; None when it does not end with one ending step
        (:func:`play_actions` then reports the problem)."""
        steps = schedule.steps
        if not steps or steps[-1].kind not in _ENDINGS:
            return None
        end = steps[-1]
        if isinstance(steps, Steps):  # columns already: every send carries bytes, in time order
            at, datas = steps.at, steps.data
            waits: tuple[int, ...] = (end.at_ns - schedule.head_at_ns,)
            if at:  # each wait: from the head or a piece to the next piece or the ending
                waits = (at[0] - schedule.head_at_ns, end.at_ns - at[-1],
                         max(map(operator.sub, at[1:], at), default=0))
            return cls(at, datas, Action(end.at_ns, end.kind), sum(map(len, datas)), max(0, *waits))
        body = steps[:-1]
        if any(s.kind is not _SEND for s in body):
            return None
        sends = [(s.at_ns, s.data) for s in body if s.data]
        at, datas = [a for a, _ in sends], [d for _, d in sends]
        # Each wait: from the latest of the head and the pieces so far to the next step.
        latest = itertools.accumulate(at, max, initial=schedule.head_at_ns)
        longest = max(map(operator.sub, [*at, end.at_ns], latest), default=0)
        return cls(at, datas, Action(end.at_ns, end.kind), sum(map(len, datas)), max(longest, 0))

    def plays_whole(self, read_timeout_ns: int | None) -> bool:
        """Whether a client with this read timeout gets every piece and the ending."""
        return read_timeout_ns is None or self.longest_silence_ns <= read_timeout_ns


def head_failure(schedule: Schedule, read_timeout_ns: int | None) -> Action | None:
    """How the connection fails before the response head, or None when the head
    arrives (at ``schedule.head_at_ns``). Pure.

    A schedule without a head (status 0: none was recorded) is the server
    hanging up at its last step: ``reset`` when that step is one, else ``cut``.
    A head (or that hang-up) due later than the read timeout is a ``timeout``.
    """
    if schedule.status == 0:
        last = schedule.steps[-1] if schedule.steps else None
        at = last.at_ns if last is not None else 0
        if read_timeout_ns is not None and at > read_timeout_ns:
            return Action(read_timeout_ns, TIMEOUT)
        if last is not None and last.kind is StepKind.RESET:
            return Action(at, StepKind.RESET)
        return Action(at, StepKind.CUT)
    if read_timeout_ns is not None and schedule.head_at_ns > read_timeout_ns:
        return Action(read_timeout_ns, TIMEOUT)
    return None


def timeout_ns(seconds: float | None) -> int | None:
    """A client's timeout in seconds as nanoseconds (None: no timeout)."""
    if seconds is None:
        return None
    return max(0, int(seconds * 1e9))


@dataclass(frozen=True)
class ReplayPlan:
    """A response to play: the matched interaction (None for an error the replayer
    invents), the profile text that scheduled it, and the schedule."""

    interaction: Interaction | None
    profile: str
    schedule: Schedule

    def header(self, name: str) -> str | None:
        """The first value of response header ``name`` as sent (case-insensitive)."""
        return self.schedule.header(name)

    @functools.cached_property
    def timeline(self) -> Timeline | None:
        """The body as a flat :class:`Timeline` (computed once per plan; plans are shared)."""
        return Timeline.of(self.schedule)


def _error_plan(status: int, message: str, type_: ErrorType, url: str) -> ReplayPlan:
    """A JSON error response in the error shape of the API of ``url``, as the replay server sends."""
    body = error_body(message, type_, path=urlsplit(url).path)
    schedule = Schedule(
        status=status,
        reason=reason_phrase(status),
        end_to_end=ERROR_HEADERS,
        framing=Framing.CONTENT_LENGTH,
        head_at_ns=0,
        steps=(Step(0, _SEND, body), Step(0, _END)),
        content_length=len(body),
    )
    return ReplayPlan(interaction=None, profile="", schedule=schedule)


def _as_interactions(cassette: CassetteSource) -> list[Interaction]:
    if isinstance(cassette, Cassette):
        return list(cassette)
    if isinstance(cassette, str | os.PathLike):
        if os.path.isdir(cassette):
            return [ix for c in load_many([cassette]) for ix in c]
        return list(load(cassette))
    if isinstance(cassette, Interaction):
        return [cassette]
    try:
        items = list(cassette)
    except TypeError:
        raise OptionError(
            f"cassette must be a Cassette, a path or interactions, not {type(cassette).__name__}"
        ) from None
    out: list[Interaction] = []
    for item in items:
        if isinstance(item, Interaction):
            out.append(item)
        elif isinstance(item, Cassette | str | os.PathLike):
            out.extend(_as_interactions(item))
        else:
            raise OptionError(f"not an interaction or cassette: {type(item).__name__}")
    return out


class Replayer:
    """Matching and profiles for the in-process drivers. Thread-safe.

    ``cassette``: a loaded :class:`Cassette`, a path (file or folder of
    ``*.tape``), or interactions. ``profile``: preset name, profile text or a
    parsed :class:`~streamtape.profiles.Profile`.
    """

    def __init__(
        self,
        cassette: CassetteSource,
        profile: str | Profile = "faithful",
        *,
        ignore_fields: Sequence[str] = (),
        match_headers: Sequence[str] = (),
        strict: bool = False,
        strict_nulls: bool = False,
        seed: int | None = None,
        no_match: NoMatchMode = NO_MATCH_STATUS,
    ) -> None:
        self.no_match_status = no_match_status(no_match)
        """The status of the no-match answer; None: ``no_match="raise"``."""
        self.interactions = _as_interactions(cassette)
        if isinstance(profile, str):
            self.profile: Profile = parse_profile(profile)
            self.profile_text = profile
        else:  # an already parsed Profile
            self.profile, self.profile_text = profile, profile.text
        self.seed = seed
        self.no_match: NoMatchMode = no_match
        self.matcher = Matcher(
            self.interactions,
            ignore_fields=tuple(ignore_fields),
            match_headers=tuple(match_headers),
            strict=strict,
            strict_nulls=strict_nulls,
        )
        self._profiles: dict[str, Profile] = {self.profile_text: self.profile}
        self._plans: dict[tuple[str, int], tuple[Profile, Interaction, ReplayPlan]] = {}
        self._lock = threading.Lock()

    @property
    def received(self) -> list[dict[str, Any]]:
        """The requests seen so far (as the replay server's ``/_streamtape/requests``)."""
        return self.matcher.received

    def _profile_for(self, headers: Sequence[tuple[str, str]]) -> tuple[str, Profile]:
        override = header_value(headers, PROFILE_HEADER)
        if override is None:
            return self.profile_text, self.profile
        with self._lock:
            prof = self._profiles.get(override)
        if prof is None:
            prof = parse_profile(override)
            with self._lock:
                self._profiles[override] = prof
        return override, prof

    def plan(
        self, method: str, url: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> ReplayPlan:
        """Match a request and schedule its response.

        As the replay server: no match is an error of status ``no_match`` (422 by
        default; ``streamtape_no_match``), a bad
        ``X-Streamtape-Profile`` or a profile that cannot apply to the matched
        recording is a 400 (``streamtape_bad_profile``); with ``no_match="raise"``
        they raise :class:`NoMatchError` / :class:`ProfileError` instead. A
        recorded WebSocket session is a 426, as from the server for a request
        that asks for no upgrade (:class:`SessionError` with ``"raise"``).
        """
        try:
            text, prof = self._profile_for(headers)
            index, ix = self.matcher.match_indexed(method, url, headers, body)
            if ix.websocket is not None:
                raise SessionError(
                    f"{method} {url}: recording #{index} is a WebSocket session; in-process "
                    "transports replay HTTP only: connect to a ReplayServer's ws_url", index
                )
            return self._plan(text, prof, index, ix)
        except SessionError as e:
            if self.no_match == "raise":
                raise
            return _error_plan(426, str(e), ErrorType.BAD_REQUEST, url)
        except NoMatchError as e:
            if self.no_match_status is None:
                raise
            return _error_plan(self.no_match_status, str(e), ErrorType.NO_MATCH, url)
        except ProfileError as e:
            if self.no_match == "raise":
                raise
            return _error_plan(400, str(e), ErrorType.BAD_PROFILE, url)

    def _plan(self, text: str, prof: Profile, index: int, ix: Interaction) -> ReplayPlan:
        """The plan for interaction ``index`` under ``prof``, scheduled once.

        A schedule is a pure function of (profile, interaction, seed), and
        building one walks every piece (a 20,000-piece stream takes tens of
        milliseconds): a test suite replaying one cassette many times pays
        that once per (profile, interaction), as the replay server does.

        Scheduled with ``apart=False``: the spacing a re-chunking profile puts
        between pieces (``latency=apart``, :attr:`Profile.apart_ns`) is there so
        that the kernel does not join them into one read on the way to the
        client. Here there is no kernel: what a read gets is decided by the
        pieces alone, not by their times (each piece is one httpx stream
        chunk, one raw read of the requests adapter's socket), so the spacing
        would only make a realtime replay slower (a 6 KB answer under
        ``adversarial:bytes-1``: 6 s instead of none).
        """
        key = (text, index)
        with self._lock:
            hit = self._plans.get(key)
        if hit is not None and hit[0] is prof and hit[1] is ix:
            return hit[2]
        schedule = prof.schedule(ix, seed=self.seed, apart=False)
        plan = ReplayPlan(interaction=ix, profile=text, schedule=schedule)
        with self._lock:
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = (prof, ix, plan)
        return plan


class ReplayDriver:
    """What every in-process driver holds: a :class:`Replayer` and the clock mode.

    ``realtime=True`` waits for each step's deadline (absolute, from the moment
    the request arrived); ``realtime=False`` runs on a virtual clock.
    """

    def __init__(
        self,
        cassette: CassetteSource,
        profile: str | Profile = "faithful",
        *,
        realtime: bool = True,
        **options: Unpack[MatchOptions],
    ) -> None:
        self.replayer = Replayer(cassette, profile, **options)
        self.realtime = realtime

    @property
    def received(self) -> list[dict[str, Any]]:
        """The requests seen so far."""
        return self.replayer.received

    @property
    def interactions(self) -> list[Interaction]:
        return self.replayer.interactions
