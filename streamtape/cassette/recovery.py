"""Finding the records of a checksummed (version 4) cassette, past any damage.

:func:`scan` opens any cassette: files of versions 1 to 3 go to
:func:`streamtape.cassette.index.scan` as before (no checksums: a corrupt
record refuses the file); a version 4 file's records are framed
(:mod:`streamtape.cassette.frames`) and read here, so that one bad record
costs its own interaction and nothing else.

The pass over a framed file, record by record:

- a frame whose check holds and whose number follows the last one is a good
  record; its place goes into the record table;
- a frame that fails its check (or bytes that are no frame at all) is damage:
  the reader looks for the next frame marker from the following byte on and
  resumes at the first whole frame that checks out there (resync), skipping
  the bytes between;
- a good frame whose number jumps ahead means records were cut out before it,
  one whose number is not above the last good one's was copied in (a splice);
  both are damage, the copy is skipped;
- a good record that contradicts the others (an id that begins twice,
  records after an end) is damage too.

Which interactions a damaged stretch costs: its bytes can no longer say whose
they were, so every interaction under way there (begun before it, not yet
ended) is left out, and so is any interaction whose later records turn up
without a begin (the begin was in the damage). Records of one interaction lie
between its begin and its end, so no other interaction can have lost a
record there: every interaction that loads is byte for byte what was written.
A file that stops inside its last frame (a recorder killed mid-write) is a
torn tail, not damage: the reader drops it and warns, as for older versions,
and the interaction under way loads as ``interrupted``.

The index record is a shortcut only: it is used when it ends the file and
its own CRC and frame check out; then the records are checked one by one as
they are read (:class:`streamtape.cassette.reader.CassetteFile`). A damaged
index is damage like any other, and the table is rebuilt by the pass above.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import CassetteError
from . import index
from .frames import CHECKSUM_VERSION, FRAME, MAGIC, Damage, frame_check
from .index import Kind, Layout, TableBuilder, decode_record, peek_kind, read_index

__all__ = ["CHECKSUM_VERSION", "scan"]

_SEQ_MOD = 1 << 32
RESYNC_WINDOW = 4 << 20
"""How far past the first good frame after damage the reader looks for the frame numbered
next (records copied into the damage can be followed by the real ones)."""


def scan(path: Path, f: BinaryIO, size: int, check_header: index.CheckHeader, *, use_index: bool = True) -> Layout:
    """Find every record of the open cassette ``f`` (``size`` bytes), of any version."""
    w = index._Window(f, size)
    header, header_end = index._read_header(w, path)
    header = check_header(header)
    if header.get("version", 0) < CHECKSUM_VERSION:
        f.seek(0)
        return index.scan(path, f, size, check_header, use_index=use_index)
    if use_index:
        found = read_index(f, size, header_end)
        if found is not None:
            table, start = found
            at = start - FRAME.size
            f.seek(at)
            head = f.read(FRAME.size)
            if at >= header_end and len(head) == FRAME.size:
                magic, n, seq, check = FRAME.unpack(head)
                f.seek(start)
                if magic == MAGIC and n == size - start and frame_check(f.read(n), seq) == check:
                    return Layout(header, table, size, size, True, at, framed=True, next_seq=seq)
    with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
        return _Pass(path, mm, header, header_end, size).run()


class _Pass:
    """One pass over a framed file's records (see the module docstring)."""

    def __init__(self, path: Path, mm: mmap.mmap, header: dict[str, Any], start: int, size: int) -> None:
        self.path = path
        self.mm = mm
        self.header = header
        self.start = start
        self.size = size
        self.table = TableBuilder()
        self.position: dict[int, int] = {}
        """Where each begun interaction's begin record is."""
        self.open: dict[int, None] = {}
        """Interactions begun and not yet ended, in begin order."""
        self.ended: set[int] = set()
        self.damage: list[tuple[int, int, str, set[int]]] = []
        """(offset, length, reason, ids it costs)."""
        self.orphans: dict[int, int] = {}
        """Ids whose records came without a begin: where the first one is."""

    def _damaged(self, offset: int, length: int, reason: str, ids: set[int] | None = None) -> None:
        cost = set(self.open) | (ids or set())
        self.damage.append((offset, length, reason, cost))

    def _resync(self, start: int, expected: int | None = None) -> int | None:
        """Where to resume after damage: the offset of a whole frame that checks out at
        or after ``start``.

        With ``expected`` (the number the next record should have): of the good frames
        found up to :data:`RESYNC_WINDOW` bytes past the first, the one numbered lowest
        from ``expected`` on. That is the real continuation, whether records were lost
        (it is numbered higher) or copies of later records were spliced in before it
        (they are numbered higher still, and fall inside the skipped bytes)."""
        mm, size = self.mm, self.size
        best: tuple[int, int] | None = None  # (distance from expected, offset)
        limit: int | None = None
        i = mm.find(MAGIC, start)
        while i != -1 and i + FRAME.size <= size and (limit is None or i <= limit):
            _, n, seq, check = FRAME.unpack_from(mm, i)
            end = i + FRAME.size + n
            if end <= size and frame_check(memoryview(mm)[i + FRAME.size : end], seq) == check:
                if expected is None:
                    return i
                ahead = (seq - expected) % _SEQ_MOD
                if ahead == 0:
                    return i
                if ahead < _SEQ_MOD // 2 and (best is None or ahead < best[0]):
                    best = (ahead, i)
                if limit is None:
                    limit = i + RESYNC_WINDOW
            i = mm.find(MAGIC, i + 1)
        if best is not None:
            return best[1]
        return self._resync(start) if expected is not None else None

    def run(self) -> Layout:
        mm, size = self.mm, self.size
        view = memoryview(mm)
        pos = self.start
        expected = 0
        good_end = size
        index_start: int | None = None
        after_damage = False
        try:
            while pos < size:
                if size - pos < FRAME.size:
                    if MAGIC.startswith(bytes(view[pos : pos + len(MAGIC)])):
                        good_end = pos  # a torn frame head: the writer died inside it
                    else:
                        self._damaged(pos, size - pos, "stray bytes after the last record")
                    break
                magic, n, seq, check = FRAME.unpack_from(mm, pos)
                end = pos + FRAME.size + n
                if magic == MAGIC and end > size:
                    nxt = self._resync(pos + 1, expected)
                    if nxt is None and frame_check(view[pos + FRAME.size : size], seq) == check:
                        # Whole to the end of the file under the length it was written with:
                        # its length field is what is damaged, not a write cut short.
                        self._damaged(pos, size - pos, "record frame is damaged (its length)")
                        break
                    if nxt is None:
                        good_end = pos  # a torn last record
                        break
                    self._damaged(pos, nxt - pos, "record frame is damaged (its length runs past the file)")
                    pos, after_damage = nxt, True
                    continue
                if magic != MAGIC or frame_check(view[pos + FRAME.size : end], seq) != check:
                    nxt = self._resync(pos + 1, expected)
                    stop = size if nxt is None else nxt
                    what = "record fails its checksum" if magic == MAGIC else "no record frame where one should start"
                    self._damaged(pos, stop - pos, what)
                    if nxt is None:
                        break
                    pos, after_damage = nxt, True
                    continue
                ahead = (seq - expected) % _SEQ_MOD
                if ahead >= _SEQ_MOD // 2:  # a number already seen: a copy spliced in
                    self._damaged(pos, end - pos, f"record number {seq} repeats an earlier one (a copy spliced in)")
                    pos, after_damage = end, True
                    continue
                if ahead and not after_damage:
                    self._damaged(pos, 0, f"{ahead} record(s) missing before this one (cut out)")
                after_damage = False
                index_start = self._record(pos, end, view[pos + FRAME.size : end])
                # An index takes the number the next record gets: it is cut off when one is appended.
                expected = seq if index_start is not None else (seq + 1) % _SEQ_MOD
                pos = end
        finally:
            view.release()
        return self._layout(good_end, index_start, expected)

    def _record(self, pos: int, end: int, payload: memoryview) -> int | None:
        """Note one good record; returns ``pos`` for an index record (else None)."""
        peeked = peek_kind(payload[:16])
        if peeked == "index":
            return pos
        if isinstance(peeked, tuple):
            kind, rid = peeked
        else:
            try:
                kind, rid = _classify(decode_record(payload))
            except ValueError as e:
                self._damaged(pos, end - pos, f"record checks out but is not a cassette record ({e})")
                return None
        b = self.table
        if kind == Kind.BEGIN:
            if rid in b or rid in self.orphans:
                self._damaged(pos, end - pos, f"interaction id {rid} begins twice", {rid})
                return None
            b.begin(rid, pos, end - pos)
            self.position[rid] = pos
            self.open[rid] = None
            return None
        if rid in self.ended:
            self._damaged(pos, end - pos, f"interaction id {rid} has records after its end", {rid})
        elif not b.add(rid, pos, end - pos, kind):
            self.orphans.setdefault(rid, pos)
        elif kind == Kind.END:
            self.ended.add(rid)
            self.open.pop(rid, None)
        return None

    def _layout(self, good_end: int, index_start: int | None, next_seq: int) -> Layout:
        first_at = dict(self.position)  # each begun interaction: where its begin is
        # An id whose records came without a begin lost its begin to the damage before them.
        for rid, first in sorted(self.orphans.items(), key=lambda kv: kv[1]):
            before = [d for d in self.damage if d[0] < first]
            if not before:
                self._damaged(first, 0, f"records of interaction id {rid}, which never began")
                before = self.damage[-1:]
            d = before[-1]
            d[3].add(rid)
            first_at[rid] = d[0]
        # A writer numbers interactions 0, 1, 2, ... as they begin: an id missing below the
        # highest one seen is an interaction every record of which was in the damage.
        known = set(first_at)
        if self.damage and known:
            for rid in sorted(set(range(max(known))) - known):
                after = [first_at[r] for r in known if r > rid]
                before = [d for d in self.damage if d[0] < min(after)] or self.damage[:1]
                d = before[-1]
                d[3].add(rid)
                first_at[rid] = d[0]
        # Positions in begin order, counting the interactions whose begin was lost.
        position = {rid: i for i, rid in enumerate(sorted(first_at, key=lambda r: (first_at[r], r)))}
        lost: set[int] = set()
        notes = []
        for offset, length, reason, ids in self.damage:
            lost |= ids
            places = tuple(sorted(position[r] for r in ids if r in position))
            notes.append(Damage(offset, length, reason, places, tuple(sorted(ids))))
        by_id = self.table._by_id
        for rid in lost:
            by_id.pop(rid, None)
        return Layout(self.header, self.table.table(), good_end, self.size, False, index_start,
                      framed=True, damage=tuple(notes), next_seq=next_seq)


def _classify(rec: Any) -> tuple[Kind, int]:
    def corrupt(detail: str) -> CassetteError:
        return CassetteError(detail)

    try:
        return index._classify(rec, corrupt)
    except CassetteError as e:
        raise ValueError(str(e)) from None
