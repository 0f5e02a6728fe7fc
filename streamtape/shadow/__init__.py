"""Shadow recording: answer the client from one backend, mirror each request to others.

``streamtape record --upstream A --shadow B`` records A's answer (what the
client gets, exactly as without shadows) and, for the same client call, B's
answer to the same request, each with its own timing, into one cassette;
``streamtape diff session.tape`` then compares them pair by pair
(:mod:`streamtape.diff.shadow`).

- :mod:`.targets`: the shadows of a run, their names and rewrites, from the
  command line options (:func:`build_plan`); pure.
- :mod:`.rewrite`: the request a shadow is sent and the one a cassette keeps;
  pure.
- :mod:`.chat_mapping`: an OpenAI chat request as Ollama's and back; pure.
- :mod:`.sender`: :class:`ShadowSender`, the driver: its own thread and event
  loop, httpx, the in-flight bound, the records.

The sender (and with it httpx) is imported on first use, so that recording
without shadows never loads it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .chat_mapping import (
    ChatApi,
    Unmappable,
    api_of_path,
    ollama_to_openai,
    openai_to_ollama,
    translate,
)
from .rewrite import CREDENTIAL_HEADERS, ShadowRequest, shadow_request, stored_request
from .targets import PathMap, ShadowPlan, ShadowTarget, build_plan

if TYPE_CHECKING:
    from .sender import ShadowSender, TargetCounts

__all__ = [
    "CREDENTIAL_HEADERS",
    "ChatApi",
    "PathMap",
    "ShadowPlan",
    "ShadowRequest",
    "ShadowSender",
    "ShadowTarget",
    "TargetCounts",
    "Unmappable",
    "api_of_path",
    "build_plan",
    "ollama_to_openai",
    "openai_to_ollama",
    "shadow_request",
    "stored_request",
    "translate",
]


def __getattr__(name: str) -> object:
    if name in ("ShadowSender", "TargetCounts"):
        return getattr(importlib.import_module(".sender", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
