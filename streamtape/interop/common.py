"""What the three importers and two exporters share: sources, content codings, one-piece bodies.

**Sources.** An imported interaction is labelled ``source=vcr``, ``source=har``
or ``source=mitm`` (:class:`Source`). None of those files keeps piece
boundaries or per-piece timing, so such an interaction holds its whole body
as one piece at the recorded total time (VCR.py records no time at all: 0).
:func:`synthetic_timing` is how a replayer tells that its ``faithful`` timing
is made up. An entry of a HAR that streamtape itself exported carries the
original pieces in its ``_streamtape`` extension and comes back unlabelled,
exactly as it was recorded.

**Content codings.** A streamtape body is the bytes the upstream sent, content
coding kept (gzip stays gzip), and its headers describe those bytes. The
foreign formats are not so tidy: HAR stores the decoded body beside the
original ``Content-Encoding`` header (the spec says ``content.text`` is
decoded), and vcrpy stores a gzip body raw when it recorded httpx but decoded,
header kept, when it recorded requests (urllib3 decodes before vcrpy sees the
data). :func:`settle_coding` makes the two agree: a body that is still encoded
keeps its header, a body that was stored decoded loses ``Content-Encoding``
(and gets a true ``Content-Length``). Re-encoding it instead would invent
bytes no server sent.

Every function here is pure: values in, values out.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ..capture.recorder import framing_of
from ..capture.redaction import Redaction
from ..capture.response_secrets import masked_answer
from ..cassette.model import Headers, Interaction, Outcome, Request, Response
from ..cassette.pieces import Piece
from ..profiles import LatencyKind, Profile
from ..wire import drop_headers, header_value, reason_phrase, with_length

SOURCE_LABEL = "source"


class Source(StrEnum):
    """A foreign recording format: the ``--from`` value and the ``source`` label."""

    VCR = "vcr"
    HAR = "har"
    MITM = "mitm"


SYNTHETIC_TIMING_NOTE = (
    "VCR cassettes, HAR files and mitmproxy flows keep no piece boundaries or per-piece "
    "timing: each body is stored as one piece at the recorded total time (VCR records no "
    "time: 0 ms), labelled source=vcr|har|mitm; give it a stream shape with a replay profile "
    "(chunk=events, chunk=random:A-B, latency=fixed:TTFT:GAP)"
)
"""What ``streamtape import`` says once when it made up any interaction's timing."""


def synthetic_timing(ix: Interaction) -> Source | None:
    """The foreign format an interaction was imported from, when its timing is made up.

    An imported interaction has one piece at the recorded total time, so a
    ``faithful`` replay of it is not the stream the client once saw.
    """
    value = ix.labels.get(SOURCE_LABEL)
    return Source(value) if value is not None and value in Source._value2member_map_ else None


def timing_note(ix: Interaction, profile: Profile) -> str | None:
    """What a replayer's log line adds when the profile plays made-up timing as if recorded.

    Only latencies that follow the recording (``recorded``, as in ``faithful``;
    ``scale``; ``jitter``) replay the synthetic timing; ``instant`` and
    ``fixed`` make their own, and need no warning.
    """
    source = synthetic_timing(ix)
    if source is None or profile.latency.kind not in _FOLLOWS_RECORDING:
        return None
    return f"timing synthetic (imported from {source.value}: the whole body as one piece at the recorded total time)"


_FOLLOWS_RECORDING = frozenset({LatencyKind.RECORDED, LatencyKind.SCALE, LatencyKind.JITTER})


@dataclass(frozen=True)
class Imported:
    """One foreign file read: its interactions, in file order, and what the reader had to say."""

    source: Source
    interactions: tuple[Interaction, ...]
    notes: tuple[str, ...] = ()
    synthetic: int = 0
    """How many of the interactions got made-up timing (all but exact streamtape round trips)."""


class Malformed(Exception):
    """One interaction or entry of a foreign file is wrong; the reader adds the file name and
    position and raises :class:`~streamtape.errors.InteropError`."""


@dataclass
class Notes:
    """Collects a reader's or writer's remarks (one line each), each said once."""

    lines: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        if line not in self.lines:
            self.lines.append(line)


# --------------------------------------------------------------------------
# Headers


def http_version(text: str | None) -> str:
    """A version as the recorder writes it (``HTTP/1.1``, ``HTTP/2.0``) from HAR's spellings.

    Chromium writes ``http/1.1``, ``h2`` and ``h3``; mitmproxy ``HTTP/2.0``;
    some tools ``HTTP/2``. Anything unknown (or missing) is HTTP/1.1.
    """
    t = (text or "").strip().lower()
    if t in ("h2", "http/2", "http/2.0", "h2c"):
        return "HTTP/2.0"
    if t in ("h3", "http/3", "http/3.0") or t.startswith("h3-"):
        return "HTTP/3"
    if t == "http/1.0":
        return "HTTP/1.0"
    if t == "http/0.9":
        return "HTTP/0.9"
    return "HTTP/1.1"


