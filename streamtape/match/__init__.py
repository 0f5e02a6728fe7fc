"""Which recording answers a request, and why none does.

- :mod:`.matcher`: :class:`~.matcher.Matcher`, a request's key
  (:class:`~.matcher.RequestKey`) compared with each recording by small
  named checks (method, path, query, headers, the JSON body as data), and the
  :class:`~streamtape.errors.NoMatchError` that names the closest recording;
- :mod:`.indexed`: :class:`~.indexed.IndexedMatcher`, the same answers for
  cassettes too large to hold, through the request digests a writer stores
  (:mod:`streamtape.cassette.digest`);
- :mod:`.websocket`: a replayed client's WebSocket messages against the
  recorded ones.
"""

from .indexed import IndexedMatcher, matcher_for
from .matcher import Closest, Matcher, RequestKey

__all__ = ["Closest", "IndexedMatcher", "Matcher", "RequestKey", "matcher_for"]
