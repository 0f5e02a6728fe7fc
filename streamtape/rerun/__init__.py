"""Re-running recorded traffic against another backend (``streamtape rerun``).

Sans-I/O at the heart, a thin driver around it, as the rest of the house:

- :mod:`.schedule`: when each request is sent (recorded arrival times,
  ``--speed``, ``--rate`` fixed or Poisson, a closed loop, ``--repeat``,
  ``--duration``); pure values;
- :mod:`.mapping`: what is sent (the shadow's rewrite reused, and the rule
  that a ``REDACTED`` value is never sent); pure;
- :mod:`.client`: one HTTP/1.1 exchange over h11 feeding the
  :class:`~streamtape.capture.recorder.Recorder`, with an asyncio driver and a
  blocking one (for Locust);
- :mod:`.run`: :class:`Rerun`, the asyncio driver writing a session cassette
  (each new recording paired with the one it re-ran);
- :mod:`.locustfile`: the same requests from Locust users, across machines
  (``streamtape rerun --locustfile`` prints its path).

The driver (and the client with it) is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .mapping import RequestMap, build_target, check_sendable, parse_map, rerun_request
from .schedule import Arrivals, SchedulePlan, Send, parse_rate, sends

if TYPE_CHECKING:
    from .run import Counts, Item, Rerun

__all__ = [
    "Arrivals",
    "Counts",
    "Item",
    "RequestMap",
    "Rerun",
    "SchedulePlan",
    "Send",
    "build_target",
    "check_sendable",
    "parse_map",
    "parse_rate",
    "rerun_request",
    "sends",
]


def __getattr__(name: str) -> object:
    if name in ("Counts", "Item", "Rerun"):
        return getattr(importlib.import_module(".run", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
