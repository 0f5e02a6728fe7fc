"""streamtape: record, replay and compare streaming LLM responses."""

__version__ = "0.1.0"

from .cassette import Cassette, Chunk, Interaction, Request, Response, load, save
from .errors import (
    CassetteError,
    NoMatchError,
    OptionError,
    ProfileError,
    StreamtapeError,
    UpstreamError,
)

__all__ = [
    "AsyncReplayTransport",
    "Cassette",
    "CassetteError",
    "Chunk",
    "Interaction",
    "NoMatchError",
    "OptionError",
    "ProfileError",
    "ReplayAdapter",
    "ReplayServer",
    "ReplayTransport",
    "Request",
    "Response",
    "StreamtapeError",
    "UpstreamError",
    "__version__",
    "load",
    "save",
]

# Replay (streamtape.transport, streamtape.serve): loaded on first use so that
# `import streamtape` stays light (no httpx / requests / asyncio server import).
_LAZY = {
    "ReplayTransport": "transport",
    "AsyncReplayTransport": "transport",
    "ReplayAdapter": "transport",
    "ReplayServer": "serve",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
