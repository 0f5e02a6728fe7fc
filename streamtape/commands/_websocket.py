"""WebSocket sessions in ``show -i N`` (messages, the close, a Realtime session's text) and ``diff A B``.

Not a command (``cli`` registers only modules with ``commands``); ``show``
and ``diff`` hand sessions here. ``show`` text output::

    GET http://api.test/v1/realtime?model=gpt-realtime HTTP/1.1
    HTTP/1.1 101 Switching Protocols  websocket  headers at 4.7 ms
    outcome: complete  ended at 226.6 ms
    close: 1000 by client
    session: realtime, 4 client + 15 server messages, 1 response (1 done), 1 error event
    text: 'Nine point eight is larger.'  first text at 102.0 ms

     offset ms    gap ms  dir       size  type
        28.736    28.736  server     215  session.created
        29.818     1.082  client     120  session.update
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from ..cassette.model import Interaction
from ..diff.gates import Gate
from ..diff.websocket import diff_sessions, render_sessions_text, sessions_json
from ..errors import OptionError
from ..fmt import ms
from ..shapes.realtime import SessionAnalysis, SessionEvent, analyze_session
from ._render import bytes_json, escape_piece, setup_json, setup_line


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def close_text(a: SessionAnalysis) -> str:
    if a.close_code is None:
        return "no close frame" + (f" ({a.closed_by}'s connection ended)" if a.closed_by else "")
    reason = f" ({a.close_reason})" if a.close_reason else ""
    return f"{a.close_code}{reason}" + (f" by {a.closed_by}" if a.closed_by else "")


def head_lines(ix: Interaction, a: SessionAnalysis) -> list[str]:
    r = ix.response
    lines = [f"{ix.request.method} {ix.request.url} {ix.request.http_version}"]
    if r is not None:
        lines.append(f"{r.http_version} {r.status} {r.reason}  websocket  headers at {ms(r.headers_at_ns)} ms")
    lines.append(f"outcome: {ix.outcome}" + (f" ({ix.error})" if ix.error else "") + f"  ended at {ms(ix.end_ns)} ms")
    if ix.setup is not None:
        lines.append(setup_line(ix.setup))
    if ix.labels:
        lines.append("labels: " + ", ".join(f"{k}={v}" for k, v in ix.labels.items()))
    lines.append(f"close: {close_text(a)}")
    client = sum(1 for e in a.events if e.direction == "client")
    parts = [a.shape, f"{client} client + {len(a.events) - client} server messages"]
    if a.shape == "realtime":
        done = sum(1 for r in a.responses if r.done_at_ns is not None)
        parts.append(f"{_plural(len(a.responses), 'response')} ({done} done)")
        parts.append(_plural(len(a.errors), "error event"))
    lines.append("session: " + ", ".join(parts))
    if a.shape == "realtime" and a.text:
        first = min((r.first_text_ns for r in a.responses if r.first_text_ns is not None), default=None)
        lines.append(f"text: {a.text!r}  first text at {ms(first)} ms")
    return lines


def _what(e: SessionEvent, data: bytes) -> str:
    """The type of a JSON event, else the message itself (escaped, cut at 80 characters)."""
    if e.type is not None:
        return e.type
    shown = escape_piece(data) if e.text else "(binary) " + data[:40].hex(" ")
    return shown if len(shown) <= 80 else shown[:79] + "…"


def message_lines(ix: Interaction, a: SessionAnalysis, with_data: bool = False) -> list[str]:
    lines = [f"{'offset ms':>10}  {'gap ms':>8}  {'dir':<6}  {'size':>6}  type"]
    prev = 0
    for e, m in zip(a.events, ix.messages, strict=True):
        line = (f"{e.at_ns / 1e6:>10.3f}  {(e.at_ns - prev) / 1e6:>8.3f}  {e.direction:<6}  {e.size:>6}"
                f"  {_what(e, m.data)}")
        if with_data and e.type is not None:
            line += "  " + escape_piece(m.data)
        lines.append(line)
        prev = e.at_ns
    return lines


def text_lines(a: SessionAnalysis) -> list[str]:
    """The assembled text alone: one response's as it is, several under ``[response ID]`` lines."""
    if len(a.responses) <= 1:
        return a.text.split("\n") if a.text else []
    out = []
    for r in a.responses:
        out.append(f"[response {r.id}]")
        out.extend(r.text.split("\n") if r.text else [])
    return out


