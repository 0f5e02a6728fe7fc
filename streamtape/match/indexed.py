"""Matching against cassettes too large to hold: request digests and :class:`IndexedMatcher`.

A :class:`~streamtape.match.matcher.Matcher` builds a key for every recorded request
(its JSON body parsed) and compares a request with each in turn. A day of
recorded traffic holds tens of thousands of interactions: building their keys
takes seconds and hundreds of megabytes before a replay server can answer,
and every request walks all of them. :class:`IndexedMatcher` answers the same
questions from a digest of each recorded request and reads a recording's
request from its file only when the digest makes it a candidate.

The digest (:func:`request_digest`) covers what matching compares exactly:
method, path, the query as a multiset, and the body — JSON bodies as data
(keys sorted, ``1`` and ``1.0`` one number, ``true`` and ``1`` two values,
ignored fields left out), others byte for byte. Two requests that match have
the same digest, so the candidates for a request are the recordings with its
digest, checked with the matcher's own comparison (headers named in
``match_headers`` included), plus the recordings a digest cannot stand for:
those holding ``"REDACTED"`` in the body or query (a placeholder matches
anything, even absence), which are always checked.

Writers store each interaction's digest (for matching without ignored fields)
in the cassette's index record, so a server opens a large cassette without
reading its requests; without them (a cassette with no index, or
``--ignore-field``) the digests are computed once at start.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, overload

from ..cassette.digest import WILDCARD, digest_parts, request_digest
from ..cassette.model import Interaction, Request
from ..cassette.reader import Cassette
from .matcher import Closest, Matcher, RequestKey
from .mcp import SessionOrder

__all__ = [
    "INDEXED_MATCH_MIN",
    "WILDCARD",
    "CassetteChain",
    "IndexedMatcher",
    "digest_parts",
    "interactions_of",
    "matcher_for",
    "request_digest",
]

INDEXED_MATCH_MIN = 5_000
"""From this many interactions on, a replay server of cassette files matches through
digests (:class:`IndexedMatcher`) instead of holding every interaction."""

_KEY_CACHE = 4096  # recorded requests kept parsed (candidates are re-checked often)
_IX_CACHE = 512  # interactions kept built (a server's schedules are keyed on them)


# --------------------------------------------------------------------------
# Interactions of several cassettes, read on demand


class CassetteChain(Sequence[Interaction]):
    """The interactions of several cassettes as one sequence, each read when asked for.

    The last :data:`_IX_CACHE` interactions built are kept, so one asked for
    again is the same object (a replay server keys its schedules on that).
    """

    def __init__(self, cassettes: Sequence[Cassette]) -> None:
        self.cassettes = list(cassettes)
        self._ends = list(accumulate(len(c) for c in self.cassettes))
        self._cache: OrderedDict[int, Interaction] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _locate(self, i: int) -> tuple[Cassette, int]:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("interaction index out of range")
        k = 0
        while self._ends[k] <= i:  # few cassettes: a walk is as good as bisect
            k += 1
        return self.cassettes[k], i - (self._ends[k - 1] if k else 0)

    @overload
    def __getitem__(self, i: int) -> Interaction: ...
    @overload
    def __getitem__(self, i: slice) -> list[Interaction]: ...
    def __getitem__(self, i: int | slice) -> Interaction | list[Interaction]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        with self._lock:
            hit = self._cache.get(i)
            if hit is not None:
                self._cache.move_to_end(i)
                return hit
        cas, j = self._locate(i)
        ix = cas[j]
        with self._lock:
            self._cache[i] = ix
            if len(self._cache) > _IX_CACHE:
                self._cache.popitem(last=False)
        return ix

    def __iter__(self) -> Iterator[Interaction]:
        for cas in self.cassettes:
            yield from cas

    def request(self, i: int) -> Request:
        """Interaction ``i``'s request (only its begin record read)."""
        cas, j = self._locate(i)
        f = cas.file
        return f.request(j) if f is not None else cas[j].request

    def requests(self) -> Iterator[Request]:
        for cas in self.cassettes:
            f = cas.file
            if f is None:
                yield from (ix.request for ix in cas)
            else:
                yield from (f.request(j) for j in range(len(f)))

    def stored_digests(self) -> array[int] | None:
        """Every interaction's digest as the writers stored them, or None if any file lacks them."""
        out: array[int] = array("Q")
        for cas in self.cassettes:
            f = cas.file
            if f is None or f.table.digests is None:
                return None
            out.extend(f.table.digests)
        return out


# --------------------------------------------------------------------------
# The matcher


