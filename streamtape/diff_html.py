"""``streamtape diff --html``: one self-contained HTML page. No I/O, no network, no assets.

For each compared pair the page shows the three sections of the terminal
report (meaning, timing, wire) and both timelines drawn as inline SVG on one
shared time axis: one tick per body piece, its height by the piece's size,
markers for the first token and the finish, and hover text (an SVG
``<title>``) with the piece's bytes, escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from .diff import (
    DIFFERS,
    FINISH_LABELS,
    SAME,
    CassetteDiff,
    DiffReport,
    Side,
    compact_words,
    fmt_ratio,
    fmt_value,
    pair_summary,
    printable,
    show,
    show_check,
)

HOVER_BYTES = 400
"""How many bytes of a piece its hover text shows."""

# SVG geometry (user units; the SVG scales to the page width).
_W = 1200
_LEFT = 96
_RIGHT = 24
_LANE_H = 92
_LANE_GAP = 34
_TOP = 30
_AXIS_H = 34
_TICK_MIN = 3.0
_COLORS = {"A": "#2563eb", "B": "#d97706"}

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 0; background: #f5f6f8; color: #1f2328; }
header.page { background: #1f2937; color: #f9fafb; padding: 18px 28px; }
header.page h1 { margin: 0 0 4px; font-size: 20px; font-weight: 600; }
header.page .sub { color: #cbd5e1; font-size: 13px; }
main { padding: 18px 28px 40px; max-width: 1400px; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 999px; font-weight: 600; font-size: 13px; }
.v-same { background: #dcfce7; color: #166534; }
.v-differs { background: #fee2e2; color: #991b1b; }
.v-wire { background: #fef3c7; color: #92400e; }
section.pair { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; margin: 0 0 22px; padding: 14px 20px 18px; }
section.pair > h2 { font-size: 16px; margin: 0 0 8px; }
.sides { display: grid; grid-template-columns: auto 1fr; gap: 2px 12px; font-size: 13px; margin-bottom: 6px; }
.tag { font-weight: 700; padding: 0 7px; border-radius: 4px; color: #fff; }
.tag-A { background: #2563eb; } .tag-B { background: #d97706; }
.note { color: #92400e; font-size: 13px; }
h3 { font-size: 14px; margin: 18px 0 6px; text-transform: uppercase; letter-spacing: .04em; color: #57606a; }
table { border-collapse: collapse; font-size: 13px; }
th, td { text-align: left; padding: 3px 12px 3px 0; vertical-align: top; border-bottom: 1px solid #eef0f3; }
th { color: #57606a; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; padding-right: 18px; }
td.val { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; max-width: 420px; overflow-wrap: anywhere; }
tr.differs td { background: #fff7ed; }
section.meaning tr.differs td { background: #fef2f2; }
.s-same { color: #166534; } .s-differs { color: #b91c1c; font-weight: 600; } .s-info { color: #8c959f; }
.s-ignored { color: #92400e; } .s-wire { color: #b45309; font-weight: 600; } .s-quiet { color: #c4c9cf; }
table.grid { min-width: 560px; }
.row { display: flex; gap: 28px; align-items: flex-start; flex-wrap: wrap; }
.row > .col { flex: 1; min-width: 320px; }
pre.words del { background: #fee2e2; color: #991b1b; text-decoration: line-through; }
pre.words ins { background: #dcfce7; color: #166534; text-decoration: none; }
.caption { font-size: 12px; color: #57606a; margin: 2px 0; }
pre.diff { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px; padding: 8px 10px; font-size: 12px;
           overflow-x: auto; max-height: 420px; margin: 6px 0; }
pre.diff .del { color: #b91c1c; background: #fee2e2; display: block; }
pre.diff .add { color: #166534; background: #dcfce7; display: block; }
pre.diff .hunk { color: #0550ae; display: block; }
pre.diff .file { font-weight: 700; display: block; }
pre.text { white-space: pre-wrap; background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px; padding: 8px 10px;
           font-size: 12px; max-height: 220px; overflow: auto; margin: 4px 0; }
.timeline-wrap { margin: 8px 0 4px; }
svg.timelines { width: 100%; height: auto; background: #fff; }
svg .lane-bg { fill: #f6f8fa; }
svg .lane-label { font: 600 13px system-ui, sans-serif; }
svg .lane-sub { font: 11px system-ui, sans-serif; fill: #57606a; }
svg .axis text { font: 11px system-ui, sans-serif; fill: #57606a; }
svg .grid { stroke: #e5e7eb; stroke-width: 1; }
svg .tick { opacity: .85; }
svg .tick:hover { opacity: 1; stroke: #111; stroke-width: 1; }
svg .marker line { stroke-width: 2; stroke-dasharray: 5 3; }
svg .marker-labels text { font: 600 11px system-ui, sans-serif; paint-order: stroke; stroke: #f6f8fa;
                         stroke-width: 3px; stroke-linejoin: round; }
svg .first-token line { stroke: #059669; } svg text.first-token { fill: #047857; }
svg .finish line { stroke: #7c3aed; } svg text.finish { fill: #6d28d9; }
svg .end line { stroke: #9ca3af; stroke-dasharray: 2 3; }
.legend { font-size: 12px; color: #57606a; }
.legend span { margin-right: 16px; }
.unpaired li { font-family: ui-monospace, monospace; font-size: 13px; }
footer { color: #8c959f; font-size: 12px; padding: 0 28px 24px; }
"""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def piece_text(data: bytes, limit: int = HOVER_BYTES) -> str:
    """A piece's bytes as readable text: UTF-8 where it decodes, ``\\xNN`` where not, control
    characters escaped (``\\n``, ``\\r``), cut at ``limit`` bytes with a note."""
    shown = data[:limit]
    text = printable(shown.decode("utf-8", "backslashreplace"))
    if len(data) > limit:
        text += f" … ({len(data) - limit} more bytes)"
    return text


