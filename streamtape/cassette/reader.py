"""Reading cassettes: :func:`load` opens a file through its record table and reads an
interaction only when it is asked for.

Loading used to decode every record and build every piece before anything was
shown: a 243 MiB cassette took 16 s and 1.3 GiB. Now :func:`load` finds where
each interaction's records are (:mod:`streamtape.cassette.index`: the index
record a writer left at the end, or one pass with ``skip()``) and keeps only
that table. ``cas[i]`` reads interaction ``i``'s begin and end records; its
body pieces (:class:`FilePieces`) are read when first used, kept compact
(:class:`~streamtape.cassette.pieces.Pieces`), and held in a small per-file cache
(:data:`PIECE_CACHE_BYTES`), so a replay server holds the heads it matches on
and the bodies it is playing, not the whole file.

What is checked when: :func:`load` checks the header and, when it has to
scan, the structure of the records (every record whole msgpack, ids that
begin once and end once, nothing after an end). A record's fields are checked
when it is read: ``cas[i]`` checks interaction ``i``'s begin and end records,
its pieces are checked when first used; a corrupt one raises
:class:`~streamtape.errors.CassetteError` then, naming the file and the byte. Nothing a file says can make the reader
allocate more than the bytes actually present (see :mod:`streamtape.cassette.index`).

A loaded cassette reads its file again later, so the file must not change
under it except by growing (a recorder appending is fine). A file replaced or
cut short since it was loaded gives a CassetteError saying so, never other
records' bytes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

from ..errors import CassetteError, DamagedRecordError
from ..wire import Framing
from .frames import Damage, unframe
from .index import Kind, Layout, RecordTable, decode_record
from .model import (
    Direction,
    Headers,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    Setup,
    WebSocketSession,
)
from .pieces import Piece, Pieces, PieceSequence
from .records import FORMAT_NAME, NEWEST_VERSION, SUFFIX, decode_messages
from .recovery import CHECKSUM_VERSION, scan

__all__ = ["Cassette", "CassetteFile", "FilePieces", "load", "load_many", "open_layout", "read_records"]

PIECE_CACHE_BYTES = 16 * 1024 * 1024
"""Body bytes a loaded cassette keeps decoded for reuse (least recently used dropped first)."""

INTERRUPTED_ERROR = "the recording stopped before this response ended"


# --------------------------------------------------------------------------
# Strict field decoding: a record's values are checked for type before use,
# so a flipped byte gives a CassetteError, never bytes(2**40) or a str where
# an offset belongs. This runs once per interaction a replay server loads, so
# it checks types with ``type(x) is``, looks enum members up in dicts, and
# fills the frozen dataclasses' fields directly (their ``__init__`` sets each
# field through ``object.__setattr__``, and Response's converts its framing).

_T = TypeVar("_T")
_FRAMINGS: dict[str, Framing] = {f.value: f for f in Framing}
_OUTCOMES: dict[str, Outcome] = {o.value: o for o in Outcome}
_DIRECTIONS: dict[str, Direction] = {d.value: d for d in Direction}


def _new(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of a frozen (dict-backed) dataclass with ``fields`` already checked."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def _str(v: Any, what: str) -> str:
    if type(v) is not str:
        raise ValueError(f"{what} is not text")
    return v


def _int(v: Any, what: str) -> int:
    if type(v) is not int:
        raise ValueError(f"{what} is not an integer")
    return v


def _opt_int(v: Any, what: str) -> int | None:
    return None if v is None else _int(v, what)


def _bytes(v: Any, what: str) -> bytes:
    if type(v) is not bytes:
        raise ValueError(f"{what} is not binary")
    return v


def _headers(raw: Any, what: str) -> tuple[tuple[str, str], ...]:
    if type(raw) is not list:
        raise ValueError(f"{what} headers are not a list")
    out = []
    for h in raw:
        if type(h) is not list or len(h) != 2 or type(h[0]) is not str or type(h[1]) is not str:
            raise ValueError(f"{what} headers hold something other than name/value text pairs")
        out.append((h[0], h[1]))
    return tuple(out)


def _request(d: Any) -> Request:
    if type(d) is not dict:
        raise ValueError("request is not a map")
    started = d["started_at"]
    if type(started) is not float and type(started) is not int:
        raise ValueError("request start time is not a number")
    return _new(Request, {
        "method": _str(d["method"], "request method"),
        "url": _str(d["url"], "request URL"),
        "http_version": _str(d["http_version"], "request HTTP version"),
        "headers": _headers(d["headers"], "request"),
        "body": _bytes(d["body"], "request body"),
        "started_at": float(started),
    })


def _head(d: Any) -> dict[str, Any] | None:
    """A response head's fields as its begin record stores them (pieces come later)."""
    if d is None:
        return None
    if type(d) is not dict:
        raise ValueError("response head is not a map")
    framing = _FRAMINGS.get(d["framing"])
    if framing is None:
        raise ValueError(f"unknown framing {d['framing']!r}")
    return {
        "status": _int(d["status"], "response status"),
        "reason": _str(d["reason"], "response reason"),
        "http_version": _str(d["http_version"], "response HTTP version"),
        "headers": _headers(d["headers"], "response"),
        "framing": framing,
        "headers_at_ns": _int(d["headers_at_ns"], "response headers offset"),
    }


