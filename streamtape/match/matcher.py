"""Which recorded interaction answers a request. Pure logic plus a lock; no I/O.

A request matches a recorded one when all of these agree:

- method (case-insensitive);
- path (exactly; scheme, host and port are ignored, so a recording of
  ``https://api.openai.com/v1/...`` answers ``http://127.0.0.1:8000/v1/...``);
- query, as a multiset of ``name=value`` pairs (order of names ignored);
- body: JSON bodies are compared as data (key order and whitespace ignored,
  ``1`` and ``1.0`` equal, ``true`` and ``1`` not); other bodies byte for byte;
- headers only when named in ``match_headers`` (case-insensitive names), and never
  those that change on every signed call (``X-Amz-Date``, ``Authorization``, ...:
  :data:`~streamtape.capture.redaction.SIGNED_CALL_HEADERS`), so a Bedrock recording
  answers boto3's freshly signed requests.

A JSON ``null`` counts as absent: a recorded ``"keep_alive": null`` matches a
body without ``keep_alive`` (an SDK that leaves unset options out) and the
other way round, unless ``strict_nulls=True`` (``--strict-nulls``).

``ignore_fields`` names JSON body fields that may differ between runs. A plain
name (``user``) is ignored **at any depth** (in every object of the body); a
dotted name (``metadata.user_id``) is a path from the top level, list indexes
left out (``messages.name`` ignores ``name`` in every message).

A recorded value that is exactly ``"REDACTED"`` (what the recorder writes in
place of a secret) matches anything, including absence: in the query, in
matched headers and in JSON bodies.

Identical requests (identical as far as matching can tell) get their recorded
interactions in cassette order, then the last one again; with ``strict=True``
running out is a :class:`~streamtape.errors.NoMatchError`.

A request nothing matches raises :class:`~streamtape.errors.NoMatchError`
carrying the request as matching saw it (:class:`RequestKey`) and the closest
recording with its differences (:class:`Closest`); its message says the same
in one line.

The closest recording is the one whose request differs least, by a weighted
count of differences: a different method outweighs everything else, then a
different path; below those each query parameter and each matched header that
differs, is missing or is extra counts 2, and each JSON body field that differs,
is missing or is extra counts 1 (a list of another length counts one per item
more or fewer; a body that is not JSON, or not the same bytes, counts 1). Ties
go to the earlier recording. So a request equal to recording #1 but for one
field is named as #1, however many recordings before it share its path.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl, urlsplit

from ..capture.redaction import DEFAULT_REDACT_HEADERS, SIGNED_CALL_HEADERS
from ..cassette.digest import has_redacted
from ..cassette.model import REDACTED, Interaction, Request
from ..errors import NoMatchError
from ..wire import form_pairs, header_value, is_form_body
from .mcp import SessionOrder

__all__ = [
    "NOT_JSON",
    "Closest",
    "JsonComparison",
    "Matcher",
    "RequestKey",
    "byte_difference",
    "parse_json",
    "shorten",
]

HeadersLike = Mapping[str, str] | Iterable[tuple[str | bytes, str | bytes]]

NOT_JSON: Final = object()
"""What :func:`parse_json` gives for data that is not a JSON object or array."""


def _text(v: str | bytes) -> str:
    return v.decode("latin-1") if isinstance(v, bytes) else str(v)


def _pairs(headers: HeadersLike | None) -> list[tuple[str, str]]:
    if headers is None:
        return []
    if hasattr(headers, "multi_items"):  # httpx.Headers keeps repeated names apart
        items = headers.multi_items()
    elif isinstance(headers, Mapping):
        items = headers.items()
    else:
        items = headers
    return [(_text(k), _text(v)) for k, v in items]


def parse_json(data: bytes) -> Any:
    """``data`` as JSON data when it is a JSON object or array, else :data:`NOT_JSON`.

    Only objects and arrays: a body of ``1`` or ``"x"`` is compared byte for byte,
    as a request body or a client message that is JSON by accident."""
    if data.lstrip()[:1] not in (b"{", b"["):
        return NOT_JSON
    try:
        return json.loads(data)
    except ValueError:
        return NOT_JSON


def shorten(value: Any, limit: int = 40, *, ascii_only: bool = True) -> str:
    """``value`` as JSON (bytes as their ``repr``), cut to ``limit`` characters with ``...``."""
    if isinstance(value, bytes):
        s = repr(value)
    else:
        try:
            s = json.dumps(value, ensure_ascii=ascii_only)
        except (TypeError, ValueError):
            s = repr(value)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def byte_difference(rec: bytes, got: bytes, window: int, short: Callable[[Any], str] = shorten) -> str:
    """Where ``got`` first differs from ``rec``, with ``window`` bytes of each from there:
    ``differs at byte N (G bytes, recorded R): ..., recorded ...``."""
    n = next(
        (i for i, (a, b) in enumerate(zip(rec, got, strict=False)) if a != b),
        min(len(rec), len(got)),
    )
    return (
        f"differs at byte {n} ({len(got)} bytes, recorded {len(rec)}): "
        f"{short(got[n : n + window])}, recorded {short(rec[n : n + window])}"
    )


@dataclass(frozen=True)
class RequestKey:
    """A request reduced to what matching compares."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]  # lower-cased names
    body: bytes
    json: Any  # parsed body, or NOT_JSON
    form: tuple[tuple[str, str], ...] | None = None
    """A form-urlencoded body's fields (compared as the query is), or None."""

    @classmethod
    def of(cls, method: str, url: str, headers: HeadersLike | None, body: bytes) -> RequestKey:
        parts = urlsplit(url)
        pairs = tuple(parse_qsl(parts.query, keep_blank_values=True))
        hdrs = tuple((k.lower(), v) for k, v in _pairs(headers))
        body = bytes(body or b"")
        form = form_pairs(body) if is_form_body(body, header_value(hdrs, "content-type")) else None
        return cls(method.upper(), parts.path or "/", pairs, hdrs, body,
                   NOT_JSON if form is not None else parse_json(body), form)

    @property
    def target(self) -> str:
        q = "&".join(f"{k}={v}" for k, v in self.query)
        return self.path + (f"?{q}" if q else "")


