"""``streamtape export``: a cassette as HAR 1.2 (browsers' devtools, mitmproxy) or a VCR.py cassette."""

from __future__ import annotations

from pathlib import Path

import click

from ..cassette.reader import load_many
from ..errors import InteropError, OptionError
from ._common import warn


@click.command("export")
@click.argument("paths", nargs=-1, required=True, metavar="CASSETTE...")
@click.option("--har", "har_out", type=click.Path(dir_okay=False), default=None,
              help="Write a HAR 1.2 file (every piece and offset kept in a _streamtape extension).")
@click.option("--vcr", "vcr_out", type=click.Path(dir_okay=False), default=None,
              help="Write a VCR.py cassette: YAML, or JSON when the name ends in .json.")
def export(paths: tuple[str, ...], har_out: str | None, vcr_out: str | None) -> None:
    """Write the interactions of CASSETTE... (files or folders) as HAR and/or a VCR.py cassette.

    The HAR opens in Chromium's devtools (Network > Import HAR) and in
    mitmproxy (mitmproxy -r out.har); 'streamtape import' of it gives every
    piece and offset back. The VCR.py cassette replays (the body whole) to
    requests and httpx clients under vcrpy or pytest-recording: each body is
    stored decoded, without Content-Encoding, the one form both clients read.
    """
    if har_out is None and vcr_out is None:
        raise OptionError("export: name at least one output, --har FILE or --vcr FILE")
    # Imported here: PyYAML and the readers are for this command only.
    from ..interop import files, har, vcr

    cassettes = load_many(paths)
    warn(cassettes)
    interactions = [ix for cas in cassettes for ix in cas]
    if har_out is not None:
        doc, notes = har.document(interactions)
        for line in notes:
            click.echo(f"streamtape: note: {har_out}: {line}", err=True)
        files.write_text(Path(har_out), har.dumps(doc))
        click.echo(f"streamtape: wrote {len(doc['log']['entries'])} entries to {har_out}")
    if vcr_out is not None:
        doc, notes = vcr.document(interactions)
        try:
            text = vcr.dumps(doc, as_json=vcr_out.lower().endswith(".json"))
        except ValueError as e:
            raise InteropError(vcr_out, str(e)) from None
        for line in notes:
            click.echo(f"streamtape: note: {vcr_out}: {line}", err=True)
        files.write_text(Path(vcr_out), text)
        click.echo(f"streamtape: wrote {len(doc['interactions'])} interactions to {vcr_out}")


commands = [export]
