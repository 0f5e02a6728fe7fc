"""A rerun session's load figures (:mod:`.load`) as summary text, JSON and an HTML table."""

from __future__ import annotations

import html

from ..fmt import jsonable
from .load import LoadFigures, Quantiles, SideLoad
from .render_text import Style, table_lines


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:.1f} ms"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _q(q: Quantiles, fmt: str) -> list[str]:
    f = _ms if fmt == "ms" else _rate
    return [f(q.p50), f(q.p90), f(q.p99)]


def _ratio(a: float | None, b: float | None) -> str:
    return f"{b / a:.2f}x" if a and b is not None else "-"


def load_rows(lf: LoadFigures) -> list[list[str]]:
    """The table: one row per figure, A's p50/p90/p99 then B's, and B/A at p50."""
    rows = [["", "A p50", "A p90", "A p99", "B p50", "B p90", "B p99", "B/A p50"]]
    for label, attr, fmt in (("TTFT", "ttft_ns", "ms"), ("ITL", "itl_ns", "ms"),
                             ("tokens/s", "tokens_per_s", "rate"), ("end-to-end", "e2e_ns", "ms")):
        qa: Quantiles = getattr(lf.a, attr)
        qb: Quantiles = getattr(lf.b, attr)
        rows.append([label, *_q(qa, fmt), *_q(qb, fmt), _ratio(qa.p50, qb.p50)])
    return rows


def _side_line(tag: str, s: SideLoad, lf: LoadFigures) -> str:
    errors = ", ".join(f"{k} {n}" for k, n in s.errors) or "none"
    parts = [f"{tag} {s.name}: {s.requests} request(s), {s.answered} answered",
             f"{_rate(s.rps)} req/s" + (f" over {s.span_s:.1f} s" if s.span_s else ""),
             f"errors: {errors}"]
    if lf.slo is not None and s.goodput is not None:
        parts.append(f"goodput {s.goodput:.1f}% ({lf.slo.text})")
    return "  ".join(parts)


def load_lines(lf: LoadFigures, st: Style) -> list[str]:
    out = [st("Load", bold=True) + st("  the rerun as a load test: each side's requests, percentiles over them",
                                      dim=True)]
    out += [_side_line("A", lf.a, lf), _side_line("B", lf.b, lf)]
    out += table_lines(load_rows(lf), range(1, 8), cap=60, label_w=None)
    return out


def _side_json(s: SideLoad) -> dict[str, object]:
    def q(x: Quantiles) -> dict[str, object]:
        return {"n": x.n, "p50": jsonable(x.p50), "p90": jsonable(x.p90), "p99": jsonable(x.p99)}

    return {
        "name": s.name, "requests": s.requests, "answered": s.answered, "span_s": jsonable(s.span_s),
        "rps": jsonable(s.rps), "ttft_ns": q(s.ttft_ns), "itl_ns": q(s.itl_ns),
        "tokens_per_s": q(s.tokens_per_s), "e2e_ns": q(s.e2e_ns), "errors": dict(s.errors),
        "goodput_percent": jsonable(s.goodput),
    }


def load_json(lf: LoadFigures) -> dict[str, object]:
    return {"a": _side_json(lf.a), "b": _side_json(lf.b), "slo": lf.slo.text if lf.slo else None}


def load_html(lf: LoadFigures) -> str:
    e = html.escape
    rows = load_rows(lf)
    head = "".join(f"<th>{e(c)}</th>" for c in rows[0])
    body = "".join(
        "<tr>" + f"<td>{e(r[0])}</td>" + "".join(f'<td class="val">{e(c)}</td>' for c in r[1:]) + "</tr>"
        for r in rows[1:]
    )
    sides = "".join(f"<li>{e(_side_line(t, s, lf))}</li>" for t, s in (("A", lf.a), ("B", lf.b)))
    return f'<h3>Load</h3><ul class="unpaired">{sides}</ul><table class="grid load"><tr>{head}</tr>{body}</table>'
