"""An exclusive, cross-process lock on one cassette file.

Two writers of one cassette (two pytest-xdist workers recording parameter sets
of one test, a test and a ``streamtape record`` in another terminal) must not
interleave their appends or rename over each other. The lock is an
``fcntl.flock`` on a hidden file beside the cassette, ``.NAME.tape.lock``, not
on the cassette itself: a cassette may be *replaced* (``os.replace`` of a new
recording over it), and a lock on the old inode would not stop a writer that
opens the new one.

The lock file holds the holder's pid (for the message a waiter gets) and is
removed by the holder before it unlocks. A waiter that then gets the lock on
the removed inode sees that the path no longer names it and starts over, so
no stale lock file is ever left beside a cassette and no two holders ever
coexist. POSIX only (``fcntl``), like the rest of the recorder's file handling.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from .errors import CassetteError

__all__ = ["cassette_lock", "lock_path"]

POLL_S = 0.02


def lock_path(cassette: str | os.PathLike[str]) -> Path:
    """The lock file of a cassette: ``.NAME.lock`` in the cassette's folder."""
    p = Path(cassette)
    return p.with_name(f".{p.name}.lock")


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text().strip() or "0")
        if pid:
            return f" (pid {pid})"
    return ""


@contextlib.contextmanager
def cassette_lock(cassette: str | os.PathLike[str], timeout: float = 120.0) -> Iterator[None]:
    """Hold the cassette's exclusive lock for the ``with`` block.

    Waits up to ``timeout`` seconds for another holder, then raises
    :class:`~streamtape.errors.CassetteError` naming the cassette and the
    holder's pid. The cassette's folder must exist.
    """
    path = lock_path(cassette)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise CassetteError(f"{cassette}: cannot create the lock file {path}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                raise CassetteError(
                    f"{cassette}: another writer{_holder(path)} has held it for more than "
                    f"{timeout:g} s ({path})"
                ) from None
            time.sleep(POLL_S)
            continue
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the previous holder removed it after we opened it
            os.close(fd)
            continue
        break
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)  # releases the flock
