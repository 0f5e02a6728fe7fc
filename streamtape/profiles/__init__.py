"""Replay profiles: how one recorded interaction is played back. Pure code, no I/O.

A profile turns an :class:`~streamtape.cassette.Interaction` into a
:class:`Schedule`: the response head, then steps "at t send these bytes" and
one final "end" / "cut" / "reset". Drivers (the replay server, the in-process
transports, ``streamtape play``) only run the steps against absolute
deadlines, so every driver plays the same thing and the timing logic is tested
without sleeping.

Profile text is a preset name, or ``key=value`` items separated by ``;``::

    chunk=utf8-split;latency=scale:0.5;fault=keepalive:2

Four modules, one concern each:

* :mod:`.model`: the vocabularies (chunk, latency, fault and step kinds as
  ``StrEnum``), :class:`Item`, :class:`Step` and :class:`Schedule`;
* :mod:`.parse`: profile text to a :class:`Profile` (:func:`parse_profile`,
  :data:`PRESETS`, :data:`ADVERSARIAL`, :data:`SYNTAX`, :func:`describe`);
* :mod:`.schedule`: :class:`Profile` and its :meth:`~Profile.schedule`, with
  the rules every schedule keeps;
* :mod:`.websocket`: the same for a WebSocket session's messages (which
  server message goes when, fragmented how, closed where).

Everything a caller needs is importable from ``streamtape.profiles``.
"""

from __future__ import annotations

from .model import (
    APART_US,
    Amount,
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
    Unit,
)
from .parse import ADVERSARIAL, PRESETS, SYNTAX, describe, explain, parse_profile
from .schedule import ERROR_MESSAGE, KEEPALIVE_TEXT, Profile

__all__ = [
    "ADVERSARIAL",
    "APART_US",
    "ERROR_MESSAGE",
    "KEEPALIVE_TEXT",
    "PRESETS",
    "SYNTAX",
    "Amount",
    "ChunkKind",
    "FaultKind",
    "FramingKind",
    "Item",
    "LatencyKind",
    "NewlineKind",
    "Profile",
    "Schedule",
    "Step",
    "StepKind",
    "Steps",
    "Unit",
    "describe",
    "explain",
    "parse_profile",
]
