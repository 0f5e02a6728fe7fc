"""The request digest: a 64-bit hash of a request as matching sees it.

Matching compares method, path, the query as a multiset, and the body (JSON
bodies as data: keys sorted, ``1`` and ``1.0`` one number, ``true`` and ``1``
two values, ignored fields left out, a field whose value is ``null`` left out
too, since by default it matches an absent field; form-urlencoded bodies as
their fields, a multiset like the query; others byte for byte). Two requests that
match have the same digest, so a matcher of a large cassette reads only the
recordings with a request's digest (:class:`~streamtape.match.indexed.IndexedMatcher`),
plus those a digest cannot stand for: recordings holding ``"REDACTED"`` in the
body (JSON or form) or query (a placeholder matches anything, even absence), whose digest is
:data:`WILDCARD`.

Writers store each interaction's digest in a large cassette's index record
(:mod:`streamtape.cassette.index`), which is why the digest lives with the
cassette and not with matching: a writer needs it, and builds on nothing of
matching's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from hashlib import blake2b
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..wire import form_pairs, header_value, is_form_body
from .model import REDACTED

__all__ = ["WILDCARD", "digest_of_begin", "digest_parts", "has_redacted", "request_digest", "without_nulls"]

WILDCARD = 0
"""The digest of a recorded request that must always be checked (it holds ``"REDACTED"``)."""

REDACTED_BYTES = REDACTED.encode()


def has_redacted(node: Any) -> bool:
    """Whether JSON data holds a ``"REDACTED"`` value anywhere (such a recording matches
    more than the bodies equal to it, so it cannot be found by equality alone)."""
    if isinstance(node, str):
        return node == REDACTED
    if isinstance(node, dict):
        return any(has_redacted(v) for v in node.values())
    if isinstance(node, list):
        return any(has_redacted(v) for v in node)
    return False


def without_nulls(node: Any) -> Any:
    """JSON data without the object fields whose value is ``null`` (at any depth; a
    ``null`` in a list stays: it holds a place)."""
    if isinstance(node, dict):
        return {k: without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [without_nulls(v) for v in node]
    return node


def _number(text: str) -> float | int:
    """A JSON number as matching compares it: an integral float is that integer."""
    f = float(text)
    return int(f) if f.is_integer() else f


# One encoder and one decoder for every digest: ``json.dumps`` and ``json.loads`` with
# arguments build a new one per call (a third of a digest's time); these give the same
# text and the same data (``json.loads`` of bytes: the encoding it detects, surrogatepass).
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
_decode = json.JSONDecoder(parse_float=_number).decode


def _loads(body: bytes) -> Any:
    return _decode(body.decode(json.detect_encoding(body), "surrogatepass"))


def request_digest(
    method: str,
    url: str,
    body: bytes,
    *,
    recorded: bool = True,
    strip: Callable[[Any], Any] | None = None,
    content_type: str | None = None,
) -> int:
    """A 64-bit digest of a request as matching sees it.

    This is digest version :data:`~streamtape.cassette.index.DIGEST_VERSION` (3; 2 hashed
    form bodies as bytes, before they were compared as fields; 1 kept ``null`` fields,
    before a ``null`` matched an absent field):
    change what goes into it and that version must change too, or readers would
    trust digests stored by another streamtape.

    ``recorded``: a recorded request holding ``"REDACTED"`` in its query or
    JSON body gets :data:`WILDCARD` (it may match requests of any digest).
    ``strip`` removes ignored fields from a parsed JSON body. ``content_type``: the
    request's, which says whether the body is a form.
    """
    parts = urlsplit(url)
    query = tuple(parse_qsl(parts.query, keep_blank_values=True))
    form = form_pairs(body) if is_form_body(body, content_type) else None
    return digest_parts(method, parts.path or "/", query, body, recorded=recorded, strip=strip, form=form)


def digest_parts(
    method: str,
    path: str,
    query: Sequence[tuple[str, str]],
    body: bytes,
    *,
    recorded: bool = True,
    strip: Callable[[Any], Any] | None = None,
    form: Sequence[tuple[str, str]] | None = None,
) -> int:
    """:func:`request_digest` of a request already split (a :class:`RequestKey`'s parts;
    ``form``: a form body's fields, None for another body)."""
    pairs = sorted(query)
    if recorded and any(v == REDACTED for _, v in pairs):
        return WILDCARD
    h = blake2b(digest_size=8)
    h.update(f"{method.upper()}\n{path}\n{json.dumps(pairs)}\n".encode())
    if form is not None:
        fields = sorted(form)
        if recorded and any(v == REDACTED for _, v in fields):
            return WILDCARD
        h.update(b"F")
        h.update(json.dumps(fields).encode())
        return int.from_bytes(h.digest(), "little") or 1
    data: Any = None
    is_json = False
    if body and body.lstrip()[:1] in (b"{", b"["):
        try:
            data = _loads(body)
            is_json = True
        except ValueError:
            pass
    if is_json:
        # The walk only when the bytes could hold the placeholder: literally, escaped
        # (\u), or in a UTF-16/32 body (NUL bytes). A writer digests every request.
        if recorded and (REDACTED_BYTES in body or b"\\u" in body or b"\x00" in body) and has_redacted(data):
            return WILDCARD
        if strip is not None:
            data = strip(data)
        if b"null" in body or b"\x00" in body:
            data = without_nulls(data)
        h.update(b"J")
        h.update(_canonical(data).encode())
    else:
        h.update(b"R")
        h.update(body)
    return int.from_bytes(h.digest(), "little") or 1


def digest_of_begin(rec: dict[str, Any]) -> int | None:
    """The digest of a begin record's request, as a writer stores it (None: not a request)."""
    req = rec.get("request")
    if not isinstance(req, dict):
        return None
    method, url, body = req.get("method"), req.get("url"), req.get("body")
    if not (isinstance(method, str) and isinstance(url, str) and isinstance(body, bytes)):
        return None
    headers = req.get("headers")
    content_type = header_value(
        [tuple(p) for p in headers if isinstance(p, list | tuple) and len(p) == 2], "content-type"
    ) if isinstance(headers, list) else None
    return request_digest(method, url, body, content_type=content_type)