def _setup(d: Any) -> Setup | None:
    if d is None:
        return None
    if type(d) is not dict:
        raise ValueError("setup is not a map")
    return Setup(
        wait_ns=_int(d["wait_ns"], "setup wait"),
        tcp_ns=_opt_int(d.get("tcp_ns"), "setup tcp"),
        proxy_connect_ns=_opt_int(d.get("proxy_connect_ns"), "setup proxy_connect"),
        tls_ns=_opt_int(d.get("tls_ns"), "setup tls"),
    )


@dataclass(frozen=True, slots=True)
class _Begin:
    request: Request
    head: dict[str, Any] | None
    labels: dict[str, str]
    setup: Setup | None
    websocket: bool


def _begin(rec: Any) -> _Begin:
    if type(rec) is not dict:
        raise ValueError("begin record is not a map")
    labels = rec.get("labels") or {}
    if type(labels) is not dict:
        raise ValueError("labels are not a map")
    return _Begin(
        _request(rec["request"]),
        _head(rec["response"]),
        {str(k): str(v) for k, v in labels.items()} if labels else {},
        _setup(rec.get("setup")),
        bool(rec.get("websocket")),
    )


@dataclass(frozen=True, slots=True)
class _End:
    outcome: Outcome
    error: str | None
    end_ns: int | None
    close: tuple[int | None, str, Direction | None] | None
    headers: Headers | None = None
    """The response headers, when they replace the begin record's (a masked compressed answer)."""


def _end(rec: Any) -> _End:
    if type(rec) is not dict:
        raise ValueError("end record is not a map")
    outcome = _OUTCOMES.get(rec["outcome"])
    if outcome is None:
        raise ValueError(f"unknown outcome {rec['outcome']!r}")
    error = rec["error"]
    if error is not None and type(error) is not str:
        raise ValueError("error is not text")
    close = rec.get("websocket")
    close_t: tuple[int | None, str, Direction | None] | None = None
    if close is not None:
        if type(close) is not dict:
            raise ValueError("websocket close is not a map")
        by = close.get("by")
        direction = None if by is None else _DIRECTIONS.get(by)
        if by is not None and direction is None:
            raise ValueError(f"unknown close direction {by!r}")
        close_t = (_opt_int(close.get("code"), "close code"), str(close.get("reason") or ""), direction)
    headers = rec.get("headers")
    return _End(
        outcome, error, _opt_int(rec["end_ns"], "end offset"), close_t,
        None if headers is None else _headers(headers, "response"),
    )


def _interaction(begin: _Begin, end: _End | None, pieces: Sequence[Piece],
                 session: WebSocketSession | None) -> Interaction:
    response = None
    if begin.head is not None:
        head = begin.head if end is None or end.headers is None else {**begin.head, "headers": end.headers}
        response = _new(Response, {**head, "pieces": pieces})
    error: str | None
    if end is None:
        outcome, error, end_ns = Outcome.INTERRUPTED, INTERRUPTED_ERROR, None
    else:
        outcome, error, end_ns = end.outcome, end.error, end.end_ns
    return _new(Interaction, {
        "request": begin.request, "response": response, "outcome": outcome, "error": error,
        "end_ns": end_ns, "labels": begin.labels, "setup": begin.setup, "websocket": session,
    })


