"""What a shadow is sent, from the request the client sent the primary. Pure code.

The shadow gets the client's request (method, path with query, headers, body)
with these changes, each for a reason:

- the URL's origin is the shadow's (and its path prefix goes first);
- ``Host``, ``Content-Length`` and hop-by-hop headers are left to the HTTP
  client, which writes them for the shadow's connection and body;
- credentials meant for the primary (``Authorization``, ``X-Api-Key``,
  ``Api-Key``, ``Cookie``, ``Proxy-Authorization`` and the ``key``,
  ``api_key``, ``token`` query parameters) are not passed on: the client
  gave them to one backend, not to every backend the recorder mirrors to. A
  shadow that needs a key gets its own with ``--shadow-header``;
- ``--shadow-header`` values are set (an empty value removes the header);
- ``--shadow-path`` moves the request to another path, and rewrites a chat
  body as the other API's when the two paths are OpenAI's and Ollama's chat
  endpoints;
- ``--shadow-model`` replaces the JSON body's top-level ``model``.

:func:`stored_request` is the request as a cassette keeps it: what was sent,
with every ``--shadow-header`` value replaced by ``REDACTED`` whatever the
redaction settings, since those values were never the client's to record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..capture.redaction import DEFAULT_REDACT_QUERY
from ..cassette.model import REDACTED, Headers, Request
from ..wire import NOT_FORWARDED, header_value
from .chat_mapping import JsonObject, Unmappable, translate
from .targets import ShadowTarget

CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"})
"""Request headers that carry the client's credentials for the primary."""
CREDENTIAL_QUERY = frozenset(DEFAULT_REDACT_QUERY)
_LEFT_TO_CLIENT = NOT_FORWARDED | {"host"}
"""What the shadow's HTTP client writes for its own connection and body, and the
shadow's ``Host`` (lower case)."""


@dataclass(frozen=True)
class ShadowRequest:
    """One request as a shadow gets it."""

    method: str
    url: str
    headers: Headers
    body: bytes
    secret_headers: frozenset[str]
    """Lower-case names of the ``--shadow-header`` values set on it (never stored)."""


def _query_without_credentials(query: str) -> str:
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(k in CREDENTIAL_QUERY for k, _ in pairs):
        return query
    return urlencode([(k, v) for k, v in pairs if k not in CREDENTIAL_QUERY])


def _json_object(body: bytes) -> JsonObject | None:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _body(target: ShadowTarget, request: Request, path: str) -> tuple[str, bytes]:
    """The path and body for the shadow; :class:`Unmappable` when a rewrite cannot be done."""
    mapping = target.path_map(path)
    translation = mapping.translation if mapping else None
    new_path = mapping.target if mapping else path
    if translation is None and target.model is None:
        return new_path, request.body
    encoding = request.header("content-encoding")
    doc = _json_object(request.body) if not encoding else None
    if doc is None:
        if translation is None:
            return new_path, request.body  # --shadow-model: no JSON model to replace
        why = f"compressed ({encoding})" if encoding else "not a JSON object"
        raise Unmappable(f"the request body is {why}; it cannot be rewritten for {mapping.target if mapping else path}")
    if translation is not None:
        doc = translate(doc, *translation)
    if target.model is not None:
        doc = {**doc, "model": target.model}
    return new_path, json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def shadow_request(target: ShadowTarget, request: Request) -> ShadowRequest:
    """The request ``target`` is sent for the client's ``request`` (see the module docstring)."""
    parts = urlsplit(request.url)
    path, body = _body(target, request, parts.path or "/")
    query = _query_without_credentials(parts.query)
    url = f"{target.origin}{target.prefix}{path}" + (f"?{query}" if query else "")
    overridden = {name.lower() for name, _ in target.headers}
    headers = [
        (k, v)
        for k, v in request.headers
        if (lk := k.lower()) not in _LEFT_TO_CLIENT and lk not in CREDENTIAL_HEADERS and lk not in overridden
    ]
    headers += [(name, value) for name, value in target.headers if value != ""]
    if body is not request.body and header_value(headers, "content-type") is None:
        headers.append(("Content-Type", "application/json"))
    return ShadowRequest(
        method=request.method,
        url=url,
        headers=tuple(headers),
        body=body,
        secret_headers=frozenset(name.lower() for name, value in target.headers if value != ""),
    )


def stored_request(sent: Request, secret_headers: frozenset[str]) -> Request:
    """``sent`` (the request as it went out, with the client's own headers) with every
    ``--shadow-header`` value replaced by ``REDACTED``."""
    if not secret_headers:
        return sent
    return replace(
        sent,
        headers=tuple((k, REDACTED if k.lower() in secret_headers else v) for k, v in sent.headers),
    )
