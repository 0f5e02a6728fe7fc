"""Absolute URLs in recorded JSON bodies that name the recorded server, pointed at the replay server.

Replay is byte-faithful everywhere but here, and this one rewrite exists because
some APIs answer a first request with the ABSOLUTE URL of the next one: Replicate's
prediction (``POST .../predictions``) carries ``urls.stream`` (and ``urls.get``,
``urls.cancel``), and its SDK follows ``urls.stream`` as given. Replayed as
recorded, that URL names the host the cassette was recorded from (the real API, or
the upstream on 127.0.0.1 that is gone by replay time), so a client pointed at
``streamtape serve`` would leave it for a dead or real host on its second request.
A reverse proxy that rewrites a ``Location`` header to its own address does the
same thing for redirects (nginx's ``proxy_redirect``).

The rule (:class:`Relinker`):

- the origins rewritten are those the loaded cassettes were recorded from: the
  ``scheme://host[:port]`` of every recorded request's URL (the upstream's, for a
  reverse-mode recording; every host the client reached, for a regular-mode one)
  and of its recorded ``Host`` header;
- they are rewritten where they begin an absolute URL (followed by ``/``, ``?``,
  ``#`` or the closing quote) in the body of a response whose content type is JSON
  (``application/json``, ``*+json``) and which has no content encoding: a stream's
  events and any compressed body are left as recorded;
- into the origin the replayed request reached the server at (``http://`` and its
  ``Host`` header: the address the client itself used).

The body keeps its piece boundaries (each moved by the length change before it),
and a recorded ``Content-Length`` header is set to the new length, so the framing
stays consistent (the schedule declares the length it sends in any case).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from ..cassette.model import Interaction, Request
from ..cassette.pieces import Piece

__all__ = ["Relinker", "is_json_body", "origin_of", "recorded_origins"]

_CACHE = 256


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an absolute http(s) URL (lower case, as written), or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def recorded_origins(requests: Iterable[Request]) -> frozenset[str]:
    """Every origin the requests were recorded from: their URLs', and their ``Host``
    header's under the URL's scheme."""
    out: set[str] = set()
    for req in requests:
        origin = origin_of(req.url)
        if origin is None:
            continue
        out.add(origin)
        host = req.header("host")
        if host:
            out.add(f"{origin.split('://')[0]}://{host.strip().lower()}")
    return frozenset(out)


def is_json_body(ix: Interaction) -> bool:
    """Whether ``ix`` answered with a JSON body, not content-encoded (what :class:`Relinker` rewrites)."""
    resp = ix.response
    if resp is None or (resp.header("content-encoding") or "identity").strip().lower() != "identity":
        return False
    ctype = resp.content_type
    return ctype == "application/json" or ctype.endswith("+json")


class Relinker:
    """Rewrites recorded origins in JSON response bodies to the serving origin.

    ``origins`` are the recorded ones (:func:`recorded_origins`). :meth:`relink` gives the
    interaction to serve: the recorded one itself when nothing in its body names a
    recorded origin (or it is no JSON body, or the request reached the server at a
    recorded origin already), else a copy with the URLs rewritten, computed once per
    (interaction, serving origin).
    """

    def __init__(self, origins: Iterable[str]) -> None:
        names = sorted({o.lower() for o in origins}, key=len, reverse=True)
        self.origins = frozenset(names)
        self._pattern = (
            re.compile(b"(?:" + b"|".join(re.escape(o.encode()) for o in names) + rb')(?=[/?#"])',
                       re.IGNORECASE)
            if names else None
        )
        self._done: dict[tuple[int, str], tuple[Interaction, Interaction]] = {}

    def relink(self, ix: Interaction, base: str) -> Interaction:
        """``ix`` with every recorded origin that begins a URL in its JSON body replaced by
        ``base`` (``scheme://host[:port]``, no trailing slash)."""
        if self._pattern is None or base.lower() in self.origins or not is_json_body(ix):
            return ix
        key = (id(ix), base)
        hit = self._done.get(key)
        if hit is not None and hit[0] is ix:
            return hit[1]
        out = self._rewrite(ix, base)
        if len(self._done) >= _CACHE:
            self._done.pop(next(iter(self._done)))
        self._done[key] = (ix, out)
        return out

    def _rewrite(self, ix: Interaction, base: str) -> Interaction:
        resp = ix.response
        assert resp is not None and self._pattern is not None
        pieces = list(resp.pieces)
        body = b"".join(p.data for p in pieces)
        matches = list(self._pattern.finditer(body))
        if not matches:
            return ix
        new = base.encode()
        # A match goes whole to the piece it starts in (the bytes of it that a later
        # piece held leave that piece); every piece keeps its time.
        out: list[Piece] = []
        pos = start = mi = 0
        for p in pieces:
            end = start + len(p.data)
            pos = max(pos, start)
            data = bytearray()
            while pos < end:
                if mi < len(matches) and matches[mi].start() < end:
                    m = matches[mi]
                    data += body[pos:m.start()] + new
                    pos, mi = m.end(), mi + 1
                else:
                    data += body[pos:end]
                    pos = end
            out.append(Piece(p.at_ns, bytes(data)))
            start = end
        new_body = b"".join(p.data for p in out)
        headers = tuple((k, str(len(new_body))) if k.lower() == "content-length" else (k, v)
                        for k, v in resp.headers)
        return dataclasses.replace(ix, response=dataclasses.replace(resp, headers=headers, pieces=tuple(out)))
