"""``streamtape import``: other tools' recordings (VCR.py, HAR, mitmproxy flows) into a cassette."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from ..capture.recorder import parse_labels
from ..capture.redaction import Redaction
from ..cassette.model import Interaction
from ..cassette.writer import save
from ..errors import InteropError
from ..interop import SYNTHETIC_TIMING_NOTE, Imported, Source


def _write_new(path: Path, interactions: list[Interaction]) -> None:
    """A new cassette written whole or not at all (a temporary file renamed into place)."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InteropError(path, f"folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    os.unlink(tmp)  # the writer creates it, header first
    try:
        save(tmp, interactions)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


@click.command("import")
@click.argument("paths", nargs=-1, required=True, metavar="FILE...")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Cassette to write (appended to when it exists).")
@click.option("--from", "source", type=click.Choice([s.value for s in Source]), default=None,
              help="The format of every FILE: vcr (VCR.py / pytest-recording cassette), har, "
                   "mitm (mitmdump -w). Detected from each file's content when not given.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="Label stored with every imported interaction (repeatable).")
@click.option("--no-redact", is_flag=True, help="Keep API keys, tokens and cookies.")
@click.option("--redact-header", multiple=True, metavar="NAME", help="Another header to redact.")
@click.option("--redact-query", multiple=True, metavar="NAME", help="Another query parameter to redact.")
@click.option("--redact-field", multiple=True, metavar="NAME", help="A JSON or form request-body field to redact (and the same field of a JSON answer).")
def import_(
    paths: tuple[str, ...],
    output: str,
    source: str | None,
    labels: tuple[str, ...],
    no_redact: bool,
    redact_header: tuple[str, ...],
    redact_query: tuple[str, ...],
    redact_field: tuple[str, ...],
) -> None:
    """Import VCR.py cassettes, HAR files and mitmproxy flow files into one cassette.

    FILE may be a folder: every .yaml, .yml, .json, .har, .flow or .mitm file
    in it, at any depth (pytest-recording's tests/cassettes/). Interactions
    keep their order, repeated requests included, and are redacted as
    'record' redacts. None of these formats keeps piece boundaries or
    per-piece timing: each body becomes one piece at the recorded total time,
    labelled source=vcr|har|mitm (a HAR that 'streamtape export' wrote comes
    back exactly). Every file is read before anything is written: one bad
    file writes nothing.
    """
    # Imported here: mitmproxy's flow reader and PyYAML cost 0.6 s, which no other command pays.
    from ..interop import files

    extra = parse_labels(labels)
    redaction = Redaction.build(
        enabled=not no_redact, extra_headers=redact_header, extra_query=redact_query, body_fields=redact_field
    )
    fmt = Source(source) if source else None
    read: list[tuple[Path, Imported]] = [
        (p, files.read(p, fmt, redaction=redaction, labels=extra)) for p in files.expand(paths)
    ]
    interactions = [ix for _, got in read for ix in got.interactions]
    if not interactions:
        raise InteropError(", ".join(str(p) for p, _ in read), "no interactions to import")
    if any(got.synthetic for _, got in read):
        click.echo(f"streamtape: note: {SYNTHETIC_TIMING_NOTE}", err=True)
    for _, got in read:
        for line in got.notes:
            click.echo(f"streamtape: note: {line}", err=True)
    out = Path(output)
    existed = out.exists()
    if existed:
        save(out, interactions)
    else:
        _write_new(out, interactions)
    for p, got in read:
        n = len(got.interactions)
        click.echo(f"{p}: {n} interaction{'s' if n != 1 else ''} ({got.source.value})")
    verb = "appended" if existed else "wrote"
    click.echo(f"streamtape: {verb} {len(interactions)} interactions to {out}")


commands = [import_]
