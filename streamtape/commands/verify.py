"""``streamtape verify FILE...``: check every record's checksum; exit 1 when any is damaged."""

from __future__ import annotations

import os

import click

from ..cassette.reader import Cassette, load_many, open_layout
from ..errors import CassetteError


def _interactions_ok(cas: Cassette) -> list[str]:
    """Read every interaction that survived, pieces and all: a record that checks out but
    holds a bad field (a writer's mistake, not damage) is named too."""
    bad = []
    for i in range(len(cas)):
        try:
            list(cas[i].pieces)
        except CassetteError as e:
            bad.append(str(e))
    return bad


def _index_problem(cas: Cassette) -> str | None:
    """The index record, when the file has one that checks out, must agree with the records."""
    if cas.path is None or cas.file is None:
        return None
    layout, _, fd = open_layout(cas.path)
    os.close(fd)
    if not layout.indexed:
        return None
    a, b = layout.table, cas.file.table
    if (a.ids, a.starts, a.offsets, list(a.lengths), a.kinds) != (b.ids, b.starts, b.offsets, list(b.lengths), b.kinds):
        return f"{cas.path}: the index record does not agree with the records (a reader would rebuild it)"
    return None


@click.command()
@click.argument("file", type=click.Path(), nargs=-1, required=True)
@click.pass_context
def verify(ctx: click.Context, file: tuple[str, ...]) -> None:
    """Check every record of each cassette against its checksum (format version 4), and
    that every interaction reads. Prints each damaged record (byte offset, length, what
    was wrong, the interactions it cost) and a line per file.

    A cassette older than format 4 has no checksums: it is read through (its
    structure checked) and said to be unverifiable. Exit status: 0 all records
    check out, 1 damage found, 2 bad input.
    """
    damaged = False
    for cas in load_many(file, verify=True):
        path = cas.path
        assert cas.file is not None
        records = cas.file.table.record_count
        problems = [f"{path}: {d.describe()}" for d in cas.damage]
        problems += _interactions_ok(cas)
        index = _index_problem(cas)
        if index is not None:
            problems.append(index)
        torn = [w for w in cas.warnings if "torn last record" in w]
        for line in problems + torn:
            click.echo(line)
        version = cas.header.get("version")
        if not cas.checksummed:
            click.echo(f"{path}: format version {version} has no record checksums: read through, "
                       f"{len(cas)} interactions, damage inside a record cannot be told "
                       f"('streamtape repair {path} -o NEW.tape' rewrites it with checksums)")
        elif problems:
            lost = sorted({i for d in cas.damage for i in d.interactions})
            click.echo(f"{path}: DAMAGED: {len(cas.damage)} damaged stretch(es), {len(lost)} interaction(s) "
                       f"left out, {len(cas)} read back whole "
                       f"('streamtape repair {path} -o NEW.tape' keeps what survives)")
        else:
            click.echo(f"{path}: ok: {records} records of {len(cas)} interactions check out")
        damaged = damaged or bool(problems)
    if damaged:
        ctx.exit(1)


commands = [verify]