@dataclass(frozen=True)
class Closest:
    """The recorded request nearest to one that nothing matched, and how they differ."""

    index: int
    """Its position in :attr:`Matcher.interactions`."""
    request: RequestKey
    differences: tuple[str, ...]
    """Every difference, one line each, most important first (method, path, query,
    headers, then the body's fields in key order)."""
    cassette: str | None = None
    """The file name of the cassette it came from, when the matcher knows (``sources``)."""
    position: int | None = None
    """Its position in that cassette (None when the cassette is not known)."""

    @property
    def where(self) -> str:
        """``session.tape#1`` (the cassette and the position in it), or ``#1`` (the
        position in :attr:`Matcher.interactions`) when the cassette is not known."""
        if self.cassette is None or self.position is None:
            return f"#{self.index}"
        return f"{self.cassette}#{self.position}"


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


@dataclass(frozen=True)
class JsonComparison:
    """JSON data compared the way matching compares it, under one set of ignored fields.

    Key order and whitespace do not count, ``1`` and ``1.0`` are equal, ``true``
    and ``1`` are not; a recorded ``"REDACTED"`` matches anything, absence too.
    A plain ignored name (``user``) is ignored at any depth, a dotted one
    (``metadata.user_id``) is a path from the top with list indexes left out.
    Request bodies (:class:`Matcher`) and a replayed WebSocket client's messages
    (:mod:`streamtape.match.websocket`) both compare through this, so an
    ``--ignore-field`` means the same for both.
    """

    ignore_names: frozenset[str] = frozenset()
    ignore_paths: frozenset[str] = frozenset()
    nulls_absent: bool = False
    """Whether an object field whose value is ``null`` counts as absent (on either side)."""

    @classmethod
    def of(cls, ignore_fields: Iterable[str], *, nulls_absent: bool = False) -> JsonComparison:
        fields = [f.strip() for f in ignore_fields if f.strip()]
        return cls(frozenset(f for f in fields if "." not in f), frozenset(f for f in fields if "." in f),
                   nulls_absent)

    def _ignored(self, key: Any, keypath: str) -> bool:
        return key in self.ignore_names or keypath in self.ignore_paths

    def strip(self, node: Any, keypath: str = "") -> Any:
        """JSON data without the ignored fields, and without ``null`` fields when they count
        as absent (for a quick equality test)."""
        if not (self.ignore_names or self.ignore_paths or self.nulls_absent):
            return node
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                kp = f"{keypath}.{k}" if keypath else str(k)
                if self._ignored(k, kp) or (v is None and self.nulls_absent):
                    continue
                out[k] = self.strip(v, kp)
            return out
        if isinstance(node, list):
            return [self.strip(v, keypath) for v in node]
        return node

    def first_difference(
        self, rec: Any, got: Any, *, whole: str, short: Callable[[Any], str] = shorten
    ) -> str | None:
        """The first difference of ``got`` from ``rec`` in one line, or None when they match.

        The line names the place (``messages[0].content``, or ``whole`` for the top)
        and both values through ``short``: ``lacks X (recorded ...)``, ``has X=...,
        not in the recording``, ``X has N items, recorded M``, ``X is ..., recorded ...``.
        """
        return next((line for _, line in self.differences(rec, got, whole=whole, short=short)), None)

    def differences(
        self, rec: Any, got: Any, *, whole: str, short: Callable[[Any], str] = shorten
    ) -> Iterator[tuple[int, str]]:
        """Every difference of ``got`` from ``rec``, in order (object keys sorted), as
        ``(fields, line)``: the line as :meth:`first_difference` words it, ``fields``
        how many fields it stands for (1, or for a list of another length the items
        more or fewer). Lazy: a caller that has seen enough stops asking."""
        return self._differences(rec, got, "", "", whole, short)

    def _differences(
        self, rec: Any, got: Any, shown: str, keypath: str, whole: str, short: Callable[[Any], str]
    ) -> Iterator[tuple[int, str]]:
        """``shown`` has list indexes, ``keypath`` not. Two scalars side by side are
        compared in place, not in a generator of their own: they are most of a body,
        and a miss compares the request with every recording."""
        if isinstance(rec, str) and rec == REDACTED:
            return
        where = shown or whole
        if isinstance(rec, dict) and isinstance(got, dict):
            for k in sorted(set(rec) | set(got), key=str):
                kp = f"{keypath}.{k}" if keypath else str(k)
                if self._ignored(k, kp):
                    continue
                if self.nulls_absent and rec.get(k, None) is None and got.get(k, None) is None:
                    continue  # null on one side, absent (or null) on the other
                if k not in got:
                    if rec[k] != REDACTED:
                        yield 1, f"lacks {_place(shown, k)} (recorded {short(rec[k])})"
                elif k not in rec:
                    yield 1, f"has {_place(shown, k)}={short(got[k])}, not in the recording"
                else:
                    a, b = rec[k], got[k]
                    if not (_scalar(a) and _scalar(b)):
                        yield from self._differences(a, b, _place(shown, k), kp, whole, short)
                    elif not (isinstance(a, str) and a == REDACTED) and not _same_scalar(a, b):
                        yield 1, f"{_place(shown, k)} is {short(b)}, recorded {short(a)}"
            return
        if isinstance(rec, list) and isinstance(got, list):
            for i, (a, b) in enumerate(zip(rec, got, strict=False)):
                if _scalar(a) and _scalar(b):
                    if not (isinstance(a, str) and a == REDACTED) and not _same_scalar(a, b):
                        yield 1, f"{shown}[{i}] is {short(b)}, recorded {short(a)}"
                else:
                    yield from self._differences(a, b, f"{shown}[{i}]", keypath, whole, short)
            if len(rec) != len(got):
                yield abs(len(got) - len(rec)), f"{where} has {len(got)} items, recorded {len(rec)}"
            return
        if not (_scalar(rec) and _scalar(got)) or not _same_scalar(rec, got):
            yield 1, f"{where} is {short(got)}, recorded {short(rec)}"


