"""``--fail-on`` gates on a whole comparison: agreement and timing distributions.

A per-pair gate (``ttft>1.5x``, :mod:`.gates`) fails when any one pair fails
it, which makes a CI job on a few hundred real requests fail on the one
request that met a cold cache. A summary gate reads the session instead:

- ``agree<95%``: fails when fewer than 95 % of the compared pairs agree in
  meaning. Given an agree gate, pairs that differ no longer fail the run by
  themselves: the gate says how much disagreement is acceptable.
- ``METRIC_p50`` / ``METRIC_p95`` with any per-pair metric name
  (``ttft_p95>1.5x``, ``duration_p50>+200ms``, ``tokens_per_s_p50<0.8x``):
  the 50th or 95th percentile of that metric over the pairs, B against A,
  read like a per-pair gate (a factor, a change, a change in percent, or an
  amount of B alone).

``gap_p95`` and ``gap_p50`` stay per-pair gates (the names of each pair's own
gap percentiles); their session percentiles are ``p95_gap_p95`` and so on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import cast

from ..errors import GateError
from .gates import GATE_RE, Gate, GateOp, fails, metric_named, parse_gate
from .model import TIMING_METRICS, TimingRow


class Stat(StrEnum):
    """Which percentile of a distribution over the pairs a gate reads."""

    P50 = "p50"
    P95 = "p95"


@dataclass(frozen=True)
class AgreeGate:
    """``agree<95%``: fails when the share of compared pairs that agree ``op`` ``percent``."""

    text: str
    op: GateOp
    percent: float


@dataclass(frozen=True)
class DistributionGate:
    """A per-pair gate read on one percentile of the metric over the pairs."""

    text: str
    stat: Stat
    gate: Gate

    def check(self, a: float | None, b: float | None) -> SummaryGateResult:
        spec = TIMING_METRICS[self.gate.metric]
        row = TimingRow(self.gate.metric, f"{spec.label} {self.stat}", spec.unit, a, b)
        r = self.gate.check((row,))
        return SummaryGateResult(self.text, r.measured, r.ok, r.detail)


SummaryGate = AgreeGate | DistributionGate


@dataclass(frozen=True)
class SummaryGateResult:
    gate: str
    """The gate as written."""
    measured: float | None
    ok: bool
    detail: str


def check_agree(gate: AgreeGate, agree: int, pairs: int) -> SummaryGateResult:
    if pairs == 0:
        return SummaryGateResult(gate.text, None, False, "cannot check: no pairs were compared")
    share = 100.0 * agree / pairs
    ok = not fails(gate.op, share, gate.percent)
    return SummaryGateResult(gate.text, share, ok, f"{share:.1f}% agree ({agree} of {pairs})")


_PERCENT_RE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*%$")


def parse_fail_on(text: str) -> Gate | SummaryGate:
    """One ``--fail-on`` gate: a per-pair :class:`Gate`, or a summary gate (see the
    module). Raises :class:`GateError` naming the gate and what is wrong."""
    m = GATE_RE.match(text)
    if m is None:
        return parse_gate(text)  # its message says what a gate looks like
    name, op_text, raw = m.groups()
    op = cast(GateOp, op_text)  # the pattern admits only the four operators
    if name.lower() == "agree":
        p = _PERCENT_RE.match(raw)
        if p is None:
            raise GateError(f"bad --fail-on gate {text!r}: agree takes a percentage of the pairs, such as agree<95%")
        value = float(p.group(1))
        if value > 100:
            raise GateError(f"bad --fail-on gate {text!r}: a share of the pairs is at most 100%")
        return AgreeGate(text, op, value)
    if metric_named(name) is None:
        base, _, suffix = name.rpartition("_")
        if suffix.lower() in (Stat.P50, Stat.P95) and metric_named(base) is not None:
            inner = parse_gate(f"{base}{op_text}{raw}")
            return DistributionGate(text, Stat(suffix.lower()), replace(inner, text=text))
    return parse_gate(text)
