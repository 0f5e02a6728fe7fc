"""``streamtape show CASSETTE --html PAGE``: one self-contained page about one cassette.

The page lists the interactions with their figures (a row each, linking to
its section), then for each interaction:

- the request and response heads, the outcome, the labels and the upstream
  connection's setup marks (kept out of the offsets, shown apart);
- the figures (first byte, first token, duration, tokens/s, gaps, stalls);
- a timeline drawn as inline SVG: one tick per body piece (its height by the
  piece's size), the bytes received so far as a step line, the normalized
  events as marks on a strip under it (text, reasoning, tool call, finish,
  error, ...), the first byte, the first token and the finish as dashed
  lines, and the largest gaps between pieces shaded and labelled;
- the assembled answer, the reasoning, the tool calls and any error events;
- the raw body with its piece boundaries visible (alternate pieces shaded,
  each with its index, time and size as hover text);
- for a WebSocket session, the message ladder in place of the pieces: client
  messages on the left, server messages on the right, in time order, each
  with its type and size, its payload one click away.

Everything recorded is escaped as text, and the page carries the same
Content-Security-Policy as the diff page (:mod:`streamtape.render.common`): no
script runs and nothing is fetched. No I/O here: the command writes the page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..cassette.model import Interaction, Outcome, Setup
from ..diff.cells import fmt_value
from ..fmt import HeadStyle, human_bytes, interaction_head, path_of, printable
from ..shapes import analyze
from ..shapes.model import Analysis, Event
from ..shapes.realtime import SessionAnalysis, analyze_session
from ..stats import Stats, compute
from .common import TimeAxis, esc, page, piece_text

RAW_LIMIT = 256 * 1024
"""How many body bytes an interaction's raw view shows (the rest is counted, not shown)."""
MESSAGE_LIMIT = 4096
"""How many bytes of a WebSocket message its payload view shows."""
LARGEST_GAPS = 3
"""How many of the largest gaps between pieces the timeline calls out."""

_W = 1200
_LEFT = 96
_RIGHT = 84
_PLOT_W = _W - _LEFT - _RIGHT
_TOP = 34
_LANE_H = 120
_STRIP_GAP = 8
_STRIP_H = 22
_AXIS_GAP = 10
_TICK_MIN = 3.0

_KIND_COLORS = {
    "start": "#64748b", "text": "#2563eb", "reasoning": "#0d9488", "refusal": "#be185d",
    "tool_call": "#d97706", "finish": "#7c3aed", "usage": "#475569", "error": "#dc2626",
    "done": "#111827",
}

_CSS = """
section.ix { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; margin: 0 0 22px; padding: 14px 20px 18px; }
section.ix > h2 { font-size: 16px; margin: 0 0 6px; }
section.overview h2 { font-size: 16px; margin: 0 0 8px; }
.head { font-size: 13px; margin: 2px 0; overflow-wrap: anywhere; }
.o-complete { color: #166534; font-weight: 600; } .o-other { color: #b91c1c; font-weight: 600; }
table.figures td { padding-right: 22px; }
.row { display: flex; gap: 28px; align-items: flex-start; flex-wrap: wrap; }
.row > .col { flex: 1; min-width: 320px; }
svg.timeline { width: 100%; height: auto; background: #fff; }
svg .lane-bg { fill: #f6f8fa; } svg .strip-bg { fill: #fafbfc; }
svg .lane-sub { font-size: 11px; fill: #57606a; }
svg .tick { fill: #2563eb; opacity: .85; }
svg .tick:hover { opacity: 1; stroke: #111; stroke-width: 1; }
svg .cumulative { fill: none; stroke: #0f766e; stroke-width: 1.5; opacity: .8; }
svg .gap rect { fill: #fde68a; opacity: .55; }
svg .gap text { font-size: 11px; fill: #92400e; font-weight: 600; }
svg .marker line { stroke-width: 2; stroke-dasharray: 5 3; }
svg .marker-labels text { font-size: 11px; font-weight: 600; paint-order: stroke; stroke: #f6f8fa;
                         stroke-width: 3px; stroke-linejoin: round; }
svg .first-byte line { stroke: #64748b; } svg text.first-byte { fill: #475569; }
svg .first-token line { stroke: #059669; } svg text.first-token { fill: #047857; }
svg .finish line { stroke: #7c3aed; } svg text.finish { fill: #6d28d9; }
svg .end line { stroke: #9ca3af; stroke-dasharray: 2 3; }
pre.raw { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f8fa; border: 1px solid #e1e4e8;
          border-radius: 6px; padding: 8px 10px; font-size: 12px; max-height: 360px; overflow: auto; margin: 4px 0; }
pre.raw .pc { border-left: 2px solid #2563eb; padding-left: 1px; }
pre.raw .pc.odd { background: #dbeafe; }
pre.raw .pc.even { background: #fef3c7; }
table.ladder { width: 100%; max-width: 1100px; }
table.ladder td { padding: 2px 8px; }
table.ladder td.client, table.ladder td.server { width: 44%; }
table.ladder td.server { text-align: right; }
.msg { display: inline-block; border-radius: 6px; padding: 1px 8px; font-size: 12px; max-width: 100%; text-align: left; }
.msg.client { background: #dbeafe; } .msg.server { background: #ede9fe; }
.msg summary { cursor: pointer; }
.msg pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; max-height: 240px; overflow: auto; }
details > summary { cursor: pointer; color: #57606a; font-size: 13px; }
"""


