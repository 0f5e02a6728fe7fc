"""Compare two recorded streams: meaning, timing and wire framing.

The heart of ``streamtape diff``. Values in, values out::

    report = compare(ix_a, ix_b, ignore={"usage"}, gates=[parse_gate("ttft>1.5x")])
    report.same           # the meaning agrees (after --ignore)
    report.exit_status    # 0 same and every gate passes, 1 otherwise
    render_text(report)   # the terminal report (styled when asked)
    report_json(report)   # the same content as JSON-ready data
    render_html(report)   # a self-contained page with both timelines

Where each part lives:

- :mod:`.pairing`: which recording of A answers which of B (:func:`pair`,
  :func:`request_key`); no shapes, no stats.
- :mod:`.model`: the report as values (:class:`DiffReport`, :class:`CassetteDiff`,
  :class:`Meaning`, rows and checks) and the vocabularies (:class:`Category`,
  :class:`Status`, :class:`Metric`).
- :mod:`.compare`: ``compare_*`` for each section, the word diff,
  :func:`compare` for two interactions and :func:`diff_many` for two cassettes.
- :mod:`.gates`: ``--fail-on`` gates (:func:`parse_gate`, :class:`Gate`).
- :mod:`.cells`: how a figure or value reads, shared by every renderer.
- :mod:`.render_text` (click's styles; :mod:`.summary_render` too), :mod:`.render_json`,
  :mod:`.html`: the three outputs, which read the model and nothing else.
- :mod:`.session`: a ``record --shadow`` session paired by pair id;
  :mod:`.summary` (agreement, reasons, timing spread over many pairs),
  :mod:`.summary_gates` (``agree<95%``, ``ttft_p95>1.5x``), and their outputs
  :mod:`.summary_render` (text, JSON) and :mod:`.summary_html` (the page's head
  and plots).

Both sides go through :func:`streamtape.shapes.analyze` and
:func:`streamtape.stats.compute`, so an OpenAI-compatible stream compares with
an Ollama NDJSON one on meaning and timing, while the wire section names the
format difference. Nothing here reads or writes files.
"""

from __future__ import annotations

from ..errors import GateError
from .compare import compare, compare_sides, diff_many, json_equal, side, word_diff
from .gates import Gate, GateKind, GateResult, parse_gate
from .model import (
    IGNORABLE,
    Category,
    Check,
    HeaderRow,
    Meaning,
    Metric,
    Side,
    Status,
    TextDiff,
    TimingRow,
    ToolCallCheck,
    WireRow,
)
from .pairing import Pairing, body_key, pair, request_key
from .render_html import render_html
from .render_json import report_json, result_json
from .render_text import render_text
from .report import CassetteDiff, DiffReport, Unpaired

__all__ = [
    "IGNORABLE",
    "CassetteDiff",
    "Category",
    "Check",
    "DiffReport",
    "Gate",
    "GateError",
    "GateKind",
    "GateResult",
    "HeaderRow",
    "Meaning",
    "Metric",
    "Pairing",
    "Side",
    "Status",
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
    "render_html",
    "render_text",
    "report_json",
    "request_key",
    "result_json",
    "side",
    "word_diff",
]
