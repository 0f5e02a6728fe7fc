"""Compare two recorded streams: meaning, timing and wire framing. No I/O.

The heart of ``streamtape diff``. Values in, values out::

    report = compare(ix_a, ix_b, ignore={"usage"}, gates=[parse_gate("ttft>1.5x")])
    report.same           # the meaning agrees (after --ignore)
    report.exit_status    # 0 same and every gate passes, 1 otherwise
    render_text(report)   # the terminal report (styled when asked)
    report_json(report)   # the same content as JSON-ready data

Whole cassettes are paired by their requests (:func:`pair`, :func:`diff_many`).
Both sides go through :func:`streamtape.shapes.analyze` and
:func:`streamtape.stats.compute`, so an OpenAI-compatible stream compares
with an Ollama NDJSON one on meaning and timing, while the wire section names
the format difference.
"""

from __future__ import annotations

import difflib
import json
import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from .cassette import Interaction, Request
from .errors import GateError, OptionError

IGNORABLE = ("text", "tools", "finish", "usage")
"""Meaning categories ``--ignore`` can relax."""

SAME, DIFFERS, INFO = "same", "differs", "info"

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
VOLATILE_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
# Headers that have their own row in the wire section.
OWN_ROW_HEADERS = frozenset({"content-type", "transfer-encoding"})


# ---------------------------------------------------------------------------
# Pairing whole cassettes by request


def body_key(body: bytes, *, drop: Iterable[str] = ()) -> tuple[str, Any]:
    """A request body as data: JSON compared as values (key order and spacing do not
    matter), anything else as bytes. Top-level JSON keys in ``drop`` are left out."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return ("bytes", body)
    if isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k not in set(drop)}
    return ("json", json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def request_key(r: Request, *, drop: Iterable[str] = ()) -> tuple[str, str, tuple[str, Any]]:
    """What pairs two recordings of one request: method, path with query, body as data."""
    return (r.method.upper(), r.path, body_key(r.body, drop=drop))


@dataclass(frozen=True)
class Pairing:
    pairs: tuple[tuple[int, int, str], ...]
    """(index in A, index in B, how): how is ``"request"`` (same method, path and body),
    ``"request except model"`` or ``"only interaction"`` (each side holds one)."""
    unpaired_a: tuple[int, ...]
    unpaired_b: tuple[int, ...]


def pair(a: Sequence[Interaction], b: Sequence[Interaction]) -> Pairing:
    """Pair interactions by request: first the same method, path and JSON body; then,
    for what is left, the same but for the top-level ``model`` field (two backends
    serve one prompt under different model names). Repeats pair in recorded order.
    When each side holds exactly one interaction, they are compared whatever the
    requests (the report says how they differ)."""
    if len(a) == 1 and len(b) == 1:
        how = (
            "request"
            if request_key(a[0].request) == request_key(b[0].request)
            else "only interaction"
        )
        return Pairing(((0, 0, how),), (), ())
    pairs: list[tuple[int, int, str]] = []
    left_a = list(range(len(a)))
    left_b = list(range(len(b)))
    for how, drop in (("request", ()), ("request except model", ("model",))):
        waiting: dict[Any, list[int]] = {}
        for j in left_b:
            waiting.setdefault(request_key(b[j].request, drop=drop), []).append(j)
        still_a = []
        for i in left_a:
            queue = waiting.get(request_key(a[i].request, drop=drop))
            if queue:
                j = queue.pop(0)
                pairs.append((i, j, how))
                left_b.remove(j)
            else:
                still_a.append(i)
        left_a = still_a
    pairs.sort()
    return Pairing(tuple(pairs), tuple(left_a), tuple(left_b))


def request_differences(a: Request, b: Request) -> tuple[str, ...]:
    """One line per way two requests differ (method, path, body fields)."""
    out = []
    if a.method.upper() != b.method.upper():
        out.append(f"method {a.method} vs {b.method}")
    if a.path != b.path:
        out.append(f"path {a.path} vs {b.path}")
    ka, kb = body_key(a.body), body_key(b.body)
    if ka != kb:
        if ka[0] == kb[0] == "json":
            da, db = json.loads(ka[1]), json.loads(kb[1])
            if isinstance(da, dict) and isinstance(db, dict):
                keys = sorted(
                    k for k in set(da) | set(db) if da.get(k, _MISSING) != db.get(k, _MISSING)
                )
                out.append("body fields differ: " + ", ".join(keys))
            else:
                out.append("bodies differ")
        else:
            out.append(f"bodies differ ({len(a.body)} vs {len(b.body)} bytes)")
    return tuple(out)


_MISSING = object()


# ---------------------------------------------------------------------------
# The report model


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the interaction and what the shapes and stats made of it."""

    label: str
    interaction: Interaction = field(repr=False, compare=False)
    analysis: Any = field(repr=False, compare=False)
    stats: Any = field(repr=False, compare=False)

    @property
    def request(self) -> Request:
        return self.interaction.request

    @property
    def status(self) -> int | None:
        r = self.interaction.response
        return r.status if r else None

    def head(self) -> dict[str, Any]:
        ix = self.interaction
        return {
            "label": self.label,
            "method": ix.request.method,
            "path": ix.request.path,
            "status": self.status,
            "shape": self.analysis.shape,
            "outcome": ix.outcome,
            "error": ix.error,
            "labels": dict(ix.labels),
        }


