"""The summary of many pairs as the head of the ``diff --html`` page, with its plots.

:func:`summary_section` is the HTML that leads the page
(:func:`streamtape.diff.render_html.render_html` takes it as ``summary_html``): the
verdict, the pairs in a table (each row a link to that pair's section, with
its two timelines, further down the page), the agreement counts, the calls
with one side only, the timing spread, the gates, and two plots for each of
first-token time and tokens/s:

- a scatter of every pair, A's value across and B's up, on one scale with
  the diagonal drawn, so a point above it is a call B made slower (or, for
  tokens/s, faster); each point links to its pair;
- both sides' distributions as step curves (the share of pairs at or below a
  value), with their p50 and p95 marked.

Inline SVG only, like the rest of the page: no script, nothing fetched, so the
page's Content-Security-Policy holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..render.common import esc as _e
from .cells import fmt_ratio, fmt_value
from .load_render import load_html
from .model import Category, Metric, TimingUnit
from .summary import Distribution, Summary
from .summary_gates import Stat

PLOTTED = (Metric.TTFT, Metric.TOKENS_PER_S)
"""The metrics drawn as plots (the others are in the table)."""

_A, _B = "#2563eb", "#d97706"
_W, _H = 420, 300
_L, _R, _T, _BOT = 64, 16, 16, 44

SUMMARY_CSS = """
section.summary .counts { font-size: 13px; margin: 4px 0 10px; }
section.summary td.why { color: #7f1d1d; font-size: 12px; max-width: 460px; }
.plots { display: flex; flex-wrap: wrap; gap: 18px; margin: 8px 0; }
.plots figure { margin: 0; background: #fff; border: 1px solid #e1e4e8; border-radius: 6px; padding: 6px; }
.plots figcaption { font-size: 12px; color: #57606a; margin: 0 4px 4px; }
svg.plot { width: 420px; height: 300px; }
svg.plot .frame { fill: #f6f8fa; }
svg.plot .grid { stroke: #e5e7eb; stroke-width: 1; }
svg.plot text { font-size: 11px; fill: #57606a; }
svg.plot .diagonal { stroke: #9ca3af; stroke-dasharray: 4 3; }
svg.plot circle.pt { fill: #7c3aed; fill-opacity: .75; stroke: #fff; stroke-width: 1; }
svg.plot a:hover circle.pt { fill: #111827; }
svg.plot polyline { fill: none; stroke-width: 2; }
svg.plot .mark { stroke-width: 1.5; stroke-dasharray: 3 3; }
.legend-a { color: #2563eb; font-weight: 600; } .legend-b { color: #d97706; font-weight: 600; }
"""


def _nice(top: float) -> float:
    """A round upper bound for an axis."""
    if top <= 0:
        return 1.0
    mag = 10.0 ** math.floor(math.log10(top))
    for m in (1, 2, 4, 6, 8, 10):  # quarters of these are round too (the gridlines)
        if top <= m * mag:
            return m * mag
    return 10 * mag


def _tick(v: float, unit: TimingUnit) -> str:
    """An axis label: a round number, in ms (or s) for times."""
    if unit == "tok/s":
        return f"{v:g}"
    if v >= 1e9:
        return f"{v / 1e9:g}\u202fs"
    return f"{v / 1e6:g}\u202fms"


@dataclass(frozen=True)
class _Scale:
    top: float

    def x(self, v: float) -> float:
        return _L + (_W - _L - _R) * v / self.top

    def y(self, v: float) -> float:
        return _H - _BOT - (_H - _T - _BOT) * v / self.top


def _axes(top: float, unit: TimingUnit, xlabel: str, ylabel: str, yfrac: bool = False) -> list[str]:
    out = [f'<rect class="frame" x="{_L}" y="{_T}" width="{_W - _L - _R}" height="{_H - _T - _BOT}"/>']
    sx = _Scale(top)
    for k in range(5):
        v = top * k / 4
        x = sx.x(v)
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{_T}" x2="{x:.1f}" y2="{_H - _BOT}"/>')
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        out.append(f'<text x="{x:.1f}" y="{_H - _BOT + 14}" text-anchor="{anchor}">{_e(_tick(v, unit))}</text>')
        yv = k / 4 if yfrac else v
        y = _frac_y(k / 4)
        out.append(f'<line class="grid" x1="{_L}" y1="{y:.1f}" x2="{_W - _R}" y2="{y:.1f}"/>')
        label = f"{yv:.0%}" if yfrac else _tick(yv, unit)
        out.append(f'<text x="{_L - 6}" y="{y + 4:.1f}" text-anchor="end">{_e(label)}</text>')
    out.append(f'<text x="{(_L + _W - _R) / 2:.0f}" y="{_H - 8}" text-anchor="middle">{_e(xlabel)}</text>')
    out.append(f'<text x="14" y="{(_T + _H - _BOT) / 2:.0f}" text-anchor="middle" transform="rotate(-90 14 {(_T + _H - _BOT) / 2:.0f})">{_e(ylabel)}</text>')
    return out


def scatter_svg(s: Summary, d: Distribution) -> str:
    """Each pair with a value on both sides: A across, B up, linking to its section."""
    points = [
        (p.index, a, b) for p, (a, b) in zip(s.pairs, d.per_pair, strict=True) if a is not None and b is not None
    ]
    top = _nice(max((max(a, b) for _, a, b in points), default=0.0) * 1.05)
    sc = _Scale(top)
    out = [
        f'<svg class="plot scatter" data-metric="{d.metric.value}" data-points="{len(points)}" '
        f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" role="img" '
        f'aria-label="{_e(d.label)} per pair, A across and B up">'
    ]
    out += _axes(top, d.unit, f"A {d.label}", f"B {d.label}")
    out.append(f'<line class="diagonal" x1="{sc.x(0):.1f}" y1="{sc.y(0):.1f}" x2="{sc.x(top):.1f}" y2="{sc.y(top):.1f}"/>')
    for n, a, b in points:
        tip = f"pair #{n}: A {fmt_value(a, d.unit)}, B {fmt_value(b, d.unit)} (B/A {fmt_ratio(b / a if a else None)})"
        out.append(
            f'<a href="#pair-{n}" class="pair-link" data-pair="{n}"><circle class="pt" cx="{sc.x(a):.1f}" '
            f'cy="{sc.y(b):.1f}" r="4.5"><title>{_e(tip)}</title></circle></a>'
        )
    out.append("</svg>")
    return "".join(out)


def _frac_y(f: float) -> float:
    """Where a share of the pairs (0 to 1) is on a plot's vertical axis."""
    return _H - _BOT - (_H - _T - _BOT) * f


def cdf_svg(d: Distribution) -> str:
    """Both sides' distributions as step curves, p50 and p95 marked."""
    values = [*d.a, *d.b]
    top = _nice(max(values, default=0.0) * 1.05)
    sc = _Scale(top)
    out = [
        f'<svg class="plot cdf" data-metric="{d.metric.value}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {_W} {_H}" role="img" aria-label="{_e(d.label)}: share of pairs at or below a value, A and B">'
    ]
    out += _axes(top, d.unit, d.label, "share of pairs", yfrac=True)
    for tag, color, vals in (("A", _A, d.a), ("B", _B, d.b)):
        if not vals:
            continue
        ordered = sorted(vals)
        n = len(ordered)
        pts = [(sc.x(0), _frac_y(0.0))]
        for i, v in enumerate(ordered):
            pts.append((sc.x(v), _frac_y(i / n)))
            pts.append((sc.x(v), _frac_y((i + 1) / n)))
        pts.append((sc.x(top), _frac_y(1.0)))
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        out.append(f'<polyline class="curve" data-side="{tag}" data-n="{n}" stroke="{color}" points="{coords}"/>')
        for stat in (Stat.P50, Stat.P95):
            mark = d.value("A" if tag == "A" else "B", stat)
            if mark is None:
                continue
            x = sc.x(mark)
            out.append(
                f'<line class="mark" data-side="{tag}" data-stat="{stat}" stroke="{color}" x1="{x:.1f}" y1="{_T}" '
                f'x2="{x:.1f}" y2="{_H - _BOT}"><title>{tag} {stat} {_e(fmt_value(mark, d.unit))}</title></line>'
            )
    out.append("</svg>")
    return "".join(out)


def _badge(s: Summary) -> str:
    ok = s.exit_status == 0
    a = s.agreement
    if not a.compared:
        text, cls = "no pairs compared", "v-wire"
    elif ok:
        text, cls = ("all pairs agree" if not a.differ else f"{a.differ} differ, within the agree gate"), "v-same"
    elif not s.gates_ok:
        text, cls = "gate failed", "v-differs"
    elif a.differ:
        text, cls = f"{a.differ} of {a.compared} pairs differ", "v-differs"
    else:
        text, cls = "unpaired requests", "v-differs"
    return f'<span class="verdict {cls}">{_e(text)}</span>'


def _pairs_table(s: Summary) -> str:
    session = s.session
    out = [
        '<table class="grid pairs"><tr><th>#</th>' + ("<th>pair</th>" if session else "")
        + '<th>request</th><th>meaning</th><th>why</th><th>wire</th><th class="num">ttft B/A</th>'
        '<th class="num">duration B/A</th><th>gates</th></tr>'
    ]
    for p in s.pairs:
        meaning = "same" if p.same else "differs in " + ", ".join(p.differs)
        out.append(
            f'<tr class="{"" if p.same else "differs"}"><td><a href="#pair-{p.index}">#{p.index}</a></td>'
            + (f'<td class="val">{_e(p.pair or "-")}</td>' if session else "")
            + f'<td class="val">{_e(p.request)}</td>'
            f'<td class="{"s-same" if p.same else "s-differs"}">{_e(meaning)}</td>'
            f'<td class="why">{_e(p.reason)}</td>'
            f'<td class="{"s-quiet" if p.wire_same else "s-wire"}">{"same" if p.wire_same else "differs"}</td>'
            f'<td class="num">{_e(fmt_ratio(p.ttft_ratio))}</td><td class="num">{_e(fmt_ratio(p.duration_ratio))}</td>'
            f'<td class="{"s-differs" if p.gates_failed else "s-info"}">{_e(f"{p.gates_failed} failed" if p.gates_failed else "-")}</td></tr>'
        )
    out.append("</table>")
    return "".join(out)


def _timing_table(dists: Sequence[Distribution]) -> str:
    out = [
        '<table class="grid timing"><tr><th></th><th class="num">A p50</th><th class="num">A p95</th>'
        '<th class="num">B p50</th><th class="num">B p95</th><th class="num">B/A p50</th>'
        '<th class="num">B/A p95</th><th class="num">pairs A/B</th></tr>'
    ]
    for d in dists:
        cells = [fmt_value(d.value(side, st), d.unit) for side in ("A", "B") for st in (Stat.P50, Stat.P95)]
        cells += [fmt_ratio(d.ratio(Stat.P50)), fmt_ratio(d.ratio(Stat.P95)), f"{len(d.a)}/{len(d.b)}"]
        out.append(
            f'<tr data-metric="{d.metric.value}"><td>{_e(d.label)}</td>'
            + "".join(f'<td class="num">{_e(c)}</td>' for c in cells)
            + "</tr>"
        )
    out.append("</table>")
    return "".join(out)


def _plots(s: Summary) -> str:
    by_metric = {d.metric: d for d in s.distributions}
    out = ['<div class="plots">']
    for m in PLOTTED:
        d = by_metric.get(m)
        if d is None:
            continue
        out.append(
            f'<figure><figcaption>{_e(d.label)} per pair: <span class="legend-a">A</span> across, '
            f'<span class="legend-b">B</span> up; above the diagonal B is higher. Click a point for its pair.</figcaption>'
            f"{scatter_svg(s, d)}</figure>"
        )
        out.append(
            f'<figure><figcaption>{_e(d.label)}: share of pairs at or below a value, '
            f'<span class="legend-a">A</span> and <span class="legend-b">B</span>, p50 and p95 marked</figcaption>'
            f"{cdf_svg(d)}</figure>"
        )
    out.append("</div>")
    return "".join(out)


def summary_section(s: Summary) -> str:
    """The section that leads the page (see the module docstring)."""
    a = s.agreement
    counts = [f"{len(s.pairs)} pair(s) paired by {s.how}", f"{a.agree} agree", f"{a.differ} differ"]
    if s.missing:
        counts.append(f"{len(s.missing)} {'missing a side' if s.session else 'unpaired'}")
    counts.append(f"exit status {s.exit_status}")
    words = {Category.TOOLS: "tool calls"}
    by_cat = " · ".join(f"{words.get(c, str(c))} {k}/{a.compared}" for c, k in a.by_category)
    out = [
        '<section class="pair summary" id="summary">',
        f"<p>{_badge(s)} {_e(' · '.join(counts))}</p>",
        f'<p class="counts">A = {_e(s.a)}{" (what the client got)" if s.session else ""} · B = {_e(s.b)}'
        f'{" (shadow)" if s.session else ""}</p>',
        "<h3>Meaning</h3>",
        f'<p class="counts">{a.agree} of {a.compared} pairs agree in meaning'
        + (f" ({a.share:.1f}%)" if a.share is not None else "")
        + f"; agree in {_e(by_cat)}"
        + (f'; <span class="s-info">not counted: {_e(", ".join(sorted(s.ignored)))}</span>' if s.ignored else "")
        + "</p>",
        f"<h3>Pairs</h3>{_pairs_table(s)}",
    ]
    if s.missing:
        items = "".join(
            f"<li>{_e(f'pair {m.pair}' if m.pair else m.label)}: {_e(m.method)} {_e(m.path)}: {_e(m.reason)}</li>"
            for m in s.missing
        )
        out.append(f'<h3>{"Missing a side" if s.session else "Unpaired"} ({len(s.missing)})</h3><ul class="unpaired">{items}</ul>')
    out.append(f"<h3>Timing over the pairs</h3>{_timing_table(s.distributions)}{_plots(s)}")
    if s.load is not None:
        out.append(load_html(s.load))
    if s.gates or s.pair_gates_failed:
        rows = "".join(
            f'<tr><td class="val">{_e(g.gate)}</td><td class="{"s-same" if g.ok else "s-differs"}">'
            f'{"ok" if g.ok else "FAILED"}</td><td>{_e(g.detail)}</td></tr>'
            for g in s.gates
        )
        if s.pair_gates_failed:
            rows += f'<tr><td class="val">per-pair gates</td><td class="s-differs">FAILED</td><td>{s.pair_gates_failed} check(s) failed</td></tr>'
        out.append(f'<h3>Gates</h3><table class="grid gates">{rows}</table>')
    out.append("</section>")
    return "".join(out)
