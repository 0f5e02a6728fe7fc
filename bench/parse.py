"""SSE parse throughput: streamtape's parser against httpx-sse's, same input, one run.

    .venv/bin/python -m bench.parse [--mb 4] [--repeat 7]

Input: OpenAI chat completion chunks as a real llama.cpp server sends them (one
``data: {...}\\n\\n`` event each, ~240 bytes, a few with multi-byte text), plus a
keep-alive comment every 50 events, joined to ``--mb`` MB, fed cut into
pieces two ways: 16 KiB reads (a fast network) and one piece per event (a server
flushing each token). Both parsers do the whole job from bytes to events:

- httpx-sse: what ``EventSource.iter_sse`` does: incremental UTF-8 decoding
  (``response.iter_text``), ``SSELineDecoder`` then ``SSEDecoder`` per line;
- streamtape: ``SSEParser.feed(bytes)``, which also tracks byte offsets,
  line endings and comments.

Each figure is the best of ``--repeat`` runs (alternating, garbage collector off
during a run, as timeit does), in process CPU time so that other load on a
shared machine disturbs it less. Target: ratio >= 1.
"""

from __future__ import annotations

import argparse
import codecs
import gc
import json
import time
from collections.abc import Callable

from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from streamtape.shapes import SSEEvent, SSEParser


def make_body(mb: float) -> tuple[bytes, list[bytes]]:
    words = [" Hello", ",", " world", "!", " Smile", " 日", " and", " say", " hi", " café", " 😀"]
    events = []
    size = 0
    i = 0
    while size < mb * 1_000_000:
        if i % 50 == 49:
            ev = b": keep-alive\n\n"
        else:
            chunk = {"choices": [{"finish_reason": None, "index": 0,
                                  "delta": {"content": words[i % len(words)]}}],
                     "created": 1796038597, "id": "chatcmpl-Zri1Obmqnz0BOlgRAlnJYn5Dpt8ouDJ1",
                     "model": "tiny-llama", "system_fingerprint": "b1-0c1e570",
                     "object": "chat.completion.chunk"}
            ev = b"data: " + json.dumps(chunk, ensure_ascii=False,
                                        separators=(",", ":")).encode() + b"\n\n"
        events.append(ev)
        size += len(ev)
        i += 1
    events.append(b"data: [DONE]\n\n")
    return b"".join(events), events


def httpx_sse(pieces: list[bytes]) -> int:
    text_decoder = codecs.getincrementaldecoder("utf-8")("replace")
    lines = SSELineDecoder()
    sse = SSEDecoder()
    n = 0
    for piece in pieces:
        text = text_decoder.decode(piece)
        if not text:
            continue
        for line in lines.decode(text):
            if sse.decode(line.rstrip("\n")) is not None:
                n += 1
    for line in lines.flush():
        if sse.decode(line.rstrip("\n")) is not None:
            n += 1
    return n


def streamtape_sse(pieces: list[bytes]) -> int:
    p = SSEParser()
    n = 0
    for i, piece in enumerate(pieces):
        for item in p.feed(piece, i):
            if type(item) is SSEEvent:
                n += 1
    p.close()
    return n


def timed(fn: Callable[[list[bytes]], int], pieces: list[bytes]) -> tuple[float, int]:
    gc.collect()
    gc.disable()  # as timeit does: keep collector pauses out of both figures
    try:
        t = time.process_time()
        n = fn(pieces)
        return time.process_time() - t, n
    finally:
        gc.enable()


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.parse", description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    body, per_event = make_body(args.mb)
    reads = [body[i : i + 16384] for i in range(0, len(body), 16384)]
    mb = len(body) / 1e6
    print(f"input: {mb:.1f} MB, {len(per_event)} events")
    print(f"{'pieces':<22} {'httpx-sse MB/s':>15} {'streamtape MB/s':>16} {'ratio':>7}")
    for name, pieces in (("16 KiB reads", reads), ("one piece per event", per_event)):
        best = {"httpx-sse": float("inf"), "streamtape": float("inf")}
        counts = {}
        for _ in range(args.repeat):
            for label, fn in (("httpx-sse", httpx_sse), ("streamtape", streamtape_sse)):
                dt, n = timed(fn, pieces)
                best[label] = min(best[label], dt)
                counts[label] = n
        # httpx-sse dispatches the same data events (comments are not events in either)
        assert counts["httpx-sse"] == counts["streamtape"], counts
        h, s = mb / best["httpx-sse"], mb / best["streamtape"]
        print(f"{name:<22} {h:>15.1f} {s:>16.1f} {s / h:>6.2f}x")


if __name__ == "__main__":
    main()