def _state_cell(state: str, ignored: bool = False, note: str = "", quiet: bool = False) -> str:
    """The verdict cell; ``quiet`` (wire rows) shows agreement as a faint mark and a
    difference in amber, since the wire may differ while the meaning is the same."""
    extra = f' <span class="s-info">{_e(note)}</span>' if note else ""
    if state == DIFFERS and ignored:
        return f'<td class="s-ignored">differs (ignored){extra}</td>'
    if state == SAME:
        return '<td class="s-quiet">=</td>' if quiet else f'<td class="s-same">same{extra}</td>'
    if state == DIFFERS:
        return f'<td class="{"s-wire" if quiet else "s-differs"}">differs{extra}</td>'
    return f'<td class="s-info">{_e(note) or "–"}</td>'


# ---------------------------------------------------------------------------
# Timelines


def _nice_step(span: float, target: int = 8) -> float:
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _fmt_axis(ns: float, step: float) -> str:
    if step >= 1e9 or ns >= 10e9:
        digits = 0 if step >= 1e9 else 1
        return f"{ns / 1e9:.{digits}f} s"
    digits = 0 if step >= 1e6 else 1 if step >= 1e5 else 2
    return f"{ns / 1e6:.{digits}f} ms"


def _finish_ns(s: Side) -> int | None:
    f = s.analysis.finish
    return getattr(f, "at_ns", None) if f is not None else None


def _side_end(s: Side) -> int:
    ix = s.interaction
    cands = [c.at_ns for c in ix.chunks]
    cands += [
        v for v in (ix.end_ns, _finish_ns(s), getattr(s.stats, "ttft_ns", None)) if v is not None
    ]
    return max(cands, default=0)


