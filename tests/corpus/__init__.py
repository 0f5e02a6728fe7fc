"""Load the real llama.cpp captures in this folder as Interactions (one piece per recv())."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from streamtape.cassette.model import Interaction, Request, Response
from streamtape.cassette.pieces import Piece
from streamtape.wire import Framing

HERE = Path(__file__).parent

PATHS = {
    "chat_stream_slow": "/v1/chat/completions",
    "chat_stream_usage_slow": "/v1/chat/completions",
    "chat_limit_tiny": "/v1/chat/completions",
    "chat_eos_stop_tiny": "/v1/chat/completions",
    "native_completion_slow": "/completion",
    "native_limit_mid_utf8_tiny": "/completion",
    "native_stopword_tiny": "/completion",
    "v1_completions_tiny": "/v1/completions",
    "anthropic_messages_slow": "/v1/messages",
    "native_random_model_tiny": "/completion",
}
NAMES = tuple(PATHS)

_LINE = re.compile(r"^\s*([0-9.]+) ms\s+(\d+) B (b.*)$")


def recvs(name: str) -> list[tuple[int, bytes]]:
    out = []
    for line in (HERE / f"{name}.timing.txt").read_text().splitlines():
        m = _LINE.match(line)
        if m:
            data = ast.literal_eval(m.group(3))
            assert len(data) == int(m.group(2))
            out.append((round(float(m.group(1)) * 1_000_000), data))
    return out


class _Dechunker:
    """Chunked transfer decoding, fed bytes in any split."""

    def __init__(self) -> None:
        self.buf = b""
        self.left = 0  # bytes left in the current chunk's data
        self.state = "size"  # size | data | crlf | done

    def feed(self, data: bytes) -> bytes:
        self.buf += data
        out = []
        while True:
            if self.state == "size":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    break
                size = int(self.buf[:i].split(b";")[0], 16)
                self.buf = self.buf[i + 2 :]
                self.left = size
                self.state = "data" if size else "done"
            elif self.state == "data":
                take = self.buf[: self.left]
                out.append(take)
                self.buf = self.buf[len(take) :]
                self.left -= len(take)
                if self.left:
                    break
                self.state = "crlf"
            elif self.state == "crlf":
                if len(self.buf) < 2:
                    break
                self.buf = self.buf[2:]
                self.state = "size"
            else:
                break
        return b"".join(out)


def _header(line: str) -> tuple[str, str]:
    """``Name: value``; llama-server also sends ``Access-Control-Allow-Origin:`` with no value."""
    name, sep, value = line.partition(": ")
    return (name, value) if sep else (line.rstrip(":"), "")


def capture(name: str) -> Interaction:
    """The capture as an Interaction: one piece per recv() that carried body bytes."""
    pieces = recvs(name)
    raw = b""
    head_at = 0
    body_pieces = []
    head = None
    dec = _Dechunker()
    for at, data in pieces:
        if head is None:
            raw += data
            if b"\r\n\r\n" not in raw:
                continue
            head, _, rest = raw.partition(b"\r\n\r\n")
            head_at = at
            data = rest
        body = dec.feed(data)
        if body:
            body_pieces.append(Piece(at, body))
    assert head is not None
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = tuple(_header(h) for h in header_lines)
    _, status, reason = status_line.split(" ", 2)
    return Interaction(
        Request("POST", f"http://127.0.0.1:8080{PATHS[name]}",
                headers=(("Content-Type", "application/json"),)),
        Response(int(status), reason, headers=headers, framing=Framing.CHUNKED, pieces=tuple(body_pieces),
                 headers_at_ns=head_at),
        end_ns=pieces[-1][0],
    )
