"""``streamtape check FILE``: protocol findings per interaction. Exit 0 clean, 1 findings,
2 bad input."""

from __future__ import annotations

import json

import click

from ..cassette.reader import load_many
from ..check import check as check_ix
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
@click.pass_context
def check(ctx: click.Context, file: tuple[str, ...], as_json: bool, shape: str | None) -> None:
    """Report protocol findings per interaction (no [DONE], no finish, finish length,
    control tokens in the text, invalid JSON events, error events after a 200 (a
    Bedrock exception message too), keep-alives, usage missing though requested, an
    event-stream CRC that does not match, a stream of a format streamtape does not
    know (its meaning unchecked), incomplete outcomes). A WebSocket
    session: a Realtime response without response.done, an abnormal close (a code
    other than 1000/1001, or no close frame), error events.

    Exit status: 0 no findings, 1 findings, 2 bad input.
    """
    if shape is not None:
        check_shape(shape)
    cassettes = load_many(file)
    results = []
    total = 0
    warn(cassettes)
    for cas in cassettes:
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
            total += len(findings)
            results.append((str(cas.path), n, ix, kind, findings))
    if as_json:
        click.echo(json.dumps({
            "findings": total,
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
                click.echo(f"  {x.code}: {x.message}{at}")
        n_ix = len(results)
        click.echo(f"{total} finding{'s' if total != 1 else ''} in {n_ix} interaction"
                   f"{'s' if n_ix != 1 else ''}")
    if total:
        ctx.exit(1)


commands = [check]
