"""``streamtape show``: list a cassette's interactions, or one interaction's timeline."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import TypedDict

import click

from ..cassette.model import Interaction
from ..cassette.reader import Cassette, load
from ..errors import OptionError
from ..fmt import human_bytes, ms, summary
from ..shapes import SHAPES, analyze, check_shape
from ..stats import compute
from ._common import warn
from ._render import bytes_json, escape_piece, setup_json, setup_line
from ._timeline import (
    analysis_fields,
    event_json,
    events_lines,
    reasoning_lines,
    result_json,
    stats_fields,
    stats_lines,
    text_lines,
)
from ._websocket import show_session


class TimelineRow(TypedDict):
    """One body piece: when it came, the silence before it, its bytes."""

    index: int
    at_ns: int
    gap_ns: int
    size: int
    data: bytes


def timeline(ix: Interaction) -> list[TimelineRow]:
    rows: list[TimelineRow] = []
    prev = 0
    for n, p in enumerate(ix.pieces):
        rows.append({"index": n, "at_ns": p.at_ns, "gap_ns": p.at_ns - prev, "size": len(p.data), "data": p.data})
        prev = p.at_ns
    return rows


def pick(cas: Cassette, index: int) -> Interaction:
    if not 0 <= index < len(cas):
        raise OptionError(
            f"{cas.path}: no interaction {index} (the cassette has {len(cas)}: 0..{len(cas) - 1})"
            if len(cas)
            else f"{cas.path}: no interaction {index} (the cassette is empty)"
        )
    return cas[index]


LISTING_WIDTH_ROWS = 1000
"""The listing's column widths come from its first rows (all of a smaller cassette);
later rows follow them, so a cassette of any size is listed in constant memory."""


def listing_lines(cas: Cassette) -> Iterator[str]:
    """The listing, one line at a time, each interaction read as its row is made."""
    head = ("#", "method", "path", "status", "pieces", "bytes", "ttfb ms", "dur ms", "outcome", "labels")
    right = {0, 3, 4, 5, 6, 7}

    def row(n: int, ix: Interaction) -> tuple[str, ...]:
        s = summary(ix)
        return (
            str(n),
            str(s["method"]),
            str(s["path"]),
            "---" if s["status"] is None else str(s["status"]),
            str(s["pieces"]),
            human_bytes(s["bytes"]),
            ms(ix.first_byte_ns),
            ms(ix.duration_ns),
            ix.outcome,
            ",".join(f"{k}={v}" for k, v in ix.labels.items()),
        )

    def line(r: tuple[str, ...], widths: list[int]) -> str:
        return "  ".join(
            (c.rjust(w) if i in right else c.ljust(w)) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()

    rows = iter(enumerate(cas))
    first = [head, *(row(n, ix) for n, ix in itertools.islice(rows, LISTING_WIDTH_ROWS))]
    widths = [max(len(r[i]) for r in first) for i in range(len(head))]
    for r in first:
        yield line(r, widths)
    del first
    for n, ix in rows:
        yield line(row(n, ix), widths)


def listing_json(cas: Cassette) -> Iterator[str]:
    """``show --json``'s listing, one interaction at a time: the same text as
    ``json.dumps(rows, indent=2)`` without holding the rows."""
    empty = True
    for n, ix in enumerate(cas):
        item = json.dumps({"index": n, **summary(ix)}, indent=2)
        yield ("[\n" if empty else ",\n") + "\n".join("  " + ln for ln in item.splitlines())
        empty = False
    yield "[]" if empty else "\n]"


def interaction_head(ix: Interaction) -> list[str]:
    r = ix.response
    lines = [f"{ix.request.method} {ix.request.url} {ix.request.http_version}"]
    if r is None:
        lines.append("no response")
    else:
        lines.append(
            f"{r.http_version} {r.status} {r.reason}  {r.content_type or '(no content type)'}  {r.framing}"
            f"  headers at {ms(r.headers_at_ns)} ms"
        )
    lines.append(f"outcome: {ix.outcome}" + (f" ({ix.error})" if ix.error else "") + f"  ended at {ms(ix.end_ns)} ms")
    if ix.setup is not None:
        lines.append(setup_line(ix.setup))
    if ix.labels:
        lines.append("labels: " + ", ".join(f"{k}={v}" for k, v in ix.labels.items()))
    return lines


def timeline_lines(ix: Interaction) -> list[str]:
    lines = [f"{'offset ms':>10}  {'gap ms':>8}  {'size':>6}  bytes"]
    for row in timeline(ix):
        lines.append(
            f"{row['at_ns'] / 1e6:>10.3f}  {row['gap_ns'] / 1e6:>8.3f}  {row['size']:>6}  {escape_piece(row['data'])}"
        )
    return lines


def interaction_json(ix: Interaction, index: int) -> dict[str, object]:
    r = ix.response
    return {
        "index": index,
        **summary(ix),
        "request": {
            "method": ix.request.method,
            "url": ix.request.url,
            "http_version": ix.request.http_version,
            "headers": [list(h) for h in ix.request.headers],
            "body": bytes_json(ix.request.body),
        },
        "response": None
        if r is None
        else {
            "status": r.status,
            "reason": r.reason,
            "http_version": r.http_version,
            "headers": [list(h) for h in r.headers],
            "framing": r.framing,
            "headers_at_ms": r.headers_at_ns / 1e6,
        },
        "setup": setup_json(ix.setup),
        "timeline": [
            {
                "index": row["index"],
                "offset_ms": row["at_ns"] / 1e6,
                "gap_ms": row["gap_ns"] / 1e6,
                "size": row["size"],
                **bytes_json(row["data"]),
            }
            for row in timeline(ix)
        ],
    }


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-i", "--index", type=int, default=None, metavar="N", help="Show interaction N's timeline.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--events", "show_events", is_flag=True,
              help="With -i: the normalized timeline (offset, event) instead of the pieces.")
@click.option("--text", "show_text", is_flag=True,
              help="With -i: the assembled answer text alone (tool calls: --events, --json).")
@click.option("--reasoning", "show_reasoning", is_flag=True,
              help="With -i: the assembled reasoning (thinking) alone.")
@click.option("--shape", default=None, metavar="NAME",
              help=f"Read the stream as this format instead of detecting it: {', '.join(SHAPES)}.")
@click.option("--html", "html_page", type=click.Path(dir_okay=False, writable=True), default=None, metavar="PAGE",
              help="Write a self-contained HTML report of the cassette (with -i N: of that interaction) to PAGE.")
def show(file: str, index: int | None, as_json: bool, show_events: bool, show_text: bool,
         show_reasoning: bool, shape: str | None, html_page: str | None) -> None:
    """List a cassette's interactions, or print one interaction's stats and timeline (-i N).

    A WebSocket session (-i N) lists its messages (offset, gap, direction, size,
    the JSON type of each event); --events adds each event's JSON, --text gives
    a Realtime session's assembled text (text and audio-transcript deltas).
    """
    if shape is not None:
        check_shape(shape)
    if index is None and (show_events or show_text or show_reasoning):
        raise OptionError("--events, --text and --reasoning need an interaction: add -i N")
    if show_text and show_reasoning and not as_json:
        raise OptionError("--text and --reasoning each print one text alone: use one, "
                          "or add --json for both")
    cas = load(file)
    warn(cas)
    if html_page is not None:
        write_report(cas, html_page, index, shape)
        return
    if index is None:
        if as_json:
            for part in listing_json(cas):
                click.echo(part, nl=part.endswith("]"))
        else:
            for line in listing_lines(cas):
                click.echo(line)
        return
    ix = pick(cas, index)
    if ix.websocket is not None:  # messages, not pieces: streamtape.commands._websocket
        show_session(ix, index, as_json=as_json, events=show_events, text=show_text,
                     reasoning=show_reasoning, shape=shape)
        return
    analysis = analyze(ix, shape)
    stats = compute(ix, analysis)
    if as_json:
        doc = interaction_json(ix, index)
        doc["analysis"] = analysis_fields(analysis)
        doc["stats"] = stats_fields(stats)
        doc["result"] = result_json(analysis)
        if show_events:
            doc["events"] = [event_json(e) for e in analysis.events]
        if show_text:
            doc["text"] = analysis.text
            doc["tool_calls"] = [{"index": c.index, "id": c.id, "name": c.name,
                                  "arguments": c.arguments, "parsed": c.parsed}
                                 for c in analysis.tool_calls]
        if show_reasoning:
            doc["reasoning"] = analysis.reasoning
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    if show_text or show_reasoning:
        for line in text_lines(analysis) if show_text else reasoning_lines(analysis):
            click.echo(line)
        return
    body = events_lines(analysis) if show_events else timeline_lines(ix)
    for line in [*interaction_head(ix), *stats_lines(stats, analysis), "", *body]:
        click.echo(line)


def write_report(cas: Cassette, path: str, index: int | None, shape: str | None) -> None:
    """``show --html``: the page from :mod:`streamtape.render.report`, written to ``path``."""
    from ..render.report import render_report

    chosen = [pick(cas, index)] if index is not None else list(cas)
    indices = [index] if index is not None else None
    text = render_report(chosen, name=str(cas.path), indices=indices, shape=shape)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise OptionError(f"--html {path}: cannot write: {e.strerror or e}") from None
    click.echo(f"wrote {path} ({len(chosen)} interaction{'' if len(chosen) == 1 else 's'}, "
               f"{human_bytes(len(text.encode()))})", err=True)


commands = [show]
