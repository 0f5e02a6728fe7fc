"""The labels a shadow recording carries: the one vocabulary of the sender and of ``diff``.

``backend``: the backend's name. ``pair``: one id per client call, on the
primary and on each shadow. ``role``: ``primary`` (the answer the client got)
or ``shadow``. ``not_sent``: on a shadow recorded without being sent, why
(the in-flight bound, or a request that could not be mapped).

A rerun (``streamtape rerun``) writes the same session, the recording it
re-ran as the primary and the new backend's answer as the shadow, and adds:
``rerun``, the run's id, on both; ``late_ms`` on a send that went out late
because ``--concurrency`` requests were in flight (how late); ``slo``, the
run's ``--slo``, on the new recordings, for ``diff`` to read.
"""

from __future__ import annotations

from enum import StrEnum

LABEL_BACKEND = "backend"
LABEL_PAIR = "pair"
LABEL_ROLE = "role"
LABEL_NOT_SENT = "not_sent"
LABEL_RERUN = "rerun"
LABEL_LATE = "late_ms"
LABEL_SLO = "slo"
SESSION_LABELS = (LABEL_BACKEND, LABEL_PAIR, LABEL_ROLE, LABEL_NOT_SENT, LABEL_RERUN, LABEL_LATE, LABEL_SLO)
"""Labels a shadow recording sets itself (``--label`` may not set them)."""


class Role(StrEnum):
    """The ``role`` label: the answer the client got, or a shadow's."""

    PRIMARY = "primary"
    SHADOW = "shadow"


class NotSent(StrEnum):
    """The ``not_sent`` label: why a shadow request was recorded without being sent."""

    IN_FLIGHT_BOUND = "in-flight-bound"
    UNMAPPABLE = "unmappable"
