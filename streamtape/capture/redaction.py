"""Secrets: what a recording blanks out, and the placeholder it writes instead.

Both sides of streamtape use this vocabulary: the recorder replaces a secret
with :data:`REDACTED` before it reaches a cassette, and the matcher treats a
recorded ``REDACTED`` as matching anything (see :mod:`streamtape.match.matcher`).
Pure code; it depends only on the cassette's values.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

from ..cassette.model import REDACTED, Headers, Request
from ..wire import header_value, is_form_body
from .response_secrets import DEFAULT_REDACT_RESPONSE_FIELDS

__all__ = ["DEFAULT_REDACT_FORM_FIELDS", "DEFAULT_REDACT_HEADERS", "DEFAULT_REDACT_QUERY", "REDACTED", "SIGNED_CALL_HEADERS", "Redaction"]


DEFAULT_REDACT_HEADERS = (
    "authorization",  # bearer keys, and the SigV4 signature of a Bedrock call
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",  # Azure OpenAI
    "x-goog-api-key",  # the Gemini API (google-genai)
    "x-amz-security-token",  # an AWS session token (temporary credentials)
)
DEFAULT_REDACT_QUERY = ("key", "api_key", "token")  # key=: the Gemini API's key in the URL

DEFAULT_REDACT_FORM_FIELDS = (
    "apikey",  # IBM IAM: grant_type=urn:ibm:params:oauth:grant-type:apikey&apikey=... (watsonx.ai)
    "api_key",  # the query's name for a key, in a form body
    "password",  # RFC 6749 4.3.2: the resource owner password grant
    "client_secret",  # RFC 6749 2.3.1: the client's password in the body
    "refresh_token",  # RFC 6749 6: a long-lived token that mints access tokens
    "access_token",  # RFC 6750 2.2: a bearer token as a form field; IBM IAM's "assume" grant
    "assertion",  # RFC 7521 4.1 / RFC 7523 2.1: a signed JWT that is itself the grant
    "client_assertion",  # RFC 7523 2.2: a signed JWT that authenticates the client
    "subject_token",  # RFC 8693 2.1: the token a token exchange trades in
    "actor_token",  # RFC 8693 2.1
    "cr_token",  # IBM IAM: a compute resource token traded for a trusted profile's token
    "token",  # RFC 7009 2.1 / RFC 7662 2.1: the token to revoke or introspect
    "code_verifier",  # RFC 7636 4.5: with a live code, it is all a public client needs for tokens
)
"""Form-body (``application/x-www-form-urlencoded``) fields redacted by default: the
credentials of OAuth 2.0 and IBM IAM token calls. Not ``code`` (RFC 6749 4.1.3): it is
single-use and spent by the exchange being recorded, and the name is common in other forms;
``--redact-field code`` adds it."""

SIGNED_CALL_HEADERS = frozenset({
    "authorization",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-amz-security-token",
    "amz-sdk-invocation-id",
    "amz-sdk-request",
})
"""Headers that change on every signed call (AWS SigV4: the signature, its date and body
hash, boto3's invocation id and attempt count): matching never compares them, even when
named in ``match_headers``, so a recording replays to an SDK that signs afresh."""

@dataclass(frozen=True)
class Redaction:
    """What to blank out at record time. ``enabled=False`` keeps everything."""

    enabled: bool = True
    headers: frozenset[str] = frozenset(DEFAULT_REDACT_HEADERS)
    query: frozenset[str] = frozenset(DEFAULT_REDACT_QUERY)
    body_fields: frozenset[str] = frozenset()
    form_fields: frozenset[str] = frozenset(DEFAULT_REDACT_FORM_FIELDS)
    """Form-body fields to blank: the defaults and the user's ``body_fields``."""
    response_fields: frozenset[str] = frozenset(DEFAULT_REDACT_RESPONSE_FIELDS)
    """String fields of a JSON answer masked in place (:mod:`.response_secrets`): the token
    fields and the user's ``body_fields``."""

    @classmethod
    def build(
        cls,
        enabled: bool = True,
        extra_headers: Iterable[str] = (),
        extra_query: Iterable[str] = (),
        body_fields: Iterable[str] = (),
    ) -> Redaction:
        return cls(
            enabled=enabled,
            headers=frozenset(DEFAULT_REDACT_HEADERS) | {h.strip().lower() for h in extra_headers},
            query=frozenset(DEFAULT_REDACT_QUERY) | {q.strip() for q in extra_query},
            body_fields=(fields := frozenset(f.strip() for f in body_fields)),
            form_fields=frozenset(DEFAULT_REDACT_FORM_FIELDS) | fields,
            response_fields=frozenset(DEFAULT_REDACT_RESPONSE_FIELDS) | fields,
        )

    def redact_headers(self, headers: Headers) -> Headers:
        if not self.enabled:
            return headers
        return tuple((k, REDACTED if k.lower() in self.headers else v) for k, v in headers)

    def redact_url(self, url: str) -> str:
        if not self.enabled:
            return url
        parts = urlsplit(url)
        if not parts.query:
            return url
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if not any(k in self.query for k, _ in pairs):
            return url
        query = urlencode([(k, REDACTED if k in self.query else v) for k, v in pairs])
        return urlunsplit(parts._replace(query=query))

    def redact_form(self, body: bytes) -> bytes:
        """Blank the credential fields of a form body (:attr:`form_fields`), keeping every
        other field, the order and the encoding byte for byte as sent."""
        out, changed = [], False
        for part in body.split(b"&"):
            name, eq, _ = part.partition(b"=")
            if eq and unquote_plus(name.decode("latin-1")) in self.form_fields:
                part, changed = name + b"=" + REDACTED.encode(), True
            out.append(part)
        return b"&".join(out) if changed else body

    def redact_body(self, body: bytes, content_type: str | None) -> bytes:
        """Blank the credential fields of a form body, and the named JSON fields at any
        depth; other bodies are left alone."""
        if not self.enabled or not body:
            return body
        if is_form_body(body, content_type):
            return self.redact_form(body)
        if not self.body_fields:
            return body
        if content_type and "json" not in content_type.lower():
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        changed = False

        def walk(node: Any) -> Any:
            nonlocal changed
            if isinstance(node, dict):
                out = {}
                for k, v in node.items():
                    if k in self.body_fields:
                        out[k] = REDACTED
                        changed = True
                    else:
                        out[k] = walk(v)
                return out
            if isinstance(node, list):
                return [walk(v) for v in node]
            return node

        new = walk(doc)
        return json.dumps(new, ensure_ascii=False).encode() if changed else body

    def request(self, r: Request) -> Request:
        if not self.enabled:
            return r
        return replace(
            r,
            url=self.redact_url(r.url),
            headers=self.redact_headers(r.headers),
            body=self.redact_body(r.body, header_value(r.headers, "content-type")),
        )