def timeline_svg(rep: DiffReport) -> str:
    """Both sides' pieces as ticks on one shared time axis."""
    sides = (("A", rep.a), ("B", rep.b))
    span = max(max(_side_end(s) for _, s in sides), 1_000)
    step = _nice_step(span)
    t_max = math.ceil(span / step) * step
    plot_w = _W - _LEFT - _RIGHT
    height = _TOP + 2 * _LANE_H + _LANE_GAP + _AXIS_H

    def x(ns: float) -> float:
        return _LEFT + plot_w * (ns / t_max)

    max_size = max((len(c.data) for _, s in sides for c in s.interaction.chunks), default=1) or 1
    out = [
        f'<svg class="timelines" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {height}" '
        f'role="img" aria-label="piece timelines of A and B on a shared time axis" '
        f'data-t-max-ns="{int(t_max)}" data-plot-x="{_LEFT}" data-plot-width="{plot_w}">'
    ]
    # grid + axis
    axis_y = _TOP + 2 * _LANE_H + _LANE_GAP + 6
    out.append('<g class="axis">')
    n_steps = round(t_max / step)
    for k in range(n_steps + 1):
        t = k * step
        gx = x(t)
        out.append(
            f'<line class="grid" x1="{gx:.1f}" y1="{_TOP - 8}" x2="{gx:.1f}" y2="{axis_y}"/>'
        )
        anchor = "start" if k == 0 else "end" if k == n_steps else "middle"
        out.append(
            f'<text x="{gx:.1f}" y="{axis_y + 15}" text-anchor="{anchor}">{_e(_fmt_axis(t, step))}</text>'
        )
    out.append("</g>")

    for n, (tag, s) in enumerate(sides):
        top = _TOP + n * (_LANE_H + _LANE_GAP)
        base = top + _LANE_H
        color = _COLORS[tag]
        chunks = s.interaction.chunks
        end = _side_end(s)
        out.append(
            f'<g class="lane timeline" data-side="{tag}" data-pieces="{len(chunks)}" data-label="{_e(s.label)}">'
        )
        out.append(
            f'<rect class="lane-bg" x="{_LEFT}" y="{top}" width="{plot_w}" height="{_LANE_H}"/>'
        )
        out.append(
            f'<rect x="{_LEFT}" y="{base - 1}" width="{max(x(end) - _LEFT, 1):.1f}" height="2" fill="{color}" opacity=".35"/>'
        )
        out.append(f'<text class="lane-label" x="8" y="{top + 20}" fill="{color}">{tag}</text>')
        out.append(f'<text class="lane-sub" x="8" y="{top + 37}">{_e(s.analysis.shape)}</text>')
        out.append(f'<text class="lane-sub" x="8" y="{top + 52}">{len(chunks)} pieces</text>')
        if not chunks:
            ix = s.interaction
            why = "no response" if ix.response is None else "no body"
            detail = f"{why} ({ix.outcome}{': ' + ix.error if ix.error else ''})"
            out.append(
                f'<text class="lane-sub" x="{_LEFT + plot_w / 2:.0f}" y="{top + _LANE_H / 2 + 4:.0f}" '
                f'text-anchor="middle">{_e(detail)}</text>'
            )
        # Marker lines under the ticks (a tick stays the hover target), labels on top.
        ttft = getattr(s.stats, "ttft_ns", None)
        fin = _finish_ns(s)
        marks = [("first-token", ttft, "first token"), ("finish", fin, "finish")]
        if ix_end := s.interaction.end_ns:
            marks.append(("end", ix_end, ""))
        labels = []
        for cls, at, name in marks:
            if at is None:
                continue
            mx = x(at)
            reason = ""
            if cls == "finish" and s.analysis.finish is not None:
                reason = f" ({s.analysis.finish.reason})"
            text = f"{name}{reason} {fmt_value(at, 'ns')}" if name else ""
            out.append(
                f'<g class="marker {cls}" data-at-ns="{int(at)}">'
                f"<title>{_e(tag)} {_e(text or 'end of response ' + fmt_value(at, 'ns'))}</title>"
                f'<line x1="{mx:.2f}" y1="{top}" x2="{mx:.2f}" y2="{base}"/></g>'
            )
            if text:
                anchor = "end" if mx > _LEFT + plot_w * 0.8 else "start"
                dx = -4 if anchor == "end" else 4
                ty = top + 12 + 13 * len(labels)
                labels.append(
                    f'<text class="{cls}" x="{mx + dx:.2f}" y="{ty}" text-anchor="{anchor}">{_e(text)}</text>'
                )
        for i, c in enumerate(chunks):
            h = _TICK_MIN + (_LANE_H - 8 - _TICK_MIN) * math.sqrt(len(c.data) / max_size)
            title = f"{tag} piece {i} at {fmt_value(c.at_ns, 'ns')}, {len(c.data)} bytes\n{piece_text(c.data)}"
            out.append(
                f'<rect class="tick" data-piece="{i}" data-bytes="{len(c.data)}" x="{x(c.at_ns) - 1.25:.2f}" '
                f'y="{base - h:.2f}" width="2.5" height="{h:.2f}" fill="{color}"><title>{_e(title)}</title></rect>'
            )
        out.append('<g class="marker-labels">' + "".join(labels) + "</g>")
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------------
# Sections


