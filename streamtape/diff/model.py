"""The report model: what a comparison found, as plain values (no I/O, no text).

A :class:`DiffReport` compares two :class:`Side` values in three sections that
answer different questions, so a change in one never hides behind another:

- :class:`Meaning`: did the model say the same thing (text, reasoning, tool
  calls, finish, usage)? Only this decides :attr:`DiffReport.same`, and
  ``--ignore`` relaxes it by :class:`Category`.
- timing (:class:`TimingRow` per :class:`Metric`): how fast, B against A; only
  ``--fail-on`` gates turn timing into a verdict.
- wire (:class:`WireRow`, :class:`HeaderRow`): how the bytes were framed; shown,
  never a verdict, since a gateway may rechunk a stream that means the same.

The report itself (:class:`~streamtape.diff.report.DiffReport`, which also
holds the gates' verdicts, and :class:`~streamtape.diff.report.CassetteDiff`)
is :mod:`streamtape.diff.report`, above :mod:`streamtape.diff.gates`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, NamedTuple

from ..cassette.model import Interaction, Request
from ..shapes import Analysis
from ..stats import Stats


class Category(StrEnum):
    """The parts of the meaning, each of which ``--ignore`` can leave out of the verdict."""

    TEXT = "text"
    REASONING = "reasoning"
    """The assembled reasoning (thinking) text, apart from the answer: two runs of one
    reasoning model rarely think alike, so ``--ignore reasoning`` is often wanted."""
    TOOLS = "tools"
    FINISH = "finish"
    USAGE = "usage"


IGNORABLE: tuple[str, ...] = tuple(c.value for c in Category)
"""Meaning categories ``--ignore`` can relax, as the words the command line takes."""


class Status(StrEnum):
    """A check's verdict: ``info`` rows are shown but never make a difference."""

    SAME = "same"
    DIFFERS = "differs"
    INFO = "info"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the interaction and what the shapes and stats made of it."""

    label: str
    interaction: Interaction = field(repr=False, compare=False)
    analysis: Analysis = field(repr=False, compare=False)
    stats: Stats = field(repr=False, compare=False)

    @property
    def request(self) -> Request:
        return self.interaction.request

    @property
    def status(self) -> int | None:
        r = self.interaction.response
        return r.status if r else None


CheckValue = str | int | list[str] | None
"""What a finish or usage check compares: a reason, a status, an outcome, a token
count, or the error messages of a stream."""


@dataclass(frozen=True)
class Check:
    """One compared item. ``state`` is same, differs, or info (shown, never counted)."""

    name: str
    a: CheckValue
    b: CheckValue
    state: Status
    note: str = ""


WordOp = Literal["=", "-", "+", "…"]
"""A word diff step: unchanged, only in A, only in B, or a note on what was left out."""


@dataclass(frozen=True)
class TextDiff:
    a: str
    b: str
    same: bool
    unified: tuple[str, ...] = ()
    """Unified diff lines (no line ends); empty when the texts are equal."""
    first_difference: int | None = None
    """Character offset of the first difference."""
    words: tuple[tuple[WordOp, str], ...] = ()
    """The same difference word by word (see :func:`~streamtape.diff.compare.word_diff`)."""


@dataclass(frozen=True)
class ToolCallCheck:
    position: int
    name_a: str | None
    name_b: str | None
    arguments_a: object
    """Parsed JSON arguments, or the raw string when they are not valid JSON; None if absent."""
    arguments_b: object
    same: bool
    note: str = ""


NO_REASONING = TextDiff("", "", True)
"""The reasoning comparison of two streams that have none."""


@dataclass(frozen=True)
class Meaning:
    text: TextDiff
    tools: tuple[ToolCallCheck, ...]
    finish: tuple[Check, ...]
    usage: tuple[Check, ...]
    ignored: frozenset[Category] = frozenset()
    reasoning: TextDiff = NO_REASONING
    """The assembled reasoning of both sides (empty and same when neither has any)."""

    @property
    def has_reasoning(self) -> bool:
        """Either side streamed reasoning (renderers show the row only then)."""
        return bool(self.reasoning.a or self.reasoning.b)

    def category_same(self, name: Category) -> bool:
        """Whether one category agrees, ignored or not."""
        match name:
            case Category.TEXT:
                return self.text.same
            case Category.REASONING:
                return self.reasoning.same
            case Category.TOOLS:
                return all(t.same for t in self.tools)
            case Category.FINISH:
                return all(c.state != Status.DIFFERS for c in self.finish)
            case Category.USAGE:
                return all(c.state != Status.DIFFERS for c in self.usage)

    @property
    def differs(self) -> tuple[Category, ...]:
        """Categories that differ and are not ignored."""
        return tuple(c for c in Category if c not in self.ignored and not self.category_same(c))

    @property
    def same(self) -> bool:
        return not self.differs


class Metric(StrEnum):
    """The timing figures compared, by the names ``--fail-on`` gates use."""

    TTFB = "ttfb"
    FIRST_REASONING = "first_reasoning"
    """First reasoning token; the row is shown when either side has reasoning."""
    TTFT = "ttft"
    P50_GAP = "p50_gap"
    P95_GAP = "p95_gap"
    MAX_GAP = "max_gap"
    DURATION = "duration"
    TOKENS_PER_S = "tokens_per_s"


TimingUnit = Literal["ns", "tok/s"]


class MetricSpec(NamedTuple):
    read: Callable[[Stats], float | None]
    """Where the figure is in :class:`~streamtape.stats.Stats`."""
    label: str
    unit: TimingUnit


TIMING_METRICS: dict[Metric, MetricSpec] = {
    Metric.TTFB: MetricSpec(lambda s: s.ttfb_ns, "first byte", "ns"),
    Metric.FIRST_REASONING: MetricSpec(lambda s: s.first_reasoning_ns, "first reasoning token", "ns"),
    Metric.TTFT: MetricSpec(lambda s: s.ttft_ns, "first token", "ns"),
    Metric.P50_GAP: MetricSpec(lambda s: s.gap_p50_ns, "gap p50", "ns"),
    Metric.P95_GAP: MetricSpec(lambda s: s.gap_p95_ns, "gap p95", "ns"),
    Metric.MAX_GAP: MetricSpec(lambda s: s.gap_max_ns, "gap max", "ns"),
    Metric.DURATION: MetricSpec(lambda s: s.duration_ns, "duration", "ns"),
    Metric.TOKENS_PER_S: MetricSpec(lambda s: s.tokens_per_s, "tokens/s", "tok/s"),
}
METRIC_ALIASES: dict[str, Metric] = {
    "first_byte": Metric.TTFB,
    "first_token": Metric.TTFT,
    "first_answer": Metric.TTFT,
    "ttfr": Metric.FIRST_REASONING,
    "gap_p50": Metric.P50_GAP,
    "gap_p95": Metric.P95_GAP,
    "gap_max": Metric.MAX_GAP,
    "p50": Metric.P50_GAP,
    "p95": Metric.P95_GAP,
    "tps": Metric.TOKENS_PER_S,
    "tokens_s": Metric.TOKENS_PER_S,
}
"""Other spellings a gate may use for a metric."""


@dataclass(frozen=True)
class TimingRow:
    metric: Metric
    label: str
    unit: TimingUnit
    """``ns`` for times, ``tok/s`` for throughput."""
    a: float | None
    b: float | None

    @property
    def ratio(self) -> float | None:
        """B/A; None when either is missing, inf when only A is zero."""
        if self.a is None or self.b is None:
            return None
        if self.a == 0:
            return 1.0 if self.b == 0 else math.inf
        return self.b / self.a

    @property
    def delta(self) -> float | None:
        if self.a is None or self.b is None:
            return None
        return self.b - self.a


WireValue = str | int | float | bool | None


@dataclass(frozen=True)
class WireRow:
    name: str
    a: WireValue
    b: WireValue

    @property
    def same(self) -> bool:
        return self.a == self.b


@dataclass(frozen=True)
class HeaderRow:
    name: str
    a: str | None
    b: str | None
