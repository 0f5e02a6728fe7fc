"""``streamtape diff A B``: compare two recordings on meaning, timing and wire framing."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from ..cassette import Interaction, load, load_many
from ..diff import (
    IGNORABLE,
    CassetteDiff,
    diff_many,
    parse_gate,
    render_html,
    render_text,
    result_json,
)
from ..errors import CassetteError, OptionError
from ..shapes import SHAPES
from ._common import warn

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
@click.argument("b", metavar="B")
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
    help="Timing gate that makes the exit status 1, e.g. ttft>1.5x, p95_gap>+20ms, duration>2s (repeatable).",
)
@click.option(
    "--shape",
    metavar="NAME",
    help="Force the wire format (NAME, or NAME_A,NAME_B) instead of detecting it.",
)
def diff_command(
    a: str,
    b: str,
    as_json: bool,
    html_path: str | None,
    ignore: tuple[str, ...],
    fail_on: tuple[str, ...],
    shape: str | None,
) -> None:
    """Compare A and B: meaning (text, tool calls, finish, usage), timing and wire framing.

    A and B are cassettes or folders of them (interactions are paired by request:
    method, path and JSON body; unpaired ones are listed), or FILE#N for one
    interaction (FILE#0 FILE#1 compares two in one cassette). When each side holds
    one interaction they are compared whatever their requests.

    A gate such as ttft>1.5x fails when the comparison holds for B against A
    (x: factor, +20ms: change, +10%: change in percent, 2s: B alone); a gate
    that cannot be checked (no first token on a side) fails too.

    Exit status: 0 when the meaning is the same, 1 when it differs, a pair is
    missing or a gate fails, 2 on bad input.
    """
    gates = [parse_gate(g) for g in fail_on]
    shape_a, shape_b = _shapes(shape)
    oa, ob = load_operand(a), load_operand(b)
    result: CassetteDiff = diff_many(
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
    if html_path:
        try:
            Path(html_path).write_text(render_html(result), encoding="utf-8")
        except OSError as e:
            raise OptionError(f"--html {html_path}: cannot write: {e.strerror or e}") from None
    if as_json:
        click.echo(json.dumps(result_json(result), indent=2, ensure_ascii=False))
    else:
        color = _use_color()
        click.echo(render_text(result, color=color), color=color)
    click.get_current_context().exit(result.exit_status)


commands = [diff_command]