def _meaning(rep: DiffReport) -> str:
    m = rep.meaning
    out = ['<section class="meaning"><h3>Meaning</h3>']
    out.append(
        f"<p>{_verdict_badge(m.same, 'same', 'differs in ' + ', '.join(m.differs))}"
        + (
            f' <span class="s-info">ignoring {_e(", ".join(sorted(m.ignored)))}</span>'
            if m.ignored
            else ""
        )
        + "</p>"
    )
    t = m.text
    ti = "text" in m.ignored
    out.append(
        '<div class="row"><table class="grid"><tr><th></th><th>A</th><th>B</th><th></th></tr>'
    )
    out.append(
        f'<tr class="{"" if t.same else "differs"}"><td>text</td><td class="val">{len(t.a)} characters</td>'
        f'<td class="val">{len(t.b)} characters</td>{_state_cell(SAME if t.same else DIFFERS, ti)}</tr>'
    )
    toi = "tools" in m.ignored
    if not m.tools:
        out.append(
            f'<tr><td>tool calls</td><td class="val">none</td><td class="val">none</td>{_state_cell(SAME)}</tr>'
        )
    for tc in m.tools:
        a = f"{tc.name_a}({show(tc.arguments_a)})" if tc.name_a is not None else "-"
        b = f"{tc.name_b}({show(tc.arguments_b)})" if tc.name_b is not None else "-"
        out.append(
            f'<tr class="{"" if tc.same else "differs"}"><td>tool call #{tc.position}</td>'
            f'<td class="val">{_e(a)}</td><td class="val">{_e(b)}</td>{_state_cell(SAME if tc.same else DIFFERS, toi)}</tr>'
        )
    fi = "finish" in m.ignored
    for c in m.finish:
        if c.name == "errors" and not c.a and not c.b:
            continue
        out.append(
            f'<tr class="{"differs" if c.state == DIFFERS else ""}"><td>{_e(FINISH_LABELS.get(c.name, c.name))}</td>'
            f'<td class="val">{_e(show_check(c, c.a))}</td><td class="val">{_e(show_check(c, c.b))}</td>'
            f"{_state_cell(c.state, fi, c.note)}</tr>"
        )
    ui = "usage" in m.ignored
    if all(c.a is None and c.b is None for c in m.usage):
        out.append(
            '<tr><td>usage</td><td class="val">-</td><td class="val">-</td>'
            '<td class="s-info">neither side reports token counts</td></tr>'
        )
    else:
        for c in m.usage:
            out.append(
                f'<tr class="{"differs" if c.state == DIFFERS else ""}"><td>{_e(c.name.replace("_", " "))}</td>'
                f'<td class="val">{_e(show(c.a))}</td><td class="val">{_e(show(c.b))}</td>'
                f"{_state_cell(c.state, ui, c.note)}</tr>"
            )
    out.append('</table><div class="col">')
    if t.same:
        if t.a:
            out.append(
                f'<div class="caption">assembled text</div><pre class="text">{_e(t.a)}</pre>'
            )
    else:
        out.append(
            f'<div class="caption">text diff, first difference at character {t.first_difference}</div>'
        )
        out.append('<pre class="diff">')
        for line in t.unified:
            cls = (
                "file"
                if line.startswith(("---", "+++"))
                else "hunk"
                if line.startswith("@@")
                else "del"
                if line.startswith("-")
                else "add"
                if line.startswith("+")
                else ""
            )
            text = _e(printable(line)) or " "
            out.append(f'<span class="{cls}">{text}</span>' if cls else f"{text}\n")
        out.append("</pre>")
        if t.words:
            out.append('<div class="caption">word by word</div><pre class="text words">')
            for op, text in compact_words(t.words, keep=200):
                shown = _e(printable(text))
                if op == "-":
                    out.append(f"<del>{shown}</del>")
                elif op == "+":
                    out.append(f"<ins>{shown}</ins>")
                elif op == "…":
                    out.append(f' <span class="s-info">… ({shown})</span>')
                else:
                    out.append(shown)
            out.append("</pre>")
    out.append("</div></div></section>")
    return "".join(out)


