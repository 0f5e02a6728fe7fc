"""``streamtape check FILE``: protocol findings per interaction, each with a severity.
Exit 0 when no finding reaches ``--fail-on``, 1 when one does, 2 bad input."""

from __future__ import annotations

import json

import click

from ..cassette.reader import load_many
from ..check import Finding
from ..check import check as check_ix
from ..check.severity import Severity
from ..check.websocket import check_session
from ..fmt import summary_line
from ..shapes import SHAPES, analyze, check_shape
from ..shapes.realtime import analyze_session
from ._common import warn


@click.command()
@click.argument("file", type=click.Path(), nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--shape", default=None, metavar="NAME",
              help=f"Read every stream as this format instead of detecting it: {', '.join(SHAPES)}.")
@click.option("--fail-on", type=click.Choice([str(Severity.WARNING), str(Severity.ERROR)]), default=str(Severity.ERROR),
              show_default=True, help="Exit 1 when a finding of this severity or worse remains.")
@click.option("--ignore", "ignored", multiple=True, metavar="CODE",
              help="Drop findings with this code (repeatable), e.g. --ignore finish-length.")
@click.pass_context
def check(ctx: click.Context, file: tuple[str, ...], as_json: bool, shape: str | None,
          fail_on: str, ignored: tuple[str, ...]) -> None:
    """Report protocol findings per interaction (no [DONE], no finish, finish length,
    control tokens in the text, invalid JSON events, error events after a 200 (a
    Bedrock exception message too), keep-alives, usage missing though requested, an
    event-stream CRC that does not match, a stream of a format streamtape does not
    know (its meaning unchecked), incomplete outcomes). A WebSocket
    session: a Realtime response without response.done, an abnormal close (a code
    other than 1000/1001, or no close frame), error events.

    A damaged record of the cassette file (one that fails its checksum) is a
    damaged-record finding. Each finding has a severity: error (a cut stream,
    an error event, an undecodable body, a damaged record), warning (a length
    or max-tokens stop, a leaked control token, a code not yet classified),
    info (keep-alive comments).

    Exit status: 0 when no finding reaches --fail-on (default: error), 1 when
    one does, 2 bad input.
    """
    if shape is not None:
        check_shape(shape)
    cassettes = load_many(file, verify=True)
    drop = set(ignored)
    results = []
    damaged: list[tuple[str, Finding]] = []
    total = 0
    warn(cassettes)
    for cas in cassettes:
        for d in cas.damage:
            damaged.append((str(cas.path), Finding("damaged-record", d.describe())))
        for n, ix in enumerate(cas):
            kind: str | None
            if ix.websocket is not None:  # a session: streamtape.check.websocket
                sa = analyze_session(ix)
                kind = "realtime" if sa.shape == "realtime" else "websocket"
                findings = check_session(ix, sa)
            else:
                a = analyze(ix, shape) if ix.response is not None else None
                kind = a.shape if a else None
                findings = check_ix(ix, a, shape)
            findings = [x for x in findings if x.code not in drop]
            total += len(findings)
            results.append((str(cas.path), n, ix, kind, findings))
    damaged = [(f, x) for f, x in damaged if x.code not in drop]
    total += len(damaged)
    every = [x for *_, fs in results for x in fs] + [x for _, x in damaged]
    failing = sum(x.severity.rank >= Severity(fail_on).rank for x in every)
    if as_json:
        click.echo(json.dumps({
            "findings": total,
            "failing": failing,
            "fail_on": fail_on,
            "by_severity": {str(s): sum(x.severity == s for x in every) for s in Severity},
            "damage": [{"file": f, **x.to_dict()} for f, x in damaged],
            "interactions": [
                {"file": f, "index": n, "method": ix.request.method, "url": ix.request.url,
                 "status": ix.response.status if ix.response else None,
                 "shape": kind, "outcome": ix.outcome,
                 "findings": [x.to_dict() for x in fs]}
                for f, n, ix, kind, fs in results
            ],
        }, indent=2, ensure_ascii=False))
    else:
        many = len(cassettes) > 1
        for f, n, ix, kind, fs in results:
            where = f"{f} #{n}" if many else f"#{n}"
            verdict = "ok" if not fs else f"{len(fs)} finding" + ("s" if len(fs) != 1 else "")
            click.echo(f"{where} {summary_line(ix)}  [{kind or '-'}]  {verdict}")
            for x in fs:
                at = f" (event {x.event})" if x.event is not None else ""
                click.echo(f"  {x.severity}: {x.code}: {x.message}{at}")
        for f, x in damaged:
            click.echo(f"{f}: {x.severity}: {x.code}: {x.message}")
        n_ix = len(results)
        counts = ", ".join(f"{sum(x.severity == s for x in every)} {s}" for s in reversed(Severity))
        click.echo(f"{total} finding{'s' if total != 1 else ''} ({counts}) in {n_ix} interaction"
                   f"{'s' if n_ix != 1 else ''}; {failing} at or above {fail_on}")
    if failing:
        ctx.exit(1)


commands = [check]
