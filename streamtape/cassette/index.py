"""Where a cassette's records are: the record table, the scan that finds it, the index record.

Records are appended as they happen, so one interaction's records (its begin,
its data or message batches, its end) are spread through the file among those
of every interaction that ran at the same time. Reading interaction N therefore
needs to know where its records are: a :class:`RecordTable` holds, for each
interaction in begin order, the offset, length and kind of each of its records
(about 17 bytes a record, in machine arrays).

The table comes from one of two places:

- the **index record** a writer appends when it closes a large cassette
  (:data:`INDEX_MIN_BYTES`): the table itself, CRC-checked, found in O(1)
  through a fixed-size tail that ends the file::

      ["x", {"v": 1, "ids": bin, "starts": bin, "offsets": bin, "lengths": bin,
             "kinds": bin}, <start: uint64>, <crc32: uint32>]

  The arrays are little-endian machine arrays (int64 ids, uint64 starts and
  offsets, uint32 lengths, one kind byte per record); ``start`` is the
  index record's own offset and ``crc32`` covers the record up to the CRC.
  The last 14 bytes of an indexed file are therefore ``0xcf`` + 8 bytes +
  ``0xce`` + 4 bytes (msgpack allows ints wider than they need). An index
  describes the records before it; one that is not at the very end of the
  file (a recorder appended after it), or whose CRC or shape is wrong, is
  ignored and the table is found by a scan. Index records need format
  version 3 (an older streamtape would stop at them), so only cassettes large
  enough for a scan to take noticeable time get one; smaller ones stay
  readable by older readers.
- a **scan**: (versions 1 to 3; a version 4 file is read by :mod:`streamtape.cassette.recovery`) one pass over the file with msgpack's ``Unpacker.skip()``, which
  walks a record without building it. Records are recognised from their
  first bytes (``0x95 "d" id``, ``0x96|0x97 "m" id``, and a map starting
  ``"t": "begin"|"end", "id": id``); anything else is decoded to be known.

Hostile and damaged files: the reader never trusts a length field. A record is
decoded only once ``skip()`` has found its end in the bytes actually present,
and then with msgpack's ``max_*_len`` limits set to the record's own length,
so a header claiming gigabytes is refused before anything is allocated; the
scan's buffer holds one read block plus one record. A file that stops inside a
record (a recorder killed mid-write) yields the records before it and a
warning; bytes that are not msgpack, or records that contradict each other,
give a :class:`~streamtape.errors.CassetteError` naming the file and the byte.
"""

from __future__ import annotations

import operator
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from ..errors import CassetteError
from .frames import Damage

__all__ = [
    "INDEX",
    "INDEX_MIN_BYTES",
    "INDEX_VERSION",
    "Kind",
    "Layout",
    "RecordTable",
    "TableBuilder",
    "decode_record",
    "index_record",
    "scan",
]

INDEX = "x"
"""The tag of an index record (an array, like the data and message records)."""
INDEX_VERSION = 3
"""The cassette format version a reader needs for an index record."""
INDEX_MIN_BYTES = 16 * 1024 * 1024
"""A writer appends an index only to a cassette at least this large: below it a
scan takes tens of milliseconds, and the file stays readable by older readers."""

_TAIL = struct.Struct(">BQBI")  # 0xcf, start, 0xce, crc32
_INDEX_HEAD = b"\x94\xa1x"
_BLOCK = 1 << 20


class Kind(IntEnum):
    """A record's kind in the table (one byte each)."""

    BEGIN = 1
    DATA = 2
    MESSAGES = 3
    END = 4


_KIND_BYTES = bytes(Kind)

DIGEST_VERSION = 3
"""The version of :func:`streamtape.cassette.digest.request_digest` an index's digests were
made with; digests of another version are ignored (a reader recomputes them)."""


