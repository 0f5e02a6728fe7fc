"""streamtape: record, replay and compare streaming LLM responses.

The public surface: cassette values and files (:class:`Cassette`,
:class:`Interaction`, :class:`Request`, :class:`Response`, :class:`Piece`,
:class:`Outcome`, :func:`load`, :func:`save`); replay profiles
(:class:`Profile`, :func:`parse_profile`); replayers (:class:`ReplayTransport`,
:class:`AsyncReplayTransport`, :class:`ReplayAdapter`, :class:`ReplayServer`);
and every exception a public function raises (:class:`StreamtapeError` and
its subclasses, the tree drawn in :mod:`streamtape.errors`).
:mod:`streamtape.shapes` (parsers, :func:`~streamtape.shapes.analyze`) is
public too. tests/unit/test_exports.py holds ``__all__`` to this.
"""

from typing import TYPE_CHECKING

from ._version import __version__
from .errors import (
    CassetteError,
    DamagedRecordError,
    GateError,
    InteropError,
    MatrixRecordError,
    McpOrderError,
    NoMatchError,
    OptionError,
    ProfileError,
    RedactedValueError,
    SessionError,
    ShapeError,
    StreamtapeError,
    UpstreamError,
    WorkerError,
)

if TYPE_CHECKING:
    from .cassette import Cassette, Interaction, Outcome, Piece, Request, Response, load, save
    from .profiles import Profile, parse_profile
    from .serve import ReplayServer
    from .transport import AsyncReplayTransport, ReplayAdapter, ReplayTransport

__all__ = [
    "AsyncReplayTransport",
    "Cassette",
    "CassetteError",
    "DamagedRecordError",
    "GateError",
    "Interaction",
    "InteropError",
    "MatrixRecordError",
    "McpOrderError",
    "NoMatchError",
    "OptionError",
    "Outcome",
    "Piece",
    "Profile",
    "ProfileError",
    "RedactedValueError",
    "ReplayAdapter",
    "ReplayServer",
    "ReplayTransport",
    "Request",
    "Response",
    "SessionError",
    "ShapeError",
    "StreamtapeError",
    "UpstreamError",
    "WorkerError",
    "__version__",
    "load",
    "parse_profile",
    "save",
]

# Every name but the errors and the version is loaded on first use, so that
# `import streamtape` stays light: the CLI imports this package before it
# knows which command runs (`streamtape --version` imports no cassette code),
# and replay and profiles would bring httpx / requests / an asyncio server and
# the stream shapes (profiles alone nearly double the import time).
_LAZY = {
    **dict.fromkeys(("Cassette", "Interaction", "Outcome", "Piece", "Request", "Response",
                     "load", "save"), "cassette"),
    "ReplayTransport": "transport",
    "AsyncReplayTransport": "transport",
    "ReplayAdapter": "transport",
    "ReplayServer": "serve",
    "Profile": "profiles",
    "parse_profile": "profiles",
}

# The legacy names of this module (each warns, naming the new one; the
# replacements are kept with the others, in streamtape.cassette).
_DEPRECATED = ("Chunk",)


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in _DEPRECATED:
        from .cassette import _deprecated

        return _deprecated(__name__, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
