"""OpenAI legacy completions (``text_completion``, ``choices[].text``) on ``/v1/completions``.

One reader serves both OpenAI formats: what a choice holds decides how it is
read (``text`` here, ``delta`` in chat), because servers do not always label
their chunks truthfully (some send chat deltas as ``"object": "text_completion"``).
The shape name still says which endpoint the stream came from.
"""

from __future__ import annotations

from .openai_chat import normalize

__all__ = ["normalize"]
