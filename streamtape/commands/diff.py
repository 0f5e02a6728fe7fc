"""``streamtape diff A B``: compare two recordings on meaning, timing and wire framing."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from ..cassette.model import Interaction
from ..cassette.reader import load, load_many
from ..diff import (
    IGNORABLE,
    CassetteDiff,
    Gate,
    diff_many,
    render_html,
    render_text,
    report_json,
    result_json,
)
from ..diff.load import LoadFigures, distinct, is_rerun, load_figures, parse_slo, recorded_slo
from ..diff.render_text import render_report
from ..diff.shadow import ShadowPairing, diff_shadow, is_shadow_recording
from ..diff.summary import Summary, summarize
from ..diff.summary_gates import SummaryGate, parse_fail_on
from ..diff.summary_html import SUMMARY_CSS, summary_section
from ..diff.summary_render import render_summary_text, summary_json
from ..errors import CassetteError, OptionError
from ..shadow.labels import LABEL_BACKEND, LABEL_ROLE, Role
from ..shapes import SHAPES
from ._common import warn
from ._websocket import diff_sessions_command, has_sessions

_INDEX_RE = re.compile(r"^(?P<path>.+)#(?P<index>[^#]*)$")


@dataclass(frozen=True)
class Operand:
    """One side of the command line: a whole cassette, or one interaction of it."""

    text: str
    interactions: list[Interaction]
    labels: list[str]


def load_operand(text: str) -> Operand:
    """``FILE`` (every interaction), ``FILE#N`` (the N-th, from 0) or a folder (every
    ``*.tape`` in it). CassetteError on bad input."""
    m = _INDEX_RE.match(text)
    if m and not Path(text).exists():
        path, raw = m.group("path"), m.group("index")
        if not re.fullmatch(r"\d+", raw.strip()):
            raise CassetteError(
                f"{text}: expected FILE#N with N a whole number from 0, got {raw!r} after '#'"
            )
        n = int(raw)
        cas = load(path)
        warn(cas)
        if n >= len(cas):
            have = (
                "no interactions"
                if not len(cas)
                else f"{len(cas)} interaction(s), #0 to #{len(cas) - 1}"
            )
            raise CassetteError(f"{text}: no interaction #{n}; {path} holds {have}")
        return Operand(text, [cas[n]], [text])
    cassettes = load_many([text]) if Path(text).is_dir() else [load(text)]
    interactions: list[Interaction] = []
    labels: list[str] = []
    warn(cassettes)
    for cas in cassettes:
        interactions.extend(cas)
        labels.extend(f"{cas.path or text}#{i}" for i in range(len(cas)))
    return Operand(text, interactions, labels)


def _shapes(value: str | None) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    parts = [p.strip() for p in value.split(",")]
    if len(parts) > 2 or not all(parts):
        raise OptionError(f"bad --shape {value!r}: expected NAME, or NAME_A,NAME_B")
    for p in parts:
        if p not in SHAPES:
            raise OptionError(f"bad --shape {p!r}: expected one of {', '.join(SHAPES)}")
    return (parts[0], parts[-1])


def _use_color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


@click.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="[B]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Also write a self-contained HTML page with both timelines.",
)
@click.option(
    "--ignore",
    type=click.Choice(IGNORABLE),
    multiple=True,
    help="Leave a part of the meaning out of the verdict (repeatable).",
)
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="EXPR",
    help="Gate that makes the exit status 1 (repeatable): per pair, e.g. ttft>1.5x, p95_gap>+20ms, "
    "duration>2s; over all pairs, e.g. ttft_p95>1.5x, duration_p50>+200ms, agree<95%.",
)
@click.option("-v", "--verbose", is_flag=True, help="After the summary of many pairs, every pair in full.")
@click.option("--pair", "pair_index", type=int, metavar="N", help="Only pair N (its # in the summary), in full.")
@click.option(
    "--shadow",
    "shadow",
    metavar="NAME",
    help="In a session with several shadows, the one to compare with the primary (its backend name).",
)
@click.option(
    "--shape",
    metavar="NAME",
    help="Force the wire format (NAME, or NAME_A,NAME_B) instead of detecting it.",
)
@click.option(
    "--slo",
    metavar="TERMS",
    help="A rerun session's goodput: the share of requests meeting every term, e.g. "
    "'ttft<500ms,itl<50ms,e2e<10s' (default: the rerun's own --slo).",
)
def diff_command(
    a: str,
    b: str | None,
    as_json: bool,
    html_path: str | None,
    ignore: tuple[str, ...],
    fail_on: tuple[str, ...],
    shape: str | None,
    verbose: bool,
    pair_index: int | None,
    shadow: str | None,
    slo: str | None,
) -> None:
    """Compare A and B: meaning (text, tool calls, finish, usage), timing and wire framing.

    A and B are cassettes or folders of them (interactions are paired by request:
    method, path and JSON body; unpaired ones are listed), or FILE#N for one
    interaction (FILE#0 FILE#1 compares two in one cassette). When each side holds
    one interaction they are compared whatever their requests.

    A gate such as ttft>1.5x fails when the comparison holds for B against A
    (x: factor, +20ms: change, +10%: change in percent, 2s: B alone); a gate
    that cannot be checked (no first token on a side) fails too.

    A alone is a session recorded with `record --shadow`: each client call's
    answer (A) is compared with a shadow's answer to the same call (B), paired
    by pair id. Token counts and reasoning are shown but not counted there.

    With more than one pair the report leads with a summary: how many pairs
    agree in meaning, why each other one differs, and the timing spread (p50
    and p95 of A and B, and B/A). -v adds every pair in full, --pair N one.

    A gate such as ttft>1.5x fails when the comparison holds for B against A
    (x: factor, +20ms: change, +10%: change in percent, 2s: B alone); a gate
    that cannot be checked (no first token on a side) fails too. A gate named
    METRIC_p50 or METRIC_p95 (ttft_p95>1.5x) reads that percentile over all
    pairs; agree<95% fails when fewer pairs agree, and then pairs that differ
    no longer fail the run by themselves.

    A and B holding WebSocket sessions compare the sessions: the server's event
    types (a run of one type read as one), a Realtime session's text and
    response statuses, the close, and timing (first server message, first text
    delta after response.create, gaps between deltas, duration), which the same
    per-pair gates read.

    A session written by `streamtape rerun` adds the load figures: requests per
    second, TTFT, inter-token latency, tokens/s and end-to-end p50/p90/p99 of
    both sides, errors by kind, and goodput under --slo.

    Exit status: 0 when the meaning is the same, 1 when it differs, a pair is
    missing or a gate fails, 2 on bad input.
    """
    parsed = [parse_fail_on(g) for g in fail_on]
    gates = [g for g in parsed if isinstance(g, Gate)]
    summary_gates: list[SummaryGate] = [g for g in parsed if not isinstance(g, Gate)]
    shape_a, shape_b = _shapes(shape)
    oa = load_operand(a)
    session = None
    if b is None:
        if not is_shadow_recording(oa.interactions):
            raise OptionError(
                f"{a}: not a shadow session (no pair labels); give two recordings, A and B, "
                "or record one with `streamtape record --shadow URL`"
            )
        result, session = diff_shadow(
            oa.interactions, oa.labels, name=a, shadow=shadow,
            shape_a=shape_a, shape_b=shape_b, ignore=ignore, gates=gates,
        )
    else:
        if shadow is not None:
            raise OptionError("--shadow picks a shadow of one session cassette; give A alone")
        ob = load_operand(b)
        if has_sessions(oa.interactions) or has_sessions(ob.interactions):  # commands._sessions
            refused = {"--html": bool(html_path), "--ignore": bool(ignore), "--shape": bool(shape),
                       "--pair": pair_index is not None, "-v": verbose, "summary gates": bool(summary_gates)}
            status = diff_sessions_command((a, oa.interactions, oa.labels), (b, ob.interactions, ob.labels),
                                           gates=gates, as_json=as_json, refused=refused)
            click.get_current_context().exit(status)
        result = diff_many(
            oa.interactions,
            ob.interactions,
            name_a=a,
            name_b=b,
            labels_a=oa.labels,
            labels_b=ob.labels,
            shape_a=shape_a,
            shape_b=shape_b,
            ignore=ignore,
            gates=gates,
        )
    load = _load(oa.interactions, session, slo) if session is not None else None
    if slo is not None and load is None:
        raise OptionError("--slo reads a rerun session (written by `streamtape rerun`); give A alone")
    summary = (
        summarize(result, session=session, gates=summary_gates, load=load)
        if session is not None or summary_gates or len(result.reports) > 1
        else None
    )
    if pair_index is not None and not 0 <= pair_index < len(result.reports):
        n = len(result.reports)
        raise OptionError(f"--pair {pair_index}: there are {n} pair(s)" + (f", #0 to #{n - 1}" if n else ""))
    if html_path:
        page = render_html(
            result,
            summary_html=summary_section(summary) if summary is not None else None,
            extra_css=SUMMARY_CSS if summary is not None else "",
        )
        try:
            Path(html_path).write_text(page, encoding="utf-8")
        except OSError as e:
            raise OptionError(f"--html {html_path}: cannot write: {e.strerror or e}") from None
        click.echo(f"streamtape: wrote the HTML report to {html_path}", err=True)  # stdout holds the report
    if pair_index is not None:
        _one_pair(result, pair_index, as_json)
        return
    if as_json:
        doc = result_json(result)
        if summary is not None:
            doc["summary"] = summary_json(summary)
            doc["exit_status"] = summary.exit_status
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        color = _use_color()
        click.echo(_text(result, summary, color=color, verbose=verbose), color=color)
    status = summary.exit_status if summary is not None else result.exit_status
    click.get_current_context().exit(status)


def _load(interactions: list[Interaction], session: ShadowPairing, slo: str | None) -> LoadFigures | None:
    """A rerun session's load figures: its primaries (each once) against the new backend's."""
    if not is_rerun(interactions):
        return None
    text = slo or recorded_slo(interactions)
    parsed = parse_slo(text) if text else None
    a = [interactions[i] for i, _, _ in session.pairs]
    b_all = [ix for ix in interactions
             if ix.labels.get(LABEL_ROLE) == Role.SHADOW and ix.labels.get(LABEL_BACKEND) == session.b_name]
    return load_figures(session.a_name, distinct(a), session.b_name, b_all, parsed)


def _text(result: CassetteDiff, summary: Summary | None, *, color: bool, verbose: bool) -> str:
    if summary is None:
        return render_text(result, color=color)
    details = [(n, render_report(r, color=color)) for n, r in enumerate(result.reports)] if verbose else []
    return render_summary_text(summary, color=color, details=details)


def _one_pair(result: CassetteDiff, n: int, as_json: bool) -> None:
    """``--pair N``: that pair alone, in full, and its own exit status."""
    rep = result.reports[n]
    if as_json:
        click.echo(json.dumps(report_json(rep), indent=2, ensure_ascii=False))
    else:
        color = _use_color()
        click.echo(render_text(rep, color=color), color=color)
    click.get_current_context().exit(rep.exit_status)


commands = [diff_command]
