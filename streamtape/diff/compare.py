"""Comparing two recordings: meaning, timing, wire framing and headers. No I/O.

Both sides go through :func:`streamtape.shapes.analyze` and
:func:`streamtape.stats.compute` first, so the comparison is between
normalized streams: an OpenAI-compatible SSE stream compares with an Ollama
NDJSON one on meaning and timing, and only the wire section names the format
difference. Each ``compare_*`` function fills one part of the
:class:`~streamtape.diff.model.DiffReport`; :func:`compare_sides` assembles
them and :func:`diff_many` does it for every pair of two cassettes.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence

from ..cassette.model import Interaction, Outcome
from ..check import CLIENT_LEFT, left_after_end
from ..errors import OptionError
from ..shapes import Event, ToolCall, analyze
from ..stats import compute
from .gates import Gate
from .model import (
    IGNORABLE,
    TIMING_METRICS,
    Category,
    Check,
    CheckValue,
    HeaderRow,
    Meaning,
    Side,
    Status,
    TextDiff,
    TimingRow,
    ToolCallCheck,
    WireRow,
    WireValue,
    WordOp,
)
from .pairing import PairedBy, pair, request_differences
from .report import CassetteDiff, DiffReport, Unpaired

VOLATILE_HEADERS = frozenset(
    {
        "date",
        "age",
        "expires",
        "last-modified",
        "etag",
        "set-cookie",
        "content-length",
        "request-id",
        "x-request-id",
        "x-correlation-id",
        "x-trace-id",
        "traceparent",
        "tracestate",
        "cf-ray",
        "x-amzn-requestid",
        "x-amzn-trace-id",
        "x-cloud-trace-context",
        "openai-processing-ms",
        "x-envoy-upstream-service-time",
        "server-timing",
        "x-process-time",
        "x-runtime",
    }
)
"""Headers that differ on every response (dates, request ids, server timings)."""
VOLATILE_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
OWN_ROW_HEADERS = frozenset({"content-type", "transfer-encoding"})
"""Headers that have their own row in the wire section."""


def side(ix: Interaction, label: str, shape: str | None = None) -> Side:
    """Analyze one interaction (``shape`` forces a format; None detects it)."""
    analysis = analyze(ix, shape)
    return Side(label, ix, analysis, compute(ix, analysis))


def json_equal(x: object, y: object) -> bool:
    """JSON values equal as data: key order never matters; true is not 1; 1 equals 1.0."""
    if isinstance(x, bool) or isinstance(y, bool):
        return isinstance(x, bool) and isinstance(y, bool) and x == y
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        return x == y
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(json_equal(x[k], y[k]) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(json_equal(p, q) for p, q in zip(x, y, strict=True))
    return type(x) is type(y) and x == y


# ---------------------------------------------------------------------------
# Text

WORD_DIFF_WINDOW = 500
"""Words compared after the common start (bounds the quadratic matcher)."""
_WORD_RE = re.compile(r"\s+|\w+|[^\w\s]")


def word_diff(a: str, b: str, window: int = WORD_DIFF_WINDOW) -> tuple[tuple[WordOp, str], ...]:
    """Word-level difference (words, runs of space and single punctuation marks).

    Ops are ``("=", text)``, ``("-", only in A)``, ``("+", only in B)``. The common
    start and end are cheap; between them at most ``window`` words a side are
    matched, and a final ``("…", note)`` says how much was left out.
    """
    wa, wb = _WORD_RE.findall(a), _WORD_RE.findall(b)
    p = 0
    while p < len(wa) and p < len(wb) and wa[p] == wb[p]:
        p += 1
    q = 0
    while q < len(wa) - p and q < len(wb) - p and wa[-1 - q] == wb[-1 - q]:
        q += 1
    mid_a, mid_b = wa[p : len(wa) - q], wb[p : len(wb) - q]
    cut = len(mid_a) > window or len(mid_b) > window
    out: list[tuple[WordOp, str]] = []

    def add(op: WordOp, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    add("=", "".join(wa[:p]))
    xa, xb = mid_a[:window], mid_b[:window]
    sm = difflib.SequenceMatcher(None, xa, xb, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            add("=", "".join(xa[i1:i2]))
        else:
            add("-", "".join(xa[i1:i2]))
            add("+", "".join(xb[j1:j2]))
    if cut:
        left_a = _words(mid_a[window:]) + _words(wa[len(wa) - q :])
        left_b = _words(mid_b[window:]) + _words(wb[len(wb) - q :])
        out.append(("…", f"word diff stops here; {left_a} more words in A, {left_b} in B"))
    else:
        add("=", "".join(wa[len(wa) - q :]))
    return tuple(out)


def _words(tokens: Sequence[str]) -> int:
    """How many of the tokens are words or marks (not runs of space)."""
    return sum(1 for w in tokens if not w.isspace())


def compare_text(a: str, b: str, label_a: str = "A", label_b: str = "B") -> TextDiff:
    """Equal, or a unified diff (by line) plus a word diff (for texts of modest size)."""
    if a == b:
        return TextDiff(a, b, True)
    first = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    unified = tuple(
        line.rstrip("\n")
        for line in difflib.unified_diff(
            a.split("\n"), b.split("\n"), fromfile=label_a, tofile=label_b, lineterm=""
        )
    )
    return TextDiff(a, b, False, unified, first, word_diff(a, b))


# ---------------------------------------------------------------------------
# Tool calls, finish, usage


def _tool_arguments(tc: ToolCall | None) -> object:
    if tc is None:
        return None
    return tc.parsed if tc.valid_json else tc.arguments


def _tool_check(pos: int, x: ToolCall | None, y: ToolCall | None) -> ToolCallCheck:
    note = ""
    if x is None or y is None:
        same = False
        note = f"only in {'A' if y is None else 'B'}"
    else:
        if x.valid_json and y.valid_json:
            args_same = json_equal(x.parsed, y.parsed)
        else:
            args_same = (x.arguments or "").strip() == (y.arguments or "").strip()
            if x.valid_json != y.valid_json:
                note = f"arguments are not valid JSON in {'B' if x.valid_json else 'A'}"
        same = x.name == y.name and args_same
        if not same and not note:
            note = "names differ" if x.name != y.name else "arguments differ"
    return ToolCallCheck(
        pos,
        x.name if x else None,
        y.name if y else None,
        _tool_arguments(x),
        _tool_arguments(y),
        same,
        note,
    )


def compare_tools(a: Sequence[ToolCall], b: Sequence[ToolCall]) -> tuple[ToolCallCheck, ...]:
    """Tool calls in order; names compared as strings, arguments as JSON data when both
    parse (key order does not matter), as strings otherwise. Call ids are ignored."""
    ta = sorted(a, key=lambda t: t.index if t.index is not None else 0)
    tb = sorted(b, key=lambda t: t.index if t.index is not None else 0)
    return tuple(
        _tool_check(pos, ta[pos] if pos < len(ta) else None, tb[pos] if pos < len(tb) else None)
        for pos in range(max(len(ta), len(tb)))
    )


def _check(name: str, a: CheckValue, b: CheckValue, note: str = "") -> Check:
    return Check(name, a, b, Status.SAME if a == b else Status.DIFFERS, note)


def compare_finish(a: Side, b: Side) -> tuple[Check, ...]:
    fa, fb = a.analysis.finish, b.analysis.finish
    ra = fa.reason if fa else None
    rb = fb.reason if fb else None
    raw_a = fa.raw if fa else None
    raw_b = fb.raw if fb else None
    ea, eb = _error_texts(a.analysis.errors), _error_texts(b.analysis.errors)
    return (
        _check("reason", ra, rb),
        Check(
            "original", raw_a, raw_b, Status.INFO, "" if raw_a == raw_b else "server values differ"
        ),
        _check("status", a.status, b.status),
        compare_outcome(a, b),
        Check(
            "errors",
            ea,
            eb,
            Status.SAME if len(ea) == len(eb) else Status.DIFFERS,
            "" if ea == eb or len(ea) != len(eb) else "messages differ",
        ),
    )


def compare_outcome(a: Side, b: Side) -> Check:
    """The recorded outcomes. A side whose client hung up once its stream had ended
    (:func:`~streamtape.check.left_after_end`) counts as complete: against a complete
    side the difference is shown, with a note, and not counted."""
    oa, ob = a.interaction.outcome, b.interaction.outcome
    if oa == ob:
        return Check("outcome", oa, ob, Status.SAME)
    for tag, s, other in (("A", a, ob), ("B", b, oa)):
        if other is Outcome.COMPLETE and left_after_end(s.interaction, s.analysis):
            return Check("outcome", oa, ob, Status.INFO, f"{tag}: {CLIENT_LEFT}")
    return Check("outcome", oa, ob, Status.DIFFERS)


def _error_texts(events: Sequence[Event]) -> list[str]:
    out = []
    for ev in events:
        err = ev.error
        if isinstance(err, dict):
            err = err.get("message") or json.dumps(err, sort_keys=True)
        out.append(str(err) if err is not None else "error")
    return out


def compare_usage(a: Side, b: Side) -> tuple[Check, ...]:
    ua, ub = a.analysis.usage, b.analysis.usage
    counts: tuple[tuple[str, int | None, int | None], ...] = (
        ("prompt_tokens", ua.prompt_tokens if ua else None, ub.prompt_tokens if ub else None),
        (
            "completion_tokens",
            ua.completion_tokens if ua else None,
            ub.completion_tokens if ub else None,
        ),
    )
    ra = ua.reasoning_tokens if ua else None
    rb = ub.reasoning_tokens if ub else None
    if ra is not None or rb is not None:  # a row only where a server counts them
        counts = (*counts, ("reasoning_tokens", ra, rb))
    out = []
    for name, va, vb in counts:
        if va is None and vb is None:
            out.append(Check(name, None, None, Status.INFO, "neither side reports it"))
        elif va is None or vb is None:
            only = "A" if vb is None else "B"
            out.append(Check(name, va, vb, Status.INFO, f"only {only} reports it"))
        else:
            out.append(_check(name, va, vb))
    return tuple(out)


# ---------------------------------------------------------------------------
# Timing, wire, headers


def compare_timing(a: Side, b: Side) -> tuple[TimingRow, ...]:
    return tuple(
        TimingRow(metric, spec.label, spec.unit, _num(spec.read(a.stats)), _num(spec.read(b.stats)))
        for metric, spec in TIMING_METRICS.items()
    )


def _num(v: float | None) -> float | None:
    """A figure as a float; None when missing or NaN."""
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


_ENDINGS = {"\r\n": "CRLF", "\n": "LF", "\r": "CR"}


def _endings(s: Iterable[str]) -> str:
    names = sorted(_ENDINGS.get(e, repr(e)) for e in s)
    return "+".join(names) if names else "-"


def _events_per_piece(s: Side) -> float | None:
    v = _num(s.stats.events_per_piece)
    return None if v is None else round(v, 2)


_WIRE_ROWS: tuple[tuple[str, Callable[[Side], WireValue]], ...] = (
    ("format", lambda s: s.analysis.shape),
    ("wire", lambda s: s.analysis.wire),
    ("content type", lambda s: r.header("content-type") if (r := s.interaction.response) else None),
    ("http version", lambda s: r.http_version if (r := s.interaction.response) else None),
    ("framing", lambda s: r.framing if (r := s.interaction.response) else None),
    ("bytes", lambda s: len(r.body) if (r := s.interaction.response) else 0),
    ("events", lambda s: s.stats.events),
    ("pieces", lambda s: len(s.interaction.pieces)),
    ("events per piece", _events_per_piece),
    ("[DONE] / end marker", lambda s: bool(s.analysis.done)),
    ("role chunk", lambda s: bool(s.analysis.role_chunk)),
    ("usage chunk", lambda s: bool(s.analysis.usage_chunk)),
    ("keep-alive comments", lambda s: s.analysis.keepalives),
    ("line endings", lambda s: _endings(s.analysis.line_endings)),
    ("cut characters", lambda s: s.analysis.cut_chars),
    ("invalid JSON events", lambda s: len(s.analysis.invalid_json)),
    ("partial last event", lambda s: len(s.analysis.partial_tail or b"")),
)
"""The wire section's rows in order: each reads one figure of a side."""


