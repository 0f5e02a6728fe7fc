"""``streamtape show``: list a cassette's interactions, or one interaction's timeline."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from collections.abc import Iterator
from typing import TypedDict

import click

from ..capture.mcp import is_mcp_exchange
from ..cassette.model import Interaction
from ..cassette.reader import Cassette, load
from ..errors import OptionError
from ..fmt import HeadStyle, human_bytes, ms, summary
from ..fmt import interaction_head as head_lines
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

    mcp: list[int] = []

    def row(n: int, ix: Interaction) -> tuple[str, ...]:
        s = summary(ix)
        if ix.websocket is None and is_mcp_exchange(
                ix.request.method, ix.request.headers, ix.response.headers if ix.response else ()):
            mcp.append(n)
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
    if mcp:
        yield (f"{len(mcp)} of these are MCP exchanges (#{', #'.join(map(str, mcp[:8]))}"
               f"{', ...' if len(mcp) > 8 else ''}): --mcp lists them by session")


def listing_json(cas: Cassette) -> Iterator[str]:
    """``show --json``'s listing, one interaction at a time: the same text as
    ``json.dumps(rows, indent=2)`` without holding the rows."""
    empty = True
    for n, ix in enumerate(cas):
        item = json.dumps({"index": n, **summary(ix)}, indent=2)
        yield ("[\n" if empty else ",\n") + "\n".join("  " + ln for ln in item.splitlines())
        empty = False
    yield "[]" if empty else "\n]"


def _outcome_text(ix: Interaction) -> str:
    return f"{ix.outcome}" + (f" ({ix.error})" if ix.error else "")


_TEXT_HEAD = HeadStyle(
    line=lambda s: s,
    text=str,
    strong=lambda s: s,
    sep="  ",
    ms=lambda ns: f"{ms(ns)} ms",
    outcome=_outcome_text,
    setup=setup_line,
    setup_before_labels=True,
)


def interaction_head(ix: Interaction) -> list[str]:
    """The head's lines for the terminal (:func:`streamtape.fmt.interaction_head`)."""
    return head_lines(ix, _TEXT_HEAD)


def timeline_lines(ix: Interaction, width: int | None = None) -> list[str]:
    """The pieces, one line each; with ``width``, each piece's bytes cut to fit it."""
    lines = [f"{'offset ms':>10}  {'gap ms':>8}  {'size':>6}  bytes"]
    for row in timeline(ix):
        lines.append(
            f"{row['at_ns'] / 1e6:>10.3f}  {row['gap_ns'] / 1e6:>8.3f}  {row['size']:>6}  "
            f"{shorten(escape_piece(row['data']), width)}"
        )
    return lines


PIECE_COLUMN = 30
"""Where a timeline line's bytes begin (offset, gap and size before them)."""


def shorten(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters (its end marked with ``…``); whole when None."""
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 1, 1)] + "…"


def piece_width(full: bool) -> int | None:
    """How many characters of a piece fit on the terminal (None: not a terminal, or --full)."""
    if full or not sys.stdout.isatty():
        return None
    return max(shutil.get_terminal_size().columns - PIECE_COLUMN, 20)


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
@click.option("--mcp", "show_mcp", is_flag=True,
              help="The MCP sessions, each one entry with its calls (--text: the results).")
@click.option("--full", is_flag=True,
              help="With -i: every byte of each piece (on a terminal a piece is cut to the width).")
@click.option("--html", "html_page", type=click.Path(dir_okay=False, writable=True), default=None, metavar="PAGE",
              help="Write a self-contained HTML report of the cassette (with -i N: of that interaction) to PAGE.")
def show(file: str, index: int | None, as_json: bool, show_events: bool, show_text: bool,
         show_reasoning: bool, shape: str | None, show_mcp: bool, full: bool, html_page: str | None) -> None:
    """List a cassette's interactions, or print one interaction's stats and timeline (-i N).

    A WebSocket session (-i N) lists its messages (offset, gap, direction, size,
    the JSON type of each event); --events adds each event's JSON, --text gives
    a Realtime session's assembled text (text and audio-transcript deltas).

    --mcp lists each MCP session as one entry: its calls in order (method, tool
    or resource, progress notifications, result or error, timing); with --text
    the results' text, with --json all of it.
    """
    if shape is not None:
        check_shape(shape)
    if index is None and not show_mcp and (show_events or show_text or show_reasoning):
        raise OptionError("--events, --text and --reasoning need an interaction: add -i N")
    if show_text and show_reasoning and not as_json:
        raise OptionError("--text and --reasoning each print one text alone: use one, "
                          "or add --json for both")
    if show_mcp and (index is not None or show_events or show_reasoning):
        raise OptionError("--mcp lists whole sessions: it takes --text or --json, not -i, --events or --reasoning")
    cas = load(file, verify=True)
    warn(cas)
    if not cas.checksummed:
        click.echo(f"streamtape: note: {file} is cassette format version {cas.header.get('version')}: "
                   "its records have no checksums, so damage cannot be detected", err=True)
    if show_mcp:  # streamtape.commands._mcp
        from ._mcp import mcp_json, mcp_lines, mcp_text_lines

        ixs = list(cas)
        if as_json:
            click.echo(mcp_json(ixs))
        else:
            for line in mcp_text_lines(ixs) if show_text else mcp_lines(ixs):
                click.echo(line)
        return
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
    body = events_lines(analysis) if show_events else timeline_lines(ix, piece_width(full))
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
