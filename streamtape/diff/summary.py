"""The summary of many compared pairs: how many agree, why the others differ, timing spread.

What someone moving an app to another backend asks first is not one pair's
diff but "what would change for my users": the share of calls whose answer
means the same (text, tool calls, finish), a few words on each that does not,
and how the two backends' speeds are spread (TTFB, TTFT, gaps, tokens/s,
duration: p50 and p95 of each, A and B, and B/A). :func:`summarize` builds
that from a :class:`~streamtape.diff.model.CassetteDiff` (pairs by request, or
a shadow session's pairs by pair id); the renderers (:mod:`.summary_render`,
:mod:`.summary_html`) read it. Summary gates (:mod:`.summary_gates`) are
checked here. No I/O, no text styling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..fmt import jsonable
from ..stats import percentile
from .cells import printable
from .load import LoadFigures
from .model import TIMING_METRICS, Category, Metric, Status, TimingRow, TimingUnit
from .pairing import PairedBy
from .report import CassetteDiff, DiffReport
from .shadow import MissingSide, ShadowPairing
from .summary_gates import (
    AgreeGate,
    DistributionGate,
    Stat,
    SummaryGate,
    SummaryGateResult,
    check_agree,
)

DISTRIBUTION_METRICS = (
    Metric.TTFB,
    Metric.FIRST_REASONING,
    Metric.TTFT,
    Metric.P50_GAP,
    Metric.P95_GAP,
    Metric.TOKENS_PER_S,
    Metric.DURATION,
)
"""The per-pair figures whose spread over the pairs is summarized (the largest gap of
each pair is left out: its spread says little the p95 gap does not)."""


_Q = {Stat.P50: 50.0, Stat.P95: 95.0}


@dataclass(frozen=True)
class Distribution:
    """One metric over the pairs: every pair's value on each side that has one."""

    metric: Metric
    label: str
    unit: TimingUnit
    per_pair: tuple[tuple[float | None, float | None], ...]
    """(A, B) of each compared pair, in the summary's pair order."""

    @property
    def a(self) -> tuple[float, ...]:
        return tuple(a for a, _ in self.per_pair if a is not None)

    @property
    def b(self) -> tuple[float, ...]:
        return tuple(b for _, b in self.per_pair if b is not None)

    def value(self, side: Literal["A", "B"], stat: Stat) -> float | None:
        return percentile(self.a if side == "A" else self.b, _Q[stat])

    def row(self, stat: Stat) -> TimingRow:
        """The percentile of both sides as a timing row (its ratio is B/A)."""
        return TimingRow(self.metric, f"{self.label} {stat}", self.unit, self.value("A", stat), self.value("B", stat))

    def ratio(self, stat: Stat) -> float | None:
        return self.row(stat).ratio


@dataclass(frozen=True)
class PairLine:
    """One pair in a few words, for the summary's table."""

    index: int
    """Its position among the compared pairs (``--pair N``; ``#pair-N`` on the page)."""
    pair: str | None
    """The session's pair id; None when paired by request."""
    a: str
    b: str
    request: str
    same: bool
    differs: tuple[Category, ...]
    reason: str
    """Why the meaning differs, short (empty when it agrees)."""
    wire_same: bool
    ttft_ratio: float | None
    duration_ratio: float | None
    gates_failed: int
    failed_gates: tuple[str, ...] = ()
    """The per-pair gates this pair failed, as written (``ttft>1.5x``)."""


@dataclass(frozen=True)
class Agreement:
    compared: int
    agree: int
    """Pairs whose meaning agrees in every counted category."""
    by_category: tuple[tuple[Category, int], ...]
    """For each counted category, how many pairs agree in it."""

    @property
    def differ(self) -> int:
        return self.compared - self.agree

    @property
    def share(self) -> float | None:
        """Percent of the compared pairs that agree."""
        return 100.0 * self.agree / self.compared if self.compared else None