class IndexedMatcher(Matcher):
    """A :class:`~streamtape.match.matcher.Matcher` over interactions read on demand (a
    :class:`CassetteChain`), finding candidates through request digests.

    It answers exactly as a Matcher holding every interaction would (the same
    comparison decides), with memory for the digests and the few requests and
    interactions in use. Options are the Matcher's.
    """

    def __init__(self, interactions: CassetteChain, **options: Any) -> None:
        super().__init__((), **options)
        self.interactions = interactions
        self._used = [0] * len(interactions)
        self._mcp = SessionOrder(len(interactions), self._recorded_request, self._recorded_key,
                                 self._cmp.json)
        digests = interactions.stored_digests() if not self.ignore_fields else None
        if digests is None:
            strip = self._cmp.strip if self.ignore_fields else None
            digests = array("Q", (request_digest(r.method, r.url, r.body, strip=strip,
                                                 content_type=r.header("content-type"))
                                  for r in interactions.requests()))
        self._buckets: dict[int, int | list[int]] = {}
        self._wild: list[int] = []
        buckets = self._buckets
        for i, d in enumerate(digests):
            if d == WILDCARD:
                self._wild.append(i)
                continue
            had = buckets.get(d)
            if had is None:
                buckets[d] = i
            elif isinstance(had, int):
                buckets[d] = [had, i]
            else:
                had.append(i)
        self._keys_cache: OrderedDict[int, RequestKey] = OrderedDict()
        self._keys_lock = threading.Lock()

    def _recorded_request(self, i: int) -> Request:
        if isinstance(self.interactions, CassetteChain):
            return self.interactions.request(i)
        return self.interactions[i].request

    def _recorded_key(self, i: int) -> RequestKey:
        with self._keys_lock:
            hit = self._keys_cache.get(i)
            if hit is not None:
                self._keys_cache.move_to_end(i)
                return hit
        r = self.interactions.request(i) if isinstance(self.interactions, CassetteChain) else (
            self.interactions[i].request)
        key = RequestKey.of(r.method, r.url, r.headers, r.body)
        with self._keys_lock:
            self._keys_cache[i] = key
            if len(self._keys_cache) > _KEY_CACHE:
                self._keys_cache.popitem(last=False)
        return key

    def _candidates(self, key: RequestKey) -> list[int]:
        strip = self._cmp.strip if self.ignore_fields else None
        d = digest_parts(key.method, key.path, key.query, key.body, recorded=False, strip=strip,
                         form=key.form)
        had = self._buckets.get(d)
        found = [] if had is None else [had] if isinstance(had, int) else list(had)
        if self._wild:
            found = sorted(set(found).union(self._wild))
        return [i for i in found if not self._cmp.differs(self._recorded_key(i), key)]

    def _closest(self, key: RequestKey) -> Closest | None:
        """The nearest recording, reading every recorded request once (a miss is rare)."""
        chain = self.interactions
        requests: Iterable[Request] = (
            chain.requests() if isinstance(chain, CassetteChain) else (ix.request for ix in chain))
        return self._nearest(key, (RequestKey.of(r.method, r.url, r.headers, r.body) for r in requests))


# --------------------------------------------------------------------------
# Choosing


def interactions_of(parts: Sequence[Interaction | Cassette]) -> tuple[Sequence[Interaction], list[str | None]]:
    """The interactions of ``parts`` (loose interactions and cassettes, in order) and the
    cassette each came from. File-backed cassettes alone stay on disk: a
    :class:`CassetteChain`; anything else is a list, as before."""
    names: list[str | None] = []
    if all(isinstance(p, Cassette) and p.file is not None for p in parts):
        cassettes = [p for p in parts if isinstance(p, Cassette)]
        for c in cassettes:
            names.extend([c.path.name if c.path else None] * len(c))
        return CassetteChain(cassettes), names
    items: list[Interaction] = []
    for part in parts:
        if isinstance(part, Interaction):
            items.append(part)
            names.append(None)
        else:
            items.extend(part)
            names.extend([part.path.name if part.path else None] * len(part))
    return items, names


def matcher_for(interactions: Sequence[Interaction], *, indexed_min: int | None = None,
                **options: Any) -> Matcher:
    """A :class:`IndexedMatcher` for a :class:`CassetteChain` of at least ``indexed_min``
    interactions (default :data:`INDEXED_MATCH_MIN`), else a :class:`Matcher` (the
    interactions in a list, as it always did)."""
    least = INDEXED_MATCH_MIN if indexed_min is None else indexed_min
    if isinstance(interactions, CassetteChain) and len(interactions) >= least:
        return IndexedMatcher(interactions, **options)
    return Matcher(interactions, **options)
