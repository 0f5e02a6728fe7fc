"""What a test sent: one value per request, whoever answered it (replay, recorder)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from ..capture.redaction import DEFAULT_REDACT_HEADERS
from ..cassette.model import REDACTED

_SECRET = frozenset(DEFAULT_REDACT_HEADERS)
INTERNAL_HEADERS = frozenset({"x-streamtape-replay"})


class Answer(StrEnum):
    """Who answered a request."""

    REPLAYED = "replayed"  # a recorded interaction of the cassette
    RECORDED = "recorded"  # the upstream, through the recorder
    UNMATCHED = "unmatched"  # nobody: no recording matched (the client got the no-match error)


@dataclass(frozen=True)
class SentRequest:
    """One request the code under test sent, as streamtape saw it.

    ``headers`` keep their order; secret ones (``authorization``, ``x-api-key``...)
    read ``REDACTED``. ``interaction`` is the index in ``streamtape.cassette`` of the
    recording that answered it; ``error`` says why none did.
    """

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: str
    answer: Answer
    interaction: int | None = None
    error: str | None = None

    def header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), None)

    def json(self) -> object:
        """The body parsed as JSON (raises ``ValueError`` if it is not JSON)."""
        return json.loads(self.body)

    def line(self) -> str:
        return f"{self.method} {self.path}"


def redacted(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (k, REDACTED if k.lower() in _SECRET else v) for k, v in headers if k.lower() not in INTERNAL_HEADERS
    )


def from_matcher_entry(entry: Mapping[str, object]) -> SentRequest:
    """A :attr:`streamtape.match.matcher.Matcher.received` entry as a :class:`SentRequest`."""
    matched = entry.get("matched")
    error = entry.get("error")
    raw_headers = entry.get("headers")
    pairs = raw_headers if isinstance(raw_headers, list) else []
    return SentRequest(
        method=str(entry["method"]),
        path=str(entry["path"]),
        headers=redacted((str(k), str(v)) for k, v in pairs),
        body=str(entry.get("body") or ""),
        answer=Answer.REPLAYED if isinstance(matched, int) else Answer.UNMATCHED,
        interaction=matched if isinstance(matched, int) else None,
        error=str(error) if error else None,
    )
