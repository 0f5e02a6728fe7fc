"""Pairing whole cassettes by request: which recording of A answers which of B.

Two recordings are of the same request when the method, the path with its
query and the body *as data* agree: a JSON body is compared as a value, so
key order and spacing (which differ between SDKs and between runs of one
SDK) never split a pair. What is left is then paired once more without the
top-level ``model`` field, because the common reason to diff is one prompt
sent to two backends that name their models differently. Headers never take
part: they carry request ids and SDK versions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..cassette.model import Interaction, Request

PairedBy = Literal["request", "request except model", "only interaction", "chosen", "pair id"]
"""How two interactions came to be compared: the same request, the same but for
``model``, each side held exactly one, the caller chose them (``FILE#N``), or
one client call of a shadow recording (:mod:`.session`)."""

BodyKey = tuple[Literal["json"], str] | tuple[Literal["bytes"], bytes]
RequestKey = tuple[str, str, BodyKey]


class _MISSING:
    """A JSON key that is absent, told apart from one whose value is null.

    The class itself is the value (never instantiated), as h11 does with its
    states, so it has a type of its own (``type[_MISSING]``) and no ``Any``."""


def body_key(body: bytes, *, drop: Iterable[str] = ()) -> BodyKey:
    """A request body as data: JSON compared as values (key order and spacing do not
    matter), anything else as bytes. Top-level JSON keys in ``drop`` are left out."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return ("bytes", body)
    if isinstance(doc, dict):
        dropped = set(drop)
        doc = {k: v for k, v in doc.items() if k not in dropped}
    return ("json", json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def request_key(r: Request, *, drop: Iterable[str] = ()) -> RequestKey:
    """What pairs two recordings of one request: method, path with query, body as data."""
    return (r.method.upper(), r.path, body_key(r.body, drop=drop))


@dataclass(frozen=True)
class Pairing:
    pairs: tuple[tuple[int, int, PairedBy], ...]
    """(index in A, index in B, how): how is ``"request"`` (same method, path and body),
    ``"request except model"`` or ``"only interaction"`` (each side holds one)."""
    unpaired_a: tuple[int, ...]
    unpaired_b: tuple[int, ...]


_PASSES: tuple[tuple[PairedBy, tuple[str, ...]], ...] = (
    ("request", ()),
    ("request except model", ("model",)),
)
"""Pairing passes in order, with the top-level JSON keys each leaves out."""


def pair(a: Sequence[Interaction], b: Sequence[Interaction]) -> Pairing:
    """Pair interactions by request: first the same method, path and JSON body; then,
    for what is left, the same but for the top-level ``model`` field (two backends
    serve one prompt under different model names). Repeats pair in recorded order.
    When each side holds exactly one interaction, they are compared whatever the
    requests (the report says how they differ)."""
    if len(a) == 1 and len(b) == 1:
        how: PairedBy = (
            "request"
            if request_key(a[0].request) == request_key(b[0].request)
            else "only interaction"
        )
        return Pairing(((0, 0, how),), (), ())
    pairs: list[tuple[int, int, PairedBy]] = []
    left_a = list(range(len(a)))
    left_b = list(range(len(b)))
    for how, drop in _PASSES:
        waiting: dict[RequestKey, list[int]] = {}
        for j in left_b:
            waiting.setdefault(request_key(b[j].request, drop=drop), []).append(j)
        still_a = []
        for i in left_a:
            queue = waiting.get(request_key(a[i].request, drop=drop))
            if queue:
                j = queue.pop(0)
                pairs.append((i, j, how))
                left_b.remove(j)
            else:
                still_a.append(i)
        left_a = still_a
    pairs.sort()
    return Pairing(tuple(pairs), tuple(left_a), tuple(left_b))


def request_differences(a: Request, b: Request) -> tuple[str, ...]:
    """One line per way two requests differ (method, path, body fields)."""
    out = []
    if a.method.upper() != b.method.upper():
        out.append(f"method {a.method} vs {b.method}")
    if a.path != b.path:
        out.append(f"path {a.path} vs {b.path}")
    ka, kb = body_key(a.body), body_key(b.body)
    if ka != kb:
        if ka[0] == "json" and kb[0] == "json":
            da, db = json.loads(ka[1]), json.loads(kb[1])
            if isinstance(da, dict) and isinstance(db, dict):
                keys = sorted(
                    k for k in set(da) | set(db) if da.get(k, _MISSING) != db.get(k, _MISSING)
                )
                out.append("body fields differ: " + ", ".join(keys))
            else:
                out.append("bodies differ")
        else:
            out.append(f"bodies differ ({len(a.body)} vs {len(b.body)} bytes)")
    return tuple(out)
