"""Small text formatters shared by the commands (no I/O)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypedDict
from urllib.parse import urlsplit

from .cassette.model import Interaction, Outcome, Setup
from .cassette.reader import Cassette


def ms(ns: int | None, digits: int = 1) -> str:
    """Nanoseconds as milliseconds text; '-' for None."""
    return "-" if ns is None else f"{ns / 1e6:.{digits}f}"


def printable(s: str) -> str:
    """Text with control characters made visible (\\r, \\t kept readable)."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in s)


def human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class Summary(TypedDict):
    """The figures one line about an interaction shows; JSON-ready."""

    method: str
    path: str
    status: int | None
    pieces: int
    bytes: int
    first_byte_ms: float | None
    duration_ms: float | None
    outcome: Outcome
    error: str | None
    labels: dict[str, str]


def summary(ix: Interaction) -> Summary:
    """The figures one line about an interaction shows (record output, ``show`` listing).

    For a WebSocket session ``pieces`` and ``bytes`` count its messages (both
    directions) and the first byte is the first server message.
    """
    r = ix.response
    ws = ix.websocket
    return {
        "method": ix.request.method,
        "path": path_of(ix.request.url),
        "status": r.status if r else None,
        "pieces": len(ws.messages) if ws else len(ix.pieces),
        "bytes": sum(len(m.data) for m in ws.messages) if ws else len(r.body) if r else 0,
        "first_byte_ms": None if ix.first_byte_ns is None else round(ix.first_byte_ns / 1e6, 3),
        "duration_ms": None if ix.duration_ns is None else round(ix.duration_ns / 1e6, 3),
        "outcome": ix.outcome,
        "error": ix.error,
        "labels": dict(ix.labels),
    }


def summary_line(ix: Interaction) -> str:
    """``POST /v1/chat/completions 200  22 pieces  1.9 KiB  ttfb 31.2 ms  dur 640.5 ms  complete``."""
    s = summary(ix)
    status = s["status"] if s["status"] is not None else "---"
    if ix.websocket is not None:
        return session_line(ix, s)
    line = (
        f"{s['method']} {s['path']} {status}  {s['pieces']} pieces  {human_bytes(s['bytes'])}"
        f"  ttfb {ms(ix.first_byte_ns)} ms  dur {ms(ix.duration_ns)} ms  {ix.outcome}"
    )
    if ix.error:
        line += f" ({ix.error})"
    return line


def session_line(ix: Interaction, s: Summary | None = None) -> str:
    """``GET /v1/realtime?model=m 101  websocket 4 client + 15 server messages  3.9 KiB
    dur 226.6 ms  closed 1000 by client  complete``."""
    ws = ix.websocket
    assert ws is not None
    s = s or summary(ix)
    client = sum(1 for m in ws.messages if m.from_client)
    if ws.close_code is not None:
        close = f"closed {ws.close_code}" + (f" ({ws.close_reason})" if ws.close_reason else "")
        close += f" by {ws.closed_by}" if ws.closed_by else ""
    else:
        close = "no close frame"
    line = (
        f"{s['method']} {s['path']} {s['status']}  websocket {client} client + "
        f"{len(ws.messages) - client} server messages  {human_bytes(s['bytes'])}"
        f"  dur {ms(ix.duration_ns)} ms  {close}  {ix.outcome}"
    )
    if ix.error:
        line += f" ({ix.error})"
    return line


def warning_lines(cassettes: Iterable[Cassette]) -> list[str]:
    """``streamtape: warning: ...``, one line per problem a cassette's reader recovered from."""
    return [f"streamtape: warning: {w}" for cas in cassettes for w in cas.warnings]


def jsonable(v: object) -> object:
    """``v`` as data any JSON reader takes (``diff --json``, the replay server's
    received requests): bytes as text (UTF-8, else Latin-1, so no byte is lost),
    tuples as lists, sets as lists sorted by text, dict keys as strings, and NaN or
    infinity as null, since JSON has no such numbers and Python would write ``NaN``."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return v.decode("latin-1")
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return [jsonable(x) for x in sorted(v, key=str)]
    return v


def failure_words(e: BaseException) -> str:
    """A connection failure in a few words, from the OS error under it when there is one
    (``connection refused``, not anyio's ``All connection attempts failed``)."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno:
            return os.strerror(seen.errno).lower()
        seen = seen.__cause__ or seen.__context__
    return str(e) or type(e).__name__


@dataclass(frozen=True)
class HeadStyle:
    """How :func:`interaction_head` writes: ``show``'s terminal lines or the HTML page's
    paragraphs (:mod:`streamtape.render.report`). The words and their order are the
    function's; a style says only how a line, a recorded value, a time, the outcome and
    the setup marks are put."""

    line: Callable[[str], str]
    """One line as written (as it is, or in a ``<p class="head">``)."""
    text: Callable[[object], str]
    """A recorded value as text (``str``, or escaped as HTML)."""
    strong: Callable[[str], str]
    """The method and the status, set off (bold on the page)."""
    sep: str
    """Between a line's parts."""
    ms: Callable[[int | None], str]
    """A time in nanoseconds, with its unit."""
    outcome: Callable[[Interaction], str]
    """The outcome, with the error when there is one."""
    setup: Callable[[Setup], str]
    """The whole setup line (the upstream connection's marks, which the offsets leave out)."""
    setup_before_labels: bool = False


def interaction_head(ix: Interaction, style: HeadStyle) -> list[str]:
    """An interaction's head: the request line, the response's status, content type,
    framing and headers time (or "no response"), the outcome and the end, the labels and
    the setup marks; one line each, written in ``style``."""
    t, b = style.text, style.strong
    req, r = ix.request, ix.response
    lines = [style.line(f"{b(t(req.method))} {t(req.url)} {t(req.http_version)}")]
    if r is None:
        lines.append(style.line("no response"))
    else:
        parts = [
            f"{t(r.http_version)} {b(t(r.status))} {t(r.reason)}",
            t(r.content_type or "(no content type)"),
            t(r.framing),
            f"headers at {style.ms(r.headers_at_ns)}",
        ]
        lines.append(style.line(style.sep.join(parts)))
    lines.append(style.line(f"outcome: {style.outcome(ix)}{style.sep}ended at {style.ms(ix.end_ns)}"))
    labels = [style.line("labels: " + t(", ".join(f"{k}={v}" for k, v in ix.labels.items())))] if ix.labels else []
    setup = [style.setup(ix.setup)] if ix.setup is not None else []
    return lines + (setup + labels if style.setup_before_labels else labels + setup)
