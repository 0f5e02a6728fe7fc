"""In-process replay: httpx / httpx2 transports and a ``requests`` adapter.

Plug a cassette straight into client code, no sockets::

    import httpx2, openai, streamtape
    t = streamtape.ReplayTransport("chat.tape", profile="chunk=utf8-split;latency=instant")
    client = openai.OpenAI(api_key="x", base_url="http://llm.test/v1",
                           http_client=httpx2.Client(transport=t))

    anthropic.Anthropic(api_key="x", base_url="http://llm.test",
                        http_client=httpx2.Client(transport=t))
    # one transport serves async clients too (AsyncReplayTransport is its other name)
    openai.AsyncOpenAI(..., http_client=httpx2.AsyncClient(transport=t))

    ollama.Client(host="http://llm.test", transport=streamtape.ReplayTransport(cas))

    session = requests.Session()
    session.mount("http://", streamtape.ReplayAdapter(cas))
    # huggingface_hub (0.x, requests): every session it makes gets the adapter
    huggingface_hub.configure_http_backend(backend_factory=lambda: session)

The transports type-check where the clients expect theirs:
``httpx.Client(transport=...)``, ``httpx.AsyncClient``, ``httpx2.Client`` and
``httpx2.AsyncClient`` all accept a :class:`ReplayTransport` under ``mypy
--strict`` (to a type checker it is each package's ``BaseTransport`` and
``AsyncBaseTransport``; at runtime it is duck-typed and imports neither).

Clients with no way to pass a transport or session (text-generation's
``Client`` calls ``requests.post``; aiohttp-based clients) are pointed at the
replay server (:mod:`streamtape.serve`) instead.

Every request is matched against the cassette (:class:`streamtape.match.matcher.Matcher`,
the same rules as the replay server), its interaction is turned into a
schedule by the profile (:meth:`streamtape.profiles.Profile.schedule`), and a
thin driver plays the schedule:

- each ``send`` step is one piece handed to the client when it is due; the
  response streams lazily, piece by piece, never buffered whole;
- ``realtime=True`` waits for each step's deadline (absolute, from the moment
  the request arrived, so no error accumulates); ``realtime=False`` runs on a
  virtual clock: no sleeping, but the client's read timeout still applies to
  the virtual silences, so a stall longer than the timeout is still a timeout;
- faults surface as the exceptions a real connection gives, of the client's
  own package (httpx or httpx2, detected from the request's class): a cut is
  ``RemoteProtocolError`` (on chunked and Content-Length framing; on a
  close-delimited body a cut looks like the end, exactly as on a socket), a
  reset is ``ReadError``, a silence longer than the read timeout (response
  head or body) is ``ReadTimeout``. The ``requests`` adapter feeds real HTTP/1.1
  wire bytes through ``http.client`` and ``urllib3`` as a socket would, so
  ``requests`` raises what it raises on a real connection
  (``ChunkedEncodingError``, ``ConnectionError``, ``ReadTimeout``).

A request with the header ``X-Streamtape-Profile`` is played under that
profile instead. As from the replay server, a request that matches nothing
gets an error naming the closest recorded request (status 422, or the
``no_match=`` status; the body in the error shape of the request's API),
and a profile that cannot apply gets a 400; ``no_match="raise"``
raises :class:`~streamtape.errors.NoMatchError` / ``ProfileError`` instead
(an SDK usually wraps a transport exception as a connection error, which is
why the response is the default).

httpx, httpx2 and requests are imported only when used.

Homes:

- :mod:`.replayer`: what to play and when, shared by every face and pure
  where it can be: :class:`Replayer` (matching and profiles, thread-safe),
  :class:`ReplayPlan` (the matched interaction and its schedule),
  :func:`head_failure` and :func:`play_actions` (the head's deadline and the
  body's actions given the client's read timeout), :class:`Timeline` (a
  plan's body as a flat tuple, what the faces walk when no read timeout
  can fire; plans are scheduled once per profile and recording);
- :mod:`.httpx_transport`: :class:`ReplayTransport`, one class for sync and
  async httpx / httpx2 clients over one body player (``AsyncReplayTransport``
  is the same class);
- :mod:`.requests_adapter`: :class:`ReplayAdapter`, real HTTP/1.1 wire bytes
  through ``http.client`` and ``urllib3``; imported on first use, since it
  imports ``requests``.

HTTP/1.1 details (the profile header, header lookup, reason phrases, the
response head, chunk framing, the error body) come from :mod:`streamtape.wire`,
as for the replay server; step kinds from :class:`streamtape.profiles.StepKind`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..wire import PROFILE_HEADER
from .httpx_transport import AsyncReplayTransport, ReplayTransport
from .replayer import (
    TIMEOUT,
    Action,
    MatchOptions,
    ReplayDriver,
    Replayer,
    ReplayPlan,
    Timeline,
    head_failure,
    play_actions,
)

if TYPE_CHECKING:
    from .requests_adapter import ReplayAdapter

__all__ = [
    "PROFILE_HEADER",
    "TIMEOUT",
    "Action",
    "AsyncReplayTransport",
    "MatchOptions",
    "ReplayAdapter",
    "ReplayDriver",
    "ReplayPlan",
    "ReplayTransport",
    "Replayer",
    "Timeline",
    "head_failure",
    "play_actions",
]


def __getattr__(name: str) -> object:
    # ReplayAdapter subclasses requests' HTTPAdapter: its module is imported on
    # first use so that importing this package does not import requests.
    if name == "ReplayAdapter":
        from .requests_adapter import ReplayAdapter

        return ReplayAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
