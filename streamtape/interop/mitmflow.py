"""mitmproxy flow files (``mitmdump -w``), read with mitmproxy's own ``mitmproxy.io``.

A flow keeps the request, the response head and, unless the body was
streamed, the whole body as it came off the wire (content coding kept, the
same bytes the streamtape recorder stores), with four timestamps: request
start and end, response head and end. The recorder's t = 0 is when the proxy
has the whole request, which is ``request.timestamp_end``; the head arrives at
``response.timestamp_start`` and the whole body is one piece at
``response.timestamp_end``.

A body that was streamed (``stream_large_bodies``, or an addon that set
``flow.response.stream``) is not kept: mitmproxy writes ``None`` for it. Such
a flow is imported as a head without pieces, and the import says so. A flow
that failed gets its outcome from mitmproxy's message, as the recorder does
(:func:`streamtape.mitm.record.outcome_of`). Flows that are not HTTP (TCP, UDP, DNS)
are skipped, and counted.

mitmproxy 11 (Python 3.11) and 12 read the same files through the same API;
reading also migrates flows written by older mitmproxy versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mitmproxy import exceptions, http
from mitmproxy.io import FlowReader

from ..capture.redaction import Redaction
from ..cassette.model import Headers, Interaction, Outcome, Request
from ..errors import InteropError
from ..mitm.record import outcome_of
from .common import Imported, Notes, Source, imported, one_piece_response


def looks_like(data: bytes) -> bool:
    """A tnetstring stream: ``<length>:`` then a dictionary (mitmproxy's flow file format)."""
    head = data[:12]
    digits = head.split(b":", 1)[0]
    return b":" in head and digits.isdigit() and 0 < len(digits) <= 10


def _headers(headers: http.Headers) -> Headers:
    """In order, duplicates kept, decoded as mitmproxy decodes them (UTF-8, surrogate escapes)."""
    return tuple(
        (k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
        for k, v in headers.fields
    )


def _ns(seconds: float | None, t0: float) -> int:
    return max(0, round(((seconds if seconds is not None else t0) - t0) * 1e9))


def read(
    path: Path, *, redaction: Redaction, labels: Mapping[str, str] | None = None
) -> Imported:
    """The HTTP flows of a ``mitmdump -w`` file, in file order."""
    notes = Notes()
    out: list[Interaction] = []
    skipped = 0
    try:
        with open(path, "rb") as f:
            for flow in FlowReader(f).stream():
                if not isinstance(flow, http.HTTPFlow):
                    skipped += 1
                    continue
                out.append(_interaction(flow, len(out), notes, redaction, dict(labels or {})))
    except exceptions.FlowReadException as e:
        where = f" after {len(out) + skipped} flows" if out or skipped else ""
        raise InteropError(
            path, f"truncated or corrupt mitmproxy flow file{where} (mitmproxy: {e})"
        ) from None
    except OSError as e:
        raise InteropError(path, f"cannot read: {e.strerror or e}") from None
    if skipped:
        notes.add(f"{skipped} flow{'s' if skipped != 1 else ''} that are not HTTP (TCP, UDP, DNS) skipped")
    return Imported(Source.MITM, tuple(out), tuple(f"{path}: {line}" for line in notes.lines), len(out))


def _interaction(
    flow: http.HTTPFlow, n: int, notes: Notes, redaction: Redaction, labels: dict[str, str]
) -> Interaction:
    rq = flow.request
    t0 = rq.timestamp_end if rq.timestamp_end is not None else rq.timestamp_start
    request = Request(
        method=rq.method,
        url=rq.url,
        http_version=rq.http_version,
        headers=_headers(rq.headers),
        body=rq.raw_content or b"",
        started_at=rq.timestamp_start,
    )
    rs = flow.response
    error = flow.error.msg if flow.error else None
    if rs is None:
        end = flow.error.timestamp if flow.error else None
        return imported(
            request, None, Source.MITM, labels, redaction,
            outcome=outcome_of(flow) if flow.error else Outcome.INTERRUPTED,
            error=error or "the flow file holds no response and no error for this request",
            end_ns=_ns(end, t0) if end is not None else None,
        )
    body = rs.raw_content
    if body is None:
        notes.add(
            f"flow {n} ({rq.method} {rq.path}): the body was streamed, so mitmproxy did not keep it: "
            "imported as head only"
        )
    end_ns = _ns(rs.timestamp_end if rs.timestamp_end is not None else rs.timestamp_start, t0)
    response = one_piece_response(
        status=rs.status_code,
        reason=rs.reason,
        version=rs.http_version,
        headers=_headers(rs.headers),
        body=body or b"",
        headers_at_ns=_ns(rs.timestamp_start, t0),
        body_at_ns=end_ns,
    )
    if flow.error:
        return imported(
            request, response, Source.MITM, labels, redaction,
            outcome=outcome_of(flow), error=error, end_ns=_ns(flow.error.timestamp, t0),
        )
    return imported(request, response, Source.MITM, labels, redaction, outcome=Outcome.COMPLETE, end_ns=end_ns)