@dataclass(frozen=True)
class Check:
    """One compared item. ``state`` is same, differs, or info (shown, never counted)."""

    name: str
    a: Any
    b: Any
    state: str
    note: str = ""


@dataclass(frozen=True)
class TextDiff:
    a: str
    b: str
    same: bool
    unified: tuple[str, ...] = ()
    """Unified diff lines (no line ends); empty when the texts are equal."""
    first_difference: int | None = None
    """Character offset of the first difference."""
    words: tuple[tuple[str, str], ...] = ()
    """The same difference word by word (see :func:`word_diff`)."""


@dataclass(frozen=True)
class ToolCallCheck:
    position: int
    name_a: str | None
    name_b: str | None
    arguments_a: Any
    """Parsed JSON arguments, or the raw string when they are not valid JSON; None if absent."""
    arguments_b: Any
    same: bool
    note: str = ""


@dataclass(frozen=True)
class Meaning:
    text: TextDiff
    tools: tuple[ToolCallCheck, ...]
    finish: tuple[Check, ...]
    usage: tuple[Check, ...]
    ignored: frozenset[str] = frozenset()

    def category_same(self, name: str) -> bool:
        if name == "text":
            return self.text.same
        if name == "tools":
            return all(t.same for t in self.tools)
        if name == "finish":
            return all(c.state != DIFFERS for c in self.finish)
        if name == "usage":
            return all(c.state != DIFFERS for c in self.usage)
        raise KeyError(name)

    @property
    def differs(self) -> tuple[str, ...]:
        """Categories that differ and are not ignored."""
        return tuple(c for c in IGNORABLE if c not in self.ignored and not self.category_same(c))

    @property
    def same(self) -> bool:
        return not self.differs


TIMING_METRICS: dict[str, tuple[str, str, str]] = {
    # key: (stats attribute, label, unit)
    "ttfb": ("ttfb_ns", "first byte", "ns"),
    "ttft": ("ttft_ns", "first token", "ns"),
    "p50_gap": ("gap_p50_ns", "gap p50", "ns"),
    "p95_gap": ("gap_p95_ns", "gap p95", "ns"),
    "max_gap": ("gap_max_ns", "gap max", "ns"),
    "duration": ("duration_ns", "duration", "ns"),
    "tokens_per_s": ("tokens_per_s", "tokens/s", "tok/s"),
}
METRIC_ALIASES = {
    "first_byte": "ttfb",
    "first_token": "ttft",
    "gap_p50": "p50_gap",
    "gap_p95": "p95_gap",
    "gap_max": "max_gap",
    "p50": "p50_gap",
    "p95": "p95_gap",
    "tps": "tokens_per_s",
    "tokens_s": "tokens_per_s",
}


@dataclass(frozen=True)
class TimingRow:
    metric: str
    label: str
    unit: str
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


@dataclass(frozen=True)
class WireRow:
    name: str
    a: Any
    b: Any

    @property
    def same(self) -> bool:
        return self.a == self.b


@dataclass(frozen=True)
class HeaderRow:
    name: str
    a: str | None
    b: str | None


@dataclass(frozen=True)
class Gate:
    """A ``--fail-on`` gate: fail when ``metric`` of B ``op`` ``value`` (as ``kind``)."""

    text: str
    metric: str
    op: str
    kind: str
    """``ratio`` (B/A against a factor), ``delta`` (B-A), ``percent`` (B-A as % of A)
    or ``absolute`` (B alone)."""
    value: float
    """Factor, percent, tokens/s, or nanoseconds for times."""

    def check(self, timing: Sequence[TimingRow]) -> GateResult:
        row = next(r for r in timing if r.metric == self.metric)
        fn = _OPS[self.op]
        missing = [s for s, v in (("A", row.a), ("B", row.b)) if v is None]
        if self.kind == "absolute":
            missing = [m for m in missing if m == "B"]
        if missing:
            return GateResult(
                self,
                None,
                False,
                f"cannot check: {' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no {row.label}",
            )
        if self.kind == "ratio":
            got = row.ratio
        elif self.kind == "delta":
            got = row.delta
        elif self.kind == "percent":
            r = row.ratio
            got = None if r is None else (r - 1.0) * 100.0
        else:
            got = row.b
        assert got is not None
        failed = bool(fn(got, self.value))
        return GateResult(self, got, not failed, _gate_detail(self, got, row))


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    measured: float | None
    ok: bool
    detail: str