def _timing(rep: DiffReport) -> str:
    out = ['<section class="timing"><h3>Timing</h3>']
    out.append('<div class="timeline-wrap">' + timeline_svg(rep) + "</div>")
    out.append(
        '<p class="legend"><span>one tick per piece, height by size (square root of bytes)</span>'
        '<span style="color:#047857">- - first token</span><span style="color:#6d28d9">- - finish</span>'
        '<span style="color:#6b7280">··· end of response</span><span>hover a tick for its bytes</span></p>'
    )
    out.append(
        '<table><tr><th>metric</th><th class="num">A</th><th class="num">B</th><th class="num">B/A</th><th class="num">B−A</th></tr>'
    )
    for r in rep.timing:
        out.append(
            f'<tr><td>{_e(r.label)}</td><td class="num">{_e(fmt_value(r.a, r.unit))}</td>'
            f'<td class="num">{_e(fmt_value(r.b, r.unit))}</td><td class="num">{_e(fmt_ratio(r.ratio))}</td>'
            f'<td class="num">{_e(fmt_value(r.delta, r.unit, signed=True))}</td></tr>'
        )
    out.append("</table>")
    if rep.gates:
        out.append("<h3>Gates</h3><table><tr><th>gate</th><th></th><th>measured</th></tr>")
        for g in rep.gates:
            cls = "s-same" if g.ok else "s-differs"
            out.append(
                f'<tr><td class="val">{_e(g.gate.text)}</td><td class="{cls}">{"ok" if g.ok else "FAILED"}</td>'
                f"<td>{_e(g.detail)}</td></tr>"
            )
        out.append("</table>")
    out.append("</section>")
    return "".join(out)


def _wire(rep: DiffReport) -> str:
    out = ['<section class="wire"><h3>Wire</h3>']
    out.append("<p>" + _verdict_badge(rep.wire_same, "same", "differs", wire=True) + "</p>")
    out.append('<table class="grid"><tr><th></th><th>A</th><th>B</th><th></th></tr>')
    for w in rep.wire:
        out.append(
            f'<tr class="{"" if w.same else "differs"}"><td>{_e(w.name)}</td><td class="val">{_e(show(w.a))}</td>'
            f'<td class="val">{_e(show(w.b))}</td>{_state_cell(SAME if w.same else DIFFERS, quiet=True)}</tr>'
        )
    out.append("</table>")
    if rep.headers:
        out.append(
            '<h3>Headers that differ</h3><p class="s-info">volatile headers (Date, request ids, rate limits, Content-Length) left out</p>'
        )
        out.append("<table><tr><th>header</th><th>A</th><th>B</th></tr>")
        for h in rep.headers:
            out.append(
                f'<tr class="differs"><td>{_e(h.name)}</td><td class="val">{_e(show(h.a))}</td><td class="val">{_e(show(h.b))}</td></tr>'
            )
        out.append("</table>")
    out.append("</section>")
    return "".join(out)


def _verdict_badge(ok: bool, yes: str, no: str, wire: bool = False) -> str:
    if ok:
        return f'<span class="verdict v-same">{_e(yes)}</span>'
    return f'<span class="verdict {"v-wire" if wire else "v-differs"}">{_e(no)}</span>'


def _pair(rep: DiffReport, n: int) -> str:
    out = [f'<section class="pair" id="pair-{n}">']
    out.append(f'<h2>{_e(rep.a.label)} vs {_e(rep.b.label)}</h2><div class="sides">')
    for tag, s in (("A", rep.a), ("B", rep.b)):
        ix = s.interaction
        status = s.status if s.status is not None else "no response"
        out.append(
            f'<span class="tag tag-{tag}">{tag}</span><span>{_e(s.label)} · {_e(ix.request.method)} '
            f"{_e(ix.request.path)} · {_e(status)} · {_e(s.analysis.shape)} · {_e(ix.outcome)}"
            + (f" ({_e(ix.error)})" if ix.error else "")
            + "</span>"
        )
    out.append("</div>")
    if rep.request_differences:
        out.append(f'<p class="note">requests differ: {_e("; ".join(rep.request_differences))}</p>')
    out.append(_meaning(rep))
    out.append(_timing(rep))
    out.append(_wire(rep))
    out.append("</section>")
    return "".join(out)


