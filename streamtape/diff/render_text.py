"""The terminal report of ``streamtape diff``: plain text, or styled with click.

The only module of the package that knows about the terminal. Every section
of a :class:`~streamtape.diff.model.DiffReport` has its own small function
returning lines (sides, meaning, timing, wire, gates); a :class:`Style` is
``click.style`` when colour is wanted and the identity otherwise, so the plain
text is the styled text with the escapes left out, byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import click

from .cells import (
    FINISH_LABELS,
    compact_words,
    fmt_ratio,
    fmt_value,
    printable,
    show,
    show_check,
)
from .model import Category, Meaning, Status, TextDiff
from .report import CassetteDiff, DiffReport, pair_summary


class Style(Protocol):
    """The part of :func:`click.style` the report uses."""

    def __call__(
        self, text: str, *, fg: str | None = None, bold: bool | None = None, dim: bool | None = None
    ) -> str: ...


def no_style(
    text: str, *, fg: str | None = None, bold: bool | None = None, dim: bool | None = None
) -> str:
    """The :class:`Style` of plain text: ``text`` as it is."""
    return text


RULE = "─" * 72
"""The line between one pair's report and the next."""
_LABEL_W = 22
"""Width of the label column of the meaning and wire tables."""


def render_text(
    result: CassetteDiff | DiffReport, *, color: bool = False, max_diff_lines: int = 80
) -> str:
    """The terminal report. With ``color``, ANSI styles via :func:`click.style`."""
    st: Style = click.style if color else no_style
    result = CassetteDiff.of(result)
    out: list[str] = []
    if len(result.reports) > 1:
        out.extend(_summary(result, st))
        out.append("")
        out.append(st(RULE, dim=True))
    for n, rep in enumerate(result.reports):
        if n:
            out.append("")
            out.append(st(RULE, dim=True))
        out.extend(_report(rep, st, max_diff_lines))
    out.extend(_unpaired(result, st))
    if not result.reports and not result.unpaired:
        out.append("no interactions on either side")
    out.append("")
    out.append(_verdict(result, st))
    return "\n".join(out)


def render_report(rep: DiffReport, *, color: bool = False, max_diff_lines: int = 80) -> str:
    """One pair's sections (sides, meaning, timing, wire, gates) without a verdict line:
    the details that follow a many-pair summary (``diff -v``, ``--pair N``)."""
    st: Style = click.style if color else no_style
    return "\n".join(_report(rep, st, max_diff_lines))


# ---------------------------------------------------------------------------
# Several pairs: the overview, what is unpaired, the verdict


def _summary(result: CassetteDiff, st: Style) -> list[str]:
    out = [st("Pairs", bold=True) + f"  {len(result.reports)} paired by request"]
    heads = ("A", "B", "request", "meaning", "wire", "ttft B/A", "duration B/A")
    rows = [[st(h, dim=True) for h in heads]]
    for rep in result.reports:
        p = pair_summary(rep)
        meaning = st(p.meaning, fg="green") if rep.same else st(p.meaning, fg="red", bold=True)
        wire = p.wire if rep.wire_same else st(p.wire, fg="yellow")
        failed_names = ", ".join(g.gate.text for g in rep.gates if not g.ok)
        gates = (
            st(f"  {p.gates_failed} gate(s) failed: {failed_names}", fg="red", bold=True) if p.gates_failed else ""
        )
        rows.append(
            [
                p.a,
                p.b,
                p.request,
                meaning,
                wire,
                fmt_ratio(p.ttft_ratio),
                fmt_ratio(p.duration_ratio) + gates,
            ]
        )
    return out + table_lines(rows, cap=60, label_w=None)


def _unpaired(result: CassetteDiff, st: Style) -> list[str]:
    if not result.unpaired:
        return []
    n = len(result.unpaired)
    out = [
        "",
        st("Unpaired", bold=True) + st(f"  {n} interaction(s) have no counterpart", fg="red"),
    ]
    for u in result.unpaired:
        out.append(f"  only in {u.side}  {u.label}  {u.method} {u.path}")
    return out


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
    if any(r.gates for r in result.reports):
        failed = result.gates_failed
        names = sorted({g.gate.text for r in result.reports for g in r.gates if not g.ok})
        parts.append(
            st(f"{failed} gate(s) failed ({', '.join(names)})", fg="red", bold=True)
            if failed
            else st("gates pass", fg="green")
        )
    return "Result: " + ", ".join(parts) + f"  (exit {result.exit_status})"