@dataclass(frozen=True)
class DiffReport:
    a: Side
    b: Side
    how: str
    """How the two were paired (see :class:`Pairing`), or ``"chosen"`` for FILE#N."""
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


@dataclass(frozen=True)
class Unpaired:
    side: str
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

    @property
    def same(self) -> bool:
        return all(r.same for r in self.reports) and not self.unpaired

    @property
    def gates_ok(self) -> bool:
        return all(r.gates_ok for r in self.reports)

    @property
    def exit_status(self) -> int:
        return 0 if self.same and self.gates_ok else 1


# ---------------------------------------------------------------------------
# Comparing


def _analyze(ix: Interaction, shape: str | None) -> tuple[Any, Any]:
    from .shapes import analyze
    from .stats import compute

    analysis = analyze(ix, shape)
    return analysis, compute(ix, analysis)


def side(ix: Interaction, label: str, shape: str | None = None) -> Side:
    """Analyze one interaction (``shape`` forces a format; None detects it)."""
    analysis, stats = _analyze(ix, shape)
    return Side(label, ix, analysis, stats)


def json_equal(x: Any, y: Any) -> bool:
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


WORD_DIFF_WINDOW = 500
"""Words compared after the common start (bounds the quadratic matcher)."""
_WORD_RE = re.compile(r"\s+|\w+|[^\w\s]")


def word_diff(a: str, b: str, window: int = WORD_DIFF_WINDOW) -> tuple[tuple[str, str], ...]:
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
    out: list[tuple[str, str]] = []

    def add(op: str, text: str) -> None:
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
        left_a = sum(1 for w in mid_a[window:] if not w.isspace()) + sum(
            1 for w in wa[len(wa) - q :] if not w.isspace()
        )
        left_b = sum(1 for w in mid_b[window:] if not w.isspace()) + sum(
            1 for w in wb[len(wb) - q :] if not w.isspace()
        )
        out.append(("…", f"word diff stops here; {left_a} more words in A, {left_b} in B"))
    else:
        add("=", "".join(wa[len(wa) - q :]))
    return tuple(out)


def compact_words(words: Sequence[tuple[str, str]], keep: int = 40) -> list[tuple[str, str]]:
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


def _valid_json(tc: Any) -> bool:
    return bool(getattr(tc, "valid_json", getattr(tc, "parsed", None) is not None))


def _tool_arguments(tc: Any) -> Any:
    if tc is None:
        return None
    return tc.parsed if _valid_json(tc) else tc.arguments


def compare_tools(a: Sequence[Any], b: Sequence[Any]) -> tuple[ToolCallCheck, ...]:
    """Tool calls in order; names compared as strings, arguments as JSON data when both
    parse (key order does not matter), as strings otherwise. Call ids are ignored."""
    ta = sorted(a, key=lambda t: t.index if t.index is not None else 0)
    tb = sorted(b, key=lambda t: t.index if t.index is not None else 0)
    out = []
    for pos in range(max(len(ta), len(tb))):
        x = ta[pos] if pos < len(ta) else None
        y = tb[pos] if pos < len(tb) else None
        note = ""
        if x is None or y is None:
            same = False
            note = f"only in {'A' if y is None else 'B'}"
        else:
            vx, vy = _valid_json(x), _valid_json(y)
            if vx and vy:
                args_same = json_equal(x.parsed, y.parsed)
            else:
                args_same = (x.arguments or "").strip() == (y.arguments or "").strip()
                if vx != vy:
                    note = f"arguments are not valid JSON in {'B' if vx else 'A'}"
            same = x.name == y.name and args_same
            if not same and not note:
                note = "names differ" if x.name != y.name else "arguments differ"
        out.append(
            ToolCallCheck(
                pos,
                getattr(x, "name", None),
                getattr(y, "name", None),
                _tool_arguments(x),
                _tool_arguments(y),
                same,
                note,
            )
        )
    return tuple(out)


def _check(name: str, a: Any, b: Any, note: str = "") -> Check:
    return Check(name, a, b, SAME if a == b else DIFFERS, note)


def compare_finish(a: Side, b: Side) -> tuple[Check, ...]:
    fa, fb = a.analysis.finish, b.analysis.finish
    ra = fa.reason if fa else None
    rb = fb.reason if fb else None
    raw_a = fa.raw if fa else None
    raw_b = fb.raw if fb else None
    checks = [_check("reason", ra, rb)]
    checks.append(
        Check("original", raw_a, raw_b, INFO, "" if raw_a == raw_b else "server values differ")
    )
    checks.append(_check("status", a.status, b.status))
    checks.append(_check("outcome", a.interaction.outcome, b.interaction.outcome))
    ea, eb = _error_texts(a.analysis.errors), _error_texts(b.analysis.errors)
    checks.append(
        Check(
            "errors",
            ea,
            eb,
            SAME if len(ea) == len(eb) else DIFFERS,
            "" if ea == eb or len(ea) != len(eb) else "messages differ",
        )
    )
    return tuple(checks)


