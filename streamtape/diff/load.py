"""The load figures of a rerun session: what a load test reports, for both sides. Pure code.

A session written by ``streamtape rerun`` (its recordings carry the ``rerun``
label) is the recorded traffic (A) and the same requests sent to another
backend (B). Besides the pair-by-pair comparison, ``diff`` then gives what
vLLM's benchmark_serving, GuideLLM or LLMPerf report, for each side:

- requests per second achieved: the requests over the time from the first
  one's start to the last one's end (wall clock: the recorded start times);
- TTFT, inter-token latency (ITL: every gap between two token events of a
  request, pooled over the requests), tokens per second (each request's
  decode rate) and end-to-end time (request sent to response ended): p50,
  p90 and p99 (:func:`streamtape.stats.percentile`);
- errors by kind: each outcome other than ``complete``, an error status
  (``status 503``), and ``not sent``;
- goodput under an SLO (``--slo 'ttft<500ms,itl<50ms,e2e<10s'``): the share
  of a side's requests that ended complete with a non-error status and meet
  every term. A request's ``itl`` is the mean of its gaps (as goodput in
  vLLM's benchmark is computed from each request's mean time per token).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ..cassette.model import Interaction, Outcome
from ..errors import OptionError
from ..shadow.labels import LABEL_NOT_SENT, LABEL_RERUN, LABEL_SLO
from ..stats import Stats, compute, percentile

QUANTILES = (50.0, 90.0, 99.0)


class SloMetric(StrEnum):
    """What an SLO term bounds."""

    TTFT = "ttft"
    ITL = "itl"
    E2E = "e2e"


@dataclass(frozen=True)
class SloTerm:
    metric: SloMetric
    limit_ns: int


@dataclass(frozen=True)
class Slo:
    text: str
    terms: tuple[SloTerm, ...]

    def met(self, ix: Interaction, stats: Stats) -> bool:
        if not good(ix):
            return False
        for t in self.terms:
            value = _slo_value(t.metric, ix, stats)
            if value is None or value >= t.limit_ns:
                return False
        return True


_TERM = re.compile(r"^\s*(?P<m>[a-z0-9_]+)\s*<\s*(?P<n>\d+(?:\.\d*)?|\.\d+)\s*(?P<u>ms|s|us)\s*$")
_UNIT_NS = {"us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_slo(text: str) -> Slo:
    """``ttft<500ms,itl<50ms,e2e<10s`` -> :class:`Slo`; :class:`OptionError` names a bad term."""
    terms: list[SloTerm] = []
    for part in text.split(","):
        m = _TERM.match(part)
        metric = m.group("m") if m else ""
        if not m or metric not in tuple(SloMetric):
            raise OptionError(
                f"--slo {text!r}: bad term {part.strip()!r}; expected METRIC<N(ms|s) with METRIC one of "
                f"{', '.join(SloMetric)} (e.g. ttft<500ms,itl<50ms)"
            )
        terms.append(SloTerm(SloMetric(metric), round(float(m.group("n")) * _UNIT_NS[m.group("u")])))
    return Slo(text.strip(), tuple(terms))


def good(ix: Interaction) -> bool:
    """Answered: complete, with a status below 400."""
    return ix.outcome is Outcome.COMPLETE and ix.response is not None and ix.response.status < 400


def _mean_gap(stats: Stats) -> float | None:
    return sum(stats.gaps_ns) / len(stats.gaps_ns) if stats.gaps_ns else None


def _slo_value(metric: SloMetric, ix: Interaction, stats: Stats) -> float | None:
    if metric is SloMetric.TTFT:
        return stats.ttft_ns
    if metric is SloMetric.ITL:
        return _mean_gap(stats)
    return ix.end_ns


def error_kind(ix: Interaction) -> str | None:
    """Why a request did not get an answer, in a word or two; None when it did."""
    if LABEL_NOT_SENT in ix.labels:
        return "not sent"
    if ix.outcome is not Outcome.COMPLETE:
        return str(ix.outcome)
    if ix.response is not None and ix.response.status >= 400:
        return f"status {ix.response.status}"
    return None


@dataclass(frozen=True)
class Quantiles:
    """p50, p90, p99 of one figure (None where no request has it)."""

    n: int
    p50: float | None
    p90: float | None
    p99: float | None


def _quantiles(values: Sequence[float]) -> Quantiles:
    p50, p90, p99 = (percentile(values, q) for q in QUANTILES)
    return Quantiles(len(values), p50, p90, p99)


@dataclass(frozen=True)
class SideLoad:
    """One side's load figures (see the module docstring)."""

    name: str
    requests: int
    answered: int
    span_s: float | None
    rps: float | None
    ttft_ns: Quantiles
    itl_ns: Quantiles
    tokens_per_s: Quantiles
    e2e_ns: Quantiles
    errors: tuple[tuple[str, int], ...]
    goodput: float | None
    """Percent of the requests meeting the SLO (None without one)."""


