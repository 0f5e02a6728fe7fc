"""Pairing one shadow recording by pair id: the client's answer against a shadow's.

``streamtape record --shadow B`` labels every recording with ``pair`` (one id
per client call), ``role`` (``primary`` for the answer the client got,
``shadow`` for a mirror's) and ``backend`` (the backend's name). Pairing by
that id, unlike pairing by request, needs no equal requests (a shadow may get
another model name or another API's body) and never mixes up two calls that
sent the same prompt. A is always the primary; B is one shadow backend, the
only one or the one asked for.

A primary the client hung up on after its end marker is compared as
complete (:func:`primary_for_comparison`). A client call whose shadow was
never sent (the in-flight bound, a request that could not be mapped: the
``not_sent`` label) or never recorded has no B side: it is listed as missing
with the reason, and left out of the comparison, since it says nothing about
B's answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..cassette.model import Interaction, Outcome
from ..check import CLIENT_LEFT, left_after_end
from ..errors import OptionError
from ..shadow.labels import LABEL_BACKEND, LABEL_NOT_SENT, LABEL_PAIR, LABEL_ROLE, Role
from .compare import compare
from .gates import Gate
from .model import Category
from .report import CassetteDiff

PRIMARY = Role.PRIMARY
SHADOW = Role.SHADOW

SHADOW_IGNORES = frozenset({Category.USAGE, Category.REASONING})
"""Left out of a session's verdict by default: two backends count tokens with
their own tokenizers, and two models rarely reason alike; the answer (text,
tool calls, finish) is what the client's users see."""


@dataclass(frozen=True)
class MissingSide:
    """A client call with no side to compare against."""

    pair: str | None
    side: Literal["A", "B"]
    """The side that is missing."""
    label: str
    """The recording that is there (``FILE#N``)."""
    method: str
    path: str
    reason: str


@dataclass(frozen=True)
class ShadowPairing:
    a_name: str
    """The primary's backend name (or names, joined, in a regular-proxy session)."""
    b_name: str
    pairs: tuple[tuple[int, int, str], ...]
    """(index of A, index of B, pair id), in the order the client's calls were recorded."""
    missing: tuple[MissingSide, ...]
    shadows: tuple[str, ...]
    """Every shadow backend the session holds."""


def is_shadow_recording(interactions: Iterable[Interaction]) -> bool:
    """Whether any recording carries a pair id (it was made with ``record --shadow``)."""
    return any(LABEL_PAIR in ix.labels and LABEL_ROLE in ix.labels for ix in interactions)


def pair_shadow(
    interactions: Sequence[Interaction], labels: Sequence[str], shadow: str | None = None
) -> ShadowPairing:
    """Pair the primary of every client call with the shadow ``shadow`` (by backend name;
    None: the session's only shadow). :class:`OptionError` when the choice is unclear."""
    shadows: list[str] = []
    for ix in interactions:
        if ix.labels.get(LABEL_ROLE) == SHADOW:
            name = ix.labels.get(LABEL_BACKEND, "")
            if name not in shadows:
                shadows.append(name)
    if not shadows:
        raise OptionError("the session holds no shadow recordings to compare with (record with --shadow URL)")
    if shadow is None:
        if len(shadows) > 1:
            raise OptionError(
                f"the session has {len(shadows)} shadows ({', '.join(shadows)}); choose one with --shadow NAME"
            )
        shadow = shadows[0]
    elif shadow not in shadows:
        raise OptionError(f"--shadow {shadow!r}: no such shadow in the session (it has {', '.join(shadows)})")
    primaries: dict[str, int] = {}
    mirrors: dict[str, int] = {}
    order: list[str] = []
    for i, ix in enumerate(interactions):
        pair = ix.labels.get(LABEL_PAIR)
        role = ix.labels.get(LABEL_ROLE)
        if pair is None:
            continue
        if role == PRIMARY and pair not in primaries:
            primaries[pair] = i
            order.append(pair)
        elif role == SHADOW and ix.labels.get(LABEL_BACKEND) == shadow and pair not in mirrors:
            mirrors[pair] = i
    pairs: list[tuple[int, int, str]] = []
    missing: list[MissingSide] = []
    for pair in order:
        i = primaries[pair]
        a = interactions[i]
        j = mirrors.get(pair)
        if j is None:
            missing.append(MissingSide(pair, "B", labels[i], a.request.method, a.request.path, f"no recording of {shadow}"))
            continue
        b = interactions[j]
        if LABEL_NOT_SENT in b.labels:
            missing.append(MissingSide(pair, "B", labels[i], a.request.method, a.request.path, b.error or "not sent"))
            continue
        pairs.append((i, j, pair))
    for pair, j in mirrors.items():
        if pair not in primaries:
            b = interactions[j]
            missing.append(MissingSide(pair, "A", labels[j], b.request.method, b.request.path, "no recording of the primary"))
    a_names = sorted({interactions[i].labels.get(LABEL_BACKEND, "?") for i in primaries.values()})
    return ShadowPairing(", ".join(a_names) or "?", shadow, tuple(pairs), tuple(missing), tuple(shadows))


def primary_for_comparison(ix: Interaction, label: str) -> tuple[Interaction, str]:
    """The primary as compared with a shadow, and its label.

    A client that hangs up once the answer has ended (the openai SDK stops
    reading at ``[DONE]``, before the chunked body's last chunk) leaves the
    primary ``client_disconnected``, while the sender reads every shadow to its
    end. That is the client's doing, not a difference between the backends:
    such a primary, whose stream reached its end marker
    (:func:`~streamtape.check.left_after_end`, which ``check`` and a two-file
    ``diff`` follow too), is compared as ``complete``, and its label says so."""
    if not left_after_end(ix):
        return ix, label
    return replace(ix, outcome=Outcome.COMPLETE, error=None), f"{label} ({CLIENT_LEFT})"


def diff_shadow(
    interactions: Sequence[Interaction],
    labels: Sequence[str],
    *,
    name: str,
    shadow: str | None = None,
    shape_a: str | None = None,
    shape_b: str | None = None,
    ignore: Iterable[str] = (),
    gates: Sequence[Gate] = (),
) -> tuple[CassetteDiff, ShadowPairing]:
    """Compare every pair of a session (see the module docstring). Usage and reasoning
    are left out of the verdict (:data:`SHADOW_IGNORES`) besides ``ignore``."""
    p = pair_shadow(interactions, labels, shadow)
    ignored = tuple(sorted({*ignore, *SHADOW_IGNORES}))
    primaries = {i: primary_for_comparison(interactions[i], labels[i]) for i, _, _ in p.pairs}
    reports = tuple(
        compare(
            primaries[i][0],
            interactions[j],
            label_a=primaries[i][1],
            label_b=labels[j],
            shape_a=shape_a,
            shape_b=shape_b,
            ignore=ignored,
            gates=gates,
            how="pair id",
        )
        for i, j, _ in p.pairs
    )
    return CassetteDiff(f"{name} [{p.a_name}]", f"{name} [{p.b_name}]", reports), p