def _error_texts(events: Sequence[Any]) -> list[str]:
    out = []
    for ev in events:
        err = getattr(ev, "error", None)
        if isinstance(err, dict):
            err = err.get("message") or json.dumps(err, sort_keys=True)
        out.append(str(err) if err is not None else "error")
    return out


def compare_usage(a: Side, b: Side) -> tuple[Check, ...]:
    ua, ub = a.analysis.usage, b.analysis.usage
    out = []
    for name in ("prompt_tokens", "completion_tokens"):
        va = getattr(ua, name, None) if ua else None
        vb = getattr(ub, name, None) if ub else None
        if va is None and vb is None:
            out.append(Check(name, None, None, INFO, "neither side reports it"))
        elif va is None or vb is None:
            out.append(Check(name, va, vb, INFO, f"only {'A' if vb is None else 'B'} reports it"))
        else:
            out.append(_check(name, va, vb))
    return tuple(out)


def compare_timing(a: Side, b: Side) -> tuple[TimingRow, ...]:
    rows = []
    for metric, (attr, label, unit) in TIMING_METRICS.items():
        rows.append(
            TimingRow(
                metric,
                label,
                unit,
                _num(getattr(a.stats, attr, None)),
                _num(getattr(b.stats, attr, None)),
            )
        )
    return tuple(rows)


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


_ENDINGS = {"\r\n": "CRLF", "\n": "LF", "\r": "CR"}


def _endings(s: Iterable[str]) -> str:
    names = sorted(_ENDINGS.get(e, repr(e)) for e in s)
    return "+".join(names) if names else "-"


def compare_wire(a: Side, b: Side) -> tuple[WireRow, ...]:
    def resp(s: Side, attr: str) -> Any:
        r = s.interaction.response
        return getattr(r, attr) if r else None

    def ctype(s: Side) -> str | None:
        r = s.interaction.response
        return r.header("content-type") if r else None

    def epp(s: Side) -> float | None:
        v = _num(getattr(s.stats, "events_per_piece", None))
        return None if v is None else round(v, 2)

    def row(name: str, fn: Callable[[Side], Any]) -> WireRow:
        return WireRow(name, fn(a), fn(b))

    return (
        row("format", lambda s: s.analysis.shape),
        row("wire", lambda s: s.analysis.wire),
        row("content type", ctype),
        row("http version", lambda s: resp(s, "http_version")),
        row("framing", lambda s: resp(s, "framing")),
        row("bytes", lambda s: len(s.interaction.response.body) if s.interaction.response else 0),
        row("events", lambda s: s.stats.events),
        row("pieces", lambda s: len(s.interaction.chunks)),
        row("events per piece", epp),
        row("[DONE] / end marker", lambda s: bool(s.analysis.done)),
        row("role chunk", lambda s: bool(s.analysis.role_chunk)),
        row("usage chunk", lambda s: bool(s.analysis.usage_chunk)),
        row("keep-alive comments", lambda s: s.analysis.keepalives),
        row("line endings", lambda s: _endings(s.analysis.line_endings)),
        row("cut characters", lambda s: s.analysis.cut_chars),
        row("invalid JSON events", lambda s: len(s.analysis.invalid_json)),
        row("partial last event", lambda s: len(getattr(s.analysis, "partial_tail", b"") or b"")),
    )


def is_volatile(name: str) -> bool:
    n = name.lower()
    return n in VOLATILE_HEADERS or n.startswith(VOLATILE_PREFIXES)


def compare_headers(a: Side, b: Side) -> tuple[HeaderRow, ...]:
    """Response headers whose values differ, volatile ones (Date, request ids, rate-limit
    counters, Content-Length) and those with their own wire row left out."""

    def collect(s: Side) -> tuple[dict[str, str], dict[str, str]]:
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

    va, na = collect(a)
    vb, nb = collect(b)
    rows = []
    for lk in sorted(set(va) | set(vb)):
        if va.get(lk) != vb.get(lk):
            rows.append(HeaderRow(na.get(lk) or nb.get(lk) or lk, va.get(lk), vb.get(lk)))
    return tuple(rows)


