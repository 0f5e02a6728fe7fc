"""Compare two WebSocket sessions: their server events, their text and their timing.

``streamtape diff A B`` sends here when both sides hold WebSocket sessions
(:func:`diff_sessions`). Values in, values out, like the rest of
:mod:`streamtape.diff`; :func:`render_sessions_text` and :func:`sessions_json`
are the two outputs.

What counts as the meaning of a session (the verdict):

- the server's events, as the sequence of their JSON ``type``, with a run of
  one type read as one (two runs of a model send the same answer in a
  different number of text deltas; the counts are shown, not judged);
- the text a Realtime session assembles (:mod:`streamtape.shapes.realtime`),
  and each response's final status;
- how it closed: the code, or no close frame, and which side closed.

Timing is the same rows as for HTTP streams (:class:`TimingRow`, so
``--fail-on`` gates read them by the same names), measured the session way:

- ``ttfb``: the first server message (``session.created``);
- ``ttft``: from the client's ``response.create`` to the first text delta of
  the response it started (the first response);
- gaps (``p50_gap``, ``p95_gap``, ``max_gap``): between text deltas of one response;
- ``duration``: the session, from t = 0 to its end;
- ``tokens_per_s``: ``response.done``'s ``output_tokens`` over the time from
  each response's first text delta to its last.

Sessions pair in order: each side's sessions to the same path (the query
left out, so two models' sessions pair) one after the other; with one
session a side they pair whatever their paths.
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..cassette.model import Direction, Interaction
from ..shapes.realtime import SessionAnalysis, SessionEvent, analyze_session
from ..stats import percentile
from .cells import fmt_ratio, fmt_value
from .compare import compare_text
from .gates import Gate, GateResult
from .model import TIMING_METRICS, Metric, TextDiff, TimingRow

EventOp = tuple[str, str, int, int]
"""``(op, type, count in A, count in B)``; op ``=`` both, ``~`` both with other
counts, ``-`` A only, ``+`` B only."""


@dataclass(frozen=True)
class SessionSide:
    label: str
    ix: Interaction
    analysis: SessionAnalysis

    @property
    def close(self) -> str:
        a = self.analysis
        if a.close_code is None:
            return "no close frame" + (f" ({a.closed_by})" if a.closed_by else "")
        return f"{a.close_code}" + (f" by {a.closed_by}" if a.closed_by else "")


@dataclass(frozen=True)
class SessionPair:
    a: SessionSide
    b: SessionSide
    events: tuple[EventOp, ...]
    events_same: bool
    text: TextDiff
    statuses: tuple[tuple[str | None, ...], tuple[str | None, ...]]
    close_same: bool
    timing: tuple[TimingRow, ...]
    gates: tuple[GateResult, ...] = ()

    @property
    def same(self) -> bool:
        return (self.events_same and self.text.same and self.close_same
                and self.statuses[0] == self.statuses[1])

    @property
    def exit_status(self) -> int:
        return 0 if self.same and all(g.ok for g in self.gates) else 1

    @property
    def differences(self) -> list[str]:
        """What differs, in words: ``server events``, ``text``, ``response status``, ``close``."""
        out = []
        if not self.events_same:
            out.append("server events")
        if not self.text.same:
            out.append("text")
        if self.statuses[0] != self.statuses[1]:
            out.append("response status")
        if not self.close_same:
            out.append("close")
        return out


@dataclass(frozen=True)
class SessionsDiff:
    pairs: tuple[SessionPair, ...]
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()

    @property
    def exit_status(self) -> int:
        if self.only_a or self.only_b:
            return 1
        return max((p.exit_status for p in self.pairs), default=0)


# -- comparing ---------------------------------------------------------------------


def _runs(events: Sequence[SessionEvent]) -> list[tuple[str, int]]:
    """Server event types with a run of one type as one: ``[(type, count), ...]``."""
    types = [e.type or ("(text)" if e.text else "(binary)") for e in events if e.direction == Direction.SERVER]
    return [(t, len(list(g))) for t, g in itertools.groupby(types)]


def compare_events(a: SessionAnalysis, b: SessionAnalysis) -> tuple[tuple[EventOp, ...], bool]:
    ra, rb = _runs(a.events), _runs(b.events)
    sm = difflib.SequenceMatcher(None, [t for t, _ in ra], [t for t, _ in rb], autojunk=False)
    ops: list[EventOp] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for (t, ca), (_, cb) in zip(ra[i1:i2], rb[j1:j2], strict=True):
                ops.append(("=" if ca == cb else "~", t, ca, cb))
            continue
        ops.extend(("-", t, c, 0) for t, c in ra[i1:i2])
        ops.extend(("+", t, 0, c) for t, c in rb[j1:j2])
    return tuple(ops), all(op in "=~" for op, *_ in ops)


def _ttft(a: SessionAnalysis) -> int | None:
    """From the first ``response.create`` to the first text delta after it."""
    asked = next((e.at_ns for e in a.events if e.direction == Direction.CLIENT and e.type == "response.create"),
                 None)
    first = next((r.first_text_ns for r in a.responses if r.first_text_ns is not None), None)
    if first is None:
        return None
    return first - asked if asked is not None and asked <= first else first


def _gaps(a: SessionAnalysis) -> list[int]:
    """Gaps between the text deltas of each response (never across two responses)."""
    return [y - x for r in a.responses for x, y in itertools.pairwise(r.delta_ns)]


def _tokens_per_s(a: SessionAnalysis) -> float | None:
    """Output tokens after the first, over the time from each response's first delta to its last."""
    tokens, span = 0, 0
    for r in a.responses:
        usage = r.usage if isinstance(r.usage, dict) else {}
        out = usage.get("output_tokens")
        if isinstance(out, int) and out > 1 and r.deltas >= 2 and r.delta_ns[-1] > r.delta_ns[0]:
            tokens += out - 1
            span += r.delta_ns[-1] - r.delta_ns[0]
    return tokens / (span / 1e9) if span else None