def _ms(ns: int | None) -> str:
    return fmt_value(ns, "ns")


def _outcome(ix: Interaction) -> str:
    cls = "o-complete" if ix.outcome == Outcome.COMPLETE else "o-other"
    err = f" ({esc(ix.error)})" if ix.error else ""
    return f'<span class="{cls}">{esc(ix.outcome)}</span>{err}'


# ---------------------------------------------------------------------------
# The listing


def _overview(items: Sequence[tuple[int, Interaction, Analysis | SessionAnalysis, Stats | None]]) -> str:
    out = [
        '<section class="ix overview"><h2>Interactions</h2><table class="figures"><tr><th>#</th><th>method</th>'
        '<th>path</th><th class="num">status</th><th>format</th><th class="num">pieces</th>'
        '<th class="num">bytes</th><th class="num">first byte</th><th class="num">first token</th>'
        '<th class="num">duration</th><th class="num">tokens/s</th><th>outcome</th><th>labels</th></tr>'
    ]
    for n, ix, a, st in items:
        ws = ix.websocket
        pieces = f"{len(ws.messages)} msgs" if ws is not None else str(len(ix.pieces))
        size = sum(len(m.data) for m in ws.messages) if ws is not None else sum(len(p.data) for p in ix.pieces)
        status = ix.response.status if ix.response is not None else "-"
        tps = "-" if st is None or st.tokens_per_s is None else f"{st.tokens_per_s:.1f}"
        labels = ", ".join(f"{k}={v}" for k, v in ix.labels.items())
        out.append(
            f'<tr><td><a href="#ix-{n}">{n}</a></td><td>{esc(ix.request.method)}</td>'
            f'<td class="val">{esc(path_of(ix.request.url))}</td><td class="num">{esc(status)}</td>'
            f"<td>{esc(a.shape)}</td><td class=\"num\">{esc(pieces)}</td><td class=\"num\">{esc(human_bytes(size))}</td>"
            f'<td class="num">{esc(_ms(ix.first_byte_ns))}</td>'
            f'<td class="num">{esc(_ms(st.ttft_ns if st else None))}</td>'
            f'<td class="num">{esc(_ms(ix.duration_ns))}</td><td class="num">{esc(tps)}</td>'
            f"<td>{_outcome(ix)}</td><td class=\"val\">{esc(labels)}</td></tr>"
        )
    out.append("</table></section>")
    return "".join(out)


# ---------------------------------------------------------------------------
# One interaction's head and figures


