"""How much each finding matters: a table keyed by finding code, and a default for the rest.

``check --fail-on`` compares a finding's severity with the level asked for; a
CI job fails on what is broken (a cut stream, an error event, an undecodable
body, a damaged record), not on what a healthy server sends (a ``max_tokens``
stop, a keep-alive comment).

A code not in :data:`SEVERITY` (a new stream format's finding, added in its
own module) is a :data:`DEFAULT_SEVERITY` warning until it is listed: shown,
counted, failing ``--fail-on warning`` but not the default ``--fail-on
error``. A finding module can also name the severity of its own codes with
:func:`register`, without editing this table.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DEFAULT_SEVERITY", "SEVERITY", "Severity", "register", "severity_of"]


class Severity(StrEnum):
    """A finding's weight, ordered: ``info < warning < error``."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741

SEVERITY: dict[str, Severity] = {
    # The stream is broken or was cut: a client reading it fails or gets less.
    "no-response": E,
    "http-status": E,
    "outcome": E,
    "no-done": E,
    "no-finish": E,
    "cut-event": E,
    "error-event": E,
    "decode-error": E,
    "invalid-json": E,
    "tool-args-invalid": E,
    "damaged-record": E,
    "close-abnormal": E,
    "no-response-done": E,
    # Whole, but worth a look: the model stopped early, or leaked text it should not.
    "finish-length": W,
    "finish-content-filter": W,
    "control-token": W,
    "usage-missing": W,
    "refusal": W,
    "reasoning-inline": W,
    "not-a-stream": W,
    # What healthy servers send.
    "keepalive": I,
}
"""The severity of each known finding code."""

DEFAULT_SEVERITY = Severity.WARNING
"""The severity of a code :data:`SEVERITY` does not list."""


def register(code: str, severity: Severity) -> None:
    """Give a finding code (a new format's) its severity, from the module that reports it."""
    SEVERITY.setdefault(code, severity)


def severity_of(code: str) -> Severity:
    return SEVERITY.get(code, DEFAULT_SEVERITY)