def _check_header(path: Path, header: Any) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise CassetteError(f"{path}: not a streamtape cassette")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CassetteError(f"{path}: corrupt cassette header (no format version)")
    if version > NEWEST_VERSION:
        raise CassetteError(
            f"{path}: cassette format version {version} is newer than this streamtape "
            f"(reads up to {NEWEST_VERSION}); upgrade streamtape"
        )
    return header


# --------------------------------------------------------------------------
# Open files


_Identity = tuple[int, int]  # (st_dev, st_ino)


class _OpenFiles:
    """Cassette files kept open for reading, a few at a time (least recently used closed).

    A served folder may hold thousands of cassettes: holding one descriptor
    each would run into the process's limit. A file reopened later must be the
    same file (device and inode) or its offsets would point into other data.
    """

    def __init__(self, limit: int = 32) -> None:
        self.limit = limit
        self._fds: OrderedDict[tuple[Path, _Identity], int] = OrderedDict()
        self._lock = threading.Lock()

    def adopt(self, path: Path, identity: _Identity, fd: int) -> None:
        """Keep ``fd`` (opened by the caller) for later reads."""
        with self._lock:
            old = self._fds.pop((path, identity), None)
            if old is not None:
                os.close(old)
            self._fds[(path, identity)] = fd
            self._evict()

    def _evict(self) -> None:
        while len(self._fds) > self.limit:
            _, fd = self._fds.popitem(last=False)
            with contextlib.suppress(OSError):
                os.close(fd)

    def read(self, path: Path, identity: _Identity, ranges: Iterable[tuple[int, int]]) -> list[bytes]:
        """The bytes of each (offset, length) range, all read from the file ``identity`` names."""
        key = (path, identity)
        with self._lock:
            fd = self._fds.get(key)
            if fd is None:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except OSError as e:
                    raise CassetteError(f"{path}: cannot read it again: {e.strerror or e}") from None
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != identity:
                    os.close(fd)
                    raise CassetteError(f"{path}: the file was replaced since it was loaded; load it again")
                self._fds[key] = fd
            else:
                self._fds.move_to_end(key)
            try:
                out = []
                for off, n in ranges:
                    data = os.pread(fd, n, off)
                    if len(data) != n:
                        raise CassetteError(
                            f"{path}: the file was cut short since it was loaded; load it again")
                    out.append(data)
                return out
            finally:
                self._evict()

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()


_FILES = _OpenFiles()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_FILES.reset_after_fork)


# --------------------------------------------------------------------------
# A cassette file and its lazily read pieces