def _setup(s: Setup) -> str:
    if s.new_connection:
        marks = ", ".join(f"{k.replace('_', ' ')} {_ms(v)}" for k, v in s.marks.items())
        what = f"new upstream connection: {marks}"
    else:
        what = "upstream connection already open"
    return (
        f'<p class="head setup" data-wait-ns="{s.wait_ns}">setup (kept out of the offsets): {esc(what)}; '
        f"sent {esc(_ms(s.wait_ns))} after the proxy had the request</p>"
    )


_HTML_HEAD = HeadStyle(
    line=lambda s: f'<p class="head">{s}</p>',
    text=esc,
    strong=lambda s: f"<b>{s}</b>",
    sep=" · ",
    ms=lambda ns: esc(_ms(ns)),
    outcome=_outcome,
    setup=_setup,
)


def _head(ix: Interaction) -> list[str]:
    return interaction_head(ix, _HTML_HEAD)


def _headers(ix: Interaction) -> list[str]:
    def table(headers: Iterable[tuple[str, str]]) -> str:
        rows = "".join(f'<tr><td>{esc(k)}</td><td class="val">{esc(v)}</td></tr>' for k, v in headers)
        return f"<table>{rows}</table>"

    out = ["<details><summary>request and response headers, request body</summary>",
           '<div class="row"><div class="col"><div class="caption">request headers</div>',
           table(ix.request.headers)]
    if ix.request.body:
        out.append('<div class="caption">request body</div>'
                   f'<pre class="text">{esc(printable_block(ix.request.body[:RAW_LIMIT]))}</pre>')
    out.append('</div><div class="col"><div class="caption">response headers</div>')
    out.append(table(ix.response.headers) if ix.response is not None else "<p>no response</p>")
    out.append("</div></div></details>")
    return out


def _figures(st: Stats, a: Analysis) -> str:
    rows: list[tuple[str, str]] = [
        ("first byte", _ms(st.ttfb_ns)),
        ("first token", _ms(st.ttft_ns)),
    ]
    if st.first_reasoning_ns is not None:
        rows.append(("first reasoning", _ms(st.first_reasoning_ns)))
    rows += [
        ("duration", _ms(st.duration_ns)),
        ("pieces", str(st.pieces)),
        ("events", str(st.events)),
        ("tokens", "-" if st.tokens is None else str(st.tokens)),
        ("tokens/s", "-" if st.tokens_per_s is None else f"{st.tokens_per_s:.1f}"),
        ("gap p50 / p95 / max", f"{_ms(st.gap_p50_ns)} / {_ms(st.gap_p95_ns)} / {_ms(st.gap_max_ns)}"),
        (f"stalls (over {st.stall_ms:g} ms)", str(len(st.stalls))),
        ("finish", "-" if a.finish is None else f"{a.finish.reason} ({a.finish.raw})" if a.finish.raw else a.finish.reason),
    ]
    body = "".join(f'<tr><td>{esc(k)}</td><td class="num">{esc(v)}</td></tr>' for k, v in rows)
    return f'<table class="figures stats">{body}</table>'


# ---------------------------------------------------------------------------
# The timeline


def largest_gaps(ix: Interaction, n: int = LARGEST_GAPS) -> list[tuple[int, int]]:
    """The ``n`` largest silences between consecutive pieces, as (piece index, gap ns),
    largest first; the piece is the one that ended the silence."""
    p = ix.pieces
    gaps = [(i, p[i].at_ns - p[i - 1].at_ns) for i in range(1, len(p))]
    gaps = [g for g in gaps if g[1] > 0]
    return sorted(gaps, key=lambda g: (-g[1], g[0]))[:n]


def _event_title(e: Event) -> str:
    detail = e.text or e.name or e.arguments or (e.reason or "") or (str(e.error) if e.error else "")
    return f"{e.kind} at {_ms(e.at_ns)}" + (f": {printable(detail[:200])}" if detail else "")