def compare_sides(
    a: Side,
    b: Side,
    *,
    ignore: Iterable[str] = (),
    gates: Sequence[Gate] = (),
    how: str = "chosen",
) -> DiffReport:
    ignored = frozenset(ignore)
    bad = ignored - set(IGNORABLE)
    if bad:
        raise OptionError(
            f"bad --ignore value {sorted(bad)[0]!r}: expected one of {', '.join(IGNORABLE)}"
        )
    meaning = Meaning(
        compare_text(a.analysis.text, b.analysis.text, a.label, b.label),
        compare_tools(a.analysis.tool_calls, b.analysis.tool_calls),
        compare_finish(a, b),
        compare_usage(a, b),
        ignored,
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
    how: str = "chosen",
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


# ---------------------------------------------------------------------------
# Gates: --fail-on EXPR

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_GATE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<)\s*(.+?)\s*$")
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

    m = _GATE_RE.match(text)
    if not m:
        raise bad(f"expected METRIC OP VALUE, such as {GATE_EXAMPLES}")
    name, op, raw = m.groups()
    metric = METRIC_ALIASES.get(name.lower(), name.lower())
    if metric not in TIMING_METRICS:
        raise bad(f"unknown metric {name!r} (known: {', '.join(TIMING_METRICS)})")
    v = _VALUE_RE.match(raw)
    if not v:
        raise bad(
            f"cannot read value {raw!r}; expected a factor (1.5x), a change (+20ms, +10%) or an amount (2s)"
        )
    sign, number, unit = v.groups()
    value = float(number)
    unit_l = unit.lower() if unit != "µs" else unit
    is_time = TIMING_METRICS[metric][2] == "ns"
    if unit_l == "x":
        if sign:
            raise bad("a factor takes no sign (write 1.5x, or +20ms for a change)")
        return Gate(text, metric, op, "ratio", value)
    if unit_l == "%":
        if not sign:
            raise bad("a percentage is a change from A: write it with a sign, such as +10%")
        return Gate(text, metric, op, "percent", -value if sign == "-" else value)
    if is_time:
        if unit_l not in _TIME_UNITS:
            why = "needs a unit" if not unit else f"unknown unit {unit!r}"
            raise bad(f"{why}: {name} is a time, use ns, us, ms or s (or x for a factor)")
        value *= _TIME_UNITS[unit_l]
    elif unit_l not in ("", "tok/s"):
        raise bad(
            f"unknown unit {unit!r}: {name} is tokens per second (a number, or x for a factor)"
        )
    if sign:
        return Gate(text, metric, op, "delta", -value if sign == "-" else value)
    return Gate(text, metric, op, "absolute", value)


def _gate_detail(g: Gate, got: float, row: TimingRow) -> str:
    if g.kind == "ratio":
        return f"B/A {fmt_ratio(got)}"
    if g.kind == "percent":
        return f"B vs A {got:+.1f}%"
    if g.kind == "delta":
        return f"B-A {fmt_value(got, row.unit, signed=True)}"
    return f"B {fmt_value(got, row.unit)}"


# ---------------------------------------------------------------------------
# Formatting (shared with the HTML page)


def fmt_value(v: float | None, unit: str, *, signed: bool = False) -> str:
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


def show_check(c: Check, v: Any) -> str:
    """A check's value as text; error messages joined, ``none`` when there are none."""
    if c.name == "errors" and isinstance(v, (list, tuple)):
        return "; ".join(v) if v else "none"
    return show(v)


def show(v: Any) -> str:
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


def printable(s: str) -> str:
    """Text with control characters made visible (\\r, \\t kept readable)."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in s)


# ---------------------------------------------------------------------------
# Terminal report


Style = Callable[..., str]


def _nostyle(text: str, **_: Any) -> str:
    return text


def render_text(
    result: CassetteDiff | DiffReport, *, color: bool = False, max_diff_lines: int = 80
) -> str:
    """The terminal report. With ``color``, ANSI styles via :func:`click.style`."""
    st: Style = click.style if color else _nostyle
    if isinstance(result, DiffReport):
        result = CassetteDiff(result.a.label, result.b.label, (result,))
    out: list[str] = []
    if len(result.reports) > 1:
        out.extend(_summary(result, st))
        out.append("")
        out.append(st("─" * 72, dim=True))
    for n, rep in enumerate(result.reports):
        if n:
            out.append("")
            out.append(st("─" * 72, dim=True))
        out.extend(_render_report(rep, st, max_diff_lines))
    if result.unpaired:
        out.append("")
        out.append(
            st("Unpaired", bold=True)
            + st(f"  {len(result.unpaired)} interaction(s) have no counterpart", fg="red")
        )
        for u in result.unpaired:
            out.append(f"  only in {u.side}  {u.label}  {u.method} {u.path}")
    if not result.reports and not result.unpaired:
        out.append("no interactions on either side")
    out.append("")
    out.append(_verdict(result, st))
    return "\n".join(out)


def pair_summary(rep: DiffReport) -> dict[str, Any]:
    """One pair in a line's worth of figures (the multi-pair overview)."""
    ttft = next(r for r in rep.timing if r.metric == "ttft")
    dur = next(r for r in rep.timing if r.metric == "duration")
    return {
        "a": rep.a.label,
        "b": rep.b.label,
        "request": f"{rep.a.request.method} {rep.a.request.path}",
        "meaning": "same" if rep.same else "differs in " + ", ".join(rep.meaning.differs),
        "wire": "same" if rep.wire_same else "differs",
        "ttft_ratio": ttft.ratio,
        "duration_ratio": dur.ratio,
        "gates_failed": sum(1 for g in rep.gates if not g.ok),
    }