def _scalar(v: Any) -> bool:
    return not isinstance(v, dict | list)


def _place(shown: str, key: Any) -> str:
    return f"{shown}.{key}" if shown else str(key)


_FIELD = 1
"""The weight of one JSON body field that differs, is missing or is extra (and of a
body that differs as a whole: not JSON, or other bytes)."""
_PARAMETER = 2
"""The weight of one query parameter or matched header that differs, is missing or is extra."""
_PATH = 1 << 64
"""A different path outweighs any count of field, parameter and header differences."""
_METHOD = 1 << 65
"""A different method outweighs a different path and everything below it."""


class _Compare:
    """Differences between a recorded request and a received one, most important first."""

    def __init__(self, ignore_fields: Iterable[str], match_headers: Iterable[str], *,
                 strict_nulls: bool = False) -> None:
        self.json = JsonComparison.of(ignore_fields, nulls_absent=not strict_nulls)
        names = (h.strip().lower() for h in match_headers)
        self.match_headers = tuple(h for h in names if h and h not in SIGNED_CALL_HEADERS)

    def strip(self, node: Any) -> Any:
        """JSON data without the ignored fields (for a quick equality test)."""
        return self.json.strip(node)

    def differences(
        self, rec: RequestKey, got: RequestKey, short: Callable[[Any], str] = shorten
    ) -> Iterator[tuple[int, str]]:
        """Every difference as ``(weight, line)``, the named checks in order, as vcrpy
        composes its matchers (method, path, query, headers, body). Lazy: ruling a
        recording out, or out of the running for closest, stops at what suffices.
        ``short`` words the body's values (:func:`_unworded` when only weights count)."""
        yield from self.method(rec, got)
        yield from self.path(rec, got)
        yield from self.query(rec, got)
        yield from self.headers(rec, got)
        yield from self.body(rec, got, short)

    def differs(self, rec: RequestKey, got: RequestKey) -> bool:
        """Whether ``rec`` does not answer ``got`` (stops at the first difference)."""
        return next(self.differences(rec, got), None) is not None

    # Each check yields (weight, message) pairs, most important first; none is a match.
    @staticmethod
    def method(rec: RequestKey, got: RequestKey) -> Iterator[tuple[int, str]]:
        if rec.method != got.method:
            yield _METHOD, f"method {got.method}, recorded {rec.method}"

    @staticmethod
    def path(rec: RequestKey, got: RequestKey) -> Iterator[tuple[int, str]]:
        if rec.path != got.path:
            yield _PATH, f"path {got.path}, recorded {rec.path}"

    def query(self, rec: RequestKey, got: RequestKey) -> Iterator[tuple[int, str]]:
        if rec.query != got.query:
            yield from _pair_differences(rec.query, got.query, "query")
    def headers(self, rec: RequestKey, got: RequestKey) -> Iterator[tuple[int, str]]:
        for name in self.match_headers:
            rv = [v for k, v in rec.headers if k == name]
            gv = [v for k, v in got.headers if k == name]
            if rv and all(v == REDACTED for v in rv):
                continue
            if rv != gv:
                r = shorten(rv[0]) if rv else "(absent)"
                g = shorten(gv[0]) if gv else "(absent)"
                yield _PARAMETER, f"header {name} is {g}, recorded {r}"

    def body(self, rec: RequestKey, got: RequestKey,
             short: Callable[[Any], str] = shorten) -> Iterator[tuple[int, str]]:
        rj, gj = rec.json, got.json
        if rec.form is not None and got.form is not None:
            if rec.body != got.body:
                for _, d in _pair_differences(rec.form, got.form, "form field"):
                    yield _FIELD, f"body {d}"
        elif rj is not NOT_JSON and gj is not NOT_JSON:
            for n, d in self.json.differences(rj, gj, whole="(the whole body)", short=short):
                yield n * _FIELD, f"body {d}"
        elif rec.body == got.body:
            return
        elif rj is not NOT_JSON:
            yield _FIELD, f"body is not JSON ({shorten(got.body)}), recorded JSON"
        elif gj is not NOT_JSON:
            yield _FIELD, f"body is JSON, recorded {shorten(rec.body)}"
        else:
            yield _FIELD, f"body {byte_difference(rec.body, got.body, 20)}"


