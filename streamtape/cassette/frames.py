"""The checksummed frame around every record of a version 4 cassette, and what damage is.

Format version 4 wraps each record (begin, data, messages, end, index) in a
14-byte frame, as the AWS event stream, PostgreSQL's WAL and LevelDB's log
do, so a reader can tell a damaged record from a good one and find the next
good one after it::

    magic   2 bytes   c1 a5   (0xc1 is the one byte msgpack never uses)
    length  uint32    big-endian: the payload's size
    seq     uint32    big-endian: the record's number in the file (0, 1, 2, ...)
    check   uint32    big-endian: the low 32 bits of the payload's xxh3-64,
                      seeded with length << 32 | seq
    payload           the record, one msgpack object, as in versions 1 to 3

The check covers the length and the sequence number through its seed, so a
flipped length or number fails it as a flipped payload byte does. The
sequence number makes a record that was cut out (a gap) or copied in (a
duplicate, a splice) visible even when every frame checks out.

Why xxh3-64 and not CRC32C: measured on this project's 2-core AMD EPYC for the
record sizes a recorder writes (64 B to 64 KiB), xxh3 was the fastest of
zlib.crc32, crc32c, google-crc32c, xxh32 and xxh3-64 at every size (83 ns for a
64-byte record, 5.5 us for 64 KiB, against 0.5 us and 66 us for zlib.crc32),
and the recorder's cost per event did not move (``bench/record_overhead.py``,
figures in docs/guide/integrity.md). Its low 32 bits leave a random change
undetected once in 2**32, as a CRC32C would; the frame stays at 14 bytes, since
a recorder's record is often one small piece (20 bytes of SSE).
The header (the first msgpack map) stays unframed, so an older streamtape
still reads the version and says to upgrade.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import xxhash

__all__ = ["CHECKSUM_VERSION", "CHECK_NAME", "FRAME", "MAGIC", "Damage", "frame", "frame_check", "unframe"]

CHECKSUM_VERSION = 4
"""The first cassette format version whose records are framed and checksummed."""

MAGIC = b"\xc1\xa5"
FRAME = struct.Struct(">2sIII")
"""magic, payload length, sequence number, check: the 14 bytes before each payload."""
CHECK_NAME = "xxh3-64"

_hash = xxhash.xxh3_64_intdigest
_LOW = 0xFFFFFFFF


def frame_check(payload: bytes | memoryview, seq: int) -> int:
    """The check of a payload at sequence number ``seq``."""
    return _hash(payload, (len(payload) << 32) | seq) & _LOW


def frame(payload: bytes, seq: int) -> bytes:
    """``payload`` framed as record number ``seq``."""
    n = len(payload)
    return FRAME.pack(MAGIC, n, seq, _hash(payload, (n << 32) | seq) & _LOW) + payload


def unframe(data: bytes | memoryview) -> tuple[int, memoryview]:
    """(sequence number, payload) of one whole frame; ValueError when it does not check out."""
    view = memoryview(data)
    if len(view) < FRAME.size:
        raise ValueError("record is shorter than its frame")
    magic, n, seq, check = FRAME.unpack_from(view)
    if magic != MAGIC:
        raise ValueError("record frame is damaged (no frame marker)")
    if n != len(view) - FRAME.size:
        raise ValueError("record frame is damaged (wrong length)")
    payload = view[FRAME.size :]
    if _hash(payload, (n << 32) | seq) & _LOW != check:
        raise ValueError(f"record fails its checksum ({CHECK_NAME})")
    return seq, payload


@dataclass(frozen=True, slots=True)
class Damage:
    """A stretch of a cassette file that did not check out, and what it cost.

    ``offset`` and ``length`` are the damaged bytes (skipped when reading);
    ``reason`` says what was wrong (a failed checksum, a missing or repeated
    record, a record that contradicts the others). ``interactions`` are the
    positions, in begin order among every interaction the file began, of the
    interactions left out because a record of theirs may have been in those
    bytes (the ones under way there, and one whose begin was lost); ``ids``
    are their interaction ids.
    """

    offset: int
    length: int
    reason: str
    interactions: tuple[int, ...] = ()
    ids: tuple[int, ...] = ()

    def describe(self) -> str:
        """One line: where, what, and which interactions were left out."""
        who = ", ".join(f"#{i}" for i in self.interactions)
        lost = f"; left out interaction {who}" if who else "; no interaction known to be lost"
        return f"damaged record at byte {self.offset} ({self.length} bytes): {self.reason}{lost}"