def compare_wire(a: Side, b: Side) -> tuple[WireRow, ...]:
    return tuple(WireRow(name, read(a), read(b)) for name, read in _WIRE_ROWS)


def is_volatile(name: str) -> bool:
    n = name.lower()
    return n in VOLATILE_HEADERS or n.startswith(VOLATILE_PREFIXES)


def _compared_headers(s: Side) -> tuple[dict[str, str], dict[str, str]]:
    """A side's response headers that take part, by lower-case name: the joined values,
    and the name as first spelled."""
    r = s.interaction.response
    values: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for k, v in r.headers if r else ():
        lk = k.lower()
        if is_volatile(lk) or lk in OWN_ROW_HEADERS:
            continue
        values.setdefault(lk, []).append(v)
        names.setdefault(lk, k)
    return {k: ", ".join(v) for k, v in values.items()}, names


def compare_headers(a: Side, b: Side) -> tuple[HeaderRow, ...]:
    """Response headers whose values differ, volatile ones (Date, request ids, rate-limit
    counters, Content-Length) and those with their own wire row left out."""
    va, na = _compared_headers(a)
    vb, nb = _compared_headers(b)
    return tuple(
        HeaderRow(na.get(lk) or nb.get(lk) or lk, va.get(lk), vb.get(lk))
        for lk in sorted(set(va) | set(vb))
        if va.get(lk) != vb.get(lk)
    )