def session_timing(side: SessionSide) -> dict[Metric, float | None]:
    a = side.analysis
    gaps = _gaps(a)
    figures: dict[Metric, float | None] = {
        Metric.TTFB: side.ix.first_byte_ns,
        Metric.FIRST_REASONING: None,
        Metric.TTFT: _ttft(a),
        Metric.P50_GAP: percentile(gaps, 50),
        Metric.P95_GAP: percentile(gaps, 95),
        Metric.MAX_GAP: max(gaps) if gaps else None,
        Metric.DURATION: side.ix.duration_ns,
        Metric.TOKENS_PER_S: _tokens_per_s(a),
    }
    return {m: None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
            for m, v in figures.items()}


def compare_sessions(a: SessionSide, b: SessionSide, gates: Sequence[Gate] = ()) -> SessionPair:
    events, events_same = compare_events(a.analysis, b.analysis)
    ta, tb = session_timing(a), session_timing(b)
    timing = tuple(TimingRow(m, spec.label, spec.unit, ta[m], tb[m]) for m, spec in TIMING_METRICS.items())
    pa, pb = a.analysis, b.analysis
    return SessionPair(
        a, b, events, events_same,
        compare_text(pa.text, pb.text, a.label, b.label),
        (tuple(r.status for r in pa.responses), tuple(r.status for r in pb.responses)),
        (pa.close_code, pa.closed_by) == (pb.close_code, pb.closed_by),
        timing,
        tuple(g.check(timing) for g in gates),
    )


def _path(ix: Interaction) -> str:
    return urlsplit(ix.request.url).path or "/"


def diff_sessions(
    a: Sequence[Interaction], b: Sequence[Interaction], labels_a: Sequence[str], labels_b: Sequence[str],
    gates: Sequence[Gate] = (),
) -> SessionsDiff:
    """Pair the sessions of A and B (in order per path; one a side: whatever the paths) and compare."""
    sides_a = [SessionSide(lab, ix, analyze_session(ix)) for ix, lab in zip(a, labels_a, strict=True)]
    sides_b = [SessionSide(lab, ix, analyze_session(ix)) for ix, lab in zip(b, labels_b, strict=True)]
    if len(sides_a) == 1 and len(sides_b) == 1:
        return SessionsDiff((compare_sessions(sides_a[0], sides_b[0], gates),))
    pairs, only_a = [], []
    left = list(sides_b)
    for sa in sides_a:
        match = next((sb for sb in left if _path(sb.ix) == _path(sa.ix)), None)
        if match is None:
            only_a.append(sa.label)
            continue
        left.remove(match)
        pairs.append(compare_sessions(sa, match, gates))
    return SessionsDiff(tuple(pairs), tuple(only_a), tuple(sb.label for sb in left))


# -- rendering ---------------------------------------------------------------------