@dataclass(frozen=True, slots=True)
class RecordTable:
    """Each interaction's records, in begin order, as machine arrays.

    Interaction ``i`` (id ``ids[i]``) owns records ``starts[i]`` to
    ``starts[i + 1]`` of ``offsets`` / ``lengths`` / ``kinds``: its begin first,
    then its data and message records in file order, then its end if written.
    ``digests[i]``, when the writer left them, is a digest of interaction ``i``'s
    request as matching sees it (:mod:`streamtape.match.indexed`), so a replay
    server can find candidates without reading every request.
    """

    ids: array[int]
    starts: array[int]
    offsets: array[int]
    lengths: array[int]
    kinds: bytes
    digests: array[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def records(self, i: int) -> list[tuple[int, int, Kind]]:
        """Interaction ``i``'s records as (offset, length, kind), in order."""
        lo, hi = self.starts[i], self.starts[i + 1]
        return [(self.offsets[k], self.lengths[k], Kind(self.kinds[k])) for k in range(lo, hi)]

    @property
    def record_count(self) -> int:
        return len(self.offsets)


class TableBuilder:
    """Collects records as they are found or written, grouped by interaction id.

    Each interaction's records are (offset, length, kind) triplets in one
    array: one append per record, on the writer's hot path.
    """

    __slots__ = ("_by_id", "_digests")

    def __init__(self) -> None:
        self._by_id: dict[int, array[int]] = {}
        self._digests: dict[int, int] | None = {}

    def digest(self, rid: int, value: int) -> None:
        """The request digest of interaction ``rid`` (every interaction needs one, or none are kept)."""
        if self._digests is not None:
            self._digests[rid] = value

    def __contains__(self, rid: int) -> bool:
        return rid in self._by_id

    @property
    def ids(self) -> Iterable[int]:
        return self._by_id.keys()

    def begin(self, rid: int, offset: int, length: int) -> None:
        self._by_id[rid] = array("Q", (offset, length, Kind.BEGIN))

    def add(self, rid: int, offset: int, length: int, kind: Kind) -> bool:
        """Note a record of a begun interaction; False when ``rid`` never began."""
        entry = self._by_id.get(rid)
        if entry is None:
            return False
        entry.extend((offset, length, kind))
        return True

    @classmethod
    def of(cls, table: RecordTable) -> TableBuilder:
        b = cls()
        for i, rid in enumerate(table.ids):
            entry: array[int] = array("Q")
            for k in range(table.starts[i], table.starts[i + 1]):
                entry.extend((table.offsets[k], table.lengths[k], table.kinds[k]))
            b._by_id[rid] = entry
        b._digests = dict(zip(table.ids, table.digests, strict=True)) if table.digests is not None else None
        return b

    def table(self) -> RecordTable:
        ids: array[int] = array("q", self._by_id.keys())
        starts: array[int] = array("Q", (0,))
        offsets: array[int] = array("Q")
        lengths: array[int] = array("Q")  # written as uint32 in the index record
        kinds = bytearray()
        for entry in self._by_id.values():
            offsets.extend(entry[0::3])
            lengths.extend(entry[1::3])
            kinds.extend(entry[2::3].tolist())
            starts.append(len(offsets))
        digests = None
        if self._digests is not None and len(self._digests) == len(ids):
            got = self._digests
            if all(rid in got for rid in ids):
                digests = array("Q", (got[rid] for rid in ids))
        return RecordTable(ids, starts, offsets, lengths, bytes(kinds), digests)


@dataclass(frozen=True, slots=True)
class Layout:
    """What opening a cassette file found: its header and where every record is."""

    header: dict[str, Any]
    table: RecordTable
    good_end: int
    """Where the last whole record ends: the file size, unless a torn record follows."""
    size: int
    """The file's size when it was opened."""
    indexed: bool
    """The table came from the file's index record (not from a scan)."""
    index_start: int | None = None
    """Where that index record starts (a writer that appends cuts it off first)."""
    framed: bool = False
    """The records are in checksummed frames (format version 4, :mod:`streamtape.cassette.frames`)."""
    damage: tuple[Damage, ...] = ()
    """Stretches of a framed file that did not check out; the interactions they cost are
    left out of :attr:`table`."""
    next_seq: int = 0
    """The sequence number the next framed record appended gets."""


# --------------------------------------------------------------------------
# Decoding one record within limits


def limits(n: int) -> dict[str, int]:
    """msgpack ``Unpacker`` limits that refuse any length claim above ``n`` bytes before allocating."""
    n = max(n, 1)
    return {
        "max_str_len": n,
        "max_bin_len": n,
        "max_array_len": n,
        "max_map_len": n,
        "max_ext_len": n,
    }


def decode_record(data: bytes | memoryview) -> Any:
    """One whole record's bytes decoded, every length claim held to the record's own size.

    Raises ValueError for anything that is not exactly one msgpack object.
    """
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, **limits(len(data)))
    except (msgpack.UnpackException, ValueError, TypeError, RecursionError) as e:
        raise ValueError(f"undecodable record ({type(e).__name__})") from None


