"""The labels a shadow recording carries: the one vocabulary of the sender and of ``diff``.

``backend``: the backend's name. ``pair``: one id per client call, on the
primary and on each shadow. ``role``: ``primary`` (the answer the client got)
or ``shadow``. ``not_sent``: on a shadow recorded without being sent, why
(the in-flight bound, or a request that could not be mapped).
"""

from __future__ import annotations

from enum import StrEnum

LABEL_BACKEND = "backend"
LABEL_PAIR = "pair"
LABEL_ROLE = "role"
LABEL_NOT_SENT = "not_sent"
SESSION_LABELS = (LABEL_BACKEND, LABEL_PAIR, LABEL_ROLE, LABEL_NOT_SENT)
"""Labels a shadow recording sets itself (``--label`` may not set them)."""


class Role(StrEnum):
    """The ``role`` label: the answer the client got, or a shadow's."""

    PRIMARY = "primary"
    SHADOW = "shadow"


class NotSent(StrEnum):
    """The ``not_sent`` label: why a shadow request was recorded without being sent."""

    IN_FLIGHT_BOUND = "in-flight-bound"
    UNMAPPABLE = "unmappable"
