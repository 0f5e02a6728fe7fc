"""``streamtape diff --json``: the report as JSON-ready data, the same content as the text.

Built from the report model only; values that JSON cannot hold (an infinite
ratio, NaN) become null through :func:`streamtape.fmt.jsonable`, so the output
parses with any JSON reader, not only Python's.
"""

from __future__ import annotations

from ..fmt import jsonable
from .model import Category, Check, Meaning, Side, TextDiff
from .report import CassetteDiff, DiffReport


def _side_json(s: Side) -> dict[str, object]:
    ix = s.interaction
    return {
        "label": s.label,
        "method": ix.request.method,
        "path": ix.request.path,
        "status": s.status,
        "shape": s.analysis.shape,
        "outcome": ix.outcome,
        "error": ix.error,
        "labels": dict(ix.labels),
    }


def _check_json(c: Check) -> dict[str, object]:
    return {
        "name": c.name,
        "a": jsonable(c.a),
        "b": jsonable(c.b),
        "state": c.state.value,
        "note": c.note,
    }


def _text_json(t: TextDiff) -> dict[str, object]:
    return {
        "same": t.same,
        "a": t.a,
        "b": t.b,
        "first_difference": t.first_difference,
        "unified_diff": list(t.unified),
        "word_diff": [list(w) for w in t.words],
    }


def _meaning_json(m: Meaning) -> dict[str, object]:
    return {
        "same": m.same,
        "differs": [c.value for c in m.differs],
        "ignored": sorted(c.value for c in m.ignored),
        "text": _text_json(m.text),
        "reasoning": _text_json(m.reasoning),
        "tool_calls": {
            "same": m.category_same(Category.TOOLS),
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
            "same": m.category_same(Category.FINISH),
            "checks": [_check_json(c) for c in m.finish],
        },
        "usage": {
            "same": m.category_same(Category.USAGE),
            "checks": [_check_json(c) for c in m.usage],
        },
    }


def report_json(rep: DiffReport) -> dict[str, object]:
    """One compared pair as JSON-ready data."""
    return {
        "a": _side_json(rep.a),
        "b": _side_json(rep.b),
        "paired_by": rep.how,
        "request_differences": list(rep.request_differences),
        "same": rep.same,
        "wire_same": rep.wire_same,
        "gates_ok": rep.gates_ok,
        "exit_status": rep.exit_status,
        "meaning": _meaning_json(rep.meaning),
        "timing": [
            {
                "metric": r.metric.value,
                "label": r.label,
                "unit": r.unit,
                "a": jsonable(r.a),
                "b": jsonable(r.b),
                "ratio": jsonable(r.ratio),
                "delta": jsonable(r.delta),
            }
            for r in rep.timing_shown
        ],
        "wire": {
            "same": rep.wire_same,
            "rows": [
                {"name": w.name, "a": jsonable(w.a), "b": jsonable(w.b), "same": w.same}
                for w in rep.wire
            ],
            "headers": [{"name": h.name, "a": h.a, "b": h.b} for h in rep.headers],
        },
        "gates": [
            {
                "gate": g.gate.text,
                "metric": g.gate.metric.value,
                "kind": g.gate.kind.value,
                "ok": g.ok,
                "measured": jsonable(g.measured),
                "detail": g.detail,
            }
            for g in rep.gates
        ],
    }


def result_json(result: CassetteDiff) -> dict[str, object]:
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
