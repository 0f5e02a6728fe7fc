"""Does a replayed client's WebSocket message match the recorded one? Pure code, no I/O.

A session replays only while the client says what the recorded client
said: the server's answers were recorded for those questions. Each arriving
client message is compared with the recorded message of the same number,
the way :mod:`streamtape.match` compares request bodies:

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

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..cassette import Message
from ..redaction import REDACTED

__all__ = ["DEFAULT_IGNORED_FIELDS", "MAX_REASON", "MessageComparer", "event_type", "fit_reason"]

DEFAULT_IGNORED_FIELDS: tuple[str, ...] = ("event_id",)
"""Fields a client generates afresh on every run: never compared. The Realtime API's
client events carry an optional client-chosen ``event_id`` (the SDKs leave it to the
caller; apps fill it with a fresh UUID)."""

MAX_REASON = 123
"""The most bytes of UTF-8 a close frame's reason may carry (125 less the code)."""

_NOT_JSON = object()


def _json(data: bytes) -> Any:
    if data.lstrip()[:1] not in (b"{", b"["):
        return _NOT_JSON
    try:
        return json.loads(data)
    except ValueError:
        return _NOT_JSON


def _short(v: Any, limit: int = 24) -> str:
    try:
        s = json.dumps(v, ensure_ascii=False) if not isinstance(v, bytes) else repr(v)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def event_type(data: bytes) -> str | None:
    """The ``type`` of a JSON event (the Realtime API's, Gemini Live's first key...), or None."""
    value = _json(data)
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

    ignore_names: frozenset[str]
    ignore_paths: frozenset[str]

    @classmethod
    def of(cls, ignore_fields: Iterable[str] = ()) -> MessageComparer:
        fields = [f.strip() for f in (*DEFAULT_IGNORED_FIELDS, *ignore_fields) if f.strip()]
        return cls(
            frozenset(f for f in fields if "." not in f), frozenset(f for f in fields if "." in f)
        )

    def difference(self, number: int, recorded: Message, text: bool, data: bytes) -> str | None:
        """How client message ``number`` (``text`` or binary ``data``) differs from
        ``recorded``, in one line; None when it matches."""
        kind = event_type(recorded.data)
        what = f"client message {number}" + (f" ({kind})" if kind else "")
        if text != recorded.text:
            got, rec = ("text", "binary") if text else ("binary", "text")
            return f"{what} is {got}, recorded {rec}"
        rj, gj = _json(recorded.data), _json(data) if text else _NOT_JSON
        if text and rj is not _NOT_JSON and gj is not _NOT_JSON:
            d = self._json_diff(rj, gj, "", "")
            return f"{what}: {d}" if d else None
        if recorded.data == data:
            return None
        if rj is not _NOT_JSON:
            return f"{what} is not JSON ({_short(data)}), recorded JSON"
        n = next(
            (i for i, (a, b) in enumerate(zip(recorded.data, data, strict=False)) if a != b),
            min(len(recorded.data), len(data)),
        )
        return (
            f"{what} differs at byte {n} ({len(data)} bytes, recorded {len(recorded.data)}): "
            f"{_short(data[n : n + 8])}, recorded {_short(recorded.data[n : n + 8])}"
        )

    def _json_diff(self, rec: Any, got: Any, shown: str, keypath: str) -> str | None:
        """The first difference in JSON data. ``shown`` has list indexes, ``keypath`` not."""
        if isinstance(rec, str) and rec == REDACTED:
            return None
        where = shown or "the message"
        if isinstance(rec, dict) and isinstance(got, dict):
            for k in sorted(set(rec) | set(got), key=str):
                kp = f"{keypath}.{k}" if keypath else str(k)
                sp = f"{shown}.{k}" if shown else str(k)
                if k in self.ignore_names or kp in self.ignore_paths:
                    continue
                if k not in got:
                    if rec[k] == REDACTED:
                        continue
                    return f"lacks {sp} (recorded {_short(rec[k])})"
                if k not in rec:
                    return f"has {sp}={_short(got[k])}, not in the recording"
                d = self._json_diff(rec[k], got[k], sp, kp)
                if d:
                    return d
            return None
        if isinstance(rec, list) and isinstance(got, list):
            for i, (a, b) in enumerate(zip(rec, got, strict=False)):
                d = self._json_diff(a, b, f"{shown}[{i}]", keypath)
                if d:
                    return d
            if len(rec) != len(got):
                return f"{where} has {len(got)} items, recorded {len(rec)}"
            return None
        if isinstance(rec, dict | list) or isinstance(got, dict | list) or not _same_scalar(rec, got):
            return f"{where} is {_short(got)}, recorded {_short(rec)}"
        return None
