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
recorder hands a piece to the writer only once all its bytes are decided
(:class:`AnswerMasker`), and the masker keeps only the bytes not handed on.

A compressed answer (``Content-Encoding: gzip``, deflate, br, zstd) cannot be
masked in place. :func:`answer_masker` gives one that decodes it as it comes
and holds its pieces (up to :data:`HOLD_BYTES` decoded): when nothing needs
masking they go on exactly as they came; when something does, the answer is
stored decoded and masked, each piece the decoded part of the one that came
(same time), and :attr:`AnswerMasker.headers` is the head to store with it
(``Content-Encoding`` gone, ``Content-Length`` the decoded length). A token
field that comes after the first :data:`HOLD_BYTES`, once the pieces before it
went on compressed, cannot be masked: the rest of the body is left out
(:attr:`AnswerMasker.withheld`).
Pure code, no I/O.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable

from ..cassette.model import Headers
from ..cassette.pieces import Piece
from ..wire import drop_headers, header_value, with_length

__all__ = [
    "DEFAULT_REDACT_RESPONSE_FIELDS",
    "HOLD_BYTES",
    "AnswerMasker",
    "FieldMasker",
    "answer_masker",
    "mask_of",
    "masked_answer",
]

DEFAULT_REDACT_RESPONSE_FIELDS = ("access_token", "refresh_token", "id_token")
"""JSON answer fields masked by default: the tokens of an OAuth 2.0 token response
(RFC 6749 5.1, OpenID Connect's ``id_token``) and of IBM IAM's, which watsonx.ai asks for."""

HOLD_BYTES = 64 * 1024
"""How much of a compressed JSON answer (decoded) is held back before its pieces go on
compressed: a token answer is a few kilobytes, a JSON-array stream (the Gemini API's
``streamGenerateContent`` without ``alt=sse``) is not held past this."""

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
        """The bytes fed and not taken yet (:meth:`take`): the body from :attr:`base` on."""
        self.base = 0
        """Where :attr:`body` starts in the whole body (every other position counts from 0)."""
        self.decided = 0
        self.masked = False
        """Whether any value was masked."""
        self.found = False
        """Whether a field to mask was found (its value may still be coming)."""
        self._pos = 0  # where scanning goes on
        self._value_at: int | None = None  # start of the value being masked, if inside one
        self._escaped = False

    @property
    def size(self) -> int:
        """How many bytes were fed in all."""
        return self.base + len(self.body)

    def feed(self, data: bytes) -> None:
        self.body += data
        self._scan()

    def end(self) -> None:
        """The body is whole: every byte is decided (a key cut off at the end is no key)."""
        if self._value_at is not None:
            self._mask(self._value_at, self.size)
            self._value_at = None
        self.decided = self._pos = self.size

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes (all decided, masked where needed), no longer kept here."""
        assert self.base + n <= self.decided, "only decided bytes are taken"
        out = bytes(self.body[:n])
        del self.body[:n]
        self.base += n
        return out

    def _scan(self) -> None:
        b, base = self.body, self.base
        while True:
            if self._value_at is not None:
                close = self._closing_quote(self._pos)
                if close is None:
                    # Inside a value whose end is still to come: it stays undecided.
                    self._pos = self.size
                    self.decided = self._value_at
                    return
                self._mask(self._value_at, close)
                self._value_at = None
                self._pos = close + 1
                continue
            m = self._key.search(b, self._pos - base)
            if m is None:
                self.decided = self._undecided_from(self._pos)
                self._pos = self.decided
                return
            self._value_at = self._pos = m.end() + base
            self.found = True
            self._escaped = False

    def _closing_quote(self, start: int) -> int | None:
        b, base = self.body, self.base
        for i in range(start - base, len(b)):
            c = b[i]
            if self._escaped:
                self._escaped = False
            elif c == 0x5C:  # backslash
                self._escaped = True
            elif c == 0x22:  # quote
                return i + base
        return None

    def _mask(self, start: int, stop: int) -> None:
        """Mask the value at ``[start, stop)`` of the whole body: a JWT's signature, or all of it."""
        base = self.base
        jwt = _JWT.match(self.body, start - base, stop - base)
        begin = jwt.end() + base if jwt is not None else start
        if stop > begin:
            self.body[begin - base : stop - base] = mask_of(stop - begin)
            self.masked = True

    def _undecided_from(self, start: int) -> int:
        """The first byte from which the rest of the body could still begin a key."""
        b, base = self.body, self.base
        earliest = self.size
        q = b.rfind(b'"', start - base)
        while q != -1:
            if self._could_start_key(bytes(b[q:])):
                earliest = q + base
            q = b.rfind(b'"', start - base, q)
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


