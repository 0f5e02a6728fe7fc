"""The reports of a comparison: one pair (:class:`DiffReport`) and two cassettes
(:class:`CassetteDiff`), as plain values (no I/O, no text).

A report holds the three sections of :mod:`streamtape.diff.model` (meaning,
timing, wire) and the verdicts of the ``--fail-on`` gates
(:class:`~streamtape.diff.gates.GateResult`), so it sits above both: the gates
read timing rows, a report holds what the gates said. A :class:`CassetteDiff`
holds every paired report of two cassettes and what stayed unpaired. The
renderers (``render_text``, ``render_json``, ``render_html``) read these values
and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .gates import GateResult
from .model import HeaderRow, Meaning, Metric, Side, TimingRow, WireRow
from .pairing import PairedBy


@dataclass(frozen=True)
class DiffReport:
    a: Side
    b: Side
    how: PairedBy
    """How the two were paired (see :class:`~streamtape.diff.pairing.Pairing`), or
    ``"chosen"`` for FILE#N."""
    request_differences: tuple[str, ...]
    meaning: Meaning
    timing: tuple[TimingRow, ...]
    wire: tuple[WireRow, ...]
    headers: tuple[HeaderRow, ...]
    gates: tuple[GateResult, ...] = ()

    @property
    def same(self) -> bool:
        return self.meaning.same

    @property
    def wire_same(self) -> bool:
        return all(r.same for r in self.wire) and not self.headers

    @property
    def gates_ok(self) -> bool:
        return all(g.ok for g in self.gates)

    @property
    def exit_status(self) -> int:
        return 0 if self.same and self.gates_ok else 1

    def timing_row(self, metric: Metric) -> TimingRow:
        return next(r for r in self.timing if r.metric == metric)

    @property
    def timing_shown(self) -> tuple[TimingRow, ...]:
        """The timing rows a report shows: the first-reasoning row only when a side has
        reasoning, so reports of plain streams read as they always did."""
        return tuple(
            r for r in self.timing
            if r.metric != Metric.FIRST_REASONING or r.a is not None or r.b is not None
        )


@dataclass(frozen=True)
class Unpaired:
    side: Literal["A", "B"]
    label: str
    method: str
    path: str


@dataclass(frozen=True)
class CassetteDiff:
    """The result of ``streamtape diff A B``: every paired report, and what stayed unpaired."""

    a: str
    b: str
    reports: tuple[DiffReport, ...]
    unpaired: tuple[Unpaired, ...] = ()

    @classmethod
    def of(cls, result: CassetteDiff | DiffReport) -> CassetteDiff:
        """A single report as a one-pair result, so every renderer takes either."""
        if isinstance(result, DiffReport):
            return cls(result.a.label, result.b.label, (result,))
        return result

    @property
    def same(self) -> bool:
        return all(r.same for r in self.reports) and not self.unpaired

    @property
    def gates_ok(self) -> bool:
        return all(r.gates_ok for r in self.reports)

    @property
    def gates_failed(self) -> int:
        return sum(1 for r in self.reports for g in r.gates if not g.ok)

    @property
    def exit_status(self) -> int:
        return 0 if self.same and self.gates_ok else 1


@dataclass(frozen=True)
class PairSummary:
    """One pair in a line's worth of figures (the multi-pair overview of text and HTML)."""

    a: str
    b: str
    request: str
    meaning: str
    wire: str
    ttft_ratio: float | None
    duration_ratio: float | None
    gates_failed: int


def pair_summary(rep: DiffReport) -> PairSummary:
    return PairSummary(
        a=rep.a.label,
        b=rep.b.label,
        request=f"{rep.a.request.method} {rep.a.request.path}",
        meaning="same" if rep.same else "differs in " + ", ".join(rep.meaning.differs),
        wire="same" if rep.wire_same else "differs",
        ttft_ratio=rep.timing_row(Metric.TTFT).ratio,
        duration_ratio=rep.timing_row(Metric.DURATION).ratio,
        gates_failed=sum(1 for g in rep.gates if not g.ok),
    )
