"""The request journal of ``serve --workers``: every worker's requests, read from any worker.

``GET /_streamtape/requests`` must list every request the server received,
whichever worker process took it, and a client that got its response and
then asks for the journal (on another connection, so maybe another worker)
must find its request there. The choice, among the ones at hand:

* a pipe to the parent, which relays entries to every worker: a worker's
  copy lags by a relay hop, so a read right after a response can miss it;
* a parent that answers journal reads: a request/response protocol
  between processes for a control endpoint;
* shared memory: fixed-size slots for entries whose size is the request's;
* **a folder of files, one per worker** (this module). A worker appends
  each finished entry to its own file with one ``write`` on an ``O_APPEND``
  descriptor before the response starts, so any later read, by any
  process, sees it: read-after-write holds with no relay and no lock. A
  read merges the files by the time each entry was written
  (``CLOCK_MONOTONIC``, one clock for every process). Each file has one
  writer, so bounding it (rewriting the newest ``keep`` entries once it
  holds ``2 * keep``, then an atomic rename) needs no coordination.

Entries are JSON lines ``[t_ns, entry]``. The cost is one ``write`` per
request (a few microseconds, page cache only) and a parse of the files per
journal read, which is a control request.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["SharedJournal"]

_SUFFIX = ".jsonl"


class SharedJournal:
    """One worker's side of a journal shared through ``folder``.

    :meth:`append` writes to this worker's file (``<worker>.jsonl``);
    iterating reads every worker's file and yields the newest ``keep``
    entries of them all, oldest first, as :attr:`streamtape.match.matcher.Matcher.received`
    does. It is a :class:`streamtape.match.matcher.RequestJournal`.
    """

    def __init__(self, folder: str | os.PathLike[str], worker: int, keep: int = 10_000) -> None:
        self.folder = Path(folder)
        self.path = self.folder / f"{worker}{_SUFFIX}"
        self.worker = worker
        self.keep = keep
        self._fd = self._open()
        self._lines = 0

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def append(self, entry: dict[str, Any], /) -> None:
        line = json.dumps([time.monotonic_ns(), entry], separators=(",", ":"), default=str) + "\n"
        data = memoryview(line.encode())
        while data:
            data = data[os.write(self._fd, data) :]
        self._lines += 1
        if self._lines >= 2 * self.keep:
            self._compact()

    def _compact(self) -> None:
        """Keep this worker's newest ``keep`` lines (a rewrite, then an atomic rename)."""
        lines = self.path.read_bytes().splitlines(keepends=True)[-self.keep :]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(b"".join(lines))
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = self._open()
        self._lines = len(lines)

    def clear(self) -> None:
        """Forget this worker's entries (the other workers keep theirs)."""
        os.ftruncate(self._fd, 0)
        self._lines = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        found: list[tuple[int, int, dict[str, Any]]] = []
        for path in self.folder.glob(f"*{_SUFFIX}"):
            try:
                raw = path.read_bytes()
            except FileNotFoundError:  # mid-rename: the new file is read on the next call
                continue
            worker = int(path.stem) if path.stem.isdigit() else -1
            for line in raw.splitlines():
                try:
                    t, entry = json.loads(line)
                except ValueError:  # a line being written right now
                    continue
                found.append((t, worker, entry))
        found.sort(key=lambda f: (f[0], f[1]))
        return iter([entry for _, _, entry in found[-self.keep :]])

    def close(self) -> None:
        os.close(self._fd)