class AnswerMasker:
    """A JSON answer's pieces, handed on once decided: masked where a token field stands.

    :meth:`feed` takes each piece as it comes and gives back the pieces that are
    final now, in order; :meth:`end` gives the rest. Every piece fed comes back
    exactly once, except those :attr:`withheld` drops. This one is for an answer
    stored as it came (no content coding): it masks in place.
    """

    def __init__(self, fields: Iterable[str]) -> None:
        self._fields = FieldMasker(fields)
        self._held: deque[Piece] = deque()
        """Pieces fed and not handed on (plain answers: their bytes are the masker's)."""
        self.headers: Headers | None = None
        """The response head to store when the body is stored other than it came (decoded);
        None when it is stored as it came."""
        self.withheld = False
        """Whether the rest of the body was left out: a token field that could not be masked."""

    @property
    def masked(self) -> bool:
        """Whether any value was masked."""
        return self._fields.masked

    def feed(self, piece: Piece) -> list[Piece]:
        self._held.append(piece)
        self._fields.feed(piece.data)
        return self._ready()

    def end(self) -> list[Piece]:
        self._fields.end()
        return self._ready()

    def _ready(self) -> list[Piece]:
        fm, held, out = self._fields, self._held, []
        while held and fm.base + len(held[0].data) <= fm.decided:
            p = held.popleft()
            data = fm.take(len(p.data))
            out.append(Piece(p.at_ns, data) if fm.masked else p)
        return out


class _EncodedAnswerMasker(AnswerMasker):
    """A compressed JSON answer: decoded as it comes, stored as it came unless it needs masking.

    ``_held`` keeps the pieces as they came; the masker keeps their decoded bytes.
    """

    def __init__(self, fields: Iterable[str], headers: Headers, decompress: Callable[[bytes], bytes],
                 hold: int | None) -> None:
        super().__init__(fields)
        self._head = headers
        self._hold = hold
        self._decompress = decompress
        self._ends: deque[int] = deque()
        """Where each held piece's decoded bytes end in the decoded body (beside ``_held``)."""
        self._broken = False
        self._passing = False
        """Past the hold with nothing to mask: pieces go on as they came."""

    def feed(self, piece: Piece) -> list[Piece]:
        if self.withheld:
            return []
        fm = self._fields
        if not self._broken:
            try:
                fm.feed(self._decompress(piece.data))
            except Exception:  # zlib.error, brotli.error, ZstdError: a body no client can read
                self._broken = True
        self._held.append(piece)
        self._ends.append(fm.size)
        if self._passing and fm.found:
            # A token field after the pieces before it went on compressed: it cannot be
            # masked, so nothing from here on is stored.
            self.withheld = True
            self._held.clear()
            self._ends.clear()
            return []
        if not self._passing and not fm.found and (
            self._broken or (self._hold is not None and fm.size >= self._hold)
        ):
            self._passing = True
        return self._passed() if self._passing else []

    def _passed(self) -> list[Piece]:
        """The pieces as they came whose decoded bytes are all decided."""
        fm, held, ends, out = self._fields, self._held, self._ends, []
        upto = fm.base
        while held and (self._broken or ends[0] <= fm.decided):
            out.append(held.popleft())
            upto = ends.popleft()
        if not self._broken and upto > fm.base:
            fm.take(upto - fm.base)  # decoded bytes of pieces handed on: no longer needed
        return out

    def end(self) -> list[Piece]:
        if self.withheld:
            return []
        fm = self._fields
        fm.end()
        if self._passing:
            return self._passed()
        held, ends = list(self._held), list(self._ends)
        self._held.clear()
        self._ends.clear()
        if not fm.masked:
            return held
        body = fm.take(fm.size - fm.base)
        # Each piece becomes its decoded part, masked, at its own time (empty parts dropped).
        starts = [0, *ends[:-1]]
        self.headers = with_length(drop_headers(self._head, "content-encoding"), len(body))
        return [Piece(p.at_ns, body[a:b]) for p, a, b in zip(held, starts, ends, strict=True) if b > a]


def _json_answer(headers: Headers) -> bool:
    """A JSON answer that is no stream of lines: where a token response's fields are masked."""
    ct = (header_value(headers, "content-type") or "").lower()
    return "json" in ct and not any(t in ct for t in ("ndjson", "jsonl", "json-seq"))


def answer_masker(
    headers: Headers, fields: Iterable[str], hold: int | None = HOLD_BYTES
) -> AnswerMasker | None:
    """The masker for a response with this head, or None when there is nothing to mask in it
    (not a JSON answer, no fields, or a content coding this streamtape cannot decode).
    ``hold``: how much of a compressed answer (decoded) to hold back (None: all of it)."""
    fields = tuple(fields)
    if not fields or not _json_answer(headers):
        return None
    coding = (header_value(headers, "content-encoding") or "identity").strip().lower()
    if coding in ("", "identity"):
        return AnswerMasker(fields)
    # Imported here: only a compressed JSON answer needs the decoders.
    from ..shapes.body import decompressor

    decode = decompressor(coding)
    return None if decode is None else _EncodedAnswerMasker(fields, headers, decode[0], hold)


def masked_answer(
    pieces: Iterable[Piece], headers: Headers, fields: Iterable[str]
) -> tuple[list[Piece], Headers] | None:
    """A whole answer masked (an import): its pieces and head, or None when nothing changed."""
    m = answer_masker(headers, fields, hold=None)
    if m is None:
        return None
    out = [q for p in pieces for q in m.feed(p)]
    out += m.end()
    if not m.masked:
        return None
    return out, m.headers or headers
