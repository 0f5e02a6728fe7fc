"""WebSocket replay timing: how late the replay server's messages reach a client, beside HTTP
chunks of the same rhythm from the same server in the same run.

    .venv/bin/python -m bench.ws_replay [--runs 3] [--count 50] [--gap-ms 10]

One ``ReplayServer`` holds a WebSocket session and an SSE response with the same
timeline: ``--count`` pieces / server messages, the first 20 ms after the request
(HTTP) or after the client message that asks (WebSocket), then one every
``--gap-ms``. Lateness is the client's arrival time less (its send time + the
recorded offset): the server's scheduling error plus the client's read path (a
raw socket for HTTP, the ``websockets`` client for WebSocket, so the WebSocket
figure carries that library's parsing too). Each line is one run; the summary is
the median of the runs' medians and p95s with their spread (min-max), the
ratio WebSocket / HTTP, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import websockets

from bench._common import pct
from streamtape.cassette.model import (
    Direction,
    Interaction,
    Message,
    Request,
    Response,
    WebSocketSession,
)
from streamtape.serve import ReplayServer
from tests.support.builders import MS, interaction

FIRST_MS = 20


def session(count: int, gap_ms: int) -> Interaction:
    asks = Message(5 * MS, Direction.CLIENT, True, b'{"type":"go"}')
    answers = [
        Message((5 + FIRST_MS + gap_ms * i) * MS, Direction.SERVER, True, f'{{"i":{i:05d}}}'.encode())
        for i in range(count)
    ]
    return Interaction(
        Request("GET", "http://bench.test/ws"),
        Response(101, framing="none", headers_at_ns=MS),
        end_ns=(10 + FIRST_MS + gap_ms * count) * MS,
        websocket=WebSocketSession((asks, *answers), 1000, "", Direction.CLIENT),
    )


def stream(count: int, gap_ms: int) -> Interaction:
    pieces = [f'data: {{"i":{i:05d}}}\n\n'.encode() for i in range(count)]
    return interaction(pieces, first_ns=FIRST_MS * MS, gap_ns=gap_ms * MS, url="http://bench.test/sse")


async def ws_lateness(url: str, count: int, gap_ms: int) -> list[float]:
    async with websockets.connect(url + "/ws", compression=None) as ws:
        t = time.perf_counter_ns()
        await ws.send('{"type":"go"}')
        out = []
        for i in range(count):
            await ws.recv()
            out.append((time.perf_counter_ns() - t) / MS - (FIRST_MS + gap_ms * i))
    return out


async def http_lateness(port: int, count: int, gap_ms: int) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b'{"stream": true}'
    head = f"POST /sse HTTP/1.1\r\nHost: bench.test\r\nContent-Type: application/json\r\n" \
           f"Content-Length: {len(body)}\r\n\r\n"
    t = time.perf_counter_ns()
    writer.write(head.encode() + body)
    buf, out = b"", list[float]()
    while len(out) < count:
        data = await reader.read(65536)
        if not data:
            raise RuntimeError("the server closed early")
        buf += data
        now = time.perf_counter_ns()
        while len(out) < count and f'"i":{len(out):05d}'.encode() in buf:
            out.append((now - t) / MS - (FIRST_MS + gap_ms * len(out)))
    writer.close()
    return out


def summary(xs: list[float]) -> tuple[float, float]:
    return statistics.median(xs), pct(xs, 95)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ms ({min(values):.3f}-{max(values):.3f})"


async def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.ws_replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--gap-ms", type=int, default=10)
    a = ap.parse_args()
    ws_med, ws_p95, http_med, http_p95 = [], [], [], []
    async with ReplayServer([session(a.count, a.gap_ms), stream(a.count, a.gap_ms)]) as server:
        for run in range(1, a.runs + 1):
            h = summary(await http_lateness(server.port, a.count, a.gap_ms))
            w = summary(await ws_lateness(server.ws_url, a.count, a.gap_ms))
            http_med.append(h[0])
            http_p95.append(h[1])
            ws_med.append(w[0])
            ws_p95.append(w[1])
            print(f"run {run}: websocket median {w[0]:.3f} ms p95 {w[1]:.3f} ms | "
                  f"http median {h[0]:.3f} ms p95 {h[1]:.3f} ms")
    ratio = statistics.median(ws_med) / statistics.median(http_med)
    print(f"websocket lateness: median {spread(ws_med)}, p95 {spread(ws_p95)}")
    print(f"http lateness:      median {spread(http_med)}, p95 {spread(http_p95)}")
    print(f"websocket / http (medians): {ratio:.2f}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
