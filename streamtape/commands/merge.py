"""``streamtape merge A.tape B.tape ... -o OUT.tape``: join cassettes, keeping shadow and rerun pairs."""

from __future__ import annotations

from pathlib import Path

import click

from ..cassette.model import Interaction
from ..cassette.reader import load
from ..errors import OptionError
from ..shadow.labels import LABEL_PAIR
from ._common import warn


def merged(cassettes: list[tuple[str, list[Interaction]]]) -> tuple[list[Interaction], int]:
    """Every recording of every cassette, in order. A pair id is one client call of one
    file: an id that an earlier file used already (two recorders that drew the same id)
    gets a suffix naming its file's position, so no two calls pair up. Returns the
    recordings and how many pair ids were renamed."""
    from dataclasses import replace

    owner: dict[str, int] = {}
    out: list[Interaction] = []
    renamed: set[tuple[int, str]] = set()
    for n, (_, recordings) in enumerate(cassettes):
        for ix in recordings:
            pair = ix.labels.get(LABEL_PAIR)
            if pair is not None:
                first = owner.setdefault(pair, n)
                if first != n:
                    renamed.add((n, pair))
                    ix = replace(ix, labels={**ix.labels, LABEL_PAIR: f"{pair}~{n}"})
            out.append(ix)
    return out, len(renamed)


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), metavar="OUT.tape",
              help="The cassette to write (must not exist yet).")
def merge(inputs: tuple[str, ...], output: str) -> None:
    """Join cassettes into one: every recording of each INPUT, in order, labels kept.

    Shadow sessions and reruns keep their pairing (pair ids stay one client
    call each); the files of Locust's workers become one session to diff.
    """
    from ..cassette.writer import save

    if Path(output).exists():
        raise OptionError(f"-o {output}: exists already; merge writes a new cassette")
    if Path(output).resolve() in {Path(p).resolve() for p in inputs}:
        raise OptionError(f"-o {output}: is one of the inputs")
    loaded = []
    for p in inputs:
        cas = load(p)
        warn(cas)
        loaded.append((p, list(cas)))
    recordings, renamed = merged(loaded)
    save(output, recordings)
    note = f"; {renamed} pair id(s) that two files shared were told apart" if renamed else ""
    click.echo(f"streamtape: merged {len(recordings)} recording(s) of {len(inputs)} cassette(s) into {output}{note}")


commands = [merge]