def _summary(result: CassetteDiff, st: Style) -> list[str]:
    out = [st("Pairs", bold=True) + f"  {len(result.reports)} paired by request"]
    rows = [
        [
            st("A", dim=True),
            st("B", dim=True),
            st("request", dim=True),
            st("meaning", dim=True),
            st("wire", dim=True),
            st("ttft B/A", dim=True),
            st("duration B/A", dim=True),
        ]
    ]
    for rep in result.reports:
        p = pair_summary(rep)
        meaning = (
            st(p["meaning"], fg="green") if rep.same else st(p["meaning"], fg="red", bold=True)
        )
        wire = p["wire"] if rep.wire_same else st(p["wire"], fg="yellow")
        gates = (
            st(f"  {p['gates_failed']} gate(s) failed", fg="red", bold=True)
            if p["gates_failed"]
            else ""
        )
        rows.append(
            [
                p["a"],
                p["b"],
                p["request"],
                meaning,
                wire,
                fmt_ratio(p["ttft_ratio"]),
                fmt_ratio(p["duration_ratio"]) + gates,
            ]
        )
    return out + _table(rows, cap=60, label_w=None)


def _verdict(result: CassetteDiff, st: Style) -> str:
    parts = []
    n = len(result.reports)
    differing = [r for r in result.reports if not r.same]
    if n == 1 and not result.unpaired:
        rep = result.reports[0]
        parts.append(
            st("meaning same", fg="green")
            if rep.same
            else st("meaning differs (" + ", ".join(rep.meaning.differs) + ")", fg="red", bold=True)
        )
        parts.append("wire same" if rep.wire_same else st("wire differs", fg="yellow"))
    else:
        parts.append(
            st(f"{n} pair(s), meaning same", fg="green")
            if not differing
            else st(f"{n} pair(s), meaning differs in {len(differing)}", fg="red", bold=True)
        )
        if result.unpaired:
            parts.append(st(f"{len(result.unpaired)} unpaired", fg="red", bold=True))
    failed = sum(1 for r in result.reports for g in r.gates if not g.ok)
    if any(r.gates for r in result.reports):
        parts.append(
            st(f"{failed} gate(s) failed", fg="red", bold=True)
            if failed
            else st("gates pass", fg="green")
        )
    return "Result: " + ", ".join(parts) + f"  (exit {result.exit_status})"


def _state(state: str, st: Style, ignored: bool = False) -> str:
    if ignored and state == DIFFERS:
        return st("differs (ignored)", fg="yellow")
    if state == SAME:
        return st("same", fg="green")
    if state == DIFFERS:
        return st("DIFFERS", fg="red", bold=True)
    return st("-", dim=True)


_LABEL_W = 22
FINISH_LABELS = {
    "reason": "finish reason",
    "original": "finish (server value)",
    "status": "status",
    "outcome": "outcome",
    "errors": "error events",
}


def _table(
    rows: Sequence[Sequence[str]],
    right: Sequence[int] = (),
    cap: int = 34,
    label_w: int | None = _LABEL_W,
) -> list[str]:
    """Rows of cells as aligned lines; the first column is the label column (``label_w``
    wide, or as wide as its widest cell when None)."""
    ncol = max((len(r) for r in rows), default=0)
    widths = [
        label_w
        if i == 0 and label_w is not None
        else min(cap, max((len(click.unstyle(r[i])) for r in rows if i < len(r)), default=0))
        for i in range(ncol)
    ]
    out = []
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            pad = " " * max(0, widths[i] - len(click.unstyle(c)))
            cells.append(pad + c if i in right else c + pad)
        out.append(("  " + "  ".join(cells)).rstrip())
    return out


