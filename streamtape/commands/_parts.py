"""The worker files of ``record --workers N``: where each worker records, and their join.

Each worker is a whole recorder with its own cassette writer, and a cassette
takes one writer at a time (:mod:`streamtape.cassette.lock`), so worker K
writes ``OUT.workerK``, an ordinary cassette, with every finished recording
fsynced as it ends, exactly as a single recorder writes ``OUT``. When the
workers stop, :func:`join` appends their recordings to ``OUT`` in the order
they started (one fsync), then removes the worker files. A run that is killed
before the join leaves the worker files whole (a worker stops when its parent
is gone, and a killed worker leaves a torn last record the reader drops); the
next ``record --workers`` on ``OUT`` joins them first, and
``streamtape merge`` joins them by hand.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path

from ..cassette.lock import CassetteLock, hold
from ..cassette.model import Interaction
from ..cassette.reader import load
from ..cassette.writer import save
from ..errors import CassetteError
from ..fmt import warning_lines
from .merge import merged

__all__ = ["join", "path", "said"]


def path(out: str, index: int) -> str:
    """Worker ``index``'s cassette: ``OUT.workerK``."""
    return f"{out}.worker{index}"


def _parts(out: str) -> list[Path]:
    target = Path(out)
    pattern = re.compile(re.escape(target.name) + r"\.worker(\d+)")
    found = [(int(m.group(1)), p) for p in target.parent.glob(f"{target.name}.worker*")
             if (m := pattern.fullmatch(p.name)) is not None]
    return [p for _, p in sorted(found)]


def join(out: str, warn: Callable[[str], None]) -> int:
    """Append every worker file's recordings to ``out`` in the order they started, then
    remove the files; returns how many were joined. The caller holds ``out``'s lock.
    A worker file another process still writes is left alone; what its reader
    recovered from (a torn last record) is said with ``warn``."""
    loaded: list[tuple[str, list[Interaction]]] = []
    held: list[CassetteLock] = []
    try:
        for p in _parts(out):
            try:
                held.append(hold(p, 0))
            except CassetteError:
                continue  # a live writer (another run's worker): not ours to take
            if p.stat().st_size == 0:
                loaded.append((str(p), []))
                continue
            cas = load(p)
            for line in warning_lines([cas]):
                warn(line)
            loaded.append((str(p), list(cas)))
        recordings, _renamed = merged(loaded)
        recordings.sort(key=lambda ix: ix.request.started_at)
        if recordings:
            save(out, recordings)
        for name, _ in loaded:
            with contextlib.suppress(FileNotFoundError):
                Path(name).unlink()
    finally:
        for lock in held:
            lock.release()
    return len(recordings) if loaded else 0


def said(n: int) -> str:
    return f"{n} recording{'s' if n != 1 else ''}"