def _int_at(buf: bytes | memoryview, i: int) -> tuple[int, int] | None:
    """A msgpack integer at ``buf[i]``: (value, its size), or None if there is none."""
    if i >= len(buf):
        return None
    b = buf[i]
    if b <= 0x7F:
        return b, 1
    if b >= 0xE0:
        return b - 0x100, 1
    width = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}.get(b)
    if width is None or i + 1 + width > len(buf):
        return None
    return int.from_bytes(buf[i + 1 : i + 1 + width], "big", signed=b >= 0xD0), 1 + width


_ARRAY_TAGS = {b"\x95\xa1d": Kind.DATA, b"\x96\xa1m": Kind.MESSAGES, b"\x97\xa1m": Kind.MESSAGES}
# A writer's begin and end maps start with "t" and then "id" (dicts keep their order).
_MAP_TAGS = {b"\xa1t\xa5begin\xa2id": Kind.BEGIN, b"\xa1t\xa3end\xa2id": Kind.END}


def peek_kind(head: bytes | memoryview) -> tuple[Kind, int] | str | None:
    """Recognise a record from its first bytes: (kind, id); ``"index"`` for an index
    record; None for anything that has to be decoded to be known (a map whose first
    keys are not ``t`` and ``id``, a foreign record, damage)."""
    if not len(head):
        return None
    if 0x80 <= head[0] <= 0x8F:
        for prefix, kind in _MAP_TAGS.items():
            if bytes(head[1 : 1 + len(prefix)]) == prefix:
                got = _int_at(head, 1 + len(prefix))
                return (kind, got[0]) if got is not None else None
        return None
    tag = bytes(head[:3])
    array_kind = _ARRAY_TAGS.get(tag)
    if array_kind is not None:
        got = _int_at(head, 3)
        return (array_kind, got[0]) if got is not None else None
    if tag == _INDEX_HEAD:
        return "index"
    return None


# --------------------------------------------------------------------------
# The index record


def _le(a: array[int]) -> bytes:
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _from_le(typecode: str, data: Any) -> array[int]:
    if not isinstance(data, bytes):
        raise ValueError("index field is not binary")
    a: array[int] = array(typecode)
    if len(data) % a.itemsize:
        raise ValueError("index field has a partial item")
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def index_record(table: RecordTable, start: int) -> bytes:
    """The index record for ``table``, to be written at byte ``start`` (ending the file)."""
    fields: dict[str, Any] = {
        "v": 1,
        "ids": _le(table.ids),
        "starts": _le(table.starts),
        "offsets": _le(table.offsets),
        "lengths": _le(array("I", table.lengths)),
        "kinds": table.kinds,
    }
    if table.digests is not None:
        fields["digests"] = {"v": DIGEST_VERSION, "values": _le(table.digests)}
    body: bytes = msgpack.packb(fields, use_bin_type=True)
    head = _INDEX_HEAD + body + b"\xcf" + start.to_bytes(8, "big")
    return head + b"\xce" + zlib.crc32(head).to_bytes(4, "big")


