"""The bytes ``streamtape.save`` writes are pinned: format 4 (checksummed frames), digest
version 3. A faster writer must write exactly these bytes for the same interactions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import streamtape
from streamtape.cassette import writer
from streamtape.cassette.digest import request_digest
from streamtape.cassette.model import (
    Direction,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    Setup,
    WebSocketSession,
)
from streamtape.cassette.pieces import Piece
from streamtape.wire import Framing

BODIES = [
    b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}',
    b'{"b": 1.0, "a": [1, 2.5, null, {"z": null, "y": "x"}], "t": true}',
    b'  [1, 1.0, 1e3, -0.0, "\\u00e9", {"k": "REDACTED"}]',
    b'{"k": "\\u0052EDACTED"}',
    b"not json at all",
    b"",
    b'{"broken": ',
    '{"é": "ü", "n": 12345678901234567890}'.encode(),
    b'{"nested": {"deep": [null, {"x": null}]}, "temperature": 0.7}',
]


def _interactions() -> list[Interaction]:
    out: list[Interaction] = []
    for k, body in enumerate(BODIES):
        pieces = tuple(Piece(1_000 + j * 25_000 + k, b"data: %d.%d\n\n" % (k, j)) for j in range(k * 3))
        out.append(Interaction(
            Request("POST", f"http://llm.test/v1/chat?b={k}&a=1&a=0", headers=(("content-type", "application/json"),),
                    body=body, started_at=1_700_000_000.0 + k),
            Response(200, "OK", headers=(("content-type", "text/event-stream"),), framing=Framing.CHUNKED,
                     pieces=pieces) if k != 5 else None,
            labels={"k": str(k)} if k % 2 else {},
            setup=Setup(wait_ns=10 + k, tcp_ns=100 if k % 3 == 0 else None) if k % 2 == 0 else None,
            outcome=Outcome.COMPLETE if k != 5 else Outcome.UPSTREAM_ERROR,
            error=None if k != 5 else "refused",
            end_ns=5_000_000 + k if k != 5 else None,
        ))
    ws = WebSocketSession(
        messages=(Message(10, Direction.CLIENT, True, b"hello"), Message(30, Direction.SERVER, False, b"\x00\x01", (1, 1))),
        close_code=1000, close_reason="bye", closed_by=Direction.CLIENT,
    )
    out.append(Interaction(
        Request("GET", "http://llm.test/ws", headers=(("upgrade", "websocket"),), body=b"", started_at=1.5),
        Response(101, "Switching Protocols", headers=(("upgrade", "websocket"),), framing=Framing.NONE),
        websocket=ws, end_ns=40,
    ))
    return out


# sha256 of the files the unoptimised writer (b4a3093) wrote for these interactions; "indexed"
# re-pinned for digest version 3 (its index record says "v": 3, the digests are the same).
PINNED = {
    "plain": "cbff9dbd9e3bbb67218e3b65a2d06abbab34909a2351a735074f518d2d3f7c6b",
    "indexed": "30b5ef1e0b76b988cf9852079949a5b8e2f11f74ef2daeb33e47650f2812999e",
}


def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("streamtape.cassette.records.time.time", lambda: 1_764_500_000.0)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_save_writes_the_pinned_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_clock(monkeypatch)
    streamtape.save(tmp_path / "a.tape", _interactions())
    assert _sha(tmp_path / "a.tape") == PINNED["plain"]


def test_an_indexed_cassette_keeps_its_pinned_bytes_digests_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fixed_clock(monkeypatch)
    with writer.CassetteWriter(tmp_path / "x.tape", sync_ends=False, index_min_bytes=0) as w:
        for ix in _interactions():
            w.add(ix)
    assert _sha(tmp_path / "x.tape") == PINNED["indexed"]
    assert len(streamtape.load(tmp_path / "x.tape")) == len(BODIES) + 1


def _reference_digest(method: str, url: str, body: bytes) -> int:
    """Digest version 2 as b4a3093 computed it (the JSON round trip), kept to compare against."""
    from hashlib import blake2b
    from urllib.parse import parse_qsl, urlsplit

    from streamtape.cassette.digest import WILDCARD, has_redacted, without_nulls

    def number(text: str) -> float | int:
        f = float(text)
        return int(f) if f.is_integer() else f

    parts = urlsplit(url)
    pairs = sorted(parse_qsl(parts.query, keep_blank_values=True))
    if any(v == "REDACTED" for _, v in pairs):
        return WILDCARD
    h = blake2b(digest_size=8)
    h.update(f"{method.upper()}\n{parts.path or '/'}\n{json.dumps(pairs)}\n".encode())
    data: Any = None
    is_json = False
    if body and body.lstrip()[:1] in (b"{", b"["):
        try:
            data = json.loads(body, parse_float=number)
            is_json = True
        except ValueError:
            pass
    if is_json:
        if has_redacted(data):
            return WILDCARD
        data = without_nulls(data)
        h.update(b"J")
        h.update(json.dumps(data, sort_keys=True, separators=(",", ":")).encode())
    else:
        h.update(b"R")
        h.update(body)
    return int.from_bytes(h.digest(), "little") or 1


@pytest.mark.parametrize("body", BODIES)
def test_the_digest_equals_the_reference_round_trip(body: bytes) -> None:
    for url in ("http://llm.test/v1/chat?b=1&a=2", "http://llm.test", "http://llm.test/x?q=REDACTED"):
        assert request_digest("post", url, body) == _reference_digest("post", url, body)
        assert request_digest("POST", url, body) == request_digest("POST", url, body)  # a cache gives the same