@dataclass(frozen=True)
class Summary:
    how: PairedBy
    a: str
    b: str
    session: bool
    """Pairs of a shadow session (by pair id), not of two cassettes (by request)."""
    pairs: tuple[PairLine, ...]
    agreement: Agreement
    distributions: tuple[Distribution, ...]
    missing: tuple[MissingSide, ...]
    """Calls with one side only: a shadow not sent or not recorded, or (two cassettes)
    a request with no counterpart."""
    ignored: frozenset[Category]
    gates: tuple[SummaryGateResult, ...]
    has_agree_gate: bool
    pair_gates_failed: int
    """Per-pair gate checks that failed, over every pair."""
    load: LoadFigures | None = None
    """A rerun session's load figures (:mod:`.load`), None otherwise."""

    @property
    def gates_ok(self) -> bool:
        return all(g.ok for g in self.gates) and not self.pair_gates_failed

    @property
    def exit_status(self) -> int:
        """1 when a gate fails, when a pair differs (unless an agree gate decides how many
        may), or when two cassettes leave a request unpaired; else 0."""
        if not self.gates_ok:
            return 1
        if self.agreement.differ and not self.has_agree_gate:
            return 1
        if not self.session and self.missing:
            return 1
        return 0


# ---------------------------------------------------------------------------
# Why a pair differs, in a few words


