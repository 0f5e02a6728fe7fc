"""VCR.py cassettes: read them (YAML or JSON, as vcrpy and pytest-recording write them), write them.

The format (vcrpy's ``CASSETTE_FORMAT_VERSION`` 1, unchanged since vcrpy 1.0)::

    version: 1
    interactions:
    - request:  {method, uri, body, headers: {name: [value]}}
      response: {status: {code, message}, headers: {name: [value, ...]}, body: {string: ...}}

``body.string`` is text when the bytes were UTF-8 and a YAML ``!!binary``
(base64) value otherwise; the JSON serializer can only hold text. vcrpy's own
loader also accepts a few Python tags older cassettes contain
(``!!python/unicode``, ``!!python/tuple``, a pickled ``BytesIO`` request
body): so does this one, and it refuses every other tag as vcrpy does.
Cassettes that vcrpy's httpx stub wrote before 4.2 have ``status_code`` /
``content`` / ``http_version`` instead of ``status`` / ``body``; they read too.
A cassette may also carry ``metadata`` (vcrpy 9.4), which holds nothing for us.

pydantic-ai's serializer (its ``tests/json_body_serializer.py``, the largest public
source of LLM cassettes) writes a JSON body parsed, as ``parsed_body`` in place of
``body``, on requests and responses alike; its loader turns it back with
``json.dumps``. So does this one, and the response's ``Content-Length`` is set to
the length of those bytes (the original spacing is gone).

One interaction that does not read (a field this code does not know, a missing
status) is left out, said in a note naming it, and the file's others import; a
file none of whose interactions read is an error.

Reading is strict about structure, so a cassette from a newer vcrpy with
fields this code does not know fails with their names instead of importing
half of what it holds.

vcrpy records a gzip body two ways (measured with vcrpy 9.4): httpx's stub
stores the bytes as they came (still gzip, header kept); the requests stub
stores what urllib3 decoded, with the ``Content-Encoding: gzip`` header kept.
Each replays wrongly for the other client: requests' replay decodes a second
time, httpx's replay of the decoded body fails to gunzip. Both forms read
here (:func:`~streamtape.interop.common.settle_coding`). The writer stores
the decoded body without ``Content-Encoding`` and with a true
``Content-Length``, the one form that both clients replay.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from io import BytesIO
from pathlib import Path
from typing import Any

import yaml

from ..capture.redaction import Redaction
from ..cassette.model import Headers, Interaction, Outcome, Request
from ..errors import InteropError
from ..wire import drop_headers, reason_phrase, with_length
from .common import (
    Imported,
    Malformed,
    Notes,
    Source,
    content_coding,
    decode_body,
    imported,
    one_piece_response,
    settle_coding,
)

FORMAT_VERSION = 1
"""The cassette format vcrpy 1.0 to 9.4 writes (``vcr.serialize.CASSETTE_FORMAT_VERSION``)."""

_TOP_KEYS = frozenset({"version", "interactions", "metadata"})
_INTERACTION_KEYS = frozenset({"request", "response"})
_REQUEST_KEYS = frozenset({"method", "uri", "body", "headers", "parsed_body"})
# ``url``: vcrpy's aiohttp stub stored it in 2.x-4.x; status_code/http_version/content:
# its httpx stub before 4.2.
# ``parsed_body``: pydantic-ai's serializer (a JSON body written parsed).
_RESPONSE_KEYS = frozenset({"status", "headers", "body", "url", "status_code", "http_version", "content",
                            "parsed_body"})
_BODY_KEYS = frozenset({"string"})

_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _CassetteLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """A safe loader plus the benign Python tags vcrpy's own loader accepts."""