def _overview(result: CassetteDiff) -> str:
    """With several pairs: one row each, linking to its section."""
    if len(result.reports) < 2:
        return ""
    out = [
        '<section class="pair overview"><h2>Pairs</h2><table class="grid"><tr><th>A</th><th>B</th>'
        '<th>request</th><th>meaning</th><th>wire</th><th class="num">ttft B/A</th>'
        '<th class="num">duration B/A</th><th>gates</th></tr>'
    ]
    for n, rep in enumerate(result.reports):
        p = pair_summary(rep)
        out.append(
            f'<tr class="{"" if rep.same else "differs"}"><td><a href="#pair-{n}">{_e(p["a"])}</a></td>'
            f'<td>{_e(p["b"])}</td><td class="val">{_e(p["request"])}</td>'
            f'<td class="{"s-same" if rep.same else "s-differs"}">{_e(p["meaning"])}</td>'
            f'<td class="{"s-quiet" if rep.wire_same else "s-wire"}">{_e(p["wire"])}</td>'
            f'<td class="num">{_e(fmt_ratio(p["ttft_ratio"]))}</td>'
            f'<td class="num">{_e(fmt_ratio(p["duration_ratio"]))}</td>'
            f'<td class="{"s-differs" if p["gates_failed"] else "s-info"}">'
            f"{_e(str(p['gates_failed']) + ' failed' if p['gates_failed'] else '-')}</td></tr>"
        )
    out.append("</table></section>")
    return "".join(out)


def _unpaired(result: CassetteDiff) -> str:
    if not result.unpaired:
        return ""
    items = "".join(
        f"<li>only in {_e(u.side)}: {_e(u.label)} {_e(u.method)} {_e(u.path)}</li>"
        for u in result.unpaired
    )
    return f'<section class="pair unpaired"><h2>Unpaired ({len(result.unpaired)})</h2><ul>{items}</ul></section>'


def render_html(result: CassetteDiff | DiffReport, *, title: str | None = None) -> str:
    """The whole page as a string: inline CSS and SVG only, nothing fetched."""
    if isinstance(result, DiffReport):
        result = CassetteDiff(result.a.label, result.b.label, (result,))
    title = title or f"streamtape diff {result.a} vs {result.b}"
    n = len(result.reports)
    differing = sum(1 for r in result.reports if not r.same)
    failed = sum(1 for r in result.reports for g in r.gates if not g.ok)
    summary: Sequence[str] = [
        f"{n} pair(s)",
        "meaning same" if not differing else f"meaning differs in {differing}",
        *([f"{len(result.unpaired)} unpaired"] if result.unpaired else []),
        *([f"{failed} gate(s) failed"] if failed else []),
        f"exit status {result.exit_status}",
    ]
    if differing:
        badge = _verdict_badge(False, "", "meaning differs")
    elif result.unpaired:
        badge = _verdict_badge(False, "", "unpaired requests")
    elif failed:
        badge = _verdict_badge(False, "", "gate failed")
    else:
        badge = _verdict_badge(True, "meaning same", "")
    body = (
        _overview(result)
        + "".join(_pair(r, i) for i, r in enumerate(result.reports))
        + _unpaired(result)
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f'<header class="page"><h1>streamtape diff</h1><div class="sub">A = {_e(result.a)} &nbsp;·&nbsp; '
        f"B = {_e(result.b)}</div></header>"
        f"<main><p>{badge} {_e(' · '.join(summary))}</p>{body}</main>"
        "<footer>generated by streamtape; this page is self-contained (no scripts, no network)</footer>"
        "</body></html>\n"
    )


__all__ = ["piece_text", "render_html", "timeline_svg"]