def _clip(s: str, n: int = 34) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _render_report(rep: DiffReport, st: Style, max_diff_lines: int) -> list[str]:
    out = []
    a, b = rep.a, rep.b
    for tag, s in (("A", a), ("B", b)):
        ix = s.interaction
        extra = f"  {ix.outcome}" + (f" ({ix.error})" if ix.error else "")
        out.append(
            f"{st(tag, bold=True)}  {s.label}  {ix.request.method} {ix.request.path}  "
            f"{s.status if s.status is not None else '---'}  {s.analysis.shape}{extra}"
        )
    if rep.request_differences:
        out.append(st("   requests differ: " + "; ".join(rep.request_differences), fg="yellow"))

    m = rep.meaning
    out.append("")
    head = st("Meaning", bold=True) + "  "
    if m.same:
        head += st("same", fg="green")
    else:
        head += st("differs in " + ", ".join(m.differs), fg="red", bold=True)
    if m.ignored:
        head += st(f"  (ignoring {', '.join(sorted(m.ignored))})", dim=True)
    out.append(head)
    label = f"{{:<{_LABEL_W}}}"

    # text
    t = m.text
    ti = "text" in m.ignored
    if t.same:
        out.append(f"  {label.format('text')}  {_state(SAME, st)}  ({len(t.a)} characters)")
    else:
        out.append(
            f"  {label.format('text')}  {_state(DIFFERS, st, ti)}  ({len(t.a)} vs {len(t.b)} characters, "
            f"first difference at character {t.first_difference})"
        )
        lines = list(t.unified)
        if len(lines) > max_diff_lines:
            extra = len(lines) - max_diff_lines
            lines = [*lines[:max_diff_lines], f"... {extra} more diff lines"]
        for line in lines:
            shown = printable(line)
            if line.startswith(("---", "+++")):
                out.append("    " + st(shown, bold=True))
            elif line.startswith("@@"):
                out.append("    " + st(shown, fg="cyan"))
            elif line.startswith("-"):
                out.append("    " + st(shown, fg="red"))
            elif line.startswith("+"):
                out.append("    " + st(shown, fg="green"))
            else:
                out.append("    " + shown)
        if t.words:
            parts = []
            for op, text in compact_words(t.words):
                shown = printable(text)
                if op == "-":
                    parts.append(st(f"[-{shown}-]", fg="red"))
                elif op == "+":
                    parts.append(st(f"{{+{shown}+}}", fg="green"))
                elif op == "…":
                    parts.append(st(f" … ({text})", dim=True))
                else:
                    parts.append(shown)
            out.append("    " + st("words: ", dim=True) + "".join(parts))
    # tools
    toi = "tools" in m.ignored
    if not m.tools:
        out.append(f"  {label.format('tool calls')}  {_state(SAME, st)}  (none)")
    else:
        state = SAME if all(x.same for x in m.tools) else DIFFERS
        na = sum(x.name_a is not None for x in m.tools)
        nb = sum(x.name_b is not None for x in m.tools)
        out.append(f"  {label.format('tool calls')}  {_state(state, st, toi)}  ({na} vs {nb})")
        for x in m.tools:
            mark = _state(SAME if x.same else DIFFERS, st, toi)
            out.append(f"    #{x.position}  {mark}  {x.note}".rstrip())
            out.append(f"      A  {x.name_a or '-'}({_clip(show(x.arguments_a), 90)})")
            out.append(f"      B  {x.name_b or '-'}({_clip(show(x.arguments_b), 90)})")
    # finish + usage
    fi, ui = "finish" in m.ignored, "usage" in m.ignored
    rows = [["", st("A", dim=True), st("B", dim=True)]]
    for c in m.finish:
        if c.name == "errors" and not c.a and not c.b:
            continue
        note = st(f"  {c.note}", dim=True) if c.note else ""
        state = "" if c.state == INFO else _state(c.state, st, fi)
        rows.append(
            [
                FINISH_LABELS.get(c.name, c.name),
                _clip(show_check(c, c.a)),
                _clip(show_check(c, c.b)),
                state + note,
            ]
        )
    if all(c.a is None and c.b is None for c in m.usage):
        rows.append(["usage", "-", "-", st("neither side reports token counts", dim=True)])
    else:
        for c in m.usage:
            note = st(f"  {c.note}", dim=True) if c.note else ""
            state = "" if c.state == INFO else _state(c.state, st, ui)
            rows.append([c.name.replace("_", " "), show(c.a), show(c.b), state + note])
    out.extend(_table(rows))

    # timing
    out.append("")
    out.append(st("Timing", bold=True))
    rows = [["", st("A", dim=True), st("B", dim=True), st("B/A", dim=True), st("B-A", dim=True)]]
    for r in rep.timing:
        ratio = r.ratio
        rs = fmt_ratio(ratio)
        if ratio is not None and not math.isinf(ratio):
            slower, faster = (
                (ratio > 1.2, ratio < 0.83) if r.unit == "ns" else (ratio < 0.83, ratio > 1.2)
            )
            rs = st(rs, fg="red") if slower else st(rs, fg="green") if faster else rs
        rows.append(
            [
                r.label,
                fmt_value(r.a, r.unit),
                fmt_value(r.b, r.unit),
                rs,
                fmt_value(r.delta, r.unit, signed=True),
            ]
        )
    out.extend(_table(rows, right=(1, 2, 3, 4)))

    # wire
    out.append("")
    out.append(
        st("Wire", bold=True)
        + "  "
        + (st("same", fg="green") if rep.wire_same else st("differs", fg="yellow"))
    )
    rows = [["", st("A", dim=True), st("B", dim=True)]]
    for w in rep.wire:
        rows.append(
            [
                w.name,
                _clip(show(w.a)),
                _clip(show(w.b)),
                "" if w.same else st("differs", fg="yellow"),
            ]
        )
    if rep.headers:
        rows.append([st(f"headers that differ ({len(rep.headers)})", dim=True), "", ""])
        for h in rep.headers:
            rows.append(
                [f"  {h.name}", _clip(show(h.a)), _clip(show(h.b)), st("differs", fg="yellow")]
            )
    out.extend(_table(rows))

    # gates
    if rep.gates:
        out.append("")
        out.append(st("Gates", bold=True))
        for g in rep.gates:
            mark = st("ok", fg="green") if g.ok else st("FAILED", fg="red", bold=True)
            out.append(f"  {g.gate.text:<24}{mark}  {g.detail}")
    return out


