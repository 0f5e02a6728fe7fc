"""Secrets in a recorded JSON answer: token fields masked in place, piece by piece.

An OAuth or IBM IAM token call answers with its tokens in the JSON body
(``{"access_token": "eyJ...", "refresh_token": "...", ...}``). Recorded with
``record --all``, that body would carry a live credential into the cassette.
:class:`FieldMasker` overwrites the value of each such field where it stands,
byte for byte the same length, so the pieces keep their boundaries and the
response its ``Content-Length``:

- a JWT (``header.payload.signature``) keeps its header and payload (clients
  read the expiry from the payload: ibm_watsonx_ai does) and loses its
  signature, which is what makes it a credential;
- any other value is overwritten whole.

The mask is ``REDACTED`` repeated to the value's length: letters that are
valid base64url, so a masked JWT still decodes.

The body comes in pieces, and a key or a value may be split across them. The
masker scans what it has been given and says how many bytes are *decided*
(:attr:`FieldMasker.decided`): bytes before that point are final (masked
where needed), bytes after it may still turn out to be a key's start. The
recorder hands a piece to the writer only once all its bytes are decided.
Pure code, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["DEFAULT_REDACT_RESPONSE_FIELDS", "FieldMasker", "mask_of"]

DEFAULT_REDACT_RESPONSE_FIELDS = ("access_token", "refresh_token", "id_token")
"""JSON answer fields masked by default: the tokens of an OAuth 2.0 token response
(RFC 6749 5.1, OpenID Connect's ``id_token``) and of IBM IAM's, which watsonx.ai asks for."""

_MASK = b"REDACTED"
_JWT = re.compile(rb"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.")
_WS = b" \t\r\n"


def mask_of(n: int) -> bytes:
    """``n`` bytes of the mask."""
    return (_MASK * (n // len(_MASK) + 1))[:n]


class FieldMasker:
    """Masks the string values of ``fields`` in a JSON body fed in pieces."""

    def __init__(self, fields: Iterable[str] = DEFAULT_REDACT_RESPONSE_FIELDS) -> None:
        names = sorted({f.encode() for f in fields}, key=len, reverse=True)
        self._names = names
        self._key = re.compile(rb'"(' + b"|".join(re.escape(n) for n in names) + rb')"[ \t\r\n]*:[ \t\r\n]*"')
        self.body = bytearray()
        self.decided = 0
        self.masked = False
        """Whether any value was masked."""
        self._pos = 0  # where scanning goes on
        self._value_at: int | None = None  # start of the value being masked, if inside one
        self._escaped = False

    def feed(self, data: bytes) -> None:
        self.body += data
        self._scan()

    def end(self) -> None:
        """The body is whole: every byte is decided (a key cut off at the end is no key)."""
        if self._value_at is not None:
            self._mask(self._value_at, len(self.body))
            self._value_at = None
        self.decided = self._pos = len(self.body)

    def _scan(self) -> None:
        b = self.body
        while True:
            if self._value_at is not None:
                close = self._closing_quote(self._pos)
                if close is None:
                    # Inside a value whose end is still to come: it stays undecided.
                    self._pos = len(b)
                    self.decided = self._value_at
                    return
                self._mask(self._value_at, close)
                self._value_at = None
                self._pos = close + 1
                continue
            m = self._key.search(b, self._pos)
            if m is None:
                self.decided = self._undecided_from(self._pos)
                self._pos = self.decided
                return
            self._value_at = self._pos = m.end()
            self._escaped = False

    def _closing_quote(self, start: int) -> int | None:
        b = self.body
        for i in range(start, len(b)):
            c = b[i]
            if self._escaped:
                self._escaped = False
            elif c == 0x5C:  # backslash
                self._escaped = True
            elif c == 0x22:  # quote
                return i
        return None

    def _mask(self, start: int, stop: int) -> None:
        """Mask the value at ``body[start:stop]``: a JWT's signature, or all of it."""
        jwt = _JWT.match(self.body, start, stop)
        begin = jwt.end() if jwt is not None else start
        if stop > begin:
            self.body[begin:stop] = mask_of(stop - begin)
            self.masked = True

    def _undecided_from(self, start: int) -> int:
        """The first byte from which the rest of the body could still begin a key."""
        b = self.body
        earliest = len(b)
        q = b.rfind(b'"', start)
        while q != -1:
            if self._could_start_key(bytes(b[q:])):
                earliest = q
            q = b.rfind(b'"', start, q)
        return earliest

    def _could_start_key(self, tail: bytes) -> bool:
        """Whether ``tail`` (from a quote to the end) is the start of a key and its value's quote."""
        rest = tail[1:]
        for name in self._names:
            if len(rest) <= len(name):
                if name.startswith(rest):
                    return True
                continue
            if not rest.startswith(name + b'"'):
                continue
            after = rest[len(name) + 1 :].lstrip(_WS)
            if not after:
                return True
            if after[:1] == b":" and not after[1:].lstrip(_WS):
                return True
        return False