# ---------------------------------------------------------------------------
# Whole reports


def _ignored(ignore: Iterable[str]) -> frozenset[Category]:
    names = frozenset(ignore)
    bad = names - set(IGNORABLE)
    if bad:
        raise OptionError(
            f"bad --ignore value {sorted(bad)[0]!r}: expected one of {', '.join(IGNORABLE)}"
        )
    return frozenset(Category(n) for n in names)


def compare_sides(
    a: Side,
    b: Side,
    *,
    ignore: Iterable[str] = (),
    gates: Sequence[Gate] = (),
    how: PairedBy = "chosen",
) -> DiffReport:
    ignored = _ignored(ignore)
    meaning = Meaning(
        compare_text(a.analysis.text, b.analysis.text, a.label, b.label),
        compare_tools(a.analysis.tool_calls, b.analysis.tool_calls),
        compare_finish(a, b),
        compare_usage(a, b),
        ignored,
        compare_text(a.analysis.reasoning, b.analysis.reasoning, a.label, b.label),
    )
    timing = compare_timing(a, b)
    return DiffReport(
        a,
        b,
        how,
        request_differences(a.request, b.request),
        meaning,
        timing,
        compare_wire(a, b),
        compare_headers(a, b),
        tuple(g.check(timing) for g in gates),
    )


