"""What several commands share (not a command: ``cli`` registers only modules with ``commands``)."""

from __future__ import annotations

from collections.abc import Iterable

import click

from ..cassette.reader import Cassette
from ..fmt import warning_lines


def warn(cassettes: Cassette | Iterable[Cassette]) -> None:
    """Print what the reader recovered from in each cassette (a torn last record) to stderr."""
    for line in warning_lines([cassettes] if isinstance(cassettes, Cassette) else cassettes):
        click.echo(line, err=True)
