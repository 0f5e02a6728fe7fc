"""The body of an interaction as identity bytes, piece by piece (content encoding undone)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

from ..cassette import Interaction

try:  # mitmproxy depends on brotli
    import brotli
except ImportError:  # pragma: no cover
    brotli = None


@dataclass(frozen=True, slots=True)
class DecodedBody:
    pieces: tuple[tuple[int, bytes], ...]
    """``(at_ns, bytes)`` per recorded piece, decoded; empty pieces dropped."""
    encoding: str
    error: str | None = None
    """Why decoding stopped early (the pieces before it are kept), or None."""

    @property
    def data(self) -> bytes:
        return b"".join(p for _, p in self.pieces)


def _decompressor(encoding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bool]] | None:
    """(decompress, finished) for an encoding, or None when unsupported."""
    if encoding in ("gzip", "x-gzip", "deflate"):
        z = zlib.decompressobj(zlib.MAX_WBITS | 32 if encoding != "deflate" else zlib.MAX_WBITS)
        return z.decompress, lambda: z.eof
    if encoding == "br" and brotli is not None:
        b = brotli.Decompressor()
        return b.process, b.is_finished
    return None


def decoded_body(ix: Interaction) -> DecodedBody:
    """Undo ``Content-Encoding`` (gzip, deflate, br) incrementally, keeping piece times.

    Never raises: an unknown encoding or corrupt data stops decoding and is
    reported in :attr:`DecodedBody.error`.
    """
    resp = ix.response
    if resp is None:
        return DecodedBody((), "identity")
    enc = (resp.header("content-encoding") or "identity").strip().lower()
    pieces = resp.pieces
    if enc in ("", "identity"):
        return DecodedBody(tuple((p.at_ns, p.data) for p in pieces if p.data), "identity")
    d_f = _decompressor(enc)
    if d_f is None:
        return DecodedBody((), enc, f"unsupported content-encoding {enc!r}")
    dec, finished = d_f
    out: list[tuple[int, bytes]] = []
    for p in pieces:
        try:
            d = dec(p.data)
        except Exception as e:  # zlib.error, brotli.error
            return DecodedBody(tuple(out), enc, f"{enc} body is corrupt: {e}")
        if d:
            out.append((p.at_ns, d))
    if pieces and not finished():
        return DecodedBody(tuple(out), enc, f"{enc} body ends early (stream cut)")
    return DecodedBody(tuple(out), enc)
