"""Timing gates (``--fail-on EXPR``): when a timing difference becomes a failure.

Timing never changes the verdict on its own, because two runs of one model are
never equally fast; a gate says how much slower is too slow. A gate reads one
:class:`~streamtape.diff.model.TimingRow` four ways, picked by how its value is
written: ``1.5x`` a factor (B/A), ``+20ms`` a change (B-A), ``+10%`` a change in
percent of A, ``2s`` an amount (B alone). A gate that cannot be checked (no
first token on a side) fails, so a broken stream never passes a speed check.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, cast

from ..errors import GateError
from .cells import fmt_ratio, fmt_value
from .model import METRIC_ALIASES, TIMING_METRICS, Metric, TimingRow

GateOp = Literal[">", ">=", "<", "<="]


class GateKind(StrEnum):
    """How a gate reads its row: B/A against a factor, B-A, B-A as % of A, or B alone."""

    RATIO = "ratio"
    DELTA = "delta"
    PERCENT = "percent"
    ABSOLUTE = "absolute"


_OPS: dict[GateOp, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def fails(op: GateOp, measured: float, limit: float) -> bool:
    """Whether a gate fails: ``measured op limit`` holds (``ttft>1.5x`` fails above 1.5)."""
    return _OPS[op](measured, limit)


def metric_named(name: str) -> Metric | None:
    """The metric a gate names (any case, aliases included), or None."""
    n = name.lower()
    if n in METRIC_ALIASES:
        return METRIC_ALIASES[n]
    try:
        return Metric(n)
    except ValueError:
        return None


@dataclass(frozen=True)
class Gate:
    """A ``--fail-on`` gate: fail when ``metric`` of B ``op`` ``value`` (as ``kind``)."""

    text: str
    metric: Metric
    op: GateOp
    kind: GateKind
    """``ratio`` (B/A against a factor), ``delta`` (B-A), ``percent`` (B-A as % of A)
    or ``absolute`` (B alone)."""
    value: float
    """Factor, percent, tokens/s, or nanoseconds for times."""

    def check(self, timing: Sequence[TimingRow]) -> GateResult:
        row = next(r for r in timing if r.metric == self.metric)
        missing = [s for s, v in (("A", row.a), ("B", row.b)) if v is None]
        if self.kind == GateKind.ABSOLUTE:
            missing = [m for m in missing if m == "B"]
        if missing:
            verb = "has" if len(missing) == 1 else "have"
            return GateResult(
                self, None, False, f"cannot check: {' and '.join(missing)} {verb} no {row.label}"
            )
        got = self.measure(row)
        assert got is not None
        return GateResult(self, got, not fails(self.op, got, self.value), self.detail(got, row))

    def measure(self, row: TimingRow) -> float | None:
        """The figure this gate compares with its value."""
        if self.kind == GateKind.RATIO:
            return row.ratio
        if self.kind == GateKind.DELTA:
            return row.delta
        if self.kind == GateKind.PERCENT:
            r = row.ratio
            return None if r is None else (r - 1.0) * 100.0
        return row.b

    def detail(self, got: float, row: TimingRow) -> str:
        """What was measured, as the report shows it beside the gate."""
        if self.kind == GateKind.RATIO:
            return f"B/A {fmt_ratio(got)}"
        if self.kind == GateKind.PERCENT:
            return f"B vs A {got:+.1f}%"
        if self.kind == GateKind.DELTA:
            return f"B-A {fmt_value(got, row.unit, signed=True)}"
        return f"B {fmt_value(got, row.unit)}"


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    measured: float | None
    ok: bool
    detail: str


GATE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<)\s*(.+?)\s*$")
"""A gate's three parts: NAME, an operator, the value as written."""
_VALUE_RE = re.compile(r"^([+-])?\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-zµ%/]*)$")
_TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
GATE_EXAMPLES = "ttft>1.5x, p95_gap>+20ms, duration>2s or tokens_per_s<0.8x"


def parse_gate(text: str) -> Gate:
    """Parse one ``--fail-on`` gate; the gate fails when the comparison holds.

    ``ttft>1.5x``: B's first token later than 1.5 times A's. ``p95_gap>+20ms``: B's
    p95 gap more than 20 ms above A's. ``duration>2s``: B took over two seconds.
    ``ttft>+50%``: more than 50 % above A. ``tokens_per_s<0.8x``: throughput fell
    below 0.8 of A's. Raises :class:`GateError` naming the gate and what is wrong.
    """

    def bad(why: str) -> GateError:
        return GateError(f"bad --fail-on gate {text!r}: {why}")

    m = GATE_RE.match(text)
    if not m:
        raise bad(f"expected METRIC OP VALUE, such as {GATE_EXAMPLES}")
    name, op_text, raw = m.groups()
    op = cast(GateOp, op_text)  # the pattern admits only the four operators
    metric = metric_named(name)
    if metric is None:
        raise bad(f"unknown metric {name!r} (known: {', '.join(TIMING_METRICS)})")
    v = _VALUE_RE.match(raw)
    if not v:
        raise bad(
            f"cannot read value {raw!r}; expected a factor (1.5x), a change (+20ms, +10%) or an amount (2s)"
        )
    sign, number, unit = v.groups()
    value = float(number)
    unit_l = unit.lower() if unit != "µs" else unit
    if unit_l == "x":
        if sign:
            raise bad("a factor takes no sign (write 1.5x, or +20ms for a change)")
        return Gate(text, metric, op, GateKind.RATIO, value)
    if unit_l == "%":
        if not sign:
            raise bad("a percentage is a change from A: write it with a sign, such as +10%")
        return Gate(text, metric, op, GateKind.PERCENT, -value if sign == "-" else value)
    if TIMING_METRICS[metric].unit == "ns":
        if unit_l not in _TIME_UNITS:
            why = "needs a unit" if not unit else f"unknown unit {unit!r}"
            raise bad(f"{why}: {name} is a time, use ns, us, ms or s (or x for a factor)")
        value *= _TIME_UNITS[unit_l]
    elif unit_l not in ("", "tok/s"):
        raise bad(
            f"unknown unit {unit!r}: {name} is tokens per second (a number, or x for a factor)"
        )
    if sign:
        return Gate(text, metric, op, GateKind.DELTA, -value if sign == "-" else value)
    return Gate(text, metric, op, GateKind.ABSOLUTE, value)
