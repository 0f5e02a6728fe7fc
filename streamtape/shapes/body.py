"""The body of an interaction as identity bytes, piece by piece (content encoding undone).

Only the analysis sees decoded bytes: a cassette keeps the body exactly as it
came, compressed or not, and replay sends it so.

Encodings: gzip, deflate, br and zstd (the openai and anthropic SDKs send
``Accept-Encoding: gzip, deflate, br, zstd``). No new dependency: each decoder
is one that mitmproxy already installs. Brotli is ``brotli``. Zstandard is the
standard library's ``compression.zstd`` on Python 3.14+, else ``backports.zstd``
(its backport, which mitmproxy 12 depends on), else ``zstandard`` (what
mitmproxy 11, the version Python 3.11 resolves, depends on). The last two have
the same streaming face (``decompress``, ``eof``, ``unused_data``).
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..cassette.model import Interaction

try:  # mitmproxy depends on brotli
    import brotli
except ImportError:  # pragma: no cover
    brotli = None


class _ZstdStream(Protocol):
    """A streaming zstd decompressor, as all three modules make one."""

    def decompress(self, data: bytes) -> bytes: ...

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...


def _zstd_factory() -> Callable[[], _ZstdStream] | None:
    """How to make a zstd decompressor with what is installed, or None."""
    for name in ("compression.zstd", "backports.zstd"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        factory: Callable[[], _ZstdStream] = mod.ZstdDecompressor
        return factory
    try:
        zstandard = importlib.import_module("zstandard")
    except ImportError:  # pragma: no cover - mitmproxy brings one of the three
        return None

    def make() -> _ZstdStream:
        obj: _ZstdStream = zstandard.ZstdDecompressor().decompressobj()
        return obj

    return make


_ZSTD = _zstd_factory()


class _Zstd:
    """zstd across frames: a body may hold several frames back to back (a server may
    end a frame per flush); each decompressor reads one, the next starts on its
    ``unused_data``."""

    def __init__(self, make: Callable[[], _ZstdStream]) -> None:
        self._make = make
        self._d = make()
        self._started = False

    def decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._d.eof:
                self._d = self._make()
            self._started = True
            out.append(self._d.decompress(data))
            data = self._d.unused_data if self._d.eof else b""
        return b"".join(out)

    def finished(self) -> bool:
        return self._started and self._d.eof


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


def decompressor(encoding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bool]] | None:
    """(decompress, finished) for an encoding, or None when unsupported."""
    if encoding in ("gzip", "x-gzip", "deflate"):
        z = zlib.decompressobj(zlib.MAX_WBITS | 32 if encoding != "deflate" else zlib.MAX_WBITS)
        return z.decompress, lambda: z.eof
    if encoding == "br" and brotli is not None:
        b = brotli.Decompressor()
        return b.process, b.is_finished
    if encoding == "zstd" and _ZSTD is not None:
        zs = _Zstd(_ZSTD)
        return zs.decompress, zs.finished
    return None


def decoded_body(ix: Interaction) -> DecodedBody:
    """Undo ``Content-Encoding`` (gzip, deflate, br, zstd) incrementally, keeping piece times.

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
    d_f = decompressor(enc)
    if d_f is None:
        return DecodedBody((), enc, f"unsupported content-encoding {enc!r}")
    dec, finished = d_f
    out: list[tuple[int, bytes]] = []
    for p in pieces:
        try:
            d = dec(p.data)
        except Exception as e:  # zlib.error, brotli.error, ZstdError
            return DecodedBody(tuple(out), enc, f"{enc} body is corrupt: {e}")
        if d:
            out.append((p.at_ns, d))
    if pieces and not finished():
        return DecodedBody(tuple(out), enc, f"{enc} body ends early (stream cut)")
    return DecodedBody(tuple(out), enc)