def _clip(s: str, n: int = 28) -> str:
    s = printable(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def _text_reason(rep: DiffReport, name: str, category: Category) -> str:
    t = rep.meaning.reasoning if category == Category.REASONING else rep.meaning.text
    removed = next((w for op, w in t.words if op == "-"), None)
    added = next((w for op, w in t.words if op == "+"), None)
    if removed is not None and added is not None:
        return f'{name}: "{_clip(removed.strip() or removed)}" → "{_clip(added.strip() or added)}"'
    if added is not None:
        return f'{name}: B adds "{_clip(added.strip() or added)}"'
    if removed is not None:
        return f'{name}: B lacks "{_clip(removed.strip() or removed)}"'
    return f"{name} differs ({len(t.a)} vs {len(t.b)} characters)"


def _check_reason(rep: DiffReport, category: Category) -> str:
    checks = rep.meaning.finish if category == Category.FINISH else rep.meaning.usage
    c = next((c for c in checks if c.state == Status.DIFFERS), None)
    if c is None:
        return f"{category} differs"
    if c.name == "errors":
        ea = c.a if isinstance(c.a, list) else []
        eb = c.b if isinstance(c.b, list) else []
        side, errors = ("B", eb) if len(eb) > len(ea) else ("A", ea)
        return f'{side} has an error event: "{_clip(errors[-1])}"' if errors else "error events differ"
    name = {"reason": "finish"}.get(c.name, c.name.replace("_", " "))
    return f"{name} {_word(c.a)} vs {_word(c.b)}"


def _word(v: object) -> str:
    return "none" if v is None else str(jsonable(v))


def _tools_reason(rep: DiffReport) -> str:
    t = next((t for t in rep.meaning.tools if not t.same), None)
    if t is None:
        return "tool calls differ"
    if t.name_a is None or t.name_b is None:
        na = sum(x.name_a is not None for x in rep.meaning.tools)
        nb = sum(x.name_b is not None for x in rep.meaning.tools)
        return f"tool calls: {na} vs {nb}"
    if t.name_a != t.name_b:
        return f"tool call #{t.position}: {t.name_a} vs {t.name_b}"
    return f"tool call #{t.position} {t.name_a}: {t.note or 'arguments differ'}"


def short_reason(rep: DiffReport, limit: int = 2) -> str:
    """Why a pair's meaning differs in a few words ("" when it agrees): a side with no
    answer first, then each differing category (at most ``limit``, then "+N more")."""
    if rep.same:
        return ""
    parts: list[str] = []
    for tag, s in (("A", rep.a), ("B", rep.b)):
        ix = s.interaction
        if ix.response is None:
            parts.append(f"{tag}: no response ({ix.outcome}" + (f": {ix.error})" if ix.error else ")"))
    if not parts and rep.a.status != rep.b.status:
        parts.append(f"status {rep.a.status} vs {rep.b.status}")
    if not parts:
        for category in rep.meaning.differs:
            if category in (Category.TEXT, Category.REASONING):
                parts.append(_text_reason(rep, str(category), category))
            elif category == Category.TOOLS:
                parts.append(_tools_reason(rep))
            else:
                parts.append(_check_reason(rep, category))
    more = len(parts) - limit
    return "; ".join(parts[:limit]) + (f"; +{more} more" if more > 0 else "")


# ---------------------------------------------------------------------------
# Building the summary


def _line(n: int, rep: DiffReport, pair: str | None) -> PairLine:
    return PairLine(
        index=n,
        pair=pair,
        a=rep.a.label,
        b=rep.b.label,
        request=f"{rep.a.request.method} {rep.a.request.path}",
        same=rep.same,
        differs=rep.meaning.differs,
        reason=short_reason(rep),
        wire_same=rep.wire_same,
        ttft_ratio=rep.timing_row(Metric.TTFT).ratio,
        duration_ratio=rep.timing_row(Metric.DURATION).ratio,
        gates_failed=sum(1 for g in rep.gates if not g.ok),
        failed_gates=tuple(g.gate.text for g in rep.gates if not g.ok),
    )


def _distribution(metric: Metric, reports: Sequence[DiffReport]) -> Distribution:
    rows = [r.timing_row(metric) for r in reports]
    spec = TIMING_METRICS[metric]
    return Distribution(metric, spec.label, spec.unit, tuple((r.a, r.b) for r in rows))


def summarize(
    result: CassetteDiff,
    *,
    session: ShadowPairing | None = None,
    gates: Sequence[SummaryGate] = (),
    load: LoadFigures | None = None,
) -> Summary:
    """The summary of ``result`` (a session's pairs when ``session`` is given; a rerun
    session's ``load`` figures alongside)."""
    reports = result.reports
    ids = [p[2] for p in session.pairs] if session is not None else [None] * len(reports)
    ignored = reports[0].meaning.ignored if reports else frozenset()
    counted = [c for c in Category if c not in ignored]
    agreement = Agreement(
        compared=len(reports),
        agree=sum(1 for r in reports if r.same),
        by_category=tuple((c, sum(1 for r in reports if r.meaning.category_same(c))) for c in counted),
    )
    dists = tuple(
        d
        for d in (_distribution(m, reports) for m in DISTRIBUTION_METRICS)
        if d.metric != Metric.FIRST_REASONING or d.a or d.b
    )
    by_metric = {d.metric: d for d in dists}
    checked: list[SummaryGateResult] = []
    for g in gates:
        if isinstance(g, AgreeGate):
            checked.append(check_agree(g, agreement.agree, agreement.compared))
        elif isinstance(g, DistributionGate):
            d = by_metric.get(g.gate.metric) or _distribution(g.gate.metric, reports)
            checked.append(g.check(d.value("A", g.stat), d.value("B", g.stat)))
    if session is not None:
        missing = session.missing
        how: PairedBy = "pair id"
        a_name, b_name = session.a_name, session.b_name
    else:
        missing = tuple(
            MissingSide(None, "B" if u.side == "A" else "A", u.label, u.method, u.path, f"no counterpart in {'B' if u.side == 'A' else 'A'}")
            for u in result.unpaired
        )
        hows = {r.how for r in reports}
        how = hows.pop() if len(hows) == 1 else "request"
        a_name, b_name = result.a, result.b
    return Summary(
        how=how,
        a=a_name,
        b=b_name,
        session=session is not None,
        pairs=tuple(_line(n, r, ids[n]) for n, r in enumerate(reports)),
        agreement=agreement,
        distributions=dists,
        missing=missing,
        ignored=frozenset(ignored),
        gates=tuple(checked),
        has_agree_gate=any(isinstance(g, AgreeGate) for g in gates),
        pair_gates_failed=result.gates_failed,
        load=load,
    )