def session_json(ix: Interaction, index: int, a: SessionAnalysis) -> dict[str, object]:
    r = ix.response
    prev = 0
    messages = []
    for e, m in zip(a.events, ix.messages, strict=True):
        messages.append({
            "index": e.index, "offset_ms": e.at_ns / 1e6, "gap_ms": (e.at_ns - prev) / 1e6,
            "direction": e.direction, "opcode": "text" if e.text else "binary", "size": e.size,
            "type": e.type, "fragments": list(m.fragments), **bytes_json(m.data),
        })
        prev = e.at_ns
    return {
        "index": index,
        "websocket": True,
        "request": {"method": ix.request.method, "url": ix.request.url,
                    "http_version": ix.request.http_version,
                    "headers": [list(h) for h in ix.request.headers]},
        "response": None if r is None else {
            "status": r.status, "reason": r.reason, "http_version": r.http_version,
            "headers": [list(h) for h in r.headers], "headers_at_ms": r.headers_at_ns / 1e6},
        "outcome": ix.outcome,
        "error": ix.error,
        "end_ms": None if ix.end_ns is None else ix.end_ns / 1e6,
        "labels": dict(ix.labels),
        "setup": setup_json(ix.setup),
        "close": {"code": a.close_code, "reason": a.close_reason, "by": a.closed_by},
        "shape": a.shape,
        "responses": [
            {"id": x.id, "status": x.status, "created_ms": _ms(x.created_at_ns),
             "first_text_ms": _ms(x.first_text_ns), "done_ms": _ms(x.done_at_ns),
             "text": x.text, "deltas": x.deltas, "usage": x.usage}
            for x in a.responses
        ],
        "errors": [{"index": e.index, "offset_ms": e.at_ns / 1e6, "event": e.doc} for e in a.errors],
        "text": a.text,
        "messages": messages,
    }


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e6


def show_session(ix: Interaction, index: int, *, as_json: bool, events: bool, text: bool,
                 reasoning: bool, shape: str | None) -> None:
    """Print one session: head, summary and messages (``--events``: with each event's JSON),
    or its text alone (``--text``), or all of it as JSON."""
    if reasoning:
        raise OptionError(f"interaction {index} is a WebSocket session: the Realtime API streams no "
                          "reasoning events (--text gives its text)")
    if shape is not None:
        raise OptionError(f"interaction {index} is a WebSocket session; --shape names HTTP stream formats")
    a = analyze_session(ix)
    if as_json:
        click.echo(json.dumps(session_json(ix, index, a), indent=2, ensure_ascii=False))
        return
    lines: Sequence[str]
    if text:
        lines = text_lines(a)
    else:
        lines = [*head_lines(ix, a), "", *message_lines(ix, a, with_data=events)]
    for line in lines:
        click.echo(line)


def has_sessions(interactions: Sequence[Interaction]) -> bool:
    return any(ix.websocket is not None for ix in interactions)


def diff_sessions_command(
    a: tuple[str, Sequence[Interaction], Sequence[str]],
    b: tuple[str, Sequence[Interaction], Sequence[str]],
    *,
    gates: Sequence[Gate],
    as_json: bool,
    refused: dict[str, bool],
) -> int:
    """``diff A B`` when a side holds WebSocket sessions: every interaction on both sides must be
    one; ``refused`` names the HTTP-only options given (each an error). Returns the exit status."""
    given = [name for name, on in refused.items() if on]
    if given:
        raise OptionError(f"{', '.join(given)}: not for WebSocket sessions (they compare HTTP streams)")
    for name, interactions, _ in (a, b):
        http = [n for n, ix in enumerate(interactions) if ix.websocket is None]
        if http:
            raise OptionError(
                f"{name}: holds WebSocket sessions and HTTP interactions (#{http[0]} is HTTP); "
                "compare sessions with sessions: pick them with FILE#N"
            )
    result = diff_sessions(a[1], b[1], a[2], b[2], gates=gates)
    if as_json:
        click.echo(json.dumps(sessions_json(result), indent=2, ensure_ascii=False))
    else:
        click.echo(render_sessions_text(result))
    return result.exit_status
