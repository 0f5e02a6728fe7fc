"""The replay HTTP server: cassettes played back over real sockets, on time.

Layers, from the inside out:

* :mod:`streamtape.wire` (pure) turns a :class:`~streamtape.profiles.Schedule`
  into HTTP/1.1 bytes: the head with its framing headers, each piece framed,
  the last chunk, the JSON error bodies.
* :mod:`.request` reads one request from a connection.
* :mod:`.player` writes a schedule's pieces at their deadlines from clock
  callbacks (:func:`streamtape.clock.call_at_ns`). Every ``send`` step is
  one write (one HTTP chunk on chunked framing) on a socket with
  ``TCP_NODELAY``, so a recorded boundary is a boundary on the wire.
* :mod:`.server`: :class:`ReplayServer`, the asyncio driver. It parses
  requests, asks the :class:`~streamtape.match.matcher.Matcher` for the interaction,
  asks the profile for a schedule and plays it against absolute deadlines
  from the moment the request was received. Faults act on the socket:
  ``cut`` closes without the terminating chunk, ``reset`` aborts with a TCP
  RST (``SO_LINGER`` 0), a stall is simply a long gap with nothing written.
* :mod:`.websocket`: when the matched recording is a WebSocket session, the
  server hands the upgraded connection to a :class:`~.websocket.SessionPlayer`
  (wsproto for the handshake and the client's frames): each server message
  is timed from the client message that preceded it in the recording, and
  every client message is compared with the recorded one
  (:mod:`streamtape.match.websocket`; a difference closes with 1008).

Special requests:

* header ``X-Streamtape-Profile: <profile>`` overrides the profile for one request;
* ``GET /_streamtape/requests`` returns the requests received so far, as JSON.

One log line per request goes to the ``log`` callback (the CLI prints it;
the default sends it to the ``streamtape.serve`` logger).
"""

from __future__ import annotations

from ..wire import PROFILE_HEADER
from .server import CONTROL_PREFIX, ReplayServer, ReplaySource, ServedRequest, ServeOutcome

__all__ = [
    "CONTROL_PREFIX",
    "PROFILE_HEADER",
    "ReplayServer",
    "ReplaySource",
    "ServeOutcome",
    "ServedRequest",
]