# ---------------------------------------------------------------------------
# JSON


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        return None
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def _check_json(c: Check) -> dict[str, Any]:
    return {
        "name": c.name,
        "a": _jsonable(c.a),
        "b": _jsonable(c.b),
        "state": c.state,
        "note": c.note,
    }


def report_json(rep: DiffReport) -> dict[str, Any]:
    m = rep.meaning
    return {
        "a": rep.a.head(),
        "b": rep.b.head(),
        "paired_by": rep.how,
        "request_differences": list(rep.request_differences),
        "same": rep.same,
        "wire_same": rep.wire_same,
        "gates_ok": rep.gates_ok,
        "exit_status": rep.exit_status,
        "meaning": {
            "same": m.same,
            "differs": list(m.differs),
            "ignored": sorted(m.ignored),
            "text": {
                "same": m.text.same,
                "a": m.text.a,
                "b": m.text.b,
                "first_difference": m.text.first_difference,
                "unified_diff": list(m.text.unified),
                "word_diff": [list(w) for w in m.text.words],
            },
            "tool_calls": {
                "same": m.category_same("tools"),
                "calls": [
                    {
                        "position": t.position,
                        "name_a": t.name_a,
                        "name_b": t.name_b,
                        "arguments_a": t.arguments_a,
                        "arguments_b": t.arguments_b,
                        "same": t.same,
                        "note": t.note,
                    }
                    for t in m.tools
                ],
            },
            "finish": {
                "same": m.category_same("finish"),
                "checks": [_check_json(c) for c in m.finish],
            },
            "usage": {
                "same": m.category_same("usage"),
                "checks": [_check_json(c) for c in m.usage],
            },
        },
        "timing": [
            {
                "metric": r.metric,
                "label": r.label,
                "unit": r.unit,
                "a": _jsonable(r.a),
                "b": _jsonable(r.b),
                "ratio": _jsonable(r.ratio),
                "delta": _jsonable(r.delta),
            }
            for r in rep.timing
        ],
        "wire": {
            "same": rep.wire_same,
            "rows": [
                {"name": w.name, "a": _jsonable(w.a), "b": _jsonable(w.b), "same": w.same}
                for w in rep.wire
            ],
            "headers": [{"name": h.name, "a": h.a, "b": h.b} for h in rep.headers],
        },
        "gates": [
            {
                "gate": g.gate.text,
                "metric": g.gate.metric,
                "kind": g.gate.kind,
                "ok": g.ok,
                "measured": _jsonable(g.measured),
                "detail": g.detail,
            }
            for g in rep.gates
        ],
    }


def result_json(result: CassetteDiff) -> dict[str, Any]:
    """The whole comparison as JSON-ready data (the ``--json`` output)."""
    return {
        "a": result.a,
        "b": result.b,
        "same": result.same,
        "gates_ok": result.gates_ok,
        "exit_status": result.exit_status,
        "pairs": [report_json(r) for r in result.reports],
        "unpaired": [
            {"side": u.side, "label": u.label, "method": u.method, "path": u.path}
            for u in result.unpaired
        ],
    }


__all__ = [
    "IGNORABLE",
    "CassetteDiff",
    "Check",
    "DiffReport",
    "Gate",
    "GateError",
    "GateResult",
    "HeaderRow",
    "Meaning",
    "Pairing",
    "Side",
    "TextDiff",
    "TimingRow",
    "ToolCallCheck",
    "Unpaired",
    "WireRow",
    "body_key",
    "compare",
    "compare_sides",
    "diff_many",
    "json_equal",
    "pair",
    "parse_gate",
    "render_text",
    "report_json",
    "request_key",
    "result_json",
    "side",
]
