"""Credentials in request bodies: finding the ones redaction would let through.

Header, query and cookie secrets are redacted by default (:mod:`.redaction`),
but a JSON request body is redacted only in the fields the user names
(``--redact-field``; a form body also in its OAuth credential fields): the recorder cannot blank every string that might be a
key without breaking matching on prompts. So instead it looks at each request
body as it is about to be written and says, once per field, "this looks like a
credential, and this is the option that keeps it out".

What looks like a credential (a string value, any depth of objects and lists):

* an OpenAI- or Anthropic-style secret key, ``sk-`` and at least 16 more
  key characters, in a field of any name;
* a JSON Web Token (``eyJ...``, three base64url parts), in a field of any name;
* in a field named like a secret (one of the words of its name is ``key``,
  ``apikey``, ``token``, ``secret``, ``password``, ``passwd``, ``credential``,
  ``credentials``, ``auth`` or ``authorization``; ``max_tokens`` is not, ``keywords`` is not): a
  long hex string (32 or more digits) or a long base64 / base64url token (24
  or more characters with upper case, lower case and digits). ``Bearer`` in
  front is skipped.

Pure code. A body whose bytes show none of these signs (no ``sk-``, no
``eyJ``, no string value after a secret-like name) is not parsed at all, so
the common case costs one regular-expression scan.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum

from ..cassette.model import REDACTED
from ..wire import form_pairs, is_form_body

__all__ = ["Credential", "CredentialKind", "find_credentials", "looks_secret_name"]


class CredentialKind(StrEnum):
    """Why a value looks like a credential; the value is the words a warning uses."""

    SECRET_KEY = "a secret key (sk-...)"
    JWT = "a JSON Web Token"
    HEX_TOKEN = "a long hex token"
    BASE64_TOKEN = "a long base64 token"


@dataclass(frozen=True, slots=True)
class Credential:
    """A body field whose value looks like a credential."""

    path: str
    """Where it is: ``auth.api_key``, ``items[2].token`` (``[n]`` for list positions)."""
    field: str
    """The object key holding it: the name ``--redact-field`` takes to blank it."""
    kind: CredentialKind


_SECRET_KEY = re.compile(r"sk-[A-Za-z0-9_\-]{16,}")
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*")
_HEX = re.compile(r"[0-9a-fA-F]{32,}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}|[A-Za-z0-9_\-]{24,}")
_UPPER, _LOWER, _DIGIT = re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"[0-9]")

_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials", "auth", "authorization"}
)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")

# The cheap first look at the raw bytes: a sign that a parse could find something.
_SIGNS = re.compile(
    rb'sk-[A-Za-z0-9_\-]{16}|eyJ[A-Za-z0-9_\-]{8}'
    rb'|"[^"\\]*(?i:key|token|secret|passw|credential|auth)[^"\\]*"\s*:\s*\[?\s*"'
)


def looks_secret_name(name: str) -> bool:
    """Whether one of the words of a field name says "secret" (``api_key``, ``accessToken``)."""
    return any(w.lower() in _SECRET_WORDS for w in _WORD.findall(name))


def _kind(value: str, secret_name: bool) -> CredentialKind | None:
    v = value.strip()
    if v[:7].lower() == "bearer ":
        v = v[7:].strip()
    if _SECRET_KEY.fullmatch(v):
        return CredentialKind.SECRET_KEY
    if _JWT.fullmatch(v):
        return CredentialKind.JWT
    if not secret_name:
        return None
    if _HEX.fullmatch(v):
        return CredentialKind.HEX_TOKEN
    if _BASE64.fullmatch(v) and _UPPER.search(v) and _LOWER.search(v) and _DIGIT.search(v):
        return CredentialKind.BASE64_TOKEN
    return None


def find_credentials(body: bytes, content_type: str | None = None) -> list[Credential]:
    """The fields of a JSON or form-urlencoded request body that look like credentials,
    in document order (a form field already ``REDACTED`` is not one).

    A body that is neither (by its content type, or because it does not
    parse) has none; so has a string at the top level, which no field names.
    """
    if body and is_form_body(body, content_type):
        return [Credential(k, k, kind) for k, v in form_pairs(body)
                if v != REDACTED and (kind := _kind(v, looks_secret_name(k)))]
    if not body or (content_type and "json" not in content_type.lower()):
        return []
    if not _SIGNS.search(body):
        return []
    try:
        doc = json.loads(body)
    except ValueError:  # UnicodeDecodeError is a ValueError
        return []
    found: list[Credential] = []

    def walk(node: object, path: str, field: str | None, secret_name: bool) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                key = str(k)
                walk(v, f"{path}.{key}" if path else key, key, looks_secret_name(key))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]", field, secret_name)
        elif isinstance(node, str) and field is not None and (kind := _kind(node, secret_name)):
            found.append(Credential(path, field, kind))

    walk(doc, "", None, False)
    return found
