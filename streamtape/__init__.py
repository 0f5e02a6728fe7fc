"""streamtape: record, replay and compare streaming LLM responses.

The public surface: cassette values and files (:class:`Cassette`,
:class:`Interaction`, :class:`Request`, :class:`Response`, :class:`Piece`,
:class:`Outcome`, :func:`load`, :func:`save`); replay profiles
(:class:`Profile`, :func:`parse_profile`); replayers (:class:`ReplayTransport`,
:class:`AsyncReplayTransport`, :class:`ReplayAdapter`, :class:`ReplayServer`);
and every exception a public function raises (see :mod:`streamtape.errors`).
:mod:`streamtape.shapes` (parsers, :func:`~streamtape.shapes.analyze`) is
public too.
"""

import importlib
from typing import TYPE_CHECKING

from ._version import __version__
from .cassette import Cassette, Interaction, Outcome, Piece, Request, Response, load, save
from .errors import (
    CassetteError,
    GateError,
    NoMatchError,
    OptionError,
    ProfileError,
    SessionError,
    ShapeError,
    StreamtapeError,
    UpstreamError,
)

if TYPE_CHECKING:
    from .profiles import Profile, parse_profile
    from .serve import ReplayServer
    from .transport import AsyncReplayTransport, ReplayAdapter, ReplayTransport

__all__ = [
    "AsyncReplayTransport",
    "Cassette",
    "CassetteError",
    "GateError",
    "Interaction",
    "NoMatchError",
    "OptionError",
    "Outcome",
    "Piece",
    "Profile",
    "ProfileError",
    "ReplayAdapter",
    "ReplayServer",
    "ReplayTransport",
    "Request",
    "Response",
    "SessionError",
    "ShapeError",
    "StreamtapeError",
    "UpstreamError",
    "__version__",
    "load",
    "parse_profile",
    "save",
]

# Replay and profiles (streamtape.transport, .serve, .profiles): loaded on
# first use so that `import streamtape` stays light (no httpx / requests /
# asyncio server, no stream shapes: profiles alone nearly double the import time).
_LAZY = {
    "ReplayTransport": "transport",
    "AsyncReplayTransport": "transport",
    "ReplayAdapter": "transport",
    "ReplayServer": "serve",
    "Profile": "profiles",
    "parse_profile": "profiles",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    from .cassette import deprecated  # the old names (Chunk): each warns, naming the new one

    return deprecated(__name__, name)
