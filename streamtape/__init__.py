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
    "Cassette",
    "CassetteError",
    "Chunk",
    "Interaction",
    "NoMatchError",
    "OptionError",
    "ProfileError",
    "Request",
    "Response",
    "StreamtapeError",
    "UpstreamError",
    "__version__",
    "load",
    "save",
]
