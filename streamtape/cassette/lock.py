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
no two holders ever coexist, and no lock file is left beside a cassette unless
its holder was killed (the kernel drops a dead process's ``flock``, so the
next writer takes the stale file over). POSIX only (``fcntl``), like the rest
of the recorder's file handling.

Every :class:`~streamtape.cassette.CassetteWriter` holds the lock while it is
open (:func:`hold`), so a second ``streamtape record`` on one file is refused
at start instead of interleaving its records with the first one's. Inside
:func:`cassette_lock` the thread that holds it can open a writer on the same
cassette (the pytest plugin's commit appends that way); a writer's own hold is
not shared, so a second writer in the same process is refused too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import CassetteError

__all__ = ["CassetteLock", "cassette_lock", "hold", "lock_path"]

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


class CassetteLock:
    """A held cassette lock (:func:`hold`); :meth:`release` lets it go (once)."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd  # None: a nested hold by the thread that has the lock already
        self._key = os.path.abspath(path)
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        fd, self._fd = self._fd, None
        key = self._key
        with _held_guard:
            entry = _held.get(key)
            if entry is None:
                return
            if entry[1] > 1:
                _held[key] = (entry[0], entry[1] - 1, entry[2])
                return
            del _held[key]
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            os.close(fd)  # releases the flock

    def __enter__(self) -> CassetteLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# Locks this process holds, by lock file path: (holding thread, depth, shared).
_held: dict[str, tuple[int, int, bool]] = {}
_held_guard = threading.Lock()


def hold(cassette: str | os.PathLike[str], timeout: float = 120.0, *, shared: bool = False) -> CassetteLock:
    """Take the cassette's exclusive lock and return it held; call ``release()`` when done.

    Waits up to ``timeout`` seconds for another holder (``0``: refuse at once),
    then raises :class:`~streamtape.errors.CassetteError` naming the cassette
    and the holder's pid. A ``shared`` hold lets holds nested inside it, on
    the same thread, through; any other hold this process has already is
    refused at once. The cassette's folder must exist.
    """
    path = lock_path(cassette)
    key = os.path.abspath(path)
    me = threading.get_ident()
    with _held_guard:
        entry = _held.get(key)
        if entry is not None:
            if entry[0] == me and entry[2]:
                _held[key] = (me, entry[1] + 1, True)
                return CassetteLock(path, None)
            if timeout <= 0 or entry[0] == me:
                raise CassetteError(
                    f"{cassette}: this process (pid {os.getpid()}) is writing it already; "
                    f"a cassette takes one writer at a time"
                )
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
            if timeout <= 0:
                raise CassetteError(
                    f"{cassette}: another writer{_holder(path)} has it open; "
                    f"a cassette takes one writer at a time ({path})"
                ) from None
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
    except OSError:
        os.close(fd)
        raise
    with _held_guard:
        _held[key] = (me, 1, shared)
    return CassetteLock(path, fd)


@contextlib.contextmanager
def cassette_lock(cassette: str | os.PathLike[str], timeout: float = 120.0) -> Iterator[None]:
    """Hold the cassette's exclusive lock for the ``with`` block (see :func:`hold`);
    a cassette writer opened inside the block, on the same thread, shares it."""
    lock = hold(cassette, timeout, shared=True)
    try:
        yield
    finally:
        lock.release()
