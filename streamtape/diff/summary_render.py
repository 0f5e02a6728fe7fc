"""The summary of many pairs as terminal text and as JSON-ready data.

The text leads ``streamtape diff`` whenever there is more than one pair: the
pairs in a table (each one that differs with a short reason; past
:data:`LIST_LIMIT` pairs, only those), the agreement counts, the calls that
have one side only, the timing spread, the gates, and the verdict. Each
pair's full report follows only on request (``-v``, ``--pair N``). Styled
with click, like :mod:`.render_text`: the plain text is the styled text
without the escapes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import click

from ..fmt import jsonable
from .cells import fmt_ratio, fmt_value
from .load_render import load_json, load_lines
from .model import Category
from .render_text import RULE, Style, no_style, table_lines
from .shadow import MissingSide
from .summary import Distribution, PairLine, Summary
from .summary_gates import Stat

LIST_LIMIT = 12
"""With more pairs than this the table lists only the pairs that differ or fail a gate."""

_CATEGORY_WORDS = {Category.TOOLS: "tool calls"}


def _table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    return table_lines(rows, right, cap=60, label_w=None)


def _pct(n: int, of: int) -> str:
    return f"{100.0 * n / of:.1f}%" if of else "-"


def _pairs(s: Summary, st: Style, limit: int) -> list[str]:
    n = len(s.pairs)
    out = [st("Pairs", bold=True) + f"  {n} paired by {s.how}"]
    if s.session:
        out.append(f"  A = {s.a} (what the client got)   B = {s.b} (shadow)")
    else:
        out.append(f"  A = {s.a}   B = {s.b}")
    shown: Sequence[PairLine] = s.pairs
    if n > limit:
        shown = [p for p in s.pairs if not p.same or p.gates_failed]
    if shown:
        # A session's recordings are told apart by pair id; two cassettes' by FILE#N.
        heads = ["#", *(["pair"] if s.session else ["A", "B"]), "request", "meaning", "wire", "ttft B/A", "duration B/A", "why"]
        rows = [[st(h, dim=True) for h in heads]]
        for p in shown:
            meaning = (
                st("same", fg="green") if p.same else st("differs in " + ", ".join(p.differs), fg="red", bold=True)
            )
            why = p.reason
            if p.gates_failed:
                why = (why + "; " if why else "") + st(
                    f"{p.gates_failed} gate(s) failed: {', '.join(p.failed_gates)}", fg="red", bold=True)
            rows.append(
                [
                    str(p.index),
                    *([p.pair or "-"] if s.session else [p.a, p.b]),
                    p.request,
                    meaning,
                    "same" if p.wire_same else st("differs", fg="yellow"),
                    fmt_ratio(p.ttft_ratio),
                    fmt_ratio(p.duration_ratio),
                    why,
                ]
            )
        out.extend(_table(rows, right=(0,)))
    if n > limit:
        out.append(st(f"  {n - len(shown)} pairs that agree are not listed (-v shows every pair in full)", dim=True))
    return out


def _agreement(s: Summary, st: Style) -> list[str]:
    a = s.agreement
    if not a.compared:
        return [st("Meaning", bold=True) + "  no pairs were compared"]
    verdict = f"{a.agree} of {a.compared} pairs agree ({_pct(a.agree, a.compared)})"
    head = st("Meaning", bold=True) + "  " + (st(verdict, fg="green") if not a.differ else st(verdict, fg="red", bold=True))
    cats = "  ·  ".join(f"{_CATEGORY_WORDS.get(c, str(c))} {k}/{a.compared}" for c, k in a.by_category)
    out = [head, f"  agree in: {cats}"]
    if s.ignored:
        why = " (token counts and reasoning differ between backends by nature)" if s.session else ""
        out.append(st(f"  not counted: {', '.join(sorted(s.ignored))}{why}", dim=True))
    return out


def _missing(s: Summary, st: Style) -> list[str]:
    if not s.missing:
        return []
    if not s.session:
        n = len(s.missing)
        out = [st("Unpaired", bold=True) + st(f"  {n} interaction(s) have no counterpart", fg="red")]
        for m in s.missing:
            out.append(f"  only in {'A' if m.side == 'B' else 'B'}  {m.label}  {m.method} {m.path}")
        return out
    sides = sorted({m.side for m in s.missing})
    out = [st("Missing", bold=True) + f"  {len(s.missing)} call(s) with no {' or '.join(sides)} side, not compared"]
    out.extend(_table([_missing_row(m) for m in s.missing]))
    return out


def _missing_row(m: MissingSide) -> list[str]:
    return [f"pair {m.pair}" if m.pair else "-", m.label, f"{m.method} {m.path}", m.reason]


def _color_ratio(r: float | None, unit: str, st: Style) -> str:
    text = fmt_ratio(r)
    if r is None or math.isinf(r):
        return text
    slower, faster = (r > 1.2, r < 0.83) if unit == "ns" else (r < 0.83, r > 1.2)
    return st(text, fg="red") if slower else st(text, fg="green") if faster else text


def _timing(dists: Sequence[Distribution], st: Style) -> list[str]:
    heads = ("A p50", "A p95", "B p50", "B p95", "B/A p50", "B/A p95", "pairs A/B")
    rows = [["", *(st(h, dim=True) for h in heads)]]
    for d in dists:
        rows.append(
            [
                d.label,
                fmt_value(d.value("A", Stat.P50), d.unit),
                fmt_value(d.value("A", Stat.P95), d.unit),
                fmt_value(d.value("B", Stat.P50), d.unit),
                fmt_value(d.value("B", Stat.P95), d.unit),
                _color_ratio(d.ratio(Stat.P50), d.unit, st),
                _color_ratio(d.ratio(Stat.P95), d.unit, st),
                f"{len(d.a)}/{len(d.b)}",
            ]
        )
    return [st("Timing", bold=True) + st("  over the pairs: percentiles of each side, and B/A of them", dim=True),
            *_table(rows, right=(1, 2, 3, 4, 5, 6, 7))]


def _gates(s: Summary, st: Style) -> list[str]:
    if not s.gates and not s.pair_gates_failed:
        return []
    out = [st("Gates", bold=True)]
    for g in s.gates:
        mark = st("ok", fg="green") if g.ok else st("FAILED", fg="red", bold=True)
        out.append(f"  {g.gate:<24}{mark}  {g.detail}")
    if s.pair_gates_failed:
        failing = [f"#{p.index} ({', '.join(p.failed_gates)})" for p in s.pairs if p.gates_failed]
        out.append(
            "  " + st(f"per-pair gates: {s.pair_gates_failed} check(s) failed", fg="red", bold=True)
            + f" on pair(s) {', '.join(failing)}"
        )
    return out


def verdict_line(s: Summary, st: Style) -> str:
    a = s.agreement
    if not a.compared:
        parts = [st("no pairs compared", fg="yellow")]
    elif not a.differ:
        parts = [st(f"{a.compared} pair(s), all agree", fg="green")]
    else:
        parts = [st(f"{a.compared} pair(s), {a.differ} differ", fg="red" if not s.has_agree_gate else "yellow", bold=True)]
    if s.missing:
        what = "unpaired" if not s.session else "missing a side"
        parts.append(st(f"{len(s.missing)} {what}", fg="red" if not s.session else "yellow", bold=not s.session))
    if s.gates or s.pair_gates_failed:
        failed = sum(1 for g in s.gates if not g.ok) + s.pair_gates_failed
        names = sorted({str(g.gate) for g in s.gates if not g.ok} | {n for p in s.pairs for n in p.failed_gates})
        parts.append(st(f"{failed} gate(s) failed ({', '.join(names)})", fg="red", bold=True)
                     if failed else st("gates pass", fg="green"))
    return "Result: " + ", ".join(parts) + f"  (exit {s.exit_status})"


def render_summary_text(
    s: Summary, *, color: bool = False, limit: int = LIST_LIMIT, details: Sequence[tuple[int, str]] = ()
) -> str:
    """The summary as terminal text (styled with ``color``); ``details`` (a pair's index
    and its full report, :func:`~streamtape.diff.render_text.render_report`) go between
    the summary and the verdict."""
    st: Style = click.style if color else no_style
    out = [*_pairs(s, st, limit), "", *_agreement(s, st)]
    if s.missing:
        out += ["", *_missing(s, st)]
    out += ["", *_timing(s.distributions, st)]
    if s.load is not None:
        out += ["", *load_lines(s.load, st)]
    if gates := _gates(s, st):
        out += ["", *gates]
    if not details and s.pairs:
        out += ["", st("Each pair in full: -v (every pair) or --pair N (one, by its #).", dim=True)]
    for n, text in details:
        p = s.pairs[n]
        out += ["", st(RULE, dim=True), st(f"#{n}", bold=True) + (f"  pair {p.pair}" if p.pair else ""), text]
    if details:
        out += ["", st(RULE, dim=True)]
    out += ["", verdict_line(s, st)]
    return "\n".join(out)


def _distribution_json(d: Distribution) -> dict[str, object]:
    return {
        "metric": d.metric.value,
        "label": d.label,
        "unit": d.unit,
        "a": {"n": len(d.a), "p50": jsonable(d.value("A", Stat.P50)), "p95": jsonable(d.value("A", Stat.P95)), "values": list(d.a)},
        "b": {"n": len(d.b), "p50": jsonable(d.value("B", Stat.P50)), "p95": jsonable(d.value("B", Stat.P95)), "values": list(d.b)},
        "ratio_p50": jsonable(d.ratio(Stat.P50)),
        "ratio_p95": jsonable(d.ratio(Stat.P95)),
    }


def summary_json(s: Summary) -> dict[str, object]:
    """The summary as JSON-ready data (the ``summary`` member of ``diff --json``)."""
    a = s.agreement
    return {
        "paired_by": s.how,
        "session": s.session,
        "a": s.a,
        "b": s.b,
        "compared": a.compared,
        "agree": a.agree,
        "differ": a.differ,
        "agree_percent": jsonable(a.share),
        "agree_by_category": {str(c): k for c, k in a.by_category},
        "not_counted": sorted(str(c) for c in s.ignored),
        "pairs": [
            {
                "index": p.index,
                "pair": p.pair,
                "a": p.a,
                "b": p.b,
                "request": p.request,
                "same": p.same,
                "differs": [str(c) for c in p.differs],
                "reason": p.reason,
                "wire_same": p.wire_same,
                "ttft_ratio": jsonable(p.ttft_ratio),
                "duration_ratio": jsonable(p.duration_ratio),
                "gates_failed": p.gates_failed,
            }
            for p in s.pairs
        ],
        "missing": [
            {"pair": m.pair, "missing_side": m.side, "label": m.label, "method": m.method, "path": m.path, "reason": m.reason}
            for m in s.missing
        ],
        "timing": [_distribution_json(d) for d in s.distributions],
        "gates": [{"gate": g.gate, "ok": g.ok, "measured": jsonable(g.measured), "detail": g.detail} for g in s.gates],
        "pair_gates_failed": s.pair_gates_failed,
        "load": load_json(s.load) if s.load is not None else None,
        "exit_status": s.exit_status,
    }