def timeline_svg(ix: Interaction, a: Analysis, st: Stats) -> str:
    """One interaction's pieces, bytes so far, events, first byte/token, finish and largest gaps."""
    pieces = ix.pieces
    ends = [p.at_ns for p in pieces] + [e.at_ns for e in a.events]
    ends += [v for v in (ix.end_ns, st.ttft_ns) if v is not None]
    axis = TimeAxis.spanning(max(ends, default=0), _LEFT, _PLOT_W)
    base = _TOP + _LANE_H
    strip = base + _STRIP_GAP
    bottom = strip + _STRIP_H + _AXIS_GAP
    height = bottom + 30
    total = sum(len(p.data) for p in pieces)
    max_size = max((len(p.data) for p in pieces), default=1) or 1
    out = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {height}" role="img" '
        f'aria-label="the pieces of the response over time" data-pieces="{len(pieces)}" data-bytes="{total}" '
        f'data-t-max-ns="{int(axis.t_max)}">',
        f'<rect class="lane-bg" x="{_LEFT}" y="{_TOP}" width="{_PLOT_W}" height="{_LANE_H}"/>',
        f'<rect class="strip-bg" x="{_LEFT}" y="{strip}" width="{_PLOT_W}" height="{_STRIP_H}"/>',
        f'<text class="lane-sub" x="8" y="{_TOP + 14}">{len(pieces)} pieces</text>',
        f'<text class="lane-sub" x="8" y="{_TOP + 29}">{esc(human_bytes(total))}</text>',
        f'<text class="lane-sub" x="8" y="{strip + 15}">{len(a.events)} events</text>',
    ]
    out.extend(axis.svg(_TOP - 10, bottom))
    for i, gap in largest_gaps(ix):
        x0, x1 = axis.x(pieces[i - 1].at_ns), axis.x(pieces[i].at_ns)
        out.append(
            f'<g class="gap" data-piece="{i}" data-gap-ns="{gap}"><title>gap of {esc(_ms(gap))} before piece {i}</title>'
            f'<rect x="{x0:.2f}" y="{_TOP}" width="{max(x1 - x0, 1):.2f}" height="{_LANE_H}"/>'
            f'<text x="{(x0 + x1) / 2:.2f}" y="{_TOP - 14}" text-anchor="middle">gap {esc(_ms(gap))}</text></g>'
        )
    if pieces:
        pts = [f"{axis.x(0):.2f},{base:.2f}"]
        seen = 0
        for p in pieces:
            x = axis.x(p.at_ns)
            pts.append(f"{x:.2f},{base - (_LANE_H - 6) * seen / (total or 1):.2f}")
            seen += len(p.data)
            pts.append(f"{x:.2f},{base - (_LANE_H - 6) * seen / (total or 1):.2f}")
        out.append(f'<polyline class="cumulative" points="{" ".join(pts)}"><title>bytes received so far</title></polyline>')
        out.append(f'<text class="lane-sub" x="{_LEFT + _PLOT_W + 6}" y="{_TOP + 10}">{esc(human_bytes(total))}</text>')
    else:
        why = "no response" if ix.response is None else "no body"
        out.append(f'<text class="lane-sub" x="{_LEFT + _PLOT_W / 2:.0f}" y="{_TOP + _LANE_H / 2:.0f}" '
                   f'text-anchor="middle">{esc(why)}</text>')
    marks: list[tuple[str, int | None, str]] = [
        ("first-byte", st.ttfb_ns, "first byte"),
        ("first-token", st.ttft_ns, "first token"),
        ("finish", a.finish.at_ns if a.finish else None, f"finish ({a.finish.reason})" if a.finish else ""),
        ("end", ix.end_ns, ""),
    ]
    labels: list[str] = []
    for cls, at, name in marks:
        if at is None:
            continue
        mx = axis.x(at)
        text = f"{name} {_ms(at)}" if name else ""
        out.append(
            f'<g class="marker {cls}" data-at-ns="{int(at)}"><title>{esc(text or "end of response " + _ms(at))}</title>'
            f'<line x1="{mx:.2f}" y1="{_TOP}" x2="{mx:.2f}" y2="{strip + _STRIP_H}"/></g>'
        )
        if text:
            anchor = "end" if mx > _LEFT + _PLOT_W * 0.7 else "start"
            dx = -4 if anchor == "end" else 4
            labels.append(f'<text class="{cls}" x="{mx + dx:.2f}" y="{_TOP + 12 + 13 * len(labels)}" '
                          f'text-anchor="{anchor}">{esc(text)}</text>')
    for i, p in enumerate(pieces):
        h = _TICK_MIN + (_LANE_H - 10 - _TICK_MIN) * math.sqrt(len(p.data) / max_size)
        title = f"piece {i} at {_ms(p.at_ns)}, {len(p.data)} bytes\n{piece_text(p.data)}"
        out.append(
            f'<rect class="tick" data-piece="{i}" data-bytes="{len(p.data)}" x="{axis.x(p.at_ns) - 1.25:.2f}" '
            f'y="{base - h:.2f}" width="2.5" height="{h:.2f}"><title>{esc(title)}</title></rect>'
        )
    for e in a.events:
        color = _KIND_COLORS.get(e.kind, "#6b7280")
        out.append(
            f'<rect class="event" data-kind="{esc(e.kind)}" x="{axis.x(e.at_ns) - 1.5:.2f}" y="{strip + 3}" '
            f'width="3" height="{_STRIP_H - 6}" fill="{color}"><title>{esc(_event_title(e))}</title></rect>'
        )
    out.append('<g class="marker-labels">' + "".join(labels) + "</g></svg>")
    return "".join(out)


