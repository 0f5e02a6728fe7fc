"""Which files a replay server reads: a folder's cassettes, and nothing outside the folder.

``streamtape serve cassettes/`` serves every ``*.tape`` in the folder. A
folder is often shared (a repository's fixtures, a download), and a link in it
named ``x.tape`` could point anywhere the server's user can read; the
server answers requests from what it loads, so that file would be served to
whoever connects. So a folder's entries are resolved (every symlink followed)
and kept only when the real file is inside the real folder and a regular file
(a FIFO named ``x.tape`` would block the read for ever); the others are
skipped and listed, for the CLI to warn about. A file named on the command
line is read wherever it is: the user chose it.

The real path is what gets loaded, so the file checked is the file read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..cassette.records import SUFFIX
from ..errors import CassetteError

__all__ = ["CassetteFiles", "Skipped", "cassette_files"]


@dataclass(frozen=True)
class Skipped:
    """A folder entry that is not read, and why."""

    path: Path
    reason: str

    def line(self) -> str:
        return f"{self.path}: skipped, {self.reason}"


@dataclass(frozen=True)
class CassetteFiles:
    """The cassette files to load, in order, and the folder entries left out."""

    files: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def cassette_files(paths: Iterable[str | os.PathLike[str]]) -> CassetteFiles:
    """The files to load for ``paths`` (files, and folders of ``*.tape`` files, sorted).

    Raises :class:`~streamtape.errors.CassetteError` for a folder with no
    cassette inside it.
    """
    out = CassetteFiles()
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            out.files.append(p)
            continue
        root = p.resolve()
        kept, skipped = 0, len(out.skipped)
        for entry in sorted(p.glob(f"*{SUFFIX}")):
            real = entry.resolve()
            if not real.is_relative_to(root):
                out.skipped.append(Skipped(entry, f"it leads outside {p} (to {real})"))
            elif not real.is_file():
                out.skipped.append(Skipped(entry, "not a regular file"))
            else:
                out.files.append(real)
                kept += 1
        if not kept:
            n = len(out.skipped) - skipped
            left = f" ({n} entr{'ies' if n != 1 else 'y'} skipped)" if n else ""
            raise CassetteError(f"{p}: folder holds no {SUFFIX} cassettes{left}")
    return out