# ---------------------------------------------------------------------------
# Table helpers


def _state(state: Status, st: Style, ignored: bool = False) -> str:
    if ignored and state == Status.DIFFERS:
        return st("differs (ignored)", fg="yellow")
    if state == Status.SAME:
        return st("same", fg="green")
    if state == Status.DIFFERS:
        return st("DIFFERS", fg="red", bold=True)
    return st("-", dim=True)


def table_lines(
    rows: Sequence[Sequence[str]],
    right: Sequence[int] = (),
    cap: int = 34,
    label_w: int | None = _LABEL_W,
) -> list[str]:
    """Rows of cells as aligned lines; the first column is the label column (``label_w``
    wide, or as wide as its widest cell when None). A column is as wide as its widest
    cell up to ``cap``, widths counted without the styles' escapes; the columns in
    ``right`` are aligned right. The summary's tables use it too."""
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


def _label(name: str) -> str:
    return name.ljust(_LABEL_W)


# ---------------------------------------------------------------------------
# One pair


def _report(rep: DiffReport, st: Style, max_diff_lines: int) -> list[str]:
    return [
        *_sides(rep, st),
        "",
        *_meaning(rep.meaning, st, max_diff_lines),
        "",
        *_timing(rep, st),
        "",
        *_wire(rep, st),
        *_gates(rep, st),
    ]


def _sides(rep: DiffReport, st: Style) -> list[str]:
    out = []
    for tag, s in (("A", rep.a), ("B", rep.b)):
        ix = s.interaction
        extra = f"  {ix.outcome}" + (f" ({ix.error})" if ix.error else "")
        out.append(
            f"{st(tag, bold=True)}  {s.label}  {ix.request.method} {ix.request.path}  "
            f"{s.status if s.status is not None else '---'}  {s.analysis.shape}{extra}"
        )
    if rep.request_differences:
        out.append(st("   requests differ: " + "; ".join(rep.request_differences), fg="yellow"))
    return out


def _meaning(m: Meaning, st: Style, max_diff_lines: int) -> list[str]:
    head = st("Meaning", bold=True) + "  "
    if m.same:
        head += st("same", fg="green")
    else:
        head += st("differs in " + ", ".join(m.differs), fg="red", bold=True)
    if m.ignored:
        head += st(f"  (ignoring {', '.join(sorted(m.ignored))})", dim=True)
    return [
        head,
        *_text(m.text, st, Category.TEXT in m.ignored, max_diff_lines),
        *(_text(m.reasoning, st, Category.REASONING in m.ignored, max_diff_lines, "reasoning")
          if m.has_reasoning else []),
        *_tools(m, st),
        *table_lines(_finish_rows(m, st) + _usage_rows(m, st)),
    ]


def _text(
    t: TextDiff, st: Style, ignored: bool, max_diff_lines: int, what: str = "text"
) -> list[str]:
    if t.same:
        return [f"  {_label(what)}  {_state(Status.SAME, st)}  ({len(t.a)} characters)"]
    out = [
        f"  {_label(what)}  {_state(Status.DIFFERS, st, ignored)}  "
        f"({len(t.a)} vs {len(t.b)} characters, first difference at character {t.first_difference})"
    ]
    lines = list(t.unified)
    if len(lines) > max_diff_lines:
        extra = len(lines) - max_diff_lines
        lines = [*lines[:max_diff_lines], f"... {extra} more diff lines"]
    out.extend("    " + _diff_line(line, st) for line in lines)
    if t.words:
        out.append("    " + st("words: ", dim=True) + _word_line(t, st))
    return out