def _legend(a: Analysis) -> str:
    kinds = sorted({e.kind for e in a.events})
    spans = "".join(f'<span style="color:{_KIND_COLORS.get(k, "#6b7280")}">■ {esc(k)}</span>' for k in kinds)
    return (
        '<p class="legend"><span>one tick per piece, height by size (square root of bytes)</span>'
        '<span style="color:#0f766e">— bytes so far</span><span style="color:#92400e">▮ largest gaps</span>'
        f"<span>events under the lane:</span>{spans}<span>hover for details</span></p>"
    )


# ---------------------------------------------------------------------------
# Text, tool calls, raw bytes


def printable_block(data: bytes) -> str:
    """Bytes as text for a block: line breaks kept, other control characters and bytes that
    are not UTF-8 shown escaped (``\\r``, ``\\xe6``)."""
    return "\n".join(printable(line) for line in data.decode("utf-8", "backslashreplace").split("\n"))


def _meaning(a: Analysis) -> list[str]:
    out = ['<div class="caption">assembled answer</div>',
           f'<pre class="text answer">{esc(a.text)}</pre>' if a.text else '<p class="s-info">no answer text</p>']
    if a.reasoning:
        out.append(f'<div class="caption">reasoning</div><pre class="text reasoning">{esc(a.reasoning)}</pre>')
    if a.tool_calls:
        out.append('<div class="caption">tool calls</div><table class="tools"><tr><th>#</th><th>name</th>'
                   "<th>arguments</th><th>JSON</th></tr>")
        for c in a.tool_calls:
            out.append(
                f'<tr><td>{c.index}</td><td class="val">{esc(c.name or "-")}</td>'
                f'<td class="val">{esc(c.arguments)}</td><td>{"valid" if c.valid_json else "not valid"}</td></tr>'
            )
        out.append("</table>")
    if a.errors:
        out.append('<div class="caption">error events</div><ul class="errors">')
        out.extend(f"<li>{esc(_event_title(e))}</li>" for e in a.errors)
        out.append("</ul>")
    return out


def _raw(ix: Interaction) -> list[str]:
    out = ['<details open><summary>raw body, piece by piece (alternate pieces shaded)</summary><pre class="raw">']
    shown = 0
    for i, p in enumerate(ix.pieces):
        if shown >= RAW_LIMIT:
            rest = sum(len(q.data) for q in ix.pieces[i:])
            out.append(f'</pre><p class="s-info">… {len(ix.pieces) - i} more pieces ({esc(human_bytes(rest))}) not shown</p><pre class="raw">')
            break
        title = f"piece {i} at {_ms(p.at_ns)}, {len(p.data)} bytes"
        out.append(f'<span class="pc {"odd" if i % 2 else "even"}" data-piece="{i}" title="{esc(title)}">'
                   f"{esc(printable_block(p.data))}</span>")
        shown += len(p.data)
    out.append("</pre></details>")
    return out


