"""The WHATWG event-stream algorithm, written as literally as possible: the reference the
SSE parser is checked against (tests/unit/test_sse.py and the atheris harness in
tests/corpus/fuzz_atheris.py). No streamtape code in it.
"""

from __future__ import annotations

import re


def reference_events(data: bytes) -> list[tuple[str, str, str, int | None]]:
    """The standard's algorithm, written as literally as possible over decoded text."""
    text = data.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines = parts[0:-1:2]  # the last part is an unterminated line (never a complete line)
    out: list[tuple[str, str, str, int | None]] = []
    data_buf, ev_type, last_id = "", "", ""
    retry: int | None = None
    for line in lines:
        if line == "":
            if data_buf == "":
                ev_type = ""
                continue
            if data_buf.endswith("\n"):
                data_buf = data_buf[:-1]
            out.append((ev_type or "message", data_buf, last_id, retry))
            data_buf, ev_type, retry = "", "", None
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "event":
            ev_type = value
        elif name == "data":
            data_buf += value + "\n"
        elif name == "id":
            if "\0" not in value:
                last_id = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return out
