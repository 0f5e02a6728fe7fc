"""Values as the short text of a report cell, shared by the terminal, HTML and gates.

One place decides how a time, a ratio, a JSON value or a control character
reads, so the terminal report, the HTML page and a gate's detail line never
disagree on a figure. Plain strings only: styling belongs to the renderers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from ..fmt import printable as printable  # its owner is fmt; kept here for the renderers
from .model import Check, TimingUnit, WordOp

FINISH_LABELS = {
    "reason": "finish reason",
    "original": "finish (server value)",
    "status": "status",
    "outcome": "outcome",
    "errors": "error events",
}
"""Row labels of the finish checks, by check name."""


def fmt_value(v: float | None, unit: TimingUnit, *, signed: bool = False) -> str:
    """A timing figure: times in s, ms or µs by size, throughput with one decimal."""
    if v is None:
        return "-"
    if unit == "ns":
        sign = "+" if signed and v >= 0 else ""
        av = abs(v)
        if av >= 1e9:
            return f"{sign}{v / 1e9:.2f} s"
        if av >= 1e6 or av == 0:
            return f"{sign}{v / 1e6:.1f} ms"
        return f"{sign}{v / 1e3:.0f} µs"
    return f"{v:+.1f}" if signed else f"{v:.1f}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    if math.isinf(r):
        return "inf"
    return f"{r:.2f}x"


def show_check(c: Check, v: object) -> str:
    """A check's value as text; error messages joined, ``none`` when there are none."""
    if c.name == "errors" and isinstance(v, (list, tuple)):
        return "; ".join(v) if v else "none"
    return show(v)


def show(v: object) -> str:
    """A value as short text for a table cell."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, ensure_ascii=False)
    return str(v)


def compact_words(words: Sequence[tuple[WordOp, str]], keep: int = 40) -> list[tuple[WordOp, str]]:
    """A word diff with long unchanged runs cut to ``keep`` characters of context."""
    out = []
    last = len(words) - 1
    for i, (op, text) in enumerate(words):
        if op == "=" and len(text) > 2 * keep + 5:
            if i == 0:
                text = "…" + text[-keep:]
            elif i == last:
                text = text[:keep] + "…"
            else:
                text = text[:keep] + " … " + text[-keep:]
        elif op == "=" and i == 0 and len(text) > keep + 5:
            text = "…" + text[-keep:]
        elif op == "=" and i == last and len(text) > keep + 5:
            text = text[:keep] + "…"
        out.append((op, text))
    return out