def read_index(f: BinaryIO, size: int, header_end: int) -> tuple[RecordTable, int] | None:
    """The table of an index record that ends the file, and where it starts; None when
    there is none, or it does not check out (CRC, shape, offsets outside the records)."""
    if size - header_end < _TAIL.size + len(_INDEX_HEAD):
        return None
    f.seek(size - _TAIL.size)
    tail = f.read(_TAIL.size)
    if len(tail) != _TAIL.size:
        return None
    m1, start, m2, crc = _TAIL.unpack(tail)
    if m1 != 0xCF or m2 != 0xCE or not header_end <= start < size - _TAIL.size:
        return None
    f.seek(start)
    data = f.read(size - start)
    if len(data) != size - start or not data.startswith(_INDEX_HEAD):
        return None
    if zlib.crc32(memoryview(data)[:-5]) != crc:
        return None
    try:
        rec = decode_record(data)
        if not (isinstance(rec, list) and len(rec) == 4 and rec[0] == INDEX and rec[2] == start):
            return None
        body = rec[1]
        if not isinstance(body, dict) or body.get("v") != 1:
            return None
        ids = _from_le("q", body["ids"])
        starts = _from_le("Q", body["starts"])
        offsets = _from_le("Q", body["offsets"])
        lengths = _from_le("I", body["lengths"])
        kinds = body["kinds"]
        if not isinstance(kinds, bytes):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    # The CRC rules out damage; these rule out a writer's mistake cheaply (over the
    # interactions, not the records: a table of a million records is read in ms). An
    # offset is checked when its record is read: it must hold the interaction's id.
    n = len(ids)
    if len(starts) != n + 1 or starts[0] != 0 or starts[-1] != len(offsets):
        return None
    if len(lengths) != len(offsets) or len(kinds) != len(offsets):
        return None
    if any(map(operator.ge, starts[:-1], starts[1:])):  # every interaction has a record
        return None
    if kinds.translate(None, _KIND_BYTES) or set(map(kinds.__getitem__, starts[:-1])) - {Kind.BEGIN}:
        return None
    if len(set(ids)) != n:
        return None
    digests = body.get("digests")
    digest_arr = None
    if isinstance(digests, dict) and digests.get("v") == DIGEST_VERSION:
        try:
            digest_arr = _from_le("Q", digests.get("values"))
        except ValueError:
            digest_arr = None
        if digest_arr is not None and len(digest_arr) != n:
            digest_arr = None
    return RecordTable(ids, starts, offsets, lengths, kinds, digest_arr), start


# --------------------------------------------------------------------------
# The scan