def _pair_differences(
    rec: Sequence[tuple[str, str]], got: Sequence[tuple[str, str]], what: str
) -> Iterator[tuple[int, str]]:
    """How two lists of name=value pairs differ as multisets (a query, a form body): a
    name recorded only as ``REDACTED`` matches any value, absence too."""
    rq: dict[str, list[str]] = {}
    gq: dict[str, list[str]] = {}
    for k, v in rec:
        rq.setdefault(k, []).append(v)
    for k, v in got:
        gq.setdefault(k, []).append(v)
    for k in sorted(set(rq) | set(gq)):
        rv, gv = rq.get(k), gq.get(k)
        if rv is not None and all(v == REDACTED for v in rv):
            continue
        if rv is None:
            yield _PARAMETER, f"{what} has {k}={shorten(gq[k][0])}, not in the recording"
        elif gv is None:
            yield _PARAMETER, f"{what} lacks {k} (recorded {k}={shorten(rv[0])})"
        elif sorted(rv) != sorted(gv):
            yield _PARAMETER, f"{what} {k}={shorten(gv[0])}, recorded {k}={shorten(rv[0])}"


class RequestJournal(Protocol):
    """Where a :class:`Matcher` keeps the requests it saw: a bounded deque by default;
    ``serve --workers`` gives every worker's matcher one journal shared between
    processes (:mod:`streamtape.serve.journal`). Each entry is appended once, finished."""

    def append(self, entry: dict[str, Any], /) -> None: ...

    def clear(self) -> None: ...

    def __iter__(self) -> Iterator[dict[str, Any]]: ...