@dataclass(frozen=True)
class LoadFigures:
    a: SideLoad
    b: SideLoad
    slo: Slo | None


def side_load(name: str, recordings: Sequence[Interaction], slo: Slo | None) -> SideLoad:
    """The figures of one side's recordings."""
    sent = [ix for ix in recordings if LABEL_NOT_SENT not in ix.labels]
    stats = [(ix, compute(ix)) for ix in sent]
    answered = [(ix, s) for ix, s in stats if good(ix)]
    starts = [ix.request.started_at for ix in sent if ix.request.started_at]
    ends = [ix.request.started_at + (ix.end_ns or 0) / 1e9 for ix in sent if ix.request.started_at]
    span = (max(ends) - min(starts)) if starts and ends else None
    errors: dict[str, int] = {}
    for ix in recordings:
        kind = error_kind(ix)
        if kind is not None:
            errors[kind] = errors.get(kind, 0) + 1
    return SideLoad(
        name=name,
        requests=len(recordings),
        answered=len(answered),
        span_s=span,
        rps=len(sent) / span if span else None,
        ttft_ns=_quantiles([s.ttft_ns for _, s in answered if s.ttft_ns is not None]),
        itl_ns=_quantiles([g for _, s in answered for g in s.gaps_ns]),
        tokens_per_s=_quantiles([s.tokens_per_s for _, s in answered if s.tokens_per_s is not None]),
        e2e_ns=_quantiles([ix.end_ns for ix, _ in answered if ix.end_ns is not None]),
        errors=tuple(sorted(errors.items())),
        goodput=(100.0 * sum(1 for ix, s in stats if slo.met(ix, s)) / len(recordings))
        if slo is not None and recordings else None,
    )


def is_rerun(interactions: Sequence[Interaction]) -> bool:
    """Whether a session was written by ``streamtape rerun``."""
    return any(LABEL_RERUN in ix.labels for ix in interactions)


def recorded_slo(interactions: Sequence[Interaction]) -> str | None:
    """The ``--slo`` the rerun was run with, when it was given one."""
    return next((ix.labels[LABEL_SLO] for ix in interactions if LABEL_SLO in ix.labels), None)


def distinct(recordings: Sequence[Interaction]) -> list[Interaction]:
    """Each recording once: a rerun with ``--repeat`` copies a recording into every pair
    that re-ran it, and the recorded side's figures count it once."""
    seen: set[tuple[float, str, str, bytes, int | None]] = set()
    out = []
    for ix in recordings:
        key = (ix.request.started_at, ix.request.method, ix.request.url, ix.request.body, ix.end_ns)
        if key not in seen:
            seen.add(key)
            out.append(ix)
    return out


def load_figures(a_name: str, a: Sequence[Interaction], b_name: str, b: Sequence[Interaction],
                 slo: Slo | None) -> LoadFigures:
    return LoadFigures(side_load(a_name, a, slo), side_load(b_name, b, slo), slo)
