"""How ``show`` writes bytes and setup marks, for HTTP interactions and WebSocket sessions alike.

Not a command (``cli`` registers only modules with ``commands``).
"""

from __future__ import annotations

import base64

from ..cassette.model import Setup
from ..fmt import ms


def escape_piece(data: bytes) -> str:
    """A piece's bytes as one line: ``\\n``, ``\\r``, ``\\t``, other controls and the bytes of
    a character cut at the piece's edge are shown escaped (``\\xe6``)."""
    text = data.decode("utf-8", errors="backslashreplace")
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def bytes_json(data: bytes) -> dict[str, str]:
    """Bytes for JSON output: UTF-8 text where valid, base64 otherwise."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def setup_line(s: Setup) -> str:
    """The upstream connection's setup marks, which the offsets leave out.

    ``setup: new upstream connection: tcp 0.3 ms, tls 82.1 ms; sent 83.0 ms after the proxy had it``
    """
    if not s.new_connection:
        return f"setup: upstream connection already open; sent {ms(s.wait_ns)} ms after the proxy had it"
    marks = ", ".join(f"{name.replace('_', ' ')} {ms(ns)} ms" for name, ns in s.marks.items())
    return f"setup: new upstream connection: {marks}; sent {ms(s.wait_ns)} ms after the proxy had it"


def setup_json(s: Setup | None) -> dict[str, object] | None:
    """``show --json``'s ``setup``: null when not recorded (an older cassette)."""
    if s is None:
        return None

    def m(ns: int | None) -> float | None:
        return None if ns is None else ns / 1e6

    return {
        "new_connection": s.new_connection,
        "wait_ms": m(s.wait_ns),
        "tcp_ms": m(s.tcp_ns),
        "proxy_connect_ms": m(s.proxy_connect_ns),
        "tls_ms": m(s.tls_ns),
    }