def compare(
    a: Interaction,
    b: Interaction,
    *,
    label_a: str = "A",
    label_b: str = "B",
    shape_a: str | None = None,
    shape_b: str | None = None,
    ignore: Iterable[str] = (),
    gates: Sequence[Gate] = (),
    how: PairedBy = "chosen",
) -> DiffReport:
    """Compare two interactions on meaning, timing and wire framing."""
    return compare_sides(
        side(a, label_a, shape_a), side(b, label_b, shape_b), ignore=ignore, gates=gates, how=how
    )


def diff_many(
    a: Sequence[Interaction],
    b: Sequence[Interaction],
    *,
    name_a: str = "A",
    name_b: str = "B",
    labels_a: Sequence[str] | None = None,
    labels_b: Sequence[str] | None = None,
    shape_a: str | None = None,
    shape_b: str | None = None,
    ignore: Iterable[str] = (),
    gates: Sequence[Gate] = (),
) -> CassetteDiff:
    """Pair two lists of interactions by request and compare each pair."""
    la = list(labels_a) if labels_a is not None else [f"{name_a}#{i}" for i in range(len(a))]
    lb = list(labels_b) if labels_b is not None else [f"{name_b}#{i}" for i in range(len(b))]
    ignore = tuple(ignore)
    p = pair(a, b)
    reports = tuple(
        compare(
            a[i],
            b[j],
            label_a=la[i],
            label_b=lb[j],
            shape_a=shape_a,
            shape_b=shape_b,
            ignore=ignore,
            gates=gates,
            how=how,
        )
        for i, j, how in p.pairs
    )
    unpaired = tuple(
        [Unpaired("A", la[i], a[i].request.method, a[i].request.path) for i in p.unpaired_a]
        + [Unpaired("B", lb[j], b[j].request.method, b[j].request.path) for j in p.unpaired_b]
    )
    return CassetteDiff(name_a, name_b, reports, unpaired)
