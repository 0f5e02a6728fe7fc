"""Writing cassettes: :class:`CassetteWriter` (append-only, locked, crash-safe),
:class:`BackgroundWriter` (the same on its own thread, for the proxy) and :func:`save`.

Every ``end`` record is fsynced before the interaction is reported as saved; a
write that fails cuts the file back to its last whole record. :func:`save`, which
writes a batch it holds whole, fsyncs once: a new file is written beside the
target and renamed into place, an append is fsynced at its end. The writer stores
each request's digest (:mod:`streamtape.cassette.digest`) in the index record it
appends to a large file, so a replay server opens it without reading it through.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, ClassVar

import msgpack

from ..errors import CassetteError
from .digest import WILDCARD, digest_of_begin
from .frames import CHECKSUM_VERSION, FRAME, frame
from .index import INDEX_MIN_BYTES, INDEX_VERSION, Kind, TableBuilder, index_record
from .lock import cassette_lock, hold
from .model import Interaction
from .reader import open_layout
from .records import (
    DATA,
    MESSAGES,
    PLAIN_VERSION,
    Record,
    interaction_records,
    make_header,
    record_kind,
    record_version,
)


class CassetteWriter:
    """Appends records to a ``.tape`` file. Not thread-safe; see :class:`BackgroundWriter`.

    Opening an existing cassette appends to it (nothing recorded is ever
    overwritten); a torn tail left by a killed recorder is cut off first, since
    the reader would drop it anyway and new records must follow valid data.

    The writer holds the cassette's lock (:func:`streamtape.cassette.lock.hold`) while it
    is open: a second writer of the same file waits up to ``lock_timeout``
    seconds (``0``, the default: it is refused at once with a message naming
    the holder's pid), so two recorders never interleave their records. A
    write that fails (disk full, I/O error) cuts the file back to its last
    whole record and ends the writing (:attr:`failed`): the file stays readable
    up to what was written before.

    The writer notes where each record goes; :meth:`close` appends an index
    record (:mod:`streamtape.cassette.index`) when the file has reached
    ``index_min_bytes``, so it reopens without a scan. Appending to a cassette
    that ends in an index cuts that index off first (it is rewritten on close).
    """

    def __init__(
        self, path: str | os.PathLike[str], lock_timeout: float = 0.0, index_min_bytes: int = INDEX_MIN_BYTES,
        *, sync_ends: bool = True,
    ) -> None:
        self.path = Path(path)
        self.sync_ends = sync_ends
        """fsync after each ``end`` record (a live recorder); False: only at :meth:`close`
        (a batch written whole, whose caller reports it saved once ``close`` returns)."""
        self.next_id = 0
        self.dropped_tail = 0
        self.index_min_bytes = index_min_bytes
        self._table = TableBuilder()
        self.failed = False
        """A write failed: the file was cut back to its last whole record and is closed."""
        # Ids are taken from more than one thread (the proxy's loop, the shadow
        # sender's): a lock keeps two interactions from getting one id.
        self._id_lock = threading.Lock()
        self._good_end = 0
        if not self.path.parent.is_dir():  # before the lock file, which lives there
            raise CassetteError(f"{self.path}: folder {self.path.parent} does not exist")
        self._lock = hold(self.path, lock_timeout)
        try:
            self._open()
        except BaseException:
            self._lock.release()
            raise
        self._good_end = self._f.tell()

    def _open(self) -> None:
        """Open the file under the lock: append to a cassette, or create one."""
        if self.path.exists() and self.path.stat().st_size > 0:
            layout, _identity, fd = open_layout(self.path)
            os.close(fd)
            self.version: int = layout.header["version"]
            self.framed = layout.framed
            self._seq = layout.next_seq
            self.next_id = max(layout.table.ids, default=-1) + 1
            self._table = TableBuilder.of(layout.table)
            self._f: BinaryIO = open(self.path, "r+b")  # noqa: SIM115
            if layout.index_start is not None:  # derived data: rewritten on close
                self._f.truncate(layout.index_start)
            elif layout.good_end < layout.size:
                self._f.truncate(layout.good_end)
                self.dropped_tail = layout.size - layout.good_end
            self._f.seek(0, os.SEEK_END)
        else:
            if self.path.parent and not self.path.parent.exists():
                raise CassetteError(f"{self.path}: folder {self.path.parent} does not exist")
            try:
                self._f = open(self.path, "w+b")  # noqa: SIM115  (read back by _raise_version)
            except OSError as e:
                raise CassetteError(f"{self.path}: cannot create: {e.strerror or e}") from None
            self.version = CHECKSUM_VERSION
            self.framed = False  # the header is never framed: an older reader must read its version
            self._seq = 0
            self._write([make_header(CHECKSUM_VERSION)], sync=self.sync_ends)
            self.framed = True

    def new_id(self) -> int:
        with self._id_lock:
            rid = self.next_id
            self.next_id += 1
        return rid

    def _write(self, records: Sequence[Record], sync: bool) -> None:
        needed = max(map(record_version, records), default=PLAIN_VERSION)
        if needed > self.version:
            self._raise_version(needed)
        packer = msgpack.Packer(use_bin_type=True)
        if self.framed:
            seq = self._seq
            packed = [frame(packer.pack(r), (seq + i) & 0xFFFFFFFF) for i, r in enumerate(records)]
        else:
            packed = [packer.pack(r) for r in records]
        data = b"".join(packed)
        try:
            self._f.write(data)
            self._f.flush()
            if sync:
                os.fsync(self._f.fileno())
        except OSError:
            self._abandon()
            raise
        if self.framed:
            self._seq = (self._seq + len(records)) & 0xFFFFFFFF
        self._note(records, packed, self._good_end)
        self._good_end += len(data)

    _ARRAY_KINDS: ClassVar[dict[str, Kind]] = {DATA: Kind.DATA, MESSAGES: Kind.MESSAGES}

    def _note(self, records: Sequence[Record], packed: Sequence[bytes], offset: int) -> None:
        """Where each interaction's records went, for the index written on close.

        Once per record on the writer's hot path, so it looks at the tag alone.
        """
        table = self._table
        array_kinds = self._ARRAY_KINDS
        for rec, blob in zip(records, packed, strict=True):
            n = len(blob)
            if isinstance(rec, list):
                kind = array_kinds.get(rec[0]) if rec else None
                if kind is not None:
                    table.add(rec[1], offset, n, kind)
            else:
                t = rec.get("t")
                if t == "begin":
                    rid = rec["id"]
                    table.begin(rid, offset, n)
                    digest = digest_of_begin(rec)  # lets a replay server match without reading it
                    table.digest(rid, WILDCARD if digest is None else digest)
                elif t == "end":
                    table.add(rec["id"], offset, n, Kind.END)
            offset += n

    def _write_index(self) -> None:
        """Append the index record, if the file is large enough to want one.

        It needs format version 3, raised in the header first (fsynced); an
        older streamtape refuses such a file with a message to upgrade. An
        index that cannot be written (disk full) is cut off again: it is only
        a shortcut, and the reader finds the records without it.
        """
        if self.failed or self._good_end < self.index_min_bytes:
            return
        table = self._table.table()
        if not len(table):
            return
        try:
            if self.version < INDEX_VERSION:
                self._raise_version(INDEX_VERSION)
            self._f.seek(self._good_end)
            if self.framed:  # framed as the next record; it takes no number (it is cut off on append)
                self._f.write(frame(index_record(table, self._good_end + FRAME.size), self._seq))
            else:
                self._f.write(index_record(table, self._good_end))
            self._f.flush()
            os.fsync(self._f.fileno())
        except (OSError, CassetteError):
            with contextlib.suppress(OSError, ValueError):
                self._f.seek(self._good_end)
                self._f.truncate(self._good_end)

    def _abandon(self) -> None:
        """After a failed write: cut the file back to its last whole record, stop writing.

        A failed write (disk full, I/O error) may have left part of a record on
        disk, and the buffer still holds the rest. Records appended after it
        (had space come back) would follow garbage, and a reader stops at the
        first undecodable byte: everything after would be lost. So the file is
        cut back to where the last good write ended (``ftruncate`` needs no free
        space) and its descriptor is closed without flushing the buffer.
        """
        self.failed = True
        with contextlib.suppress(OSError, ValueError):
            os.ftruncate(self._f.fileno(), self._good_end)
        f = self._f
        if isinstance(f, io.BufferedRandom | io.BufferedWriter):
            with contextlib.suppress(OSError, ValueError):
                f.raw.close()  # the buffered file's own close would retry the failed flush

    def _raise_version(self, version: int) -> None:
        """Raise the header's format version in place, before records that need it.

        The version is one positive fixint byte after the ``version`` key, so
        the header keeps its size and nothing after it moves. It is fsynced
        before the records that need it are written: a reader never meets a
        record its version does not announce.
        """
        self._f.flush()
        self._f.seek(0)
        head = self._f.read(512)
        key = msgpack.packb("version")
        at = head.find(key) + len(key)
        ok = at >= len(key) and at < len(head) and head[at] == self.version and version < 0x80
        if ok:  # check on a copy that the byte is the header's version and nothing else
            unpacker = msgpack.Unpacker(raw=False)
            unpacker.feed(head[:at] + bytes([version]) + head[at + 1 :])
            try:
                patched = next(unpacker)
            except Exception:
                patched = None
            ok = isinstance(patched, dict) and patched.get("version") == version
        if not ok:
            self._f.seek(0, os.SEEK_END)
            raise CassetteError(f"{self.path}: cannot raise the cassette's format version to {version}")
        self._f.seek(at)
        self._f.write(bytes([version]))
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.seek(0, os.SEEK_END)
        self.version = version

    def write(self, records: Sequence[Record], sync: bool = False) -> None:
        """Append records in one write; fsync when ``sync`` (always for an ``end``)."""
        self._write(records, sync or (self.sync_ends and any(record_kind(r) == "end" for r in records)))

    def add(self, ix: Interaction) -> None:
        """Append a whole finished interaction (fsynced, unless the writer syncs at close only)."""
        self.write(interaction_records(ix, self.new_id()), sync=self.sync_ends)

    def close(self) -> None:
        try:
            if not self._f.closed:
                self._write_index()
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
        finally:
            self._lock.release()

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SAVE_LOCK_WAIT_S = 120.0
"""How long :func:`save` waits for a cassette another process is writing."""


def save(path: str | os.PathLike[str], interactions: Iterable[Interaction]) -> None:
    """Write (or append) interactions to a cassette file (waiting for another writer's lock).

    One fsync for the whole batch, not one per interaction (4,000 fsyncs took 3.0 s
    of 4.7 s for 4,000 interactions on this project's machines). A new cassette is
    written to a hidden file beside the target and renamed into place once it is on
    disk, so the target never holds part of a batch; an append is fsynced once at
    its end (a crash in between leaves a torn tail the reader drops and reports,
    and every interaction the file held before).
    """
    target = Path(path)
    with cassette_lock(target, SAVE_LOCK_WAIT_S):
        if target.exists() and target.stat().st_size > 0:
            with CassetteWriter(target, sync_ends=False) as w:
                for ix in interactions:
                    w.add(ix)
            return
        part = target.with_name(f".{target.name}.{os.getpid()}.part")
        try:
            with CassetteWriter(part, sync_ends=False) as w:
                for ix in interactions:
                    w.add(ix)
            os.replace(part, target)
        except BaseException:
            with contextlib.suppress(OSError):
                part.unlink()
            raise
        _sync_folder(target.parent)


def _sync_folder(folder: Path) -> None:
    """fsync a folder, so a rename in it is on disk (POSIX; a no-op where it cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class BackgroundWriter:
    """A :class:`CassetteWriter` driven by its own thread, so callers never block on disk.

    ``submit`` takes records from any thread (the proxy's event loop) and
    returns at once; the thread drains everything queued, writes it in one
    ``write`` and fsyncs when an interaction ended. A submit's ``on_written``
    is called on the writer thread once its records are on disk (True; fsynced
    when they hold an ``end``) or will never be (False): a recorder reports an
    interaction as saved only when it is. After the first failed write nothing
    more is written (:attr:`failure`; see :meth:`CassetteWriter._abandon`).
    """

    def __init__(self, path: str | os.PathLike[str], lock_timeout: float = 0.0) -> None:
        self.writer = CassetteWriter(path, lock_timeout)
        self._cond = threading.Condition()
        self._pending: list[Record] = []
        self._waiting: list[Callable[[bool], None]] = []
        self._closing = False
        self._submitted = 0
        self._written = 0
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamtape-writer", daemon=True)
        self._thread.start()

    @property
    def path(self) -> Path:
        return self.writer.path

    def new_id(self) -> int:
        return self.writer.new_id()

    def submit(self, records: Sequence[Record], on_written: Callable[[bool], None] | None = None) -> None:
        with self._cond:
            self._pending.extend(records)
            self._submitted += len(records)
            if on_written is not None:
                self._waiting.append(on_written)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                batch, self._pending = self._pending, []
                waiting, self._waiting = self._waiting, []
                closing = self._closing
            if batch:
                if self.failure is None:
                    try:
                        self.writer.write(batch)
                    except BaseException as e:  # disk full, file removed: keep the proxy alive
                        self.failure = e
                ok = self.failure is None
                for done in waiting:
                    with contextlib.suppress(Exception):  # a caller's callback must not stop the writing
                        done(ok)
                with self._cond:
                    self._written += len(batch)
                    self._cond.notify_all()
            if closing and not batch:
                return

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until everything submitted so far is on disk."""
        with self._cond:
            target = self._submitted
            self._cond.wait_for(lambda: self._written >= target, timeout)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self.writer.close()
