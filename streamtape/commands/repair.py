"""``streamtape repair FILE -o OUT``: write every interaction that survives into a new cassette."""

from __future__ import annotations

from pathlib import Path

import click

from ..cassette.reader import load
from ..cassette.writer import CassetteWriter
from ..errors import CassetteError, OptionError


@click.command()
@click.argument("file", type=click.Path())
@click.option("-o", "--output", "out", type=click.Path(), required=True, metavar="OUT",
              help="The new cassette to write (must not exist yet).")
def repair(file: str, out: str) -> None:
    """Copy every interaction of FILE that reads back whole into OUT, a new cassette with
    checksums (format version 4), leaving out damaged records and the interactions they
    cost. Also rewrites an older cassette with checksums. FILE is never changed.
    """
    src, dst = Path(file), Path(out)
    if dst.exists():
        raise OptionError(f"-o {out}: the file exists; repair writes a new cassette, give another name")
    cas = load(src, verify=True)
    left_out = sorted({i for d in cas.damage for i in d.interactions})
    unreadable = []
    written = 0
    with CassetteWriter(dst) as w:
        for i in range(len(cas)):
            try:
                ix = cas[i]
                list(ix.pieces)
            except CassetteError as e:  # checks out but does not read: named, not copied
                unreadable.append(str(e))
                continue
            w.add(ix)
            written += 1
    for line in unreadable:
        click.echo(f"left out: {line}", err=True)
    lost = len(left_out) + len(unreadable)
    where = "".join(f"\n  {d.describe()}" for d in cas.damage)
    click.echo(f"wrote {written} interaction(s) to {dst}; left out {lost}{where}")


commands = [repair]