def _diff_line(line: str, st: Style) -> str:
    shown = printable(line)
    if line.startswith(("---", "+++")):
        return st(shown, bold=True)
    if line.startswith("@@"):
        return st(shown, fg="cyan")
    if line.startswith("-"):
        return st(shown, fg="red")
    if line.startswith("+"):
        return st(shown, fg="green")
    return shown


def _word_line(t: TextDiff, st: Style) -> str:
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
    return "".join(parts)


def _tools(m: Meaning, st: Style) -> list[str]:
    if not m.tools:
        return [f"  {_label('tool calls')}  {_state(Status.SAME, st)}  (none)"]
    ignored = Category.TOOLS in m.ignored
    state = Status.SAME if all(x.same for x in m.tools) else Status.DIFFERS
    na = sum(x.name_a is not None for x in m.tools)
    nb = sum(x.name_b is not None for x in m.tools)
    out = [f"  {_label('tool calls')}  {_state(state, st, ignored)}  ({na} vs {nb})"]
    for x in m.tools:
        mark = _state(Status.SAME if x.same else Status.DIFFERS, st, ignored)
        out.append(f"    #{x.position}  {mark}  {x.note}".rstrip())
        out.append(f"      A  {x.name_a or '-'}({_clip(show(x.arguments_a), 90)})")
        out.append(f"      B  {x.name_b or '-'}({_clip(show(x.arguments_b), 90)})")
    return out


def _finish_rows(m: Meaning, st: Style) -> list[list[str]]:
    ignored = Category.FINISH in m.ignored
    rows = [["", st("A", dim=True), st("B", dim=True)]]
    for c in m.finish:
        if c.name == "errors" and not c.a and not c.b:
            continue
        note = st(f"  {c.note}", dim=True) if c.note else ""
        state = "" if c.state == Status.INFO else _state(c.state, st, ignored)
        rows.append(
            [
                FINISH_LABELS.get(c.name, c.name),
                _clip(show_check(c, c.a)),
                _clip(show_check(c, c.b)),
                state + note,
            ]
        )
    return rows


def _usage_rows(m: Meaning, st: Style) -> list[list[str]]:
    if all(c.a is None and c.b is None for c in m.usage):
        return [["usage", "-", "-", st("neither side reports token counts", dim=True)]]
    ignored = Category.USAGE in m.ignored
    rows = []
    for c in m.usage:
        note = st(f"  {c.note}", dim=True) if c.note else ""
        state = "" if c.state == Status.INFO else _state(c.state, st, ignored)
        rows.append([c.name.replace("_", " "), show(c.a), show(c.b), state + note])
    return rows


def _timing(rep: DiffReport, st: Style) -> list[str]:
    heads = ("A", "B", "B/A", "B-A")
    rows = [["", *(st(h, dim=True) for h in heads)]]
    for r in rep.timing_shown:
        ratio = r.ratio
        rs = fmt_ratio(ratio)
        if ratio is not None and not math.isinf(ratio):
            # Times: a higher ratio is slower. Throughput: a lower one is.
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
    return [st("Timing", bold=True), *table_lines(rows, right=(1, 2, 3, 4))]


def _wire(rep: DiffReport, st: Style) -> list[str]:
    verdict = st("same", fg="green") if rep.wire_same else st("differs", fg="yellow")
    rows = [["", st("A", dim=True), st("B", dim=True)]]
    for w in rep.wire:
        differs = "" if w.same else st("differs", fg="yellow")
        rows.append([w.name, _clip(show(w.a)), _clip(show(w.b)), differs])
    if rep.headers:
        rows.append([st(f"headers that differ ({len(rep.headers)})", dim=True), "", ""])
        for h in rep.headers:
            rows.append(
                [f"  {h.name}", _clip(show(h.a)), _clip(show(h.b)), st("differs", fg="yellow")]
            )
    return [st("Wire", bold=True) + "  " + verdict, *table_lines(rows)]


def _gates(rep: DiffReport, st: Style) -> list[str]:
    if not rep.gates:
        return []
    out = ["", st("Gates", bold=True)]
    for g in rep.gates:
        mark = st("ok", fg="green") if g.ok else st("FAILED", fg="red", bold=True)
        out.append(f"  {g.gate.text:<24}{mark}  {g.detail}")
    return out
