"""Cassettes: recorded interactions, and the append-only ``.tape`` files that hold them.

This is the face users import (``from streamtape.cassette import load``); the
parts behind it, from the bottom up:

- :mod:`.pieces`: a response's body pieces, kept compactly until iterated;
- :mod:`.model`: the values (:class:`Interaction`, :class:`Request`,
  :class:`Response`, :class:`Setup`, WebSocket :class:`Message` and
  :class:`WebSocketSession`, :class:`Outcome`);
- :mod:`.index`: the record table, the one-pass scan that finds it, and the
  index record a large file ends with;
- :mod:`.records`: the file format (its module docstring is the format's
  description and compatibility rules) and the pure codec between records
  and values;
- :mod:`.digest`: the request digest a writer stores in the index;
- :mod:`.reader`: :func:`load` (lazy: an interaction is read when asked for);
- :mod:`.lock` and :mod:`.writer`: the cross-process lock, the writers and
  :func:`save`.

Nothing here imports matching, capture or replay: they build on this package.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..wire import Framing, header_value
from .model import (
    REDACTED,
    Direction,
    Headers,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    Setup,
    WebSocketSession,
)
from .pieces import Piece, Pieces, PieceSequence
from .reader import Cassette, load, load_many
from .records import FORMAT_NAME, FORMAT_VERSION, NEWEST_VERSION, SUFFIX, WEBSOCKET_VERSION, Record
from .writer import BackgroundWriter, CassetteWriter, save

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "NEWEST_VERSION",
    "REDACTED",
    "SUFFIX",
    "WEBSOCKET_VERSION",
    "BackgroundWriter",
    "Cassette",
    "CassetteWriter",
    "Direction",
    "Framing",
    "Headers",
    "Interaction",
    "Message",
    "Outcome",
    "Piece",
    "PieceSequence",
    "Pieces",
    "Record",
    "Request",
    "Response",
    "Setup",
    "WebSocketSession",
    "header_value",
    "load",
    "load_many",
    "save",
]

# Names of streamtape 0.1.0 that have a better one now. They keep working, with
# a DeprecationWarning naming the new one; the package itself uses none of them.
_DEPRECATED: dict[str, tuple[Any, str]] = {
    "Chunk": (Piece, "streamtape.cassette.Piece"),
    "COMPLETE": (Outcome.COMPLETE, "Outcome.COMPLETE"),
    "UPSTREAM_CLOSED": (Outcome.UPSTREAM_CLOSED, "Outcome.UPSTREAM_CLOSED"),
    "CLIENT_DISCONNECTED": (Outcome.CLIENT_DISCONNECTED, "Outcome.CLIENT_DISCONNECTED"),
    "UPSTREAM_ERROR": (Outcome.UPSTREAM_ERROR, "Outcome.UPSTREAM_ERROR"),
    "INTERRUPTED": (Outcome.INTERRUPTED, "Outcome.INTERRUPTED"),
    "OUTCOMES": (tuple(Outcome), "tuple(Outcome)"),
    "CHUNKED": (Framing.CHUNKED, "Framing.CHUNKED"),
    "CONTENT_LENGTH": (Framing.CONTENT_LENGTH, "Framing.CONTENT_LENGTH"),
    "CLOSE_DELIMITED": (Framing.CLOSE_DELIMITED, "Framing.CLOSE_DELIMITED"),
    "FRAMES": (Framing.FRAMES, "Framing.FRAMES"),
    "FRAMINGS": (
        (Framing.CHUNKED, Framing.CONTENT_LENGTH, Framing.CLOSE_DELIMITED, Framing.FRAMES),
        "the recorded members of Framing (all but Framing.NONE)",
    ),
}


def _deprecated(module: str, name: str) -> Any:
    """The value of a deprecated name of ``module``, with its warning (or AttributeError)."""
    if name not in _DEPRECATED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    value, instead = _DEPRECATED[name]
    warnings.warn(f"{module}.{name} is deprecated; use {instead}", DeprecationWarning, stacklevel=3)
    return value


def __getattr__(name: str) -> Any:
    return _deprecated(__name__, name)