def _counts(ca: int, cb: int) -> str:
    return "" if ca == cb == 1 else f"  ×{ca}" if ca == cb else f"  ×{ca} | ×{cb}"


def pair_lines(p: SessionPair) -> list[str]:
    lines = []
    for side, name in ((p.a, "A"), (p.b, "B")):
        a = side.analysis
        client = sum(1 for e in a.events if e.direction == Direction.CLIENT)
        lines.append(f"{name}: {side.label}  {side.ix.request.method} {side.ix.request.path}  "
                     f"{len(a.events) - client} server + {client} client messages  close {side.close}  "
                     f"{side.ix.outcome}")
    lines.append("meaning: " + ("same" if p.same else "differs (" + ", ".join(p.differences) + ")"))
    lines.append("")
    lines.append("server events" + ("" if p.events_same else "  (differ)"))
    for op, t, ca, cb in p.events:
        if op == "-":
            lines.append(f"  - {t}{_counts(ca, ca)}  (A only)")
        elif op == "+":
            lines.append(f"  + {t}{_counts(cb, cb)}  (B only)")
        else:
            lines.append(f"  {op} {t}{_counts(ca, cb)}")
    lines.append("")
    if p.text.same:
        lines.append(f"text: same {p.text.a!r}")
    else:
        lines.append("text: differs")
        lines.append("  " + "".join(f"[-{t}-]" if op == "-" else f"{{+{t}+}}" if op == "+" else t
                                    for op, t in p.text.words))
    if p.statuses[0] != p.statuses[1]:
        lines.append(f"response status: A {list(p.statuses[0])}  B {list(p.statuses[1])}")
    lines.append(f"close: A {p.a.close}  B {p.b.close}" + ("" if p.close_same else "  (differs)"))
    lines.append("")
    lines.append(f"{'timing':<22}{'A':>12}{'B':>12}{'B/A':>9}")
    for r in p.timing:
        if r.a is None and r.b is None:
            continue
        lines.append(f"{r.label:<22}{fmt_value(r.a, r.unit):>12}{fmt_value(r.b, r.unit):>12}"
                     f"{fmt_ratio(r.ratio):>9}")
    for g in p.gates:
        lines.append(f"gate {g.gate.text}: {'ok' if g.ok else 'FAIL'} ({g.detail})")
    return lines


def render_sessions_text(d: SessionsDiff) -> str:
    out: list[str] = []
    for n, p in enumerate(d.pairs):
        if len(d.pairs) > 1:
            out.append(f"== pair {n}")
        out.extend(pair_lines(p))
        out.append("")
    out.extend(f"only in A: {label}" for label in d.only_a)
    out.extend(f"only in B: {label}" for label in d.only_b)
    same = sum(1 for p in d.pairs if p.same)
    out.append(f"{same} of {len(d.pairs)} session pair{'s' if len(d.pairs) != 1 else ''} the same")
    return "\n".join(out)


def _side_json(s: SessionSide) -> dict[str, object]:
    a = s.analysis
    return {
        "label": s.label, "url": s.ix.request.url, "outcome": s.ix.outcome,
        "close": {"code": a.close_code, "reason": a.close_reason, "by": a.closed_by},
        "messages": len(a.events), "text": a.text,
        "responses": [{"id": r.id, "status": r.status} for r in a.responses],
        "errors": [e.index for e in a.errors],
    }


def pair_json(p: SessionPair) -> dict[str, object]:
    return {
        "a": _side_json(p.a), "b": _side_json(p.b), "same": p.same, "differences": p.differences,
        "events": [{"op": op, "type": t, "count_a": ca, "count_b": cb} for op, t, ca, cb in p.events],
        "text": {"same": p.text.same, "a": p.text.a, "b": p.text.b,
                 "words": [list(w) for w in p.text.words]},
        "close_same": p.close_same,
        "timing": [{"metric": r.metric, "label": r.label, "unit": r.unit, "a": r.a, "b": r.b,
                    "ratio": None if r.ratio is None or math.isinf(r.ratio) else r.ratio}
                   for r in p.timing],
        "gates": [{"gate": g.gate.text, "ok": g.ok, "measured": g.measured, "detail": g.detail}
                  for g in p.gates],
        "exit_status": p.exit_status,
    }


def sessions_json(d: SessionsDiff) -> dict[str, object]:
    return {"websocket": True, "pairs": [pair_json(p) for p in d.pairs], "only_a": list(d.only_a),
            "only_b": list(d.only_b), "exit_status": d.exit_status}