class _Window:
    """The file read in blocks, fed to one Unpacker, with the bytes around the
    current record kept for peeking and slicing (at most a block plus one record)."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f = f
        self.size = size
        self.unpacker = msgpack.Unpacker(
            raw=False, strict_map_key=False, max_buffer_size=max(size, 1), **limits(size)
        )
        self.buf = b""
        self.buf_start = 0
        self.fed = 0

    def more(self, keep_from: int) -> bool:
        """Feed the next block; keep buffered bytes from ``keep_from`` on. False at EOF."""
        if self.fed >= self.size:
            return False
        block = self.f.read(min(_BLOCK, self.size - self.fed))
        if not block:
            return False
        self.unpacker.feed(block)
        self.fed += len(block)
        self.buf = self.buf[keep_from - self.buf_start :] + block
        self.buf_start = keep_from
        return True

    def bytes_at(self, start: int, end: int) -> memoryview:
        return memoryview(self.buf)[start - self.buf_start : end - self.buf_start]


def _read_header(w: _Window, path: Path) -> tuple[Any, int]:
    """The header (the first object) and where it ends. It must be a small map: a
    file that starts with anything else is not decoded at all."""
    w.more(0)
    if not w.buf or not 0x80 <= w.buf[0] <= 0x8F:
        raise CassetteError(f"{path}: not a streamtape cassette")
    while True:
        try:
            w.unpacker.skip()
            end = w.unpacker.tell()
            break
        except msgpack.OutOfData:
            if not w.more(0):
                raise CassetteError(f"{path}: not a streamtape cassette (no complete header)") from None
        except (msgpack.UnpackException, ValueError, TypeError):
            raise CassetteError(f"{path}: not a streamtape cassette") from None
    try:
        return decode_record(w.bytes_at(0, end)), end
    except ValueError:
        raise CassetteError(f"{path}: not a streamtape cassette") from None


CheckHeader = Callable[[Any], dict[str, Any]]
"""Returns the header if this streamtape reads it, else raises CassetteError."""


def scan(
    path: Path,
    f: BinaryIO,
    size: int,
    check_header: CheckHeader,
    *,
    use_index: bool = True,
) -> Layout:
    """Find every record of the open cassette ``f`` (``size`` bytes).

    The index record is used when it ends the file and checks out, else the
    file is read once, record by record, checking its structure (every record
    whole msgpack, ids that begin once and end once, nothing after an end),
    not the records' fields. Raises CassetteError for a file that is not a
    cassette or is corrupt before its last record.
    """
    w = _Window(f, size)
    header, header_end = _read_header(w, path)
    header = check_header(header)
    if use_index and header.get("version", 0) >= INDEX_VERSION:
        found = read_index(f, size, header_end)
        if found is not None:
            table, start = found
            return Layout(header, table, size, size, True, start)
        f.seek(w.fed)
    return _scan_records(path, w, header, header_end)


def _scan_records(path: Path, w: _Window, header: dict[str, Any], pos: int) -> Layout:
    """One pass over the records after the header. The loop body runs once per record
    of a file that may hold millions: data records take the short path (a tag check,
    ``skip()``, one array append)."""
    b = TableBuilder()
    by_id = b._by_id
    ended: set[int] = set()
    up = w.unpacker
    n = 0
    index_start: int | None = None
    size = w.size
    data_tag = b"\x95\xa1d"

    def corrupt(detail: str) -> CassetteError:
        return CassetteError(f"{path}: corrupt cassette: record {n} at byte {pos}: {detail}")

    while pos < size:
        n += 1
        if w.fed - pos < 16:
            while w.fed < min(pos + 16, size) and w.more(pos):
                pass
        buf, i = w.buf, pos - w.buf_start
        peeked: tuple[Kind, int] | str | None = None
        if buf.startswith(data_tag, i) and i + 8 <= len(buf):  # the usual case, ids inline
            c = buf[i + 3]
            if c < 0x80:
                peeked = (Kind.DATA, c)
            elif c == 0xCD:
                peeked = (Kind.DATA, buf[i + 4] << 8 | buf[i + 5])
            elif c == 0xCE:
                peeked = (Kind.DATA, int.from_bytes(buf[i + 4 : i + 8], "big"))
        if peeked is None:
            peeked = peek_kind(memoryview(buf)[i : i + 16])
        try:
            while True:
                try:
                    up.skip()
                    break
                except msgpack.OutOfData:
                    if not w.more(pos):
                        # A torn last record: the writer died inside it.
                        return Layout(header, b.table(), pos, size, False, index_start)
        except (msgpack.UnpackException, ValueError, TypeError):
            if peeked == "index":  # a damaged index ends the records; it is only a shortcut
                return Layout(header, b.table(), pos, size, False, pos)
            raise CassetteError(
                f"{path}: corrupt cassette: undecodable data at byte {pos} after record {n - 1}"
            ) from None
        end = up.tell()
        if peeked == "index":
            index_start = pos
            pos = end
            continue
        index_start = None
        if isinstance(peeked, tuple):
            kind, rid = peeked
            if kind == Kind.DATA:
                entry = by_id.get(rid)
                if entry is None or rid in ended:
                    raise corrupt(f"unknown interaction id {rid}" if entry is None
                                  else f"interaction id {rid} has records after its end")
                entry.extend((pos, end - pos, Kind.DATA))
                pos = end
                continue
        else:
            try:
                rec = decode_record(w.bytes_at(pos, end))
            except ValueError as e:
                raise corrupt(str(e)) from None
            kind, rid = _classify(rec, corrupt)
        if kind == Kind.BEGIN:
            if rid in b:
                raise corrupt(f"interaction id {rid} begins twice")
            b.begin(rid, pos, end - pos)
        else:
            if rid in ended:
                what = "ends twice" if kind == Kind.END else "has records after its end"
                raise corrupt(f"interaction id {rid} {what}")
            if not b.add(rid, pos, end - pos, kind):
                raise corrupt(f"unknown interaction id {rid}")
            if kind == Kind.END:
                ended.add(rid)
        pos = end
    return Layout(header, b.table(), pos, size, False, index_start)


def _classify(rec: Any, corrupt: Callable[[str], CassetteError]) -> tuple[Kind, int]:
    """The kind and id of a record that was decoded (a map, or an array the peek did not know)."""
    if isinstance(rec, dict):
        t = rec.get("t")
        kind = {"begin": Kind.BEGIN, "end": Kind.END}.get(t) if isinstance(t, str) else None
        if kind is None:
            raise corrupt(f"unknown record type {t!r}")
        rid = rec.get("id")
    elif isinstance(rec, list) and rec and rec[0] in ("d", "m"):
        kind = Kind.DATA if rec[0] == "d" else Kind.MESSAGES
        rid = rec[1] if len(rec) > 1 else None
    else:
        raise corrupt("not a cassette record")
    if not isinstance(rid, int) or isinstance(rid, bool):
        raise corrupt(f"interaction id {rid!r} is not an integer")
    return kind, rid


def span(records: Sequence[tuple[int, int, Kind]]) -> tuple[int, int]:
    """The smallest byte range holding all of ``records``."""
    lo = min(off for off, _, _ in records)
    hi = max(off + n for off, n, _ in records)
    return lo, hi