class CassetteFile:
    """An opened cassette file: its header, record table, and reads of one interaction."""

    def __init__(self, path: Path, layout: Layout, identity: _Identity) -> None:
        self.path = path
        self.layout = layout
        self.table: RecordTable = layout.table
        self.identity = identity
        self._cache: OrderedDict[int, Pieces] = OrderedDict()
        self._cache_bytes = 0
        self._big: tuple[int, Pieces] | None = None
        """The last interaction too large for the cache: ``show -i`` of a 100 MB body reads it once."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.table)

    def _read(self, ranges: Iterable[tuple[int, int]]) -> list[bytes]:
        return _FILES.read(self.path, self.identity, ranges)

    def _corrupt(self, offset: int, detail: str) -> CassetteError:
        return CassetteError(f"{self.path}: corrupt cassette: record at byte {offset}: {detail}")

    def _decode(self, offset: int, data: bytes, rid: int) -> Any:
        if self.layout.framed:
            try:
                _seq, payload = unframe(data)
                rec = decode_record(payload)
            except ValueError as e:
                where = self.table.ids.index(rid) if rid in self.table.ids else None
                raise DamagedRecordError(self.path, offset, str(e), where) from None
        else:
            try:
                rec = decode_record(data)
            except ValueError as e:
                raise self._corrupt(offset, str(e)) from None
        got = rec.get("id") if isinstance(rec, dict) else rec[1] if isinstance(rec, list) and len(rec) > 1 else None
        if got != rid:
            raise self._corrupt(offset, f"expected a record of interaction {rid}")
        return rec

    def interaction(self, i: int) -> Interaction:
        """Interaction ``i`` (begin order), its pieces left on disk until used."""
        t = self.table
        lo, hi = t.starts[i], t.starts[i + 1]
        rid = t.ids[i]
        ended = t.kinds[hi - 1] == Kind.END
        ranges = [(t.offsets[lo], t.lengths[lo])]
        if ended:
            ranges.append((t.offsets[hi - 1], t.lengths[hi - 1]))
        msg_at = [k for k in range(lo + 1, hi) if t.kinds[k] == Kind.MESSAGES]
        ranges.extend((t.offsets[k], t.lengths[k]) for k in msg_at)
        blobs = self._read(ranges)
        off = t.offsets[lo]
        try:
            begin = _begin(self._decode(off, blobs[0], rid))
            if ended:
                off = t.offsets[hi - 1]
                end: _End | None = _end(self._decode(off, blobs[1], rid))
            else:
                end = None
            session = None
            if begin.websocket:
                messages: list[Message] = []
                last = 0
                for k, blob in zip(msg_at, blobs[1 + ended :], strict=True):
                    off = t.offsets[k]
                    rec = self._decode(off, blob, rid)
                    if not isinstance(rec, list):
                        raise ValueError("message record is not an array")
                    new = decode_messages(rec, last)
                    if new:
                        messages.extend(new)
                        last = new[-1].at_ns
                code, reason, by = end.close if end is not None and end.close is not None else (None, "", None)
                session = WebSocketSession(tuple(messages), code, reason, by)
            elif msg_at:
                off = t.offsets[msg_at[0]]
                raise ValueError(f"messages for interaction {rid}, which is not a WebSocket session")
        except CassetteError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            detail = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise self._corrupt(off, detail) from None
        has_data = Kind.DATA in t.kinds[lo + 1 : hi]
        return _interaction(begin, end, FilePieces(self, i) if has_data else (), session)

    def request(self, i: int) -> Request:
        """Interaction ``i``'s request alone (its begin record read, nothing else built)."""
        t = self.table
        lo = t.starts[i]
        off = t.offsets[lo]
        (blob,) = self._read([(off, t.lengths[lo])])
        rec = self._decode(off, blob, t.ids[i])
        try:
            if type(rec) is not dict:
                raise ValueError("begin record is not a map")
            return _request(rec["request"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise self._corrupt(off, f"missing field {e}" if isinstance(e, KeyError) else str(e)) from None

    def pieces(self, i: int) -> Pieces:
        """Interaction ``i``'s body pieces, from the cache or read now."""
        with self._lock:
            hit = self._cache.get(i)
            if hit is not None:
                self._cache.move_to_end(i)
                return hit
            if self._big is not None and self._big[0] == i:
                return self._big[1]
        t = self.table
        lo, hi = t.starts[i], t.starts[i + 1]
        rid = t.ids[i]
        at = [k for k in range(lo + 1, hi) if t.kinds[k] == Kind.DATA]
        blobs = self._read((t.offsets[k], t.lengths[k]) for k in at)
        batches = []
        off = 0
        try:
            for k, blob in zip(at, blobs, strict=True):
                off = t.offsets[k]
                rec = self._decode(off, blob, rid)
                if not isinstance(rec, list) or len(rec) != 5:
                    raise ValueError("malformed data record")
                batches.append((_bytes(rec[2], "piece data"), _list(rec[3]), _list(rec[4])))
            pieces = Pieces.from_batches(batches)
        except CassetteError:
            raise
        except (TypeError, ValueError) as e:
            raise self._corrupt(off, str(e)) from None
        size = len(pieces.data) + 16 * len(pieces.at)
        if size <= PIECE_CACHE_BYTES // 4:
            with self._lock:
                if i not in self._cache:
                    self._cache[i] = pieces
                    self._cache_bytes += size
                while self._cache_bytes > PIECE_CACHE_BYTES:
                    _, old = self._cache.popitem(last=False)
                    self._cache_bytes -= len(old.data) + 16 * len(old.at)
        else:
            with self._lock:
                self._big = (i, pieces)
        return pieces


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise ValueError("piece sizes or gaps are not a list")
    return v


class FilePieces(PieceSequence):
    """An interaction's body pieces, read from its cassette file when first used.

    Equal to any sequence of the same pieces. The decoded pieces are kept in the
    file's cache, not here, so interactions held for matching (a replay
    server's) do not pin every body they ever played.
    """

    __slots__ = ("_file", "_index")

    def __init__(self, file: CassetteFile, index: int) -> None:
        self._file = file
        self._index = index

    def compact(self) -> Pieces:
        return self._file.pieces(self._index)

    def __reduce__(self) -> tuple[type[Pieces], tuple[bytes, Any, Any]]:
        c = self.compact()
        return (Pieces, (c.data, c.ends, c.at))


# --------------------------------------------------------------------------
# The cassette


class Cassette(Sequence[Interaction]):
    """An ordered, read-only sequence of interactions: loaded from a ``.tape`` file
    (:func:`load`: read one interaction at a time, on demand) or built in memory.

    ``len()`` and ``cas[i]`` never decode the other interactions. ``cas[i]``
    reads the interaction again on each call (equal values, not one object);
    keep what you use.
    """

    def __init__(
        self,
        interactions: Iterable[Interaction] = (),
        *,
        path: Path | None = None,
        header: dict[str, Any] | None = None,
        warnings: Iterable[str] = (),
        file: CassetteFile | None = None,
        damage: Iterable[Damage] = (),
    ) -> None:
        self._file = file
        self._items: list[Interaction] = [] if file is not None else list(interactions)
        self.path = path
        self.header = header or {}
        self.warnings: list[str] = list(warnings)
        """Problems the reader recovered from (a torn last record, damage), one line each."""
        self.damage: list[Damage] = list(damage)
        """The stretches of a checksummed file that did not check out, and the interactions
        they cost (left out of this sequence): see :class:`~streamtape.cassette.frames.Damage`."""

    @property
    def checksummed(self) -> bool:
        """The file's records carry checksums (format version 4 and up): damage is detected."""
        version = self.header.get("version", 0)
        return isinstance(version, int) and version >= CHECKSUM_VERSION

    @property
    def file(self) -> CassetteFile | None:
        """The opened file this cassette reads from (None for one built in memory)."""
        return self._file

    @overload
    def __getitem__(self, i: int) -> Interaction: ...
    @overload
    def __getitem__(self, i: slice) -> list[Interaction]: ...
    def __getitem__(self, i: int | slice) -> Interaction | list[Interaction]:
        f = self._file
        if f is None:
            return self._items[i]
        if isinstance(i, slice):
            return [f.interaction(k) for k in range(*i.indices(len(f)))]
        n = len(f)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("cassette index out of range")
        return f.interaction(i)

    def __len__(self) -> int:
        return len(self._file) if self._file is not None else len(self._items)

    def __iter__(self) -> Iterator[Interaction]:
        f = self._file
        if f is None:
            return iter(self._items)
        return (f.interaction(k) for k in range(len(f)))

    def __repr__(self) -> str:
        return f"<Cassette {self.path or '(memory)'}: {len(self)} interactions>"


# --------------------------------------------------------------------------
# Loading


def open_layout(path: Path, *, use_index: bool = True) -> tuple[Layout, _Identity, int]:
    """Open a cassette file and find its records: (layout, file identity, open descriptor).

    The caller owns the descriptor. Raises CassetteError for a missing,
    unreadable, empty, foreign, newer or corrupt file.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise CassetteError(f"{path}: no such cassette file") from None
    except IsADirectoryError:
        raise CassetteError(f"{path}: is a directory, not a cassette file") from None
    except OSError as e:
        raise CassetteError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise CassetteError(f"{path}: is a directory, not a cassette file")
        if st.st_size == 0:
            raise CassetteError(f"{path}: empty file, not a streamtape cassette")
        f = os.fdopen(os.dup(fd), "rb", buffering=0)
        try:
            layout = scan(path, f, st.st_size, lambda h: _check_header(path, h), use_index=use_index)
        except OSError as e:
            raise CassetteError(f"{path}: cannot read: {e.strerror or e}") from None
        finally:
            f.close()
    except BaseException:
        os.close(fd)
        raise
    return layout, (st.st_dev, st.st_ino), fd


def _warnings(path: Path, layout: Layout) -> list[str]:
    out = []
    if layout.good_end < layout.size:
        out.append(
            f"{path}: dropped a torn last record ({layout.size - layout.good_end} bytes at byte "
            f"{layout.good_end}); the recorder was probably killed while writing it"
        )
    if layout.damage:
        out.append(damage_line(path, layout.damage))
    return out


def damage_line(path: Path, damage: Sequence[Damage]) -> str:
    """One line for all of a file's damage: how much, which interactions it cost, where."""
    lost = sorted({i for d in damage for i in d.interactions})
    where = ", ".join(
        f"#{i} at byte {next(d.offset for d in damage if i in d.interactions)}" for i in lost[:5]
    ) + (", ..." if len(lost) > 5 else "")
    what = f"left out {len(lost)} interaction(s) ({where})" if lost else "no interaction known to be lost"
    return (
        f"{path}: {len(damage)} damaged record(s) skipped, first at byte {damage[0].offset}; {what}; "
        f"'streamtape verify' lists them"
    )


def load(path: str | os.PathLike[str], *, verify: bool = False) -> Cassette:
    """Open a cassette. Raises :class:`~streamtape.errors.CassetteError` on bad input.

    Only the record table is read now; interactions are read when asked for
    (see the module docstring for what is checked when). A torn last record
    is dropped; :attr:`Cassette.warnings` says what was dropped. In a
    checksummed cassette (version 4) damaged records are skipped and the
    interactions they cost are left out, listed in :attr:`Cassette.damage`.

    ``verify``: check every record's checksum now, reading the whole file,
    even when an index record would let the file open without (commands that
    read every interaction anyway, ``show``, ``check``, ``verify``, use it).
    Otherwise a record reached through the index is checked when it is read,
    and a damaged one raises :class:`~streamtape.errors.DamagedRecordError`.
    """
    p = Path(path)
    layout, identity, fd = open_layout(p, use_index=not verify)
    _FILES.adopt(p, identity, fd)
    return Cassette(path=p, header=layout.header, warnings=_warnings(p, layout),
                    file=CassetteFile(p, layout, identity), damage=layout.damage)


def load_many(paths: Iterable[str | os.PathLike[str]], *, verify: bool = False) -> list[Cassette]:
    """Load cassettes from files and folders (every ``*.tape`` in a folder, sorted)."""
    out: list[Cassette] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(p.glob(f"*{SUFFIX}"))
            if not files:
                raise CassetteError(f"{p}: folder holds no {SUFFIX} cassettes")
            out.extend(load(f, verify=verify) for f in files)
        else:
            out.append(load(p, verify=verify))
    return out


def read_records(path: Path) -> tuple[dict[str, Any], list[Any], int, int]:
    """Header, every record decoded (in file order), where valid data ends, and the file size.

    For tools and tests that look at the records themselves; :func:`load` is
    the way to read interactions. Raises :class:`CassetteError` as :func:`load` does.
    """
    layout, _identity, fd = open_layout(Path(path), use_index=False)
    try:
        t = layout.table
        order = sorted(range(t.record_count), key=t.offsets.__getitem__)
        records = []
        for k in order:
            data = os.pread(fd, t.lengths[k], t.offsets[k])
            try:
                records.append(decode_record(unframe(data)[1] if layout.framed else data))
            except ValueError as e:
                raise CassetteError(f"{path}: corrupt cassette: record at byte {t.offsets[k]}: {e}") from None
    finally:
        os.close(fd)
    return layout.header, records, layout.good_end, layout.size