def _python_str(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


def _python_tuple(loader: yaml.SafeLoader, node: yaml.Node) -> tuple[Any, ...]:
    return tuple(loader.construct_sequence(node))  # type: ignore[arg-type]


def _bytesio(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
    mapping = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    state = mapping.get("state") or (b"",)
    data = state[0] if state else b""
    return data.encode() if isinstance(data, str) else bytes(data or b"")


def _iterator(loader: yaml.SafeLoader, node: yaml.Node) -> list[Any]:
    mapping = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    args: Any = mapping.get("args") or ([],)
    return list(args[0]) if args else []


for _tag, _fn in (
    ("tag:yaml.org,2002:python/str", _python_str),
    ("tag:yaml.org,2002:python/unicode", _python_str),
    ("tag:yaml.org,2002:python/tuple", _python_tuple),
    ("tag:yaml.org,2002:python/object/new:_io.BytesIO", _bytesio),
    ("tag:yaml.org,2002:python/object/apply:builtins.iter", _iterator),
):
    _CassetteLoader.add_constructor(_tag, _fn)


def parse(path: Path, data: bytes) -> Any:
    """The cassette document: JSON when it looks like JSON, else YAML."""
    text = data.decode("utf-8", errors="replace")
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            pass  # flow-style YAML also starts with "{"
    try:
        return yaml.load(text, Loader=_CassetteLoader)
    except yaml.constructor.ConstructorError as e:
        raise InteropError(path, f"not a VCR.py cassette: YAML tag {e.problem or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InteropError(path, f"not YAML{where}: {problem}") from None


def looks_like(doc: Any) -> bool:
    return isinstance(doc, dict) and "interactions" in doc


def _unknown(keys: Iterable[Any], known: frozenset[str], where: str) -> str | None:
    extra = sorted(str(k) for k in keys if k not in known)
    if not extra:
        return None
    return (
        f"{where} has field{'s' if len(extra) > 1 else ''} {', '.join(extra)} this streamtape does "
        f"not know (a cassette from a newer vcrpy? it reads format {FORMAT_VERSION}, "
        "as vcrpy 1.0 to 9.4 write it)"
    )


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, BytesIO):
        return value.getvalue()
    if isinstance(value, (list, tuple)):
        return b"".join(_as_bytes(v) for v in value)
    raise TypeError(f"a body of type {type(value).__name__}")


def _parsed(value: Any) -> bytes:
    """A ``parsed_body`` as the bytes pydantic-ai's loader gives the client (``json.dumps``)."""
    return json.dumps(value).encode()


def _vcr_headers(raw: Any) -> Headers:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise TypeError("headers are not a mapping")
    out: list[tuple[str, str]] = []
    for name, values in raw.items():
        for v in values if isinstance(values, (list, tuple)) else [values]:
            out.append((str(name), str(v)))
    return tuple(out)


def read(
    path: Path, data: bytes, *, redaction: Redaction, labels: Mapping[str, str] | None = None
) -> Imported:
    """Interactions of a VCR.py cassette, in file order (repeated requests stay repeated)."""
    doc = parse(path, data)
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "request" in doc[0]:
        raise InteropError(
            path, "a VCR.py cassette in the format before vcrpy 1.0: run python -m vcr.migration on it first"
        )
    if not looks_like(doc):
        raise InteropError(path, "not a VCR.py cassette (no 'interactions' list)")
    version = doc.get("version")
    if version != FORMAT_VERSION:
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise InteropError(
                path,
                f"VCR.py cassette format version {version} is newer than this streamtape reads "
                f"({FORMAT_VERSION})",
            )
        raise InteropError(path, f"not a VCR.py cassette: format version {version!r} (expected 1)")
    problem = _unknown(doc, _TOP_KEYS, "the cassette")
    if problem:
        raise InteropError(path, problem)
    items = doc["interactions"]
    if not isinstance(items, list):
        raise InteropError(path, "not a VCR.py cassette ('interactions' is not a list)")
    notes = Notes()
    out: list[Interaction] = []
    bad: list[str] = []
    for n, item in enumerate(items):
        try:
            out.append(_interaction(item, n, notes, redaction, labels))
        except Malformed as e:
            bad.append(f"interaction {n}: {e}")
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            detail = f"no {e}" if isinstance(e, KeyError) else str(e)
            bad.append(f"interaction {n}: malformed ({detail})")
    if bad and not out:
        more = f" (and {len(bad) - 1} more like it)" if len(bad) > 1 else ""
        raise InteropError(path, bad[0] + more)
    for line in bad:
        notes.add(f"{line}: left out, the other interactions imported")
    return Imported(Source.VCR, tuple(out), tuple(f"{path}: {line}" for line in notes.lines), len(out))



def _interaction(
    item: Any, n: int, notes: Notes, redaction: Redaction, labels: Mapping[str, str] | None
) -> Interaction:
    if not isinstance(item, dict):
        raise Malformed("not a mapping")
    for keys, known, where in (
        (item, _INTERACTION_KEYS, "it"),
        (item["request"], _REQUEST_KEYS, "its request"),
        (item["response"], _RESPONSE_KEYS, "its response"),
    ):
        if not isinstance(keys, dict):
            raise Malformed(f"{where} is not a mapping")
        problem = _unknown(keys, known, where)
        if problem:
            raise Malformed(problem)
    rq, rs = item["request"], item["response"]
    request = Request(
        method=str(rq["method"]),
        url=str(rq["uri"]),
        headers=_vcr_headers(rq.get("headers")),
        body=_parsed(rq["parsed_body"]) if "parsed_body" in rq else _as_bytes(rq.get("body")),
    )
    if "status_code" in rs:  # vcrpy's httpx stub before 4.2
        status, reason = int(rs["status_code"]), None
        version = str(rs.get("http_version") or "HTTP/1.1")
        body = _as_bytes(rs.get("content"))
    else:
        st = rs["status"]
        status = int(st["code"])
        reason = st.get("message")
        version = "HTTP/1.1"
        raw = rs.get("body") or {}
        if not isinstance(raw, dict):
            raise Malformed("its response body is not a mapping")
        problem = _unknown(raw, _BODY_KEYS, "its response body")
        if problem:
            raise Malformed(problem)
        body = _parsed(rs["parsed_body"]) if "parsed_body" in rs else _as_bytes(raw.get("string"))
    headers = _vcr_headers(rs.get("headers"))
    if "parsed_body" in rs:
        headers = with_length(headers, len(body))
    body, headers, dropped = settle_coding(body, headers)
    if dropped:
        notes.add(
            f"the cassette holds {dropped} bodies decoded (vcrpy recording requests does this): "
            f"stored decoded, without their Content-Encoding header"
        )
    response = one_piece_response(
        status=status,
        reason=str(reason) if reason is not None else None,
        version=version,
        headers=headers,
        body=body,
        headers_at_ns=0,
        body_at_ns=0,
    )
    return imported(request, response, Source.VCR, dict(labels or {}), redaction, end_ns=0)


# --------------------------------------------------------------------------
# Writing


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _headers_out(headers: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in headers:
        out.setdefault(k, []).append(v)
    return out


def document(interactions: Iterable[Interaction]) -> tuple[dict[str, Any], list[str]]:
    """A VCR.py cassette document of the interactions, and notes on what it could not hold.

    Each body is whole and decoded; ``Content-Encoding`` and the framing headers
    go, ``Content-Length`` is its length. An interaction with no response head
    cannot be written (vcrpy has no such thing) and is left out, said in a note.
    """
    notes = Notes()
    items: list[dict[str, Any]] = []
    for n, ix in enumerate(interactions):
        r = ix.response
        if ix.websocket is not None:
            notes.add(f"interaction {n}: a WebSocket session: VCR cassettes hold HTTP only, left out")
            continue
        if r is None:
            notes.add(f"interaction {n}: no response head ({ix.outcome}): a VCR cassette cannot hold it, left out")
            continue
        body = r.body
        headers = r.headers
        coding = content_coding(headers)
        if coding is not None:
            decoded = decode_body(body, coding)
            if decoded is None:
                notes.add(
                    f"interaction {n}: the body is not valid {coding}: written as recorded, "
                    "with its Content-Encoding header"
                )
            else:
                body = decoded
                headers = drop_headers(headers, "content-encoding")
        if ix.outcome is not Outcome.COMPLETE:
            notes.add(f"interaction {n} ended {ix.outcome}: the cassette holds the body that arrived, not the cut")
        headers = (*drop_headers(headers, "content-length", "transfer-encoding"), ("Content-Length", str(len(body))))
        items.append(
            {
                "request": {
                    "body": _text_or_bytes(ix.request.body) if ix.request.body else None,
                    "headers": _headers_out(ix.request.headers),
                    "method": ix.request.method,
                    "uri": ix.request.url,
                },
                "response": {
                    "body": {"string": _text_or_bytes(body)},
                    "headers": _headers_out(headers),
                    "status": {"code": r.status, "message": r.reason or reason_phrase(r.status)},
                },
            }
        )
    return {"interactions": items, "version": FORMAT_VERSION}, notes.lines


def dumps(doc: dict[str, Any], *, as_json: bool) -> str:
    """The document in vcrpy's own serializations (its YAML style, or its JSON with indent 4).

    Raises ValueError when JSON is asked for and a body is not UTF-8 text
    (vcrpy's JSON serializer cannot hold bytes either).
    """
    if as_json:
        for n, item in enumerate(doc["interactions"]):
            for side in ("request", "response"):
                body = item[side]["body"]
                value = body.get("string") if isinstance(body, dict) else body
                if isinstance(value, bytes):
                    raise ValueError(
                        f"interaction {n}: the {side} body is not UTF-8 text, which a JSON VCR "
                        "cassette cannot hold: write YAML (.yaml) instead"
                    )
        return json.dumps(doc, indent=4) + "\n"
    return yaml.dump(doc, Dumper=_SafeDumper)