# --------------------------------------------------------------------------
# Content codings


def content_coding(headers: Iterable[tuple[str, str]]) -> str | None:
    """The response's one content coding (lower case), or None for identity / none / several."""
    value = (header_value(headers, "content-encoding") or "").strip().lower()
    if not value or value == "identity" or "," in value:
        return None
    return value


def decode_body(body: bytes, coding: str) -> bytes | None:
    """``body`` decoded from ``coding``, or None when it is not encoded that way.

    gzip and deflate are decoded incrementally, so a body cut short (a
    recording whose upstream closed early) decodes to what arrived, as it did
    for the client. br and zstd go through mitmproxy's decoders (mitmproxy is
    a dependency already); an unknown coding gives None.
    """
    if not body:
        return b""
    if coding in ("gzip", "x-gzip"):
        if body[:2] != b"\x1f\x8b":
            return None
        return _inflate(body, 16 + zlib.MAX_WBITS)
    if coding == "deflate":
        # RFC 9110 says zlib-wrapped; some servers send raw deflate.
        return _inflate(body, zlib.MAX_WBITS) or _inflate(body, -zlib.MAX_WBITS)
    if coding in ("br", "zstd"):
        # Imported here: only br and zstd bodies need it, and it loads the codecs.
        from mitmproxy.net import encoding

        try:
            out = encoding.decode(body, coding)
        except ValueError:
            return None
        return out if isinstance(out, bytes) else None
    return None


def _inflate(body: bytes, wbits: int) -> bytes | None:
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body)
    except zlib.error:
        return None
    return out


def settle_coding(body: bytes, headers: Headers) -> tuple[bytes, Headers, str | None]:
    """Make body and headers agree: (body, headers, the coding dropped or None).

    A body still encoded as its ``Content-Encoding`` says is kept as it was
    recorded. One that was stored decoded (HAR; vcrpy recording requests)
    loses the header, and a ``Content-Length`` becomes its true length.
    """
    coding = content_coding(headers)
    if coding is None or not body or decode_body(body, coding) is not None:
        return body, headers, None
    if coding not in ("gzip", "x-gzip", "deflate", "br", "zstd"):
        return body, headers, None  # a coding we cannot check: trust the recording
    return body, with_length(drop_headers(headers, "content-encoding"), len(body)), coding


# --------------------------------------------------------------------------
# Building interactions


def one_piece_response(
    *,
    status: int,
    reason: str | None,
    version: str,
    headers: Headers,
    body: bytes,
    headers_at_ns: int,
    body_at_ns: int,
) -> Response:
    """A response whose whole body arrived as one piece at ``body_at_ns`` (no piece if empty)."""
    return Response(
        status=status,
        reason=reason if reason is not None else reason_phrase(status),
        http_version=version,
        headers=headers,
        framing=framing_of(version, headers),
        pieces=(Piece(body_at_ns, body),) if body else (),
        headers_at_ns=headers_at_ns,
    )


def imported(
    request: Request,
    response: Response | None,
    source: Source,
    labels: dict[str, str],
    redaction: Redaction,
    *,
    outcome: Outcome = Outcome.COMPLETE,
    error: str | None = None,
    end_ns: int | None = None,
) -> Interaction:
    """An imported interaction: redacted like a recording, labelled with its source."""
    ix = Interaction(
        request,
        response,
        outcome=outcome,
        error=error,
        end_ns=end_ns,
        labels={**labels, SOURCE_LABEL: source.value},
    )
    return redacted(ix, redaction)


def redacted(ix: Interaction, redaction: Redaction) -> Interaction:
    """The secrets a recording would not have kept, blanked: the request's, the response
    headers', and the token fields of a JSON answer, masked as the recorder masks them."""
    if not redaction.enabled:
        return ix
    r = ix.response
    if r is not None:
        r = replace(r, headers=redaction.redact_headers(r.headers))
        masked = masked_answer(r.pieces, r.headers, redaction.response_fields)
        if masked is not None:
            pieces, headers = masked
            r = replace(r, pieces=tuple(pieces), headers=headers)
    return replace(ix, request=redaction.request(ix.request), response=r)


def ns(ms: float) -> int:
    """Milliseconds (a HAR timing) as whole nanoseconds."""
    return round(ms * 1_000_000)
