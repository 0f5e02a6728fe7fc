"""Does a replayed client's WebSocket message match the recorded one? Pure code, no I/O.

A session replays only while the client says what the recorded client
said: the server's answers were recorded for those questions. Each arriving
client message is compared with the recorded message of the same number,
the way :mod:`streamtape.match.matcher` compares request bodies:

- text and binary must agree (the opcode is part of the message);
- JSON text (an object or an array) is compared as data: key order and
  whitespace ignored, ``1`` and ``1.0`` equal, ``true`` and ``1`` not;
  other text and binary messages byte for byte;
- ``ignore_fields`` names JSON fields that may differ, with the rules of
  ``--ignore-field`` for HTTP bodies: a plain name at any depth, a dotted
  name a path from the top level with list indexes left out;
  :data:`DEFAULT_IGNORED_FIELDS` are ignored always (ids clients generate
  per run, such as the Realtime API's ``event_id``);
- a recorded value that is exactly ``"REDACTED"`` (what the recorder writes
  for a field named with ``--redact-field``) matches anything, absence too.

A difference is one line naming the message and the first place it differs,
short enough to go in a close frame's reason (at most 123 bytes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..cassette.model import Message
from .matcher import NOT_JSON, JsonComparison, byte_difference, parse_json, shorten

__all__ = ["DEFAULT_IGNORED_FIELDS", "MAX_REASON", "MessageComparer", "event_type", "fit_reason"]

DEFAULT_IGNORED_FIELDS: tuple[str, ...] = ("event_id",)
"""Fields a client generates afresh on every run: never compared. The Realtime API's
client events carry an optional client-chosen ``event_id`` (the SDKs leave it to the
caller; apps fill it with a fresh UUID)."""

MAX_REASON = 123
"""The most bytes of UTF-8 a close frame's reason may carry (125 less the code)."""


def _short(v: Any) -> str:
    """A value as a close frame's reason quotes it: short, and not escaped to ASCII."""
    return shorten(v, 24, ascii_only=False)


def event_type(data: bytes) -> str | None:
    """The ``type`` of a JSON event (the Realtime API's, Gemini Live's first key...), or None."""
    value = parse_json(data)
    if isinstance(value, dict):
        t = value.get("type")
        if isinstance(t, str):
            return t
        if len(value) == 1:  # Gemini Live: {"setup": {...}}, {"clientContent": {...}}
            return str(next(iter(value)))
    return None


def fit_reason(text: str, limit: int = MAX_REASON) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (on a character boundary, with ``...``)."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode("utf-8", "ignore") + "..."


@dataclass(frozen=True)
class MessageComparer:
    """Compares client messages with recorded ones under one set of ignored fields."""

    fields: JsonComparison

    @classmethod
    def of(cls, ignore_fields: Iterable[str] = ()) -> MessageComparer:
        return cls(JsonComparison.of((*DEFAULT_IGNORED_FIELDS, *ignore_fields)))

    def difference(self, number: int, recorded: Message, text: bool, data: bytes) -> str | None:
        """How client message ``number`` (``text`` or binary ``data``) differs from
        ``recorded``, in one line; None when it matches."""
        kind = event_type(recorded.data)
        what = f"client message {number}" + (f" ({kind})" if kind else "")
        if text != recorded.text:
            got, rec = ("text", "binary") if text else ("binary", "text")
            return f"{what} is {got}, recorded {rec}"
        rj, gj = parse_json(recorded.data), parse_json(data) if text else NOT_JSON
        if text and rj is not NOT_JSON and gj is not NOT_JSON:
            d = self.fields.first_difference(rj, gj, whole="the message", short=_short)
            return f"{what}: {d}" if d else None
        if recorded.data == data:
            return None
        if rj is not NOT_JSON:
            return f"{what} is not JSON ({_short(data)}), recorded JSON"
        return f"{what} {byte_difference(recorded.data, data, 8, _short)}"
