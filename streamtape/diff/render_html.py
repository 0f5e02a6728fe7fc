"""``streamtape diff --html``: one self-contained HTML page. No I/O, no network, no assets.

For each compared pair the page shows the three sections of the terminal
report (meaning, timing, wire) and both timelines drawn as inline SVG on one
shared time axis: one tick per body piece, its height by the piece's size,
markers for the first token and the finish, and hover text (an SVG
``<title>``) with the piece's bytes, escaped. The page carries a
Content-Security-Policy that allows no script and no fetch, so a cassette's
bytes shown in it can do nothing but be read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..render.common import HOVER_BYTES as HOVER_BYTES
from ..render.common import TimeAxis, page
from ..render.common import esc as _e
from ..render.common import piece_text as piece_text
from .cells import (
    FINISH_LABELS,
    compact_words,
    fmt_ratio,
    fmt_value,
    printable,
    show,
    show_check,
)
from .model import Category, Check, Meaning, Side, Status, TextDiff
from .report import CassetteDiff, DiffReport, pair_summary

# SVG geometry (user units; the SVG scales to the page width).
_W = 1200
_LEFT = 96
_RIGHT = 24
_PLOT_W = _W - _LEFT - _RIGHT
_LANE_H = 92
_LANE_GAP = 34
_TOP = 30
_AXIS_H = 34
_TICK_MIN = 3.0
_COLORS = {"A": "#2563eb", "B": "#d97706"}

_CSS = """
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
tr.differs td { background: #fff7ed; }
section.meaning tr.differs td { background: #fef2f2; }
.s-ignored { color: #92400e; } .s-wire { color: #b45309; font-weight: 600; } .s-quiet { color: #c4c9cf; }
table.grid { min-width: 560px; }
.row { display: flex; gap: 28px; align-items: flex-start; flex-wrap: wrap; }
.row > .col { flex: 1; min-width: 320px; }
pre.words del { background: #fee2e2; color: #991b1b; text-decoration: line-through; }
pre.words ins { background: #dcfce7; color: #166534; text-decoration: none; }
pre.diff { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px; padding: 8px 10px; font-size: 12px;
           overflow-x: auto; max-height: 420px; margin: 6px 0; }
pre.diff .del { color: #b91c1c; background: #fee2e2; display: block; }
pre.diff .add { color: #166534; background: #dcfce7; display: block; }
pre.diff .hunk { color: #0550ae; display: block; }
pre.diff .file { font-weight: 700; display: block; }
.timeline-wrap { margin: 8px 0 4px; }
svg.timelines { width: 100%; height: auto; background: #fff; }
svg .lane-bg { fill: #f6f8fa; }
svg .lane-label { font-weight: 600; font-size: 13px; }
svg .lane-sub { font-size: 11px; fill: #57606a; }
svg .tick { opacity: .85; }
svg .tick:hover { opacity: 1; stroke: #111; stroke-width: 1; }
svg .marker line { stroke-width: 2; stroke-dasharray: 5 3; }
svg .marker-labels text { font-weight: 600; font-size: 11px; paint-order: stroke; stroke: #f6f8fa;
                         stroke-width: 3px; stroke-linejoin: round; }
svg .first-token line { stroke: #059669; } svg text.first-token { fill: #047857; }
svg .finish line { stroke: #7c3aed; } svg text.finish { fill: #6d28d9; }
svg .end line { stroke: #9ca3af; stroke-dasharray: 2 3; }
.unpaired li { font-family: ui-monospace, monospace; font-size: 13px; }
"""


def _state_cell(state: Status, ignored: bool = False, note: str = "", quiet: bool = False) -> str:
    """The verdict cell; ``quiet`` (wire rows) shows agreement as a faint mark and a
    difference in amber, since the wire may differ while the meaning is the same."""
    extra = f' <span class="s-info">{_e(note)}</span>' if note else ""
    if state == Status.DIFFERS and ignored:
        return f'<td class="s-ignored">differs (ignored){extra}</td>'
    if state == Status.SAME:
        return '<td class="s-quiet">=</td>' if quiet else f'<td class="s-same">same{extra}</td>'
    if state == Status.DIFFERS:
        return f'<td class="{"s-wire" if quiet else "s-differs"}">differs{extra}</td>'
    return f'<td class="s-info">{_e(note) or "–"}</td>'


def _same(same: bool) -> Status:
    return Status.SAME if same else Status.DIFFERS


# ---------------------------------------------------------------------------
# Timelines


def _finish_ns(s: Side) -> int | None:
    f = s.analysis.finish
    return f.at_ns if f is not None else None


def _side_end(s: Side) -> int:
    ix = s.interaction
    cands = [c.at_ns for c in ix.pieces]
    cands += [v for v in (ix.end_ns, _finish_ns(s), s.stats.ttft_ns) if v is not None]
    return max(cands, default=0)


def timeline_svg(rep: DiffReport) -> str:
    """Both sides' pieces as ticks on one shared time axis."""
    axis = TimeAxis.spanning(max(_side_end(s) for s in (rep.a, rep.b)), _LEFT, _PLOT_W)
    height = _TOP + 2 * _LANE_H + _LANE_GAP + _AXIS_H
    sides = (("A", rep.a), ("B", rep.b))
    max_size = max((len(c.data) for _, s in sides for c in s.interaction.pieces), default=1) or 1
    out = [
        f'<svg class="timelines" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {height}" '
        f'role="img" aria-label="piece timelines of A and B on a shared time axis" '
        f'data-t-max-ns="{int(axis.t_max)}" data-plot-x="{_LEFT}" data-plot-width="{_PLOT_W}">'
    ]
    out.extend(axis.svg(_TOP - 8, _TOP + 2 * _LANE_H + _LANE_GAP + 6))
    for n, (tag, s) in enumerate(sides):
        out.extend(_lane_svg(tag, s, _TOP + n * (_LANE_H + _LANE_GAP), axis, max_size))
    out.append("</svg>")
    return "".join(out)


def _lane_svg(tag: str, s: Side, top: int, axis: TimeAxis, max_size: int) -> list[str]:
    """One side's lane: its name and format, the markers, then one tick per piece."""
    base = top + _LANE_H
    color = _COLORS[tag]
    pieces = s.interaction.pieces
    out = [
        f'<g class="lane timeline" data-side="{tag}" data-pieces="{len(pieces)}" data-label="{_e(s.label)}">',
        f'<rect class="lane-bg" x="{_LEFT}" y="{top}" width="{_PLOT_W}" height="{_LANE_H}"/>',
        f'<rect x="{_LEFT}" y="{base - 1}" width="{max(axis.x(_side_end(s)) - _LEFT, 1):.1f}" height="2" fill="{color}" opacity=".35"/>',
        f'<text class="lane-label" x="8" y="{top + 20}" fill="{color}">{tag}</text>',
        f'<text class="lane-sub" x="8" y="{top + 37}">{_e(s.analysis.shape)}</text>',
        f'<text class="lane-sub" x="8" y="{top + 52}">{len(pieces)} pieces</text>',
    ]
    if not pieces:
        ix = s.interaction
        why = "no response" if ix.response is None else "no body"
        detail = f"{why} ({ix.outcome}{': ' + ix.error if ix.error else ''})"
        out.append(
            f'<text class="lane-sub" x="{_LEFT + _PLOT_W / 2:.0f}" y="{top + _LANE_H / 2 + 4:.0f}" '
            f'text-anchor="middle">{_e(detail)}</text>'
        )
    # Marker lines under the ticks (a tick stays the hover target), labels on top.
    markers, labels = _markers(tag, s, top, axis)
    out.extend(markers)
    out.extend(_ticks(tag, s, base, axis, max_size))
    out.append('<g class="marker-labels">' + "".join(labels) + "</g>")
    out.append("</g>")
    return out


def _markers(tag: str, s: Side, top: int, axis: TimeAxis) -> tuple[list[str], list[str]]:
    """Dashed lines at the first token, the finish and the end; their labels apart, to
    be drawn over the ticks."""
    base = top + _LANE_H
    marks: list[tuple[str, int | None, str]] = [
        ("first-token", s.stats.ttft_ns, "first token"),
        ("finish", _finish_ns(s), "finish"),
    ]
    if ix_end := s.interaction.end_ns:
        marks.append(("end", ix_end, ""))
    lines: list[str] = []
    labels: list[str] = []
    for cls, at, name in marks:
        if at is None:
            continue
        mx = axis.x(at)
        reason = ""
        if cls == "finish" and s.analysis.finish is not None:
            reason = f" ({s.analysis.finish.reason})"
        text = f"{name}{reason} {fmt_value(at, 'ns')}" if name else ""
        lines.append(
            f'<g class="marker {cls}" data-at-ns="{int(at)}">'
            f"<title>{_e(tag)} {_e(text or 'end of response ' + fmt_value(at, 'ns'))}</title>"
            f'<line x1="{mx:.2f}" y1="{top}" x2="{mx:.2f}" y2="{base}"/></g>'
        )
        if text:
            anchor = "end" if mx > _LEFT + _PLOT_W * 0.8 else "start"
            dx = -4 if anchor == "end" else 4
            ty = top + 12 + 13 * len(labels)
            labels.append(
                f'<text class="{cls}" x="{mx + dx:.2f}" y="{ty}" text-anchor="{anchor}">{_e(text)}</text>'
            )
    return lines, labels


def _ticks(tag: str, s: Side, base: int, axis: TimeAxis, max_size: int) -> list[str]:
    """One bar per piece at its time, its height by the square root of its size."""
    out = []
    color = _COLORS[tag]
    for i, c in enumerate(s.interaction.pieces):
        h = _TICK_MIN + (_LANE_H - 8 - _TICK_MIN) * math.sqrt(len(c.data) / max_size)
        title = f"{tag} piece {i} at {fmt_value(c.at_ns, 'ns')}, {len(c.data)} bytes\n{piece_text(c.data)}"
        out.append(
            f'<rect class="tick" data-piece="{i}" data-bytes="{len(c.data)}" x="{axis.x(c.at_ns) - 1.25:.2f}" '
            f'y="{base - h:.2f}" width="2.5" height="{h:.2f}" fill="{color}"><title>{_e(title)}</title></rect>'
        )
    return out


# ---------------------------------------------------------------------------
# Sections


def _meaning(rep: DiffReport) -> str:
    m = rep.meaning
    ignoring = (
        f' <span class="s-info">ignoring {_e(", ".join(sorted(m.ignored)))}</span>'
        if m.ignored
        else ""
    )
    verdict = _verdict_badge(m.same, "same", "differs in " + ", ".join(m.differs))
    out = [
        '<section class="meaning"><h3>Meaning</h3>',
        f"<p>{verdict}{ignoring}</p>",
        '<div class="row"><table class="grid"><tr><th></th><th>A</th><th>B</th><th></th></tr>',
        *_meaning_rows(m),
        '</table><div class="col">',
        *_text_panel(m.text),
        *(_text_panel(m.reasoning, "reasoning") if m.has_reasoning else []),
        "</div></div></section>",
    ]
    return "".join(out)


def _check_row(c: Check, ignored: bool, label: str, a: str, b: str) -> str:
    return (
        f'<tr class="{"differs" if c.state == Status.DIFFERS else ""}"><td>{_e(label)}</td>'
        f'<td class="val">{_e(a)}</td><td class="val">{_e(b)}</td>'
        f"{_state_cell(c.state, ignored, c.note)}</tr>"
    )


def _meaning_rows(m: Meaning) -> list[str]:
    """The meaning table: text, each tool call, the finish checks and token counts."""
    t = m.text
    out = [
        f'<tr class="{"" if t.same else "differs"}"><td>text</td><td class="val">{len(t.a)} characters</td>'
        f'<td class="val">{len(t.b)} characters</td>{_state_cell(_same(t.same), Category.TEXT in m.ignored)}</tr>'
    ]
    if m.has_reasoning:
        r = m.reasoning
        out.append(
            f'<tr class="{"" if r.same else "differs"}"><td>reasoning</td><td class="val">{len(r.a)} characters</td>'
            f'<td class="val">{len(r.b)} characters</td>{_state_cell(_same(r.same), Category.REASONING in m.ignored)}</tr>'
        )
    if not m.tools:
        out.append(
            f'<tr><td>tool calls</td><td class="val">none</td><td class="val">none</td>{_state_cell(Status.SAME)}</tr>'
        )
    for tc in m.tools:
        a = f"{tc.name_a}({show(tc.arguments_a)})" if tc.name_a is not None else "-"
        b = f"{tc.name_b}({show(tc.arguments_b)})" if tc.name_b is not None else "-"
        out.append(
            f'<tr class="{"" if tc.same else "differs"}"><td>tool call #{tc.position}</td>'
            f'<td class="val">{_e(a)}</td><td class="val">{_e(b)}</td>{_state_cell(_same(tc.same), Category.TOOLS in m.ignored)}</tr>'
        )
    fi = Category.FINISH in m.ignored
    for c in m.finish:
        if c.name == "errors" and not c.a and not c.b:
            continue
        label = FINISH_LABELS.get(c.name, c.name)
        out.append(_check_row(c, fi, label, show_check(c, c.a), show_check(c, c.b)))
    if all(c.a is None and c.b is None for c in m.usage):
        out.append(
            '<tr><td>usage</td><td class="val">-</td><td class="val">-</td>'
            '<td class="s-info">neither side reports token counts</td></tr>'
        )
    else:
        ui = Category.USAGE in m.ignored
        for c in m.usage:
            out.append(_check_row(c, ui, c.name.replace("_", " "), show(c.a), show(c.b)))
    return out


def _text_panel(t: TextDiff, what: str = "text") -> list[str]:
    """The assembled text (or reasoning) when both agree; else the line diff and the word diff."""
    if t.same:
        if t.a:
            return [f'<div class="caption">assembled {what}</div><pre class="text">{_e(t.a)}</pre>']
        return []
    out = [
        f'<div class="caption">{what} diff, first difference at character {t.first_difference}</div>',
        '<pre class="diff">',
    ]
    for line in t.unified:
        cls = _diff_class(line)
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
    return out


def _diff_class(line: str) -> str:
    if line.startswith(("---", "+++")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("-"):
        return "del"
    if line.startswith("+"):
        return "add"
    return ""


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
    for r in rep.timing_shown:
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
            f'<td class="val">{_e(show(w.b))}</td>{_state_cell(_same(w.same), quiet=True)}</tr>'
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
            f'<tr class="{"" if rep.same else "differs"}"><td><a href="#pair-{n}">{_e(p.a)}</a></td>'
            f'<td>{_e(p.b)}</td><td class="val">{_e(p.request)}</td>'
            f'<td class="{"s-same" if rep.same else "s-differs"}">{_e(p.meaning)}</td>'
            f'<td class="{"s-quiet" if rep.wire_same else "s-wire"}">{_e(p.wire)}</td>'
            f'<td class="num">{_e(fmt_ratio(p.ttft_ratio))}</td>'
            f'<td class="num">{_e(fmt_ratio(p.duration_ratio))}</td>'
            f'<td class="{"s-differs" if p.gates_failed else "s-info"}">'
            f"{_e(str(p.gates_failed) + ' failed' if p.gates_failed else '-')}</td></tr>"
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


def _headline(result: CassetteDiff) -> str:
    """The verdict badge and the counts under the page title."""
    n = len(result.reports)
    differing = sum(1 for r in result.reports if not r.same)
    failed = result.gates_failed
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
    return f"<p>{badge} {_e(' · '.join(summary))}</p>"


def render_html(
    result: CassetteDiff | DiffReport,
    *,
    title: str | None = None,
    summary_html: str | None = None,
    extra_css: str = "",
) -> str:
    """The whole page as a string: inline CSS and SVG only, nothing fetched.

    ``summary_html`` (a many-pair summary, :func:`streamtape.diff.summary_html.summary_section`)
    takes the place of the headline and the overview table; ``extra_css`` is its style."""
    result = CassetteDiff.of(result)
    title = title or f"streamtape diff {result.a} vs {result.b}"
    lead = _headline(result) + _overview(result) if summary_html is None else summary_html
    body = (
        lead
        + "".join(_pair(r, i) for i, r in enumerate(result.reports))
        + _unpaired(result)
    )
    sub = f"A = {_e(result.a)} &nbsp;·&nbsp; B = {_e(result.b)}"
    return page(title, "streamtape diff", sub, body, _CSS + extra_css)
