"""Body pieces: one piece as a value, and a response's pieces kept compactly.

A day of recorded traffic holds tens of millions of pieces. As Python objects
(a :class:`Piece` and a ``bytes`` each) they cost about 100 bytes of overhead
apiece, more than the pieces themselves (SSE events of 20 to 250 bytes), and
building them is most of what loading a cassette used to cost. :class:`Pieces`
keeps a response's pieces the way a data record stores them: the body joined
into one ``bytes``, each piece's end in it and each piece's offset in two
machine arrays (16 bytes a piece). A :class:`Piece` is made only when one is
asked for, by indexing or iterating.

:class:`PieceSequence` is what both :class:`Pieces` and a cassette's lazily
read pieces (:class:`streamtape.cassette.reader.FilePieces`) are: a read-only
``Sequence[Piece]`` that also hands out the joined body without joining
anything. Any of them equals any sequence holding the same pieces, a tuple of
:class:`Piece` included, so ``Response.pieces`` may be either.
"""

from __future__ import annotations

import operator
from abc import abstractmethod
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain
from typing import overload

__all__ = ["Piece", "PieceSequence", "Pieces"]


@dataclass(frozen=True, slots=True)
class Piece:
    """One body piece as the upstream delivered it, ``at_ns`` after t = 0."""

    at_ns: int
    data: bytes


class PieceSequence(Sequence[Piece]):
    """A read-only sequence of pieces that knows its joined body.

    Subclasses give :meth:`compact`, the pieces as a :class:`Pieces`; every
    other operation is built on it.
    """

    __slots__ = ()

    @abstractmethod
    def compact(self) -> Pieces:
        """The pieces as a :class:`Pieces` (joined bytes and two arrays)."""

    @property
    def joined(self) -> bytes:
        """Every piece's bytes in order: the body exactly as the upstream sent it."""
        return self.compact().data

    @property
    def sizes(self) -> list[int]:
        """Each piece's size, in order."""
        ends = self.compact().ends
        return list(map(operator.sub, ends, chain((0,), ends)))

    def gaps(self, previous_at_ns: int = 0) -> list[int]:
        """Each piece's offset as a delta from the one before (the first from ``previous_at_ns``):
        what a data record stores."""
        at = self.compact().at
        return list(map(operator.sub, at, chain((previous_at_ns,), at)))

    def __len__(self) -> int:
        return len(self.compact().at)

    @overload
    def __getitem__(self, i: int) -> Piece: ...
    @overload
    def __getitem__(self, i: slice) -> Pieces: ...
    def __getitem__(self, i: int | slice) -> Piece | Pieces:
        return self.compact()[i]

    def __iter__(self) -> Iterator[Piece]:
        return iter(self.compact())

    def __eq__(self, other: object) -> bool:
        mine = self.compact()
        if isinstance(other, PieceSequence):
            theirs = other.compact()
            return mine.at == theirs.at and mine.ends == theirs.ends and mine.data == theirs.data
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(mine) == len(other) and all(a == b for a, b in zip(mine, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        # Equal to a tuple of the same pieces, so hashed like one.
        return hash(tuple(self))

    def __repr__(self) -> str:
        c = self.compact()
        return f"<{type(self).__name__}: {len(c.at)} pieces, {len(c.data)} bytes>"


class Pieces(PieceSequence):
    """Pieces stored as one joined ``bytes`` plus each piece's end and offset in arrays.

    ``ends[i]`` is where piece ``i`` ends in ``data`` (it starts where piece
    ``i - 1`` ends), ``at[i]`` its offset in nanoseconds after t = 0. Build one
    with :meth:`of` (from pieces) or :meth:`from_batches` (from data records).
    """

    __slots__ = ("at", "data", "ends")

    def __init__(self, data: bytes, ends: array[int], at: array[int]) -> None:
        if len(ends) != len(at) or (len(ends) and ends[-1] != len(data)):
            raise ValueError("piece ends and offsets do not fit the data")
        self.data = data
        self.ends = ends
        self.at = at

    @classmethod
    def of(cls, pieces: Iterable[Piece]) -> Pieces:
        """The same pieces, stored compactly."""
        if isinstance(pieces, PieceSequence):
            return pieces.compact()
        ps = pieces if isinstance(pieces, Sequence) else list(pieces)
        return cls(
            b"".join(p.data for p in ps),
            array("Q", accumulate(len(p.data) for p in ps)),
            array("q", (p.at_ns for p in ps)),
        )

    @classmethod
    def from_batches(
        cls, batches: Iterable[tuple[bytes, Sequence[int], Sequence[int]]], previous_at_ns: int = 0
    ) -> Pieces:
        """Pieces from data-record batches of (joined bytes, sizes, gaps), in order.

        Raises ValueError when a batch's sizes do not add up to its bytes or a
        size or offset is not an integer that fits 64 bits (a corrupt record).
        """
        parts: list[bytes] = []
        ends: array[int] = array("Q")
        at: array[int] = array("q")
        total, last = 0, previous_at_ns
        for data, sizes, gaps in batches:
            if len(sizes) != len(gaps):
                raise ValueError("piece sizes and gaps differ in number")
            try:
                batch_ends = array("Q", accumulate(sizes, initial=total))
                batch_at = array("q", accumulate(gaps, initial=last))
            except (TypeError, OverflowError):
                raise ValueError("a piece size or gap is not a 64-bit integer") from None
            if batch_ends[-1] - total != len(data):
                raise ValueError("piece sizes do not add up to the data")
            if len(sizes):
                ends.extend(batch_ends[1:])
                at.extend(batch_at[1:])
                total, last = batch_ends[-1], batch_at[-1]
            parts.append(data)
        return cls(b"".join(parts), ends, at)

    def compact(self) -> Pieces:
        return self

    @property
    def joined(self) -> bytes:
        return self.data

    def __len__(self) -> int:
        return len(self.at)

    @overload
    def __getitem__(self, i: int) -> Piece: ...
    @overload
    def __getitem__(self, i: slice) -> Pieces: ...
    def __getitem__(self, i: int | slice) -> Piece | Pieces:
        if isinstance(i, slice):
            lo, hi, step = i.indices(len(self.at))
            if step != 1:
                return Pieces.of([self[k] for k in range(lo, hi, step)])
            if hi <= lo:
                return Pieces(b"", array("Q"), array("q"))
            base = self.ends[lo - 1] if lo else 0
            return Pieces(
                self.data[base : self.ends[hi - 1]],
                array("Q", (e - base for e in self.ends[lo:hi])),
                self.at[lo:hi],
            )
        n = len(self.at)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("piece index out of range")
        start = self.ends[i - 1] if i else 0
        return Piece(self.at[i], self.data[start : self.ends[i]])

    def __iter__(self) -> Iterator[Piece]:
        data, start = self.data, 0
        for end, at in zip(self.ends, self.at, strict=True):
            yield Piece(at, data[start:end])
            start = end

    def __reduce__(self) -> tuple[type[Pieces], tuple[bytes, array[int], array[int]]]:
        return (Pieces, (self.data, self.ends, self.at))