class Matcher:
    """Answers requests from recorded interactions. Thread-safe.

    ``match`` returns the interaction; :meth:`match_indexed` also returns its
    index in ``interactions``. :attr:`received` lists the requests seen (the
    latest ``keep_received``, so a long-running server does not grow).
    ``sources`` names the cassette file each interaction came from (None where
    not known, as :func:`~streamtape.match.indexed.interactions_of` gives them):
    a :class:`~streamtape.errors.NoMatchError`'s closest recording then carries
    its cassette, and when interactions of several cassettes are served the
    message names it (``closest is session.tape#1 POST ...``).
    """

    def __init__(
        self,
        interactions: Iterable[Interaction],
        *,
        ignore_fields: Iterable[str] = (),
        match_headers: Iterable[str] = (),
        strict: bool = False,
        strict_nulls: bool = False,
        keep_received: int = 10_000,
        journal: RequestJournal | None = None,
        sources: Sequence[str | None] | None = None,
    ) -> None:
        self.interactions: Sequence[Interaction] = list(interactions)
        self.sources: Sequence[str | None] | None = sources
        """The cassette file of each interaction (None: not known); see the class docstring."""
        self.strict = strict
        self.ignore_fields = tuple(ignore_fields)
        self.match_headers = tuple(match_headers)
        self.strict_nulls = strict_nulls
        """Whether a recorded JSON ``null`` must be sent as ``null`` (else it matches absence)."""
        self._cmp = _Compare(self.ignore_fields, self.match_headers, strict_nulls=strict_nulls)
        self._keys = [
            RequestKey.of(ix.request.method, ix.request.url, ix.request.headers, ix.request.body)
            for ix in self.interactions
        ]
        # A recorded JSON body without "REDACTED" in it can only match a body
        # equal to it once ignored fields are gone: a C-speed test rejects most.
        self._quick = [
            None if k.json is NOT_JSON or has_redacted(k.json) else self._cmp.strip(k.json)
            for k in self._keys
        ]
        self._used = [0] * len(self.interactions)
        self._lock = threading.Lock()
        self._received: RequestJournal = (
            journal if journal is not None else deque(maxlen=keep_received)
        )
        self._mcp = SessionOrder(len(self.interactions), self._recorded_request, self._recorded_key,
                                 self._cmp.json)
        """MCP sessions: their calls in recorded order (:mod:`streamtape.match.mcp`)."""

    @property
    def received(self) -> list[dict[str, Any]]:
        """Requests seen so far (the latest ``keep_received``), oldest first, as JSON-ready dicts: ``method``, ``path``
        (with query), ``headers`` (secret ones as ``REDACTED``), ``body`` (text),
        ``matched`` (index into ``interactions`` or None), ``error`` (or None)."""
        with self._lock:
            return [dict(r) for r in self._received]

    @property
    def used(self) -> list[int]:
        """How many times each interaction was served."""
        with self._lock:
            return list(self._used)

    def reset(self) -> None:
        """Forget what was served and received (start the repeat order over)."""
        with self._lock:
            self._used = [0] * len(self.interactions)
            self._received.clear()

    def match(
        self, method: str, url: str, headers: HeadersLike | None = None, body: bytes = b""
    ) -> Interaction:
        """The recorded interaction that answers this request, or :class:`NoMatchError`."""
        return self.match_indexed(method, url, headers, body)[1]

    def match_indexed(
        self, method: str, url: str, headers: HeadersLike | None = None, body: bytes = b""
    ) -> tuple[int, Interaction]:
        key = RequestKey.of(method, url, headers, body)
        candidates = self._candidates(key)
        mcp_session = self._mcp.applies(key)
        with self._lock:
            entry = self._entry(key)
            try:
                try:  # an MCP session's call, or a stream resumed after Last-Event-ID
                    resumed = self._mcp.resume(key, self.interactions.__getitem__)
                    if resumed is None and mcp_session is not None:
                        chosen = self._mcp.choose(mcp_session, key, candidates)
                except NoMatchError as e:
                    entry["error"] = str(e)
                    raise
                if resumed is not None:
                    entry["matched"] = resumed[0]
                    return resumed
                if mcp_session is not None:
                    self._used[chosen] += 1
                    entry["matched"] = chosen
                    return chosen, self.interactions[chosen]
                if not candidates:
                    closest = self._closest(key)
                    entry["error"] = msg = _no_match_message(key, closest, self._several_sources())
                    raise NoMatchError(msg, request=key, closest=closest)
                fresh = [i for i in candidates if self._used[i] == 0]
                if fresh:
                    chosen = fresh[0]
                elif self.strict:
                    n = len(candidates)
                    entry["error"] = msg = (
                        f"{key.method} {key.target}: all {n} recorded interaction"
                        f"{'s' if n > 1 else ''} matching it (#{', #'.join(map(str, candidates))}) "
                        "were already used (strict matching)"
                    )
                    raise NoMatchError(msg, request=key)
                else:
                    chosen = candidates[-1]
                self._used[chosen] += 1
                entry["matched"] = chosen
                ix = self.interactions[chosen]
                if ix.response is not None:
                    self._mcp.served(key, ix.response.headers)
                return chosen, ix
            finally:
                self._received.append(entry)  # finished: a shared journal stores it as it is

    def answers(
        self, method: str, url: str, headers: HeadersLike | None = None, body: bytes = b""
    ) -> bool:
        """Whether :meth:`match_indexed` would answer this request now, without serving it:
        nothing is counted and nothing goes into :attr:`received`."""
        key = RequestKey.of(method, url, headers, body)
        candidates = self._candidates(key)
        if not self.strict:
            return bool(candidates)
        with self._lock:
            return any(self._used[i] == 0 for i in candidates)

    def note(self, entry: dict[str, Any]) -> None:
        """Add an entry to :attr:`received` that is not a request's (the replay server's
        note of a WebSocket client message that did not match its recording)."""
        with self._lock:
            self._received.append(entry)

    def _candidates(self, key: RequestKey) -> list[int]:
        """The recordings that answer ``key``, in cassette order (a subclass may find
        them another way: :class:`streamtape.match.indexed.IndexedMatcher`)."""
        got = self._cmp.strip(key.json) if key.json is not NOT_JSON else NOT_JSON
        candidates = []
        for i, rk in enumerate(self._keys):
            quick = self._quick[i]
            if rk.method != key.method or rk.path != key.path:
                continue
            if quick is not None and got is not NOT_JSON and quick != got:
                continue
            if not self._cmp.differs(rk, key):
                candidates.append(i)
        return candidates

    def _recorded_request(self, i: int) -> Request:
        """Recorded request ``i`` (a subclass may read it from its file)."""
        return self.interactions[i].request

    def _recorded_key(self, i: int) -> RequestKey:
        """Recorded request ``i`` as matching compares it."""
        return self._keys[i]

    def _entry(self, key: RequestKey) -> dict[str, Any]:
        secret = set(DEFAULT_REDACT_HEADERS)
        return {
            "method": key.method,
            "path": key.target,
            "headers": [[k, REDACTED if k in secret else v] for k, v in key.headers],
            "body": key.body.decode("utf-8", "replace"),
            "matched": None,
            "error": None,
        }

    def _closest(self, key: RequestKey) -> Closest | None:
        """The recording whose request differs least from ``key`` (None: no recordings)."""
        return self._nearest(key, self._keys)

    def _nearest(self, key: RequestKey, recorded: Iterable[RequestKey]) -> Closest | None:
        """The least different of ``recorded`` (the requests of :attr:`interactions`, in
        order), by the weighted count of the module docstring; ties go to the earlier.

        A recording's differences are counted only until they reach the best so far
        (they come lazily, heaviest checks first), and put into words for the winner
        alone: a miss over a day of recordings costs a walk, not a report on each."""
        best: tuple[int, int, RequestKey] | None = None
        for i, rk in enumerate(recorded):
            score = 0
            for weight, _ in self._cmp.differences(rk, key, _unworded):
                score += weight
                if best is not None and score >= best[0]:
                    break
            else:
                if best is None or score < best[0]:
                    best = (score, i, rk)
        if best is None:
            return None
        _, i, rk = best
        cassette, position = self._source_of(i)
        differences = tuple(line for _, line in self._cmp.differences(rk, key))
        return Closest(i, rk, differences, cassette, position)

    def _source_of(self, index: int) -> tuple[str | None, int | None]:
        """The cassette of interaction ``index`` and its position there, when known."""
        names = self.sources
        if names is None or index >= len(names) or names[index] is None:
            return None, None
        name = names[index]
        return name, sum(1 for n in itertools.islice(names, index) if n == name)

    def _several_sources(self) -> bool:
        """Whether the interactions come from more than one cassette (or loose ones and a cassette)."""
        names = self.sources
        return names is not None and len(set(names)) > 1


def _unworded(value: Any) -> str:
    """A ``short`` that words nothing: ranking needs only the weights."""
    return ""


_SHOWN = 3
"""How many of the closest recording's differences a no-match message words."""


def _no_match_message(key: RequestKey, closest: Closest | None, name_cassette: bool) -> str:
    """One line: the request, the closest recording (``session.tape#1``: its cassette file
    whenever it is known, even when there is one, so the user knows which file to look
    in; ``#1`` otherwise), its first :data:`_SHOWN` differences and how many more.
    ``name_cassette`` is kept for callers; the file is named either way."""
    what = f"{key.method} {key.target}"
    if closest is None:
        return f"no recorded interaction matches {what}: the cassette is empty"
    rk, ds = closest.request, closest.differences
    rest = len(ds) - _SHOWN
    more = f" (and {rest} more difference{'s' if rest > 1 else ''})" if rest > 0 else ""
    where = closest.where
    return (
        f"no recorded interaction matches {what}; closest is {where} "
        f"{rk.method} {rk.target}: {'; '.join(ds[:_SHOWN])}{more}"
    )