# ---------------------------------------------------------------------------
# WebSocket sessions


def _ladder(ix: Interaction, a: SessionAnalysis) -> list[str]:
    ws = ix.websocket
    assert ws is not None
    close = "no close frame" if a.close_code is None else f"close {a.close_code}" + (
        f" ({a.close_reason})" if a.close_reason else "") + (f" by {a.closed_by}" if a.closed_by else "")
    client = sum(1 for m in ws.messages if m.from_client)
    out = [f'<p class="head">session: {esc(a.shape)}, {client} client + {len(ws.messages) - client} server '
           f"messages · {esc(close)}</p>"]
    if a.text:
        out.append(f'<div class="caption">assembled text</div><pre class="text answer">{esc(a.text)}</pre>')
    out.append('<h3>Messages</h3><table class="ladder"><tr><th>client</th><th class="num">offset</th>'
               '<th class="num">gap</th><th style="text-align:right">server</th></tr>')
    prev = 0
    for e in a.events:
        m = ws.messages[e.index]
        kind = "text" if m.text else "binary"
        label = f"{'→' if m.from_client else '←'} {e.type or kind} · {len(m.data)} B"
        body = printable_block(m.data[:MESSAGE_LIMIT]) + (
            f"\n… ({len(m.data) - MESSAGE_LIMIT} more bytes)" if len(m.data) > MESSAGE_LIMIT else "")
        cell = (f'<details class="msg {m.direction}" data-index="{e.index}"><summary>{esc(label)}</summary>'
                f"<pre>{esc(body)}</pre></details>")
        left, right = (cell, "") if m.from_client else ("", cell)
        out.append(f'<tr><td class="client">{left}</td><td class="num">{esc(_ms(m.at_ns))}</td>'
                   f'<td class="num">{esc(_ms(m.at_ns - prev))}</td><td class="server">{right}</td></tr>')
        prev = m.at_ns
    out.append("</table>")
    return out


# ---------------------------------------------------------------------------
# The page


def _section(n: int, ix: Interaction, a: Analysis | SessionAnalysis, st: Stats | None) -> str:
    out = [f'<section class="ix" id="ix-{n}"><h2>#{n} {esc(ix.request.method)} {esc(path_of(ix.request.url))}</h2>']
    out.extend(_head(ix))
    out.extend(_headers(ix))
    if isinstance(a, SessionAnalysis):
        out.extend(_ladder(ix, a))
    else:
        assert st is not None
        out.append(f'<div class="row"><div class="figures-col"><h3>Figures</h3>{_figures(st, a)}</div>'
                   '<div class="col"><h3>Meaning</h3>')
        out.extend(_meaning(a))
        out.append("</div></div>")
        out.append(f'<h3>Timeline</h3>{timeline_svg(ix, a, st)}{_legend(a)}')
        out.append("<h3>Wire</h3>")
        out.extend(_raw(ix))
    out.append("</section>")
    return "".join(out)


def render_report(interactions: Iterable[Interaction], *, name: str,
                  indices: Sequence[int] | None = None, shape: str | None = None) -> str:
    """The report page of a cassette's interactions (``name`` heads it: the cassette's path).

    ``indices`` numbers them as in the cassette (default 0, 1, ...); ``shape`` forces
    the stream format, as ``show --shape`` does."""
    items: list[tuple[int, Interaction, Analysis | SessionAnalysis, Stats | None]] = []
    for k, ix in enumerate(interactions):
        n = indices[k] if indices is not None else k
        if ix.websocket is not None:
            items.append((n, ix, analyze_session(ix), None))
        else:
            an = analyze(ix, shape)
            items.append((n, ix, an, compute(ix, an)))
    sub = f"{esc(name)} &nbsp;·&nbsp; {len(items)} interaction{'' if len(items) == 1 else 's'}"
    body = _overview(items) + "".join(_section(n, ix, a, st) for n, ix, a, st in items)
    return page(f"streamtape show {name}", "streamtape show", sub, body, _CSS)
